"""The makespan model's and the what-if arms' RESULTS.md sections (from committed ``results/model`` and
``results/whatif`` documents; empty when none exist; the figure: :mod:`nsa_exp.figures.model_validation`).

Per calibration: its designed routings, its fitted parameters and how many of them the fit actually used (a
parameter at its bound, or fixed by one slot per SM, is not free). Per validation: the |error| over all its rows
as recorded, over the non-baseline rows (``local`` is every sweep point's own baseline, so it is counted once per
point there), over the distinct routing x T points (a point measured by several files counts once, the mean of
its |errors|), and per row the measurement's 95% CI (from the point's own raw observations) with the error
range it allows. The what-if arms: each arm's median (csr + dK/dV + reduce) with its CI, the time saved with a
paired CI, and the rule's verdict on arm / baseline.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.autotune_matrix import diff_ci
from ..analysis.bootstrap import bootstrap_median_ci, bootstrap_ratio_ci
from ..core.families import BASELINE_PATTERN
from ..figures.model_validation import figure_stem
from ..io.paths import locate_recorded
from ..io.store import file_sha256, load_document
from .claims import round_up
from .data import ReportData
from .markdown import md_table, ms, times

#: A fitted parameter this close to its bound is at the bound (the fit did not use it).
AT_BOUND = 1e-9


def free_parameters(cal: dict[str, Any]) -> tuple[int, list[str]]:
    """How many of ``(a, c, gamma)`` the fit used, and why the others are not free."""
    p, slots = cal["model"]["parameters"], cal["occupancy"]["slots_per_sm"]
    fixed = []
    if p["a_ms"] <= AT_BOUND * max(1.0, p["c_ms"]):
        fixed.append(f"a = {p['a_ms']:.2g} ms, at its bound 0")
    if slots == 1:
        fixed.append("gamma = 1, fixed by one program per SM (1 ≤ gamma ≤ slots)")
    elif abs(p["gamma"] - 1.0) <= AT_BOUND or abs(p["gamma"] - slots) <= AT_BOUND:
        fixed.append(f"gamma = {p['gamma']:g}, at its bound")
    return 3 - len(fixed), fixed


def calibration_lines(data: ReportData) -> list[str]:
    rows = []
    for path in data.inputs.model_calibrations():
        cal = load_document(path, ("model_calibration",))
        p, free = cal["model"]["parameters"], free_parameters(cal)
        cfg = cal["autotune_config"]
        rows.append([f"`{data.inputs.relative(path)}`", f"BQ={cfg['kwargs'].get('BQ')}, w{cfg['num_warps']}, "
                     f"s{cfg['num_stages']}", str(cal["occupancy"]["slots_per_sm"]), f"{p['a_ms']:.4g}",
                     f"{p['c_ms']:.4g}", f"{p['gamma']:.4g}",
                     f"{free[0]}" + (f" ({'; '.join(free[1])})" if free[1] else ""),
                     f"{cal['residuals']['mean_abs_pct']:.2f}% / {cal['residuals']['max_abs_pct']:.2f}% over "
                     f"{cal['residuals']['n']}"])
    if not rows:
        return []
    return ["Calibrations (`calibrate`, least squares on the designed routings of the calibration set; a in ms per "
            "program, c in ms per BQ-iteration of a row):", "",
            md_table(["calibration", "dK/dV config", "slots/SM", "a ms", "c ms", "gamma", "free parameters",
                      "fit abs. error mean / max"], rows), ""]


def _measured(data: ReportData, row: dict[str, Any]) -> dict[str, Any] | None:
    """The row's measurement in its source file: median, 95% CI, n (None when the source is not committed)."""
    run = data.runs.get(row["source"])
    if run is None:
        return None
    name = next((n for n, p in run.patterns.items() if p.params == row["pattern"]), None)
    if name is None:
        return None
    raw = np.asarray(run.patterns[name].stages["dkv_core"].raw_ms)
    out = {"median": float(np.median(raw)), "ci": bootstrap_median_ci(raw), "n": int(raw.size)}
    path = locate_recorded(row["source"], [data.inputs.root]) or data.inputs.root / row["source"]
    out["same_file"] = file_sha256(path) == row.get("sha256", file_sha256(path))
    return out


