"""RESULTS.md's "When it matters" section (issue 32): how the skew penalty of dK/dV moves with batch B, KV heads H,
group size G = HQ/H and T, what the makespan model's break-even says about it, and what it costs a training step.

Reads (:mod:`.manifest` names each):

- the penalty map, ``results/sweeps/sweep_penalty_h200.csv`` (T=32768: B·H and G axes) and
  ``results/sweeps/sweep_penalty_T_h200.csv`` (T=8192, 131072), with their point files: each point times one
  skewed routing interleaved with its own ``local`` at the same shape. Per point: ``local``'s dK/dV median (95% CI
  of its rounds), the ratio of medians with the paired 95% CI, the absolute excess ``median(skewed) −
  median(local)`` of dK/dV and of the full backward wrapper with the paired bootstrap CI of a difference of
  medians (:func:`nsa_exp.analysis.autotune_matrix.diff_ci`), the rule's verdict with the GPU's dK/dV floor, and
  the model's predicted ratio from ``results/model/h200_BQ1_w4_s2_penalty_validation.json`` (its rows' predicted
  dK/dV of the skewed routing over that of ``local``, same point file);
- the model's break-even ``(B·H)*`` per routing (:func:`nsa_exp.model.makespan.break_even` through
  :func:`nsa_exp.model.calibration.predict`, on the routing regenerated from its point's config at the map's
  T=32768, G=16, with the calibration the validation names): computed here, never typed;
- the release arm's primary-shape file (``results/releases/release_h200/fla-core-0.5.2-T32768.json``): the
  skewed routings' excess of ``train_step`` (``parallel_nsa`` forward + backward, the selection branch as a
  training step runs it) over ``local``'s, as a fraction of ``local``'s (paired CIs: every round ran every routing);
- optionally the layer results (:data:`.manifest.RELEASE_LAYERS`: ``results/releases/release_layer_h200/`` along
  T, ``results/releases/release_layer_shapes_h200/`` along B at T=32768): the same for ``nsa_layer``
  (compression + selection branches with their gates, ``window_size=0``) beside ``train_step``, per shape; the
  answer line gives the layer share at the smallest and largest measured B·H.

Absent: the sliding-window branch (FLA delegates it to flash-attn, not installed on the device: never timed);
fla-topk has no model break-even (its routing is computed on the GPU, not regenerable here); a point whose file
is not committed is left out of the map (counted); without the map the section is empty; without the layer
files the layer share says it is not measured yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..analysis.autotune_matrix import diff_ci
from ..analysis.bootstrap import bootstrap_median_ci, bootstrap_ratio_ci
from ..analysis.noise import judge
from ..core.families import BASELINE_PATTERN
from ..core.records import ReleaseResult, SweepPoint
from ..core.stages import GRID_LIMITS, RELEASE_LAYER_STAGE
from ..io.store import load_document
from ..model.calibration import predict
from ..model.points import pattern_fanin, regenerable
from ..sweeps.plan import load_sweep
from ..sweeps.table import read_sweep_table
from .data import ReportData
from .manifest import PENALTY_SWEEPS, PENALTY_VALIDATION, RELEASE_LAYER, RELEASE_PRIMARY
from .markdown import anchor, md_table, ms, pct, times

TITLE = "When it matters (H200): batch, KV heads, group size and T"
#: The map's main plane: the B·H and G axes were swept at this T, the B·H axis at this G.
MAP_T, MAP_G = 32768, 16
#: The routings in the order the section lists them (others after, by name).
ORDER = ("sink-heavy", "zipf", "fla-topk")
#: The train step's stage and what it runs (the release arm, nsa_exp/gpu/release.py).
STEP = "train_step"


def _order(family: str) -> tuple[int, str]:
    return (ORDER.index(family) if family in ORDER else len(ORDER), family)


def _paired(x: Sequence[float], base: Sequence[float]) -> dict[str, Any]:
    """``x`` against ``base`` of the same rounds: medians, the excess ``median(x) − median(base)`` with its paired
    bootstrap CI, the ratio with its paired CI, and the share ``ratio − 1`` (the excess as a fraction of base)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(base, dtype=np.float64)
    ratio_ci = bootstrap_ratio_ci(a, b)
    ratio = float(np.median(a) / np.median(b))
    return {"median": float(np.median(a)), "base": float(np.median(b)), "base_ci": bootstrap_median_ci(b),
            "excess": float(np.median(a) - np.median(b)), "excess_ci": diff_ci(a, b),
            "ratio": ratio, "ratio_ci": ratio_ci, "share": ratio - 1, "share_ci": (ratio_ci[0] - 1, ratio_ci[1] - 1)}


