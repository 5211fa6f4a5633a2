"""RESULTS.md's mechanism section: why dK/dV (and so the wrapper) pays for fan-in skew, from the committed data.

The dK/dV kernel runs one program per (KV head, KV block) CSR row, each looping over its row's queries; the
compiled config fits ``slots`` programs per SM (the calibration's occupancy); so the launch is a makespan over
rows, and it follows the longest row and where that row starts in program order. The evidence, each number with
its CI and the rule's verdict: the fan-in statistics of the equal-edge routings; the skew sweep's hot blocks
(one long row per head, every other row local) and placements on one KV head; the T sweep; Nsight's per-SM
throughput spread; the makespan model's busy fraction of the SM slots; and which routing has the largest dK/dV
(the claim "worst" only when that is resolved against every other routing).
"""

from __future__ import annotations

from typing import Any

from ..analysis.compare import ratio_ci
from ..analysis.noise import judge, routing_label
from ..core.records import SweepPoint
from ..io.store import load_document
from .data import ReportData
from .manifest import SKEW_SWEEP, T_SWEEP
from .markdown import md_table, ms, times
from .sections import fanin_section
from .sweeps import point_of

TITLE = "Mechanism: dK/dV follows its long CSR rows and when they start"


def _formal_calibration(data: ReportData) -> tuple[str, dict[str, Any]] | None:
    """``(path, document)`` of the calibration whose autotune config is the formal runs' dK/dV config, or None."""
    for p in data.inputs.model_calibrations():
        cal = load_document(p, ("model_calibration",))
        if cal["autotune_config"] == data.formal[-1].run.best_configs().get("dkv_core"):
            return data.inputs.relative(p), cal
    return None


def busy_fractions(data: ReportData) -> dict[tuple[str, str], float]:
    """The makespan model's busy fraction of the SM slots per measured routing: ``(point file, routing label) ->
    fraction``, from the validations of the formal runs' calibration (:func:`_formal_calibration`). Keyed by the
    point's file, not its routing's name: the penalty validation holds ``sink-heavy(sinks=4)@T=32768`` at eight
    (B, H, G) shapes, and a name alone took the last of them (0.72 at B=8 where the primary shape gives 0.23; a new
    user's finding of 2026-12-05)."""
    formal = _formal_calibration(data)
    out: dict[tuple[str, str], float] = {}
    if formal is None:
        return out
    for p in data.inputs.model_validations():
        doc = load_document(p, ("model_validation",))
        if doc["calibration"]["path"] == formal[0]:
            for r in doc["rows"]:
                out.setdefault((r["source"], r["name"]), r["busy_fraction"])
    return out


def _busy_key(pid: str, run: SweepPoint) -> tuple[str, str]:
    """The :func:`busy_fractions` key of the skew sweep's point ``pid``: its file and its routing's label."""
    return f"results/sweeps/{SKEW_SWEEP}/{pid}.json", f"{routing_label(run.point['pattern'])}@T={run.shape['T']}"


def skew_busy(data: ReportData, busy: dict[tuple[str, str], float], family: str,
              params: dict[str, Any]) -> float | None:
    """The busy fraction (of ``busy``, :func:`busy_fractions`) of the skew sweep's point whose routing is
    ``family`` with ``params``; None without that point or its validation row."""
    got = point_of(data, SKEW_SWEEP, family, params)
    if got is None:
        return None
    key = _busy_key(got[0], data.point(f"results/sweeps/{SKEW_SWEEP}/{got[0]}.json"))
    return busy.get(key)


def slots(data: ReportData) -> tuple[int, int] | None:
    """``(slots per SM, registers)`` of the formal runs' dK/dV config, from the matching calibration."""
    formal = _formal_calibration(data)
    if formal is None:
        return None
    return formal[1]["occupancy"]["slots_per_sm"], formal[1]["kernel_resources"]["n_regs"]


