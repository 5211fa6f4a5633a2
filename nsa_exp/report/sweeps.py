"""RESULTS.md's sweep appendix: every committed sweep table (``results/sweeps/<name>.csv``), one row per point,
each median and ratio with its 95% CI from the point's own rounds (``results/sweeps/<name>/<point>.json``: the
routing interleaved with ``local``, so the ratio's CI is paired) and the rule's verdict, with its figure
(``python -m nsa_exp sweep-plot``). Nothing is added when no table exists."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..core.records import SweepPoint
from ..sweeps.table import read_sweep_table
from .data import ReportData
from .markdown import md_table, ms, pct, times

if TYPE_CHECKING:
    import pandas as pd


def point_stats(data: ReportData, sweep: str, point_id: str) -> dict[str, Any] | None:
    """The point's dK/dV (median, CI, ratio to its own local with the paired CI) and CSR (median, CI)."""
    run = data.runs.get(f"results/sweeps/{sweep}/{point_id}.json")
    if not isinstance(run, SweepPoint):
        return None
    return _stats_of(data, run)


def _stats_of(data: ReportData, run: SweepPoint) -> dict[str, Any]:
    """:func:`point_stats` of a loaded sweep point."""
    name = run.point["pattern"]["name"]
    out = {"gpu": run.gpu_name, "dkv": data.point_ci(run, name, "dkv_core"), "rounds": run.timing.repetitions}
    if "csr" in run.routing.stages:
        out["csr"] = data.point_ci(run, name, "csr")
    return out


def sweep_rows(data: ReportData, frame: pd.DataFrame) -> list[list[str]]:
    rows = []
    for r in frame.to_dict(orient="records"):
        s = point_stats(data, r["sweep"], r["point_id"])
        base = [r["point_id"], str(r["T"]), f"{r['fanin_max']:.0f}", f"{r['fanin_cv']:.3f}", f"{r['fanin_gini']:.3f}"]
        if s is None:
            rows.append([*base, f"{r['dkv_median_ms']:.3f}", f"{r['csr_median_ms']:.3f}", f"{r['ratio_vs_local']:.3f}×",
                         "point file not committed"])
            continue
        d = s["dkv"]
        csr = ms(s["csr"]["median"], s["csr"]["ci"]) if "csr" in s else "—"
        if "ratio" in d:
            ratio = times(d["ratio"], d["ratio_ci"])
            word = data.claims.judged(d["ratio_ci"], data.floor("dkv_core", s["gpu"]))
        else:
            ratio, word = "1 (the baseline)", "—"
        rows.append([*base, ms(d["median"], d["ci"]), csr, ratio, word])
    return rows


def sweep_section(data: ReportData) -> list[str]:
    """``## Appendix: sweeps`` with one table per committed sweep (sorted by family, then T, then point id)."""
    tables = data.inputs.sweep_tables()
    if not tables:
        return []
    out = ["## Appendix: sweeps (H200, dK/dV-focused)", "",
           "Each point is its own result (`results/sweeps/<name>/<point>.json`): its routing interleaved with "
           "`local` at the same T, `csr` and `dkv_core` timed with CUDA events (read L2 flush), autotune configs "
           "pinned from the bench result the sweep config names (per table below). `× local` is the ratio of "
           "medians against that point's own `local`, paired bootstrap 95% CI over its rounds; the verdict is the "
           "rule's with the GPU's dK/dV floor.", ""]
    for path in tables:
        frame = read_sweep_table(path).sort_values(["family", "T", "point_id"])
        first = data.inputs.glob(path.parent / path.stem, "T*.json")
        point = data.runs.get(data.inputs.relative(first[0])) if first else None
        kernels = point.autotune if point is not None else {}
        dkv = kernels.get("kernels", {}).get("dkv_core", {}).get("best_config") or {}
        pinned = (f"autotune from `{kernels.get('source')}` (dK/dV {json.dumps(dkv, sort_keys=True)})"
                  if kernels else "autotune source not recorded")
        rounds = sorted({s["rounds"] for r in frame.to_dict("records")
                         if (s := point_stats(data, r["sweep"], r["point_id"]))})
        gpu = point.gpu_name if point is not None else None
        out += [f"### `{data.inputs.relative(path)}` ({len(frame)} points, {'/'.join(map(str, rounds))} rounds each; "
                f"{pinned}; floor f = {pct(data.floor('dkv_core', gpu)) if gpu else '—'})", "",
                md_table(["point", "T", "fan-in max", "fan-in CV", "Gini", "dK/dV ms (95% CI)", "CSR ms (95% CI)",
                          "× local (95% CI)", "verdict"], sweep_rows(data, frame)), ""]
        figure = data.inputs.figures / f"{path.stem}_dkv.png"
        if data.inputs.committed(figure):
            out += [f"![{path.stem}](figures/{figure.name})", "",
                    f"`{path.stem}`: dK/dV median (bars: p10–p90 of the point's rounds) vs each fan-in statistic"
                    + (" and vs T" if frame["T"].nunique() > 1 else "") + ".", ""]
    return out


def point_of(data: ReportData, sweep: str, family: str, params: dict[str, Any] | None = None,
             T: int | None = None) -> tuple[str, dict[str, Any]] | None:
    """The (point id, :func:`point_stats`) of the sweep's point whose routing is ``family`` with exactly
    ``params`` (at ``T`` when given); None when the sweep has no such point."""
    for path in data.inputs.sweep_points(sweep):
        run = data.runs.get(data.inputs.relative(path))
        if not isinstance(run, SweepPoint) or run.config.get("packing"):
            continue
        pat = run.point["pattern"]
        if (pat["name"] == family and {k: v for k, v in pat.items() if k != "name"} == (params or {})
                and (T is None or run.shape["T"] == T)):
            return path.stem, _stats_of(data, run)
    return None