def _model_doc(data: ReportData, path: str, kind: str) -> dict[str, Any]:
    """A model document, schema-checked as the model appendix reads it (:mod:`.model`: its every check,
    re-predicting each row, is ``validate``'s and the model tests' job, not a report's)."""
    return load_document(data.inputs.root / path, (kind,), path)


def _predicted(data: ReportData) -> dict[tuple[str, str], float]:
    """``{(point file, routing name): predicted dK/dV ms}`` of the penalty validation (empty when absent)."""
    if not data.inputs.committed(PENALTY_VALIDATION):
        return {}
    doc = _model_doc(data, PENALTY_VALIDATION, "model_validation")
    return {(r["source"], r["pattern"]["name"]): float(r["predicted_ms"]) for r in doc["rows"]}


def map_rows(data: ReportData, sweeps: Sequence[str] = PENALTY_SWEEPS) -> tuple[list[dict[str, Any]], int]:
    """The penalty map's rows (module doc), ordered by routing, then G, T, B·H; and the number of table rows
    left out because their point file is not committed."""
    predicted = _predicted(data)
    rows, missing = [], 0
    for name in sweeps:
        path = data.inputs.packing_table(name)
        if not data.inputs.committed(path):
            continue
        for r in read_sweep_table(path).to_dict(orient="records"):
            key = f"results/sweeps/{r['sweep']}/{r['point_id']}.json"
            run = data.runs.get(key)
            if not isinstance(run, SweepPoint):
                missing += 1
                continue
            family = run.point["pattern"]["name"]
            skew, base = run.patterns[family].stages, run.patterns[BASELINE_PATTERN].stages
            B, H, HQ, T = (int(run.shape[k]) for k in ("B", "H", "HQ", "T"))
            model = (predicted[(key, family)] / predicted[(key, BASELINE_PATTERN)]
                     if (key, family) in predicted and (key, BASELINE_PATTERN) in predicted else None)
            rows.append({"key": key, "run": run, "family": family, "pattern": dict(run.point["pattern"]),
                         "T": T, "B": B, "H": H, "G": HQ // H, "BH": B * H, "gpu": run.gpu_name,
                         "dkv": _paired(skew["dkv_core"].raw_ms, base["dkv_core"].raw_ms),
                         "full": _paired(skew["full_bwd"].raw_ms, base["full_bwd"].raw_ms), "model_ratio": model})
    rows.sort(key=lambda r: (_order(r["family"]), r["G"], r["T"], r["BH"], r["B"]))
    return rows, missing


def absent_points(data: ReportData, rows: list[dict[str, Any]]) -> list[str]:
    """The points the map's sweep configs (``configs/<sweep>.json``) plan and the sweep does not refuse, but whose
    row is not in the committed table (e.g. moved out after failing ``validate``; PROVENANCE.md says why)."""
    have = {r["key"].rsplit("/", 1)[-1].removesuffix(".json") for r in rows}
    out = []
    for name in PENALTY_SWEEPS:
        config = data.inputs.root / "configs" / f"{name}.json"
        if config.is_file():  # a config of the repository (not a published result: not in the manifest's tracking)
            out += [p.point_id for p in load_sweep(config) if not p.refused and p.point_id not in have]
    return out


def launch_limit_bht(block_size: int) -> int:
    """The largest B·H·T FLA's dK/dV launch allows: its grid's y = B·H·cdiv(T, block_size) is at most CUDA's
    65,535 (:data:`nsa_exp.core.stages.GRID_LIMITS`)."""
    return GRID_LIMITS[1] * block_size


def _judged(data: ReportData, r: dict[str, Any]) -> str:
    return judge(r["dkv"]["ratio_ci"], data.floor("dkv_core", r["gpu"]))


def _plane(rows: list[dict[str, Any]], family: str) -> list[dict[str, Any]]:
    """The routing's rows on the B·H axis (T = :data:`MAP_T`, G = :data:`MAP_G`), by B·H."""
    return sorted((r for r in rows if r["family"] == family and r["T"] == MAP_T and r["G"] == MAP_G),
                  key=lambda r: (r["BH"], r["B"]))