def _points(data: ReportData, sweep: str) -> list[tuple[str, SweepPoint]]:
    return [(p.stem, run) for p in data.inputs.sweep_points(sweep)
            if isinstance(run := data.runs.get(data.inputs.relative(p)), SweepPoint)]


def largest(data: ReportData, sweep: str = SKEW_SWEEP) -> str:
    """Which routing of the sweep has the largest dK/dV median, "the worst routing measured" only when it is
    resolved (the rule, across the points' independent rounds) against every other routing of the sweep."""
    pts = [(pid, run) for pid, run in _points(data, sweep) if run.point["pattern"]["name"] != "local"]
    if not pts:
        return ""
    pid, top = max(pts, key=lambda x: x[1].routing.median("dkv_core"))
    floor = data.floor("dkv_core", top.gpu_name)
    open_against = []
    for other_id, run in pts:
        if other_id == pid:
            continue
        ci = ratio_ci(run.routing.stages["dkv_core"].raw_ms, top.routing.stages["dkv_core"].raw_ms)
        if judge(ci, floor) != "differs":
            r = top.routing.median("dkv_core") / run.routing.median("dkv_core")
            open_against.append(f"{routing_label(run.point['pattern'])} ({times(r, ci)})")
    name = routing_label(top.point["pattern"])
    stats = data.point_ci(top, top.point["pattern"]["name"])
    head = (f"`{name}` has the largest dK/dV median of `{sweep}`, {ms(stats['median'], stats['ci'])} ms = "
            f"{times(stats['ratio'], stats['ratio_ci'])} local")
    if not open_against:
        return head + ": " + data.claims.holds("the worst routing measured", True, "resolved against every other") + "."
    return (head + f"; a point estimate, not resolved (the rule, f = {100 * floor:.1f}%) against "
            + ", ".join(open_against) + ".")


def mechanism_section(data: ReportData) -> list[str]:
    out = [f"## {TITLE}", "", *fanin_section(data.formal[0].run)]
    s = slots(data)
    if s:
        out += [f"`parallel_nsa_bwd_kernel_dkv` launches one program per (batch, KV head, KV block) — one per CSR row "
                f"— and each loops over its row's queries; the formal runs' config compiles to {s[1]} registers, so "
                f"{s[0]} programs fit on an SM at a time (docs/MODEL.md). Equal edges mean equal total work; the "
                "launch lasts until its last row is done.", ""]
    busy = busy_fractions(data)
    rows = []
    for family, params in (("local", {}), ("hot-block", {"block": 511}), ("hot-block", {"block": 256}),
                           ("hot-block", {"block": 128}), ("hot-block", {"block": 0}),
                           ("sink-heavy", {"heads": [0], "sinks": 4}), ("sink-heavy", {"heads": [3], "sinks": 4}),
                           ("sink-heavy", {"sinks": 4}), ("zipf", {"exponent": 1.0})):
        got = point_of(data, SKEW_SWEEP, family, params)
        if got is None:
            continue
        pid, st = got
        run = data.point(f"results/sweeps/{SKEW_SWEEP}/{pid}.json")
        d = st["dkv"]
        name = routing_label(run.point["pattern"])
        key = _busy_key(pid, run)
        floor = data.floor("dkv_core", st["gpu"])
        ratio = (f"{times(d['ratio'], d['ratio_ci'])}: {data.claims.judged(d['ratio_ci'], floor)}"
                 if "ratio" in d else "1 (the baseline)")
        rows.append([name, f"{run.routing.fanin['max']:.0f}", f"{run.routing.fanin['cv']:.3f}",
                     ms(d["median"], d["ci"]),
                     ratio, f"{busy[key]:.2f}" if key in busy else "— (a calibration point)"])
    if rows:
        out += [f"The skew sweep (`results/sweeps/{SKEW_SWEEP}/`, H200, each point against its own `local`): a "
                "hot block `b` makes every query that can see it select it, so each head gets one row of 32768 − 64·b "
                "queries and every other row stays local; `heads` puts a routing on those KV heads only (program "
                "order `(b·H + h)·M + s`: head 3's rows start last). Busy: the makespan model's fraction of SM-slot "
                "time doing work (model appendix).", "",
                md_table(["routing", "longest row (fan-in max)", "fan-in CV", "dK/dV ms (95% CI)", "× local (95% CI)",
                          "busy"], rows), ""]
    out += _placement(data) + _by_T(data)
    top = largest(data)
    if top:
        out += [top, ""]
    out += _ncu_spread(data)
    return out