def summary_stats(rows: list[dict[str, Any]]) -> dict[str, tuple[int, float, float]]:
    """``(n, mean |error| %, max |error| %)`` over: every row, the non-baseline rows, the distinct routing x T
    points (each the mean of its rows' |errors|), the distinct non-baseline points."""
    def stats(errs: list[float]) -> tuple[int, float, float]:
        return (len(errs), float(np.mean(errs)), float(np.max(errs))) if errs else (0, float("nan"), float("nan"))

    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["name"], []).append(r)
    distinct = {n: float(np.mean([abs(x["error_pct"]) for x in g])) for n, g in groups.items()}
    local = {n for n, g in groups.items() if g[0]["pattern"]["name"] == BASELINE_PATTERN}
    return {"all rows": stats([abs(r["error_pct"]) for r in rows]),
            "non-baseline rows": stats([abs(r["error_pct"]) for r in rows if r["pattern"]["name"] != BASELINE_PATTERN]),
            "distinct routing × T points": stats(list(distinct.values())),
            "distinct non-baseline points": stats([v for n, v in distinct.items() if n not in local])}


def _validation_rows(data: ReportData, doc: dict[str, Any]) -> tuple[list[list[str]], int]:
    """One row per distinct routing x T point (several files: the range of their medians and CIs)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in doc["rows"]:
        groups.setdefault(r["name"], []).append(r)
    rows, changed = [], 0
    for name, rs in groups.items():
        r = rs[0]
        meas = [_measured(data, x) for x in rs]
        changed += sum(1 for m in meas if m is not None and not m["same_file"])
        known = [m for m in meas if m is not None]
        lpt = f"{r['predicted_ms'] - r['heaviest_first_ms']:+.2f}"
        split = "-" if r["split_ms"] is None else f"{r['predicted_ms'] - r['split_ms']:+.2f}"
        if known:
            lo, hi = min(m["ci"][0] for m in known), max(m["ci"][1] for m in known)
            err_ci = f"{100 * (r['predicted_ms'] / hi - 1):+.1f}% … {100 * (r['predicted_ms'] / lo - 1):+.1f}%"
        else:
            lo = hi = None
            err_ci = "source not committed"
        if len(rs) == 1:
            measured = ms(r["measured_ms"], (lo, hi), 2) if lo is not None else f"{r['measured_ms']:.2f}"
            err = f"{r['error_pct']:+.1f}%"
        else:
            medians = [x["measured_ms"] for x in rs]
            measured = f"{min(medians):.2f}–{max(medians):.2f} over {len(rs)} files" + (
                f" (CIs {lo:.2f}–{hi:.2f})" if lo is not None else "")
            errs = [x["error_pct"] for x in rs]
            err = f"{min(errs):+.1f}% … {max(errs):+.1f}%"
        rows.append([name, measured, f"{r['predicted_ms']:.2f}", err, err_ci, f"{r['busy_fraction']:.2f}", lpt, split])
    return rows, changed


def _validation(data: ReportData, doc: dict[str, Any], path: str) -> list[str]:
    stats = summary_stats(doc["rows"])
    verdict = "meets" if doc["meets_target"] else "**misses**"
    limit = doc["target"]["max_abs_pct"]
    misses = [f"{r['name']} ({r['error_pct']:+.1f}%)" for r in doc["rows"] if abs(r["error_pct"]) > limit]
    signs = sum(r["error_pct"] > 0 for r in doc["rows"])
    rows, changed = _validation_rows(data, doc)
    table = md_table(["over", "n", "mean abs. error", "max abs. error"],
                     [[k, str(n), f"{m:.2f}%", f"{x:.2f}%"] for k, (n, m, x) in stats.items()])
    return [f"### Validation: `{path}`", "",
            f"Calibrated on `{doc['calibration']['path']}` (designed routings only; used points excluded: "
            f"{', '.join(doc['excluded']) or 'none'}). Target: mean |error| ≤ {doc['target']['mean_abs_pct']}%, max ≤ "
            f"{limit}% over the rows as recorded: {verdict}. Over {limit}%: {', '.join(misses) or 'none'}. "
            f"{signs} of {len(doc['rows'])} predictions are above the measurement (docs/MODEL.md discusses the bias). "
            "`local` is the baseline of every sweep point, so the rows count it once per point; the distinct points "
            "count each routing × T once:", "", table, "",
            f"![predicted vs measured](figures/{figure_stem(doc)}.png)", "",
            "Predicted vs measured (each measurement with its 95% CI, from the point's own rounds; several files "
            "of one point are separate markers).", "",
            md_table(["routing", "measured ms (95% CI)", "predicted ms", "error", "error over the CI", "busy",
                      "model: LPT saves ms", f"model: split F={doc['split_max_fanin']} saves ms"
                      if doc["split_max_fanin"] else "model: split (not modelled)"], rows), "",
            *([f"{changed} source file(s) changed since this validation (sha256 differs): re-run its command.", ""]
              if changed else []),
            *([f"**Its calibration `{doc['calibration']['path']}` changed since this validation** (sha256 differs: "
               "`validate` fails it): re-run its command.", ""] if _calibration_changed(data, doc) else [])]


def _calibration_changed(data: ReportData, doc: dict[str, Any]) -> bool:
    """Whether the calibration a validation records is no longer the file at its path (its sha256 differs, or it is
    gone): the validation's predictions came from another calibration."""
    path = data.inputs.root / doc["calibration"]["path"]
    return not path.is_file() or file_sha256(path) != doc["calibration"]["sha256"]