def break_evens(data: ReportData, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The model's break-even per routing of the map (and ``local``) at T = :data:`MAP_T`, G = :data:`MAP_G`:
    :func:`nsa_exp.model.calibration.predict`'s ``break_even`` on the routing regenerated from the point's
    config at the point's shape (the point nearest the primary B·H = 4), with the calibration the penalty
    validation names; ``{}`` without the validation or a regenerable routing."""
    if not data.inputs.committed(PENALTY_VALIDATION):
        return {}
    cal_path = _model_doc(data, PENALTY_VALIDATION, "model_validation")["calibration"]["path"]
    if not data.inputs.committed(cal_path):
        return {}
    cal = _model_doc(data, cal_path, "model_calibration")
    out: dict[str, dict[str, Any]] = {}
    base: dict[str, dict[str, Any]] = {}
    for family in sorted({r["family"] for r in rows}, key=_order):
        plane = _plane(rows, family)
        if not plane or not regenerable(plane[0]["pattern"]):
            continue
        r = min(plane, key=lambda r: (abs(r["BH"] - 4), r["B"]))
        run: SweepPoint = r["run"]
        seed = int(run.config["seeds"]["routing"])
        for pattern, into in ((r["pattern"], out), ({"name": BASELINE_PATTERN}, base)):
            if pattern["name"] in into:
                continue
            fanin = pattern_fanin(pattern, run.shape, r["T"], seed)
            into[pattern["name"]] = {**predict(cal, fanin, shape=dict(run.shape))["break_even"], "B": r["B"],
                                     "H": r["H"]}
    return {**out, **base}


def map_table(data: ReportData, rows: list[dict[str, Any]]) -> str:
    cells = []
    for r in rows:
        d, f = r["dkv"], r["full"]
        cells.append([r["family"], str(r["T"]), str(r["B"]), str(r["H"]), str(r["G"]), str(r["BH"]),
                      ms(d["base"], d["base_ci"]), times(d["ratio"], d["ratio_ci"]),
                      data.claims.judged(d["ratio_ci"], data.floor("dkv_core", r["gpu"])),
                      ms(d["excess"], d["excess_ci"], 2), ms(f["excess"], f["excess_ci"], 2),
                      "—" if r["model_ratio"] is None else f"{r['model_ratio']:.3f}×"])
    return md_table(["routing", "T", "B", "H", "G", "B·H", "local dK/dV ms (95% CI)", "dK/dV × local (95% CI)",
                     "verdict", "dK/dV excess ms (95% CI)", "full bwd excess ms (95% CI)", "model × local"], cells)


def _range(values: Sequence[float]) -> str:
    return f"{min(values):.1f}–{max(values):.1f}"


def break_even_lines(data: ReportData, rows: list[dict[str, Any]], be: dict[str, dict[str, Any]]) -> list[str]:
    """The model's break-even against the data, per routing on the B·H axis (module doc)."""
    out = []
    if be:
        parts = [f"`{k}` {v['BH']:.2f} (heaviest row alone {v['heaviest_row_ms']:.1f} ms, work per (b, h) "
                 f"{v['work_per_bh_ms']:.0f} ms)" for k, v in be.items()]
        out.append(f"- **Model** (`makespan.break_even` at T={MAP_T}, G={MAP_G}, the routing regenerated from its "
                   f"point): the heaviest CSR row stops deciding the makespan at (B·H)* = " + "; ".join(parts)
                   + ". fla-topk: not regenerable here (its routing is computed on the GPU), no model break-even.")
    for family in sorted({r["family"] for r in rows}, key=_order):
        plane = _plane(rows, family)
        if len(plane) < 2:
            continue
        first, last = plane[0], plane[-1]
        j = [_judged(data, r) for r in plane]
        exc = [r["dkv"]["excess"] for r in plane]
        flat = (max(exc) - min(exc)) / max(exc)
        reach = [r for r, v in zip(plane, j, strict=True) if v != "differs"]
        verdict = ("the ratio never reaches 1: at every measured B·H it "
                   + data.claims.holds("differs measurably", not reach, "a point of the B·H axis does not differ")
                   + " from local" if not reach else
                   f"the ratio's CI reaches the floor at B·H = {', '.join(str(r['BH']) for r in reach)}")
        line = (f"- **Data, `{family}`** (T={MAP_T}, G={MAP_G}, B·H {first['BH']}–{last['BH']}): {verdict}; at the "
                f"largest measured B·H = {last['BH']} (B={last['B']}, H={last['H']}) it is "
                f"{times(last['dkv']['ratio'], last['dkv']['ratio_ci'])} local with an excess of "
                f"{ms(last['dkv']['excess'], last['dkv']['excess_ci'], 2)} ms per call. The excess "
                + ("stays roughly constant" if flat < 0.25 else "varies")
                + f" over B·H ({_range(exc)} ms, spread {pct(flat, 0)} of its largest) while the ratio falls "
                f"{first['dkv']['ratio']:.2f}× → {last['dkv']['ratio']:.2f}×.")
        if family in be:
            b = be[family]
            one = first["dkv"]["median"]
            above = [r for r in plane if r["BH"] > b["BH"]]
            line += (f" The model puts the break-even at B·H* = {b['BH']:.1f}, where total work over the slots "
                     "overtakes the heaviest row alone, as if the heavy rows then hid under the other pairs' work; "
                     f"the data show them added instead: at B·H = {last['BH']}"
                     + (f" ({len(above)} measured point{'s' if len(above) > 1 else ''} above B·H*)" if above else "")
                     + f" the excess is still {last['dkv']['excess'] / one:.2f} of the whole skewed dK/dV at "
                     f"B·H = {first['BH']} ({one:.2f} ms, {pct(first['dkv']['excess'] / one, 0)} of it the excess "
                     f"over local) and {last['dkv']['excess'] / b['heaviest_row_ms']:.2f} of the model's heaviest row "
                     "alone.")
        out.append(line)
    return out


def scaling_line(rows: list[dict[str, Any]]) -> str | None:
    """How the excess moves with T (at G = :data:`MAP_G`, smallest B·H) and with G (at T = :data:`MAP_T`)."""
    parts = []
    for family in sorted({r["family"] for r in rows}, key=_order):
        mine = [r for r in rows if r["family"] == family]
        by_t = {r["T"]: r for r in sorted(mine, key=lambda r: -r["BH"]) if r["G"] == MAP_G and r["BH"] == 4}
        by_g = {r["G"]: r for r in mine if r["T"] == MAP_T and r["BH"] == 4}
        bits = []
        if len(by_t) > 1:
            bits.append("T " + ", ".join(f"{t}: {by_t[t]['dkv']['excess']:.1f} ms" for t in sorted(by_t)))
        if len(by_g) > 1:
            bits.append("G " + ", ".join(f"{g}: {by_g[g]['dkv']['excess']:.1f} ms" for g in sorted(by_g)))
        if bits:
            parts.append(f"`{family}` " + "; ".join(bits))
    if not parts:
        return None
    return ("- **With T and G** (B·H = 4, dK/dV excess per call): " + " · ".join(parts)
            + ". The excess follows the heaviest rows' length (fan-in grows with T) and their per-query cost (G "
            "query heads per KV head), not B·H.")


def release_primary(data: ReportData) -> ReleaseResult | None:
    """The release arm's primary-shape result (:data:`.manifest.RELEASE_PRIMARY`), None when not committed."""
    if not data.inputs.committed(RELEASE_PRIMARY):
        return None
    return ReleaseResult.from_json(data.load(RELEASE_PRIMARY, (ReleaseResult.KIND,)))


def layer_results(data: ReportData) -> list[tuple[str, ReleaseResult]]:
    """The committed layer results (:data:`.manifest.RELEASE_LAYER`, GPU-timed, with ``nsa_layer``), by T."""
    out = []
    for path in data.inputs.release_layers():
        run = ReleaseResult.from_json(data.load(path, (ReleaseResult.KIND,)))
        if run.timing.timer == "cuda-events":
            out.append((data.inputs.relative(path), run))
    return sorted(out, key=lambda e: (int(e[1].shape["T"]), _bh(e[1]), int(e[1].shape["B"])))


def _bh(run: ReleaseResult) -> int:
    return int(run.shape["B"]) * int(run.shape["H"])


def layer_shares(layers: list[tuple[str, ReleaseResult]]) -> list[dict[str, Any]]:
    """Per layer result and skewed routing: its shape (T, B, H, G, B·H) and :func:`_paired` of its ``nsa_layer``
    rounds against ``local``'s, beside the same for ``train_step`` (the selection branch alone, same rounds)."""
    out = []
    for path, run in layers:
        sel = {x["routing"]: x for x in step_shares(run, STEP)}
        for x in step_shares(run, RELEASE_LAYER_STAGE):
            sh = run.shape
            out.append({"path": path, "T": int(sh["T"]), "B": int(sh["B"]), "H": int(sh["H"]),
                        "G": int(sh["HQ"]) // int(sh["H"]), "BH": _bh(run), "layer": x, "step": sel.get(x["routing"]),
                        "routing": x["routing"]})
    return out


def _layer_table(rows: list[dict[str, Any]]) -> str:
    def share(s: dict[str, Any] | None) -> str:
        return "—" if s is None else f"{pct(s['share'])} ({pct(s['share_ci'][0])}–{pct(s['share_ci'][1])})"

    return md_table(["T", "B", "H", "B·H", "routing", "layer fwd+bwd, local ms (95% CI)", "layer, skewed ms",
                     "excess ms (95% CI)", "excess / local layer (95% CI)", "excess / skewed layer",
                     "selection branch alone: its excess / its local (95% CI)"],
                    [[str(r["T"]), str(r["B"]), str(r["H"]), str(r["BH"]), r["routing"],
                      ms(r["layer"]["base"], r["layer"]["base_ci"], 2), f"{r['layer']['median']:.2f}",
                      ms(r["layer"]["excess"], r["layer"]["excess_ci"], 2), share(r["layer"]),
                      pct(r["layer"]["excess"] / r["layer"]["median"]), share(r["step"])]
                     for r in rows])


def step_shares(run: ReleaseResult, stage: str) -> list[dict[str, Any]]:
    """Per skewed routing of ``run`` that timed ``stage``: :func:`_paired` of its rounds against ``local``'s."""
    base = run.patterns.get(BASELINE_PATTERN)
    if base is None or stage not in base.stages:
        return []
    out = []
    for name, p in run.patterns.items():
        if name != BASELINE_PATTERN and stage in p.stages:
            out.append({"routing": name, **_paired(p.stages[stage].raw_ms, base.stages[stage].raw_ms)})
    return sorted(out, key=lambda r: _order(r["routing"]))


def _share_table(first: str, rows: list[tuple[str, dict[str, Any]]]) -> str:
    return md_table([first, "routing", "local ms (95% CI)", "skewed ms", "excess ms (95% CI)",
                     "share of local's (95% CI)"],
                    [[k, s["routing"], ms(s["base"], s["base_ci"], 2), f"{s['median']:.2f}",
                      ms(s["excess"], s["excess_ci"], 2),
                      f"{pct(s['share'])} ({pct(s['share_ci'][0])}–{pct(s['share_ci'][1])})"] for k, s in rows])


def step_lines(data: ReportData, layers: list[tuple[str, ReleaseResult]] | None) -> list[str]:
    """The training-step share (module doc): the selection branch's, and the layer's when measured."""
    out = []
    run = release_primary(data)
    if run is not None and (rows := step_shares(run, STEP)):
        s = run.shape
        out += [f"**What it costs the selection branch of a training step.** `{RELEASE_PRIMARY}` (the release "
                "arm: the pinned FLA files "
                f"through FLA's public API, {run.timing.repetitions} interleaved rounds) at the primary shape "
                f"(B{s['B']} T{s['T']} HQ{s['HQ']} H{s['H']}): `train_step` = `fla.ops.nsa.parallel_nsa(q, k, v, "
                "block_indices=…)` forward + backward, the selection branch as a training step runs it; the "
                "excess over `local` and its share of `local`'s step (paired 95% CIs):", "",
                _share_table("T", [(str(s["T"]), r) for r in rows]), ""]
    layers = [] if layers is None else layers
    shares = layer_shares(layers)
    if shares:
        folders = sorted({"/".join(path.split("/")[:3]) for path, _ in layers})
        out += [f"The NSA layer ({', '.join(f'`{f}/`' for f in folders)}, {len(layers)} file"
                f"{'s' if len(layers) > 1 else ''}, {'/'.join(sorted({str(r.timing.repetitions) for _, r in layers}))} "
                f"interleaved rounds): `{RELEASE_LAYER_STAGE}` = `parallel_nsa(q, k, v, g_cmp, g_slc, "
                "block_indices=…, window_size=0)` forward + backward, the compression and selection branches with "
                "their gates, G = 16 (the sliding-window branch left out, below); the skewed routing's excess over "
                "`local`, divided by the layer's fwd+bwd with `local` (what the tail adds to a step) and with the "
                "skewed routing (its part of the time the step takes); beside it, the selection branch's own excess "
                "over its `local` (`train_step`, the branch alone, same rounds):", "",
                _layer_table(shares), ""]
        plane = sorted((r for r in shares if r["T"] == MAP_T), key=lambda r: (r["routing"], r["BH"]))
        for family in sorted({r["routing"] for r in plane}, key=_order):
            mine = [r for r in plane if r["routing"] == family]
            if len(mine) > 1:
                out.append(f"- `{family}` at T={MAP_T}: the excess per layer call is "
                           + ", ".join(f"{r['layer']['excess']:.1f} ms" for r in mine) + " at B·H = "
                           + ", ".join(str(r["BH"]) for r in mine) + ", excess / local layer "
                           + " → ".join(pct(r["layer"]["share"], 1) for r in mine)
                           + f": the layer grows with B·H, the tail does not (measured up to B·H = {mine[-1]['BH']}).")
        out.append("")
    else:
        out += [f"The whole layer's share (`{RELEASE_LAYER_STAGE}`: compression + selection with their gates) is "
                f"not measured yet: no `{RELEASE_LAYER}/*.json` is committed; this fills in from those files.", ""]
    out += ["The sliding-window branch is not timed: FLA delegates it to flash-attn, which is not installed on the "
            "device, so every layer number here leaves it out (it does not depend on the routing).", ""]
    return out


def map_advice_lines(data: ReportData, rows: list[dict[str, Any]]) -> list[str]:
    """Two lines of advice from the map: where a user can ignore the tail, where routing-aware scheduling pays."""
    if not rows:
        return []
    floor = max(data.floor("dkv_core", r["gpu"]) for r in rows)
    same = [r for r in rows if _judged(data, r) == "same"]
    bht = {id(r): r["BH"] * r["T"] for r in rows}
    top = max(rows, key=lambda r: (bht[id(r)], -r["dkv"]["ratio"]))
    low = min(rows, key=lambda r: r["dkv"]["ratio"])
    if same:
        first = min(same, key=lambda r: bht[id(r)])
        one = (f"- **Advice (1), when to ignore the tail**: from B·H·T = {bht[id(first)]:,} (`{first['family']}` "
               f"B={first['B']} H={first['H']} T={first['T']}) the ratio's CI lies within the dK/dV floor "
               f"(f = {pct(floor)}): " + ", ".join(f"`{r['family']}` B·H·T {bht[id(r)]:,}" for r in same) + ".")
    else:
        plane = [r for r in rows if r["T"] == MAP_T and r["G"] == MAP_G]
        big = max(plane or rows, key=lambda r: r["BH"])
        per = big["dkv"]["base"] / (big["BH"] * big["T"])  # local ms per unit of B·H·T at the map's G
        at = max(plane or rows, key=lambda r: r["dkv"]["excess"])
        need = at["dkv"]["excess"] / floor / per
        limit = launch_limit_bht(int(big["run"].shape["block_size"]))
        one = (f"- **Advice (1), when to ignore the tail**: no measured point lets you: up to B·H·T = "
               f"{bht[id(top)]:,} every ratio's CI lies above 1 + f (f = {pct(floor)}); the smallest is "
               f"`{low['family']}`'s {times(low['dkv']['ratio'], low['dkv']['ratio_ci'])} at B={low['B']} H={low['H']} "
               f"G={low['G']} T={low['T']}. With the largest excess per call measured at T={at['T']}, G={at['G']} "
               f"(`{at['family']}`, {at['dkv']['excess']:.1f} ms at B·H = {at['BH']}) held fixed and `local` growing "
               "as B·H·T "
               f"(G={MAP_G}), the ratio would fall under 1 + f only near B·H·T ≈ {need:.1e}: an extrapolation, and "
               + ("beyond" if need > limit else "within")
               + f" FLA's dK/dV launch limit (grid y = B·H·T/{big['run'].shape['block_size']} ≤ {GRID_LIMITS[1]:,}, "
               f"so B·H·T ≤ {limit:,}): within what FLA can launch, the kernel ratio never says ignore it.")
    layer = [r for r in layer_shares(layer_results(data)) if r["T"] == MAP_T]
    if layer and len({r["BH"] for r in layer}) > 1:
        hi, lo = max(r["BH"] for r in layer), min(r["BH"] for r in layer)
        ends = {f: (a, b) for f in sorted({r["routing"] for r in layer}, key=_order)
                if (a := next((r for r in layer if r["routing"] == f and r["BH"] == lo), None))
                and (b := next((r for r in layer if r["routing"] == f and r["BH"] == hi), None))}
        if ends:
            one += (" What a training step feels is the layer: the tail's excess over an NSA layer's fwd+bwd with "
                    f"`local` (compression + selection, T={MAP_T}, G={MAP_G}; the sliding-window branch not timed) "
                    "falls from B·H = " + f"{lo} to {hi}: "
                    + "; ".join(f"`{f}` {pct(a['layer']['share'], 1)} ({pct(a['layer']['share_ci'][0], 1)}–"
                                f"{pct(a['layer']['share_ci'][1], 1)}) → {pct(b['layer']['share'], 1)} "
                                f"({pct(b['layer']['share_ci'][0], 1)}–{pct(b['layer']['share_ci'][1], 1)})"
                                for f, (a, b) in ends.items())
                    + " — the layer grows with B·H and the tail does not: ignore the tail where that share is within "
                    "your step's budget, not where the kernel ratio says so (layer points measured at B·H = "
                    + ", ".join(str(b) for b in sorted({r["BH"] for r in layer})) + " only).")
    frac = min(rows, key=lambda r: r["dkv"]["share"])
    big_t = max(rows, key=lambda r: r["dkv"]["excess"])
    long_t = max(r["BH"] for r in rows if r["T"] == max(x["T"] for x in rows))
    two = (f"- **Advice (2), when routing-aware scheduling is worth building** (splitting or reordering long CSR "
           f"rows): wherever skewed routings meet small B·H·T, and at long T or large G (measured at B·H ≤ {long_t} "
           f"at T={max(r['T'] for r in rows)}, B·H = 4 at G > {MAP_G}): the excess is "
           f"at least {pct(frac['dkv']['share'], 0)} of `local`'s dK/dV at every measured point (least at "
           f"`{frac['family']}` B={frac['B']} H={frac['H']} G={frac['G']} T={frac['T']}) and largest in absolute "
           f"terms at `{big_t['family']}` G={big_t['G']} T={big_t['T']}: "
           f"{ms(big_t['dkv']['excess'], big_t['dkv']['excess_ci'], 1)} ms per call; it does not shrink with B·H, "
           "so only the ratio does.")
    return [one, two]


def scope_lines(data: ReportData, rows: list[dict[str, Any]]) -> list[str]:
    """What the map's CIs and points cover: one run per point (within-session CIs), the planned points that are
    absent, the launch limit, and how the G > 16 points were timed and modelled."""
    absent = absent_points(data, rows)
    bs = int(rows[0]["run"].shape["block_size"])
    wide = [r for r in rows if r["G"] > MAP_G and r["model_ratio"] is not None]
    pinned = sorted({str(r["run"].autotune.get("from") or r["run"].autotune.get("source") or "")
                     for r in rows if r["G"] > MAP_G} - {""})
    text = (f"**Scope.** Each point is one run ({'/'.join(sorted({str(r['run'].timing.repetitions) for r in rows}))} "
            "interleaved rounds): its CIs are within-session (no repeat, no cross-session floor on the excess in ms). "
            f"FLA's dK/dV grid has y = B·H·T/{bs} ≤ {GRID_LIMITS[1]:,}, so B·H·T ≤ {launch_limit_bht(bs):,} (at "
            f"T=131072 B·H ≤ {launch_limit_bht(bs) // 131072}); the map stops at B·H·T = "
            f"{max(r['BH'] * r['T'] for r in rows):,}.")
    if absent:
        text += (f" Planned by the sweep configs but not in the map ({len(absent)}): "
                 + ", ".join(f"`{a}`" for a in absent)
                 + " (their files failed `validate` on the GPU and were moved out of `results/`: PROVENANCE.md).")
    if wide:
        err = [100 * (r["model_ratio"] / r["dkv"]["ratio"] - 1) for r in wide]
        text += (f" At G > {MAP_G} the model's ratio is {min(err):+.0f}% to {max(err):+.0f}% off the measured one "
                 "(its per-query cost scaled by G does not hold there)"
                 + (f"; those points replay the dK/dV autotune config of {', '.join(f'`{p}`' for p in pinned)}"
                    if pinned else "") + ".")
    return [text, ""]


def _figure_lines(data: ReportData) -> list[str]:
    """The map's figure (``sweep-plot --table results/sweeps/<map>.csv``: ``<map>_penalty_map.png``), when
    committed."""
    figs = [g for n in PENALTY_SWEEPS for g in data.inputs.glob(data.inputs.figures, f"{n}_penalty_map.png")]
    return [*(f"![{g.stem}](figures/{g.name})" for g in figs), ""] if figs else []


def penalty_section(data: ReportData, layers: list[tuple[str, ReleaseResult]] | None = None) -> list[str]:
    """``## When it matters (H200): …`` (module doc); ``[]`` when no penalty sweep is committed. ``layers``: the
    ``nsa_layer`` results to read (default: the committed :data:`.manifest.RELEASE_LAYER` files)."""
    rows, missing = map_rows(data)
    if not rows:
        return []
    layers = layer_results(data) if layers is None else layers
    be = break_evens(data, rows)
    sweeps = [f"`{data.inputs.relative(data.inputs.packing_table(n))}`" for n in PENALTY_SWEEPS
              if data.inputs.committed(data.inputs.packing_table(n))]
    rounds = sorted({r["run"].timing.repetitions for r in rows})
    out = [f"## {TITLE}", "",
           f"The penalty map: {' and '.join(sweeps)} ({len(rows)} points"
           + (f"; {missing} table rows without a committed point file left out" if missing else "")
           + f", {'/'.join(map(str, rounds))} rounds each). Each point times one skewed routing interleaved with its "
           "own `local` at the same shape: `× local` is the ratio of dK/dV medians (paired 95% CI), the excess "
           "`median(skewed) − median(local)` per call (paired bootstrap 95% CI of the difference), for dK/dV and "
           "the full backward wrapper; verdict: the rule with the H200's dK/dV floor "
           f"(f = {pct(max(data.floor('dkv_core', r['gpu']) for r in rows))}); `model × local`: the makespan "
           f"model's predicted ratio (`{PENALTY_VALIDATION}`; —: the validation holds no prediction for the point, "
           "fla-topk's routing not being regenerable on a CPU and a routing that calibrated the model left out).", "",
           map_table(data, rows), "", *_figure_lines(data), *scope_lines(data, rows),
           "**Break-even.** The model's against the data's:", "", *break_even_lines(data, rows, be)]
    scale = scaling_line(rows)
    out += [*([scale] if scale else []), "", *step_lines(data, layers), *map_advice_lines(data, rows), ""]
    return out


def answer_line(data: ReportData) -> str | None:
    """The answer block's pointer to the section: the excess at the largest measured B·H per routing, the model's
    break-even, and the training-step share of the primary shape. None without the map."""
    rows, _ = map_rows(data)
    ends = {f: p[-1] for f in sorted({r["family"] for r in rows}, key=_order) if (p := _plane(rows, f))}
    if not ends:
        return None
    bh = max(r["BH"] for r in ends.values())
    at = {f: r for f, r in ends.items() if r["BH"] == bh}
    cells = ", ".join(f"{f} {r['dkv']['excess']:.1f} ms ({r['dkv']['excess_ci'][0]:.1f}–"
                      f"{r['dkv']['excess_ci'][1]:.1f}; {times(r['dkv']['ratio'], r['dkv']['ratio_ci'], 2)})"
                      for f, r in at.items())
    be = break_evens(data, rows)
    ones = {f: p[0] for f in at if (p := _plane(rows, f)) and p[0]["BH"] == 1}
    model = ("; the model's break-even B·H* ≈ " + ", ".join(f"{v['BH']:.1f} ({k})" for k, v in be.items() if k in at)
             + f" is not borne out: the excess at B·H = {bh} is "
             + ", ".join(f"{at[k]['dkv']['excess'] / ones[k]['dkv']['excess']:.2f}× ({k})" for k in be
                         if k in at and k in ones) + " its size at B·H = 1"
             if any(k in at for k in be) else "")
    run = release_primary(data)
    step = ""
    layer = [r for r in layer_shares(layer_results(data)) if r["T"] == MAP_T and r["routing"] in at]
    lo, hi = (min(r["BH"] for r in layer), max(r["BH"] for r in layer)) if layer else (0, 0)
    ends_of = {f: [r for r in layer if r["routing"] == f and r["BH"] in (lo, hi)] for f in at}
    both = {f: sorted(rs, key=lambda r: r["BH"]) for f, rs in ends_of.items() if len(rs) == 2}
    if both:
        step = ("; over an NSA layer's fwd+bwd with `local` (compression + selection; sliding window not timed) the "
                "excess adds "
                + ", ".join(f"{f} " + " → ".join(f"{pct(r['layer']['share'], 1)} ({pct(r['layer']['share_ci'][0], 1)}"
                                                  f"–{pct(r['layer']['share_ci'][1], 1)})" for r in rs)
                            for f, rs in both.items())
                + f" from B·H = {lo} to {hi}")
    elif run is not None and (shares := step_shares(run, STEP)):
        step = (f"; a training step's selection branch (fwd+bwd, B{run.shape['B']} T{run.shape['T']}) pays "
                + ", ".join(f"+{pct(s['share'], 0)} ({pct(s['share_ci'][0], 0)}–{pct(s['share_ci'][1], 0)}) for "
                            f"{s['routing']}" for s in shares if s["routing"] in at))
    return (f"- **When it matters** (H200): at B·H = {bh} (batch × KV heads; T={MAP_T}, G={MAP_G} query heads per KV "
            "head) the dK/dV excess per call is still "
            f"{cells}{model}{step} ([{TITLE.split(' (')[0].lower()}]({anchor(TITLE)})).")