def start_order(data: ReportData) -> dict[str, Any] | None:
    """Same CSR rows, another start (the skew sweep): ``sink-heavy(sinks=4)`` on KV head 0 only (its heavy rows
    start first) vs head 3 only (they start last, at program 3·M). ``{"h0", "h3"}``: each point's
    :func:`~nsa_exp.report.sweeps.point_stats`; ``ratio``, ``ci``: head 3 over head 0 (dK/dV medians, the points'
    rounds resampled on their own); ``fanin_max``: both points' longest row (queries); None without both."""
    h0 = point_of(data, SKEW_SWEEP, "sink-heavy", {"heads": [0], "sinks": 4})
    h3 = point_of(data, SKEW_SWEEP, "sink-heavy", {"heads": [3], "sinks": 4})
    if not (h0 and h3):
        return None
    r0 = data.point(f"results/sweeps/{SKEW_SWEEP}/{h0[0]}.json")
    r3 = data.point(f"results/sweeps/{SKEW_SWEEP}/{h3[0]}.json")
    ci = ratio_ci(r0.routing.stages["dkv_core"].raw_ms, r3.routing.stages["dkv_core"].raw_ms)
    return {"h0": h0[1], "h3": h3[1], "ratio": r3.routing.median("dkv_core") / r0.routing.median("dkv_core"),
            "ci": ci, "gpu": r0.gpu_name, "fanin_max": {r0.routing.fanin["max"], r3.routing.fanin["max"]}}


def _placement(data: ReportData) -> list[str]:
    o = start_order(data)
    if o is None:
        return []
    return [f"Same rows, other start: `sink-heavy(sinks=4)` on KV head 3 only over on KV head 0 only, dK/dV "
            f"{times(o['ratio'], o['ci'])} ({data.claims.judged(o['ci'], data.floor('dkv_core', o['gpu']))}; the "
            "points' rounds resampled on their own): the heavy rows of head 3 start at program 3·M, behind every "
            "other head's rows.", ""]


def _by_T(data: ReportData) -> list[str]:
    rows = []
    for _, run in sorted(_points(data, T_SWEEP), key=lambda x: x[1].shape["T"]):
        if run.point["pattern"]["name"] == "local":
            continue
        d = data.point_ci(run, run.point["pattern"]["name"])
        rows.append(f"T={run.shape['T']} {times(d['ratio'], d['ratio_ci'], 2)}")
    if not rows:
        return []
    return [f"With T (`results/sweeps/{T_SWEEP}/`, `sink-heavy(sinks=4)`, the sink rows are T queries long): dK/dV × "
            "local " + ", ".join(rows) + ".", ""]


def _ncu_spread(data: ReportData) -> list[str]:
    parts = []
    for f in data.formal:
        path = data.inputs.ncu_summary(f.path, "dkv_core")
        if not data.inputs.committed(path):
            continue
        for k in load_document(path, ("ncu_summary",))["kernels"]:
            m: dict[str, Any] = k["metrics"]
            parts.append(f"{f.label} `{k['pattern']}` {m['sm_throughput_pct']:.1f}% "
                         f"({m['sm_throughput_min_pct']:.1f}–{m['sm_throughput_max_pct']:.1f}%)")
    if not parts:
        return []
    return ["Nsight Compute, dK/dV SM throughput averaged over SMs (least–most busy SM): " + "; ".join(parts)
            + ". Under the skewed routing most SMs idle while a few finish the long rows: a scheduling tail, not "
            "bandwidth (DRAM columns of the H100-vs-H200 section).", ""]