def model_section(data: ReportData) -> list[str]:
    """The model appendix: calibrations, then every ``results/model/*_validation.json``."""
    vals = data.inputs.model_validations()
    if not vals:
        return []
    out = ["## Appendix: makespan model of the dK/dV kernel (docs/MODEL.md)", "", *calibration_lines(data)]
    for p in vals:
        out += _validation(data, load_document(p, ("model_validation",)), data.inputs.relative(p))
    return out


def whatif_rows(data: ReportData, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per pattern x arm: median (CI), saved ms vs the baseline (paired CI), arm / baseline (paired CI), verdict."""
    gpu = (doc["metadata"].get("gpu") or {}).get("name", "?")
    floor = data.floor("dkv_core", gpu)
    out = []
    for pattern, entry in doc["patterns"].items():
        base = np.asarray(entry["arms"]["baseline"]["total"]["raw_ms"])
        for name, arm in entry["arms"].items():
            raw = np.asarray(arm["total"]["raw_ms"])
            row = {"pattern": pattern, "arm": name, "batches": arm["batches"], "median": float(np.median(raw)),
                   "ci": bootstrap_median_ci(raw), "n": int(raw.size)}
            if name != "baseline":
                row["saved"] = float(np.median(base) - np.median(raw))
                row["saved_ci"] = diff_ci(base, raw)
                row["ratio"] = float(np.median(raw) / np.median(base))
                row["ratio_ci"] = bootstrap_ratio_ci(raw, base)
                row["floor"] = floor
            out.append(row)
    return out


def equivalence_phrase(doc: dict[str, Any]) -> str:
    """What a what-if result's equivalence gate proved, from its recorded numbers: per arm and tensor (dK, dV)
    against the official wrapper's, the elements that differ (``n_different`` of ``numel``), the largest
    difference in bf16 ULP, the largest rel-L2 and the gate's tolerance; "bitwise equal" only when every
    tensor of every arm is ``bit_exact``."""
    eqs = [t for v in doc["patterns"].values() for a in v["arms"].values() if a.get("equivalence")
           for t in a["equivalence"].values()]
    tol = doc["config"]["tolerances"]["full_shape_dkv_rel_l2"]
    if all(t["bit_exact"] for t in eqs):
        return "each bitwise equal to the official wrapper's dK/dV"
    nd, numel = [t["n_different"] for t in eqs], [t["numel"] for t in eqs]
    worst = round_up(max(t["rel_l2"] for t in eqs), 4)
    return (f"each equal to the official wrapper's dK/dV within rel-L2 {worst:.4f} (the "
            f"gate: ≤ {tol}), not bitwise: {min(nd):,}–{max(nd):,} of {min(numel):,}–{max(numel):,} elements of a "
            f"tensor differ, by at most {max(t['max_ulp'] for t in eqs):.0f} bf16 ULP (a different summation order "
            "of the split partials)")


def whatif_section(data: ReportData) -> list[str]:
    out = []
    for p in data.inputs.whatifs():
        doc = load_document(p, ("whatif_result",))
        rows = []
        for r in whatif_rows(data, doc):
            if r["arm"] == "baseline":
                rows.append([r["pattern"], r["arm"], str(r["batches"]), ms(r["median"], r["ci"], 2), "—", "—"])
                continue
            rows.append([r["pattern"], r["arm"], str(r["batches"]), ms(r["median"], r["ci"], 2),
                         ms(r["saved"], r["saved_ci"], 2),
                         f"{times(r['ratio'], r['ratio_ci'])}: {data.claims.judged(r['ratio_ci'], r['floor'])}"])
        out += [f"`{data.inputs.relative(p)}` ({doc['timing']['rounds']} interleaved rounds): FLA's unmodified "
                "`prepare_block_csr` + `parallel_nsa_bwd_kernel_dkv` on an emulated schedule (B' batches, chunk j of "
                f"each long CSR row in batch j) plus the reduction, {equivalence_phrase(doc)}; "
                "medians of csr + dkv_core (+ reduce). Saved ms: baseline − arm, paired bootstrap CI over the rounds. "
                "Not the experiment's measurement.", "",
                md_table(["pattern", "arm", "B'", "median ms (95% CI)", "saved ms (95% CI)", "arm / baseline"], rows),
                ""]
    return out
