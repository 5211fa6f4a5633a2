"""RESULTS.md's packed-documents section (issue 15), from the packing sweep's table and its point files, and
the bench on the varlen path (``configs/e1_h200_docs8192.json``).

Reads ``results/sweeps/<name>.csv`` (schema ``sweep_row`` with the ``packing`` and ``documents`` columns of a
sweep with a ``packings`` axis, e.g. ``configs/sweep_packing_h200.json``): each row is a skewed routing's point,
timed interleaved with ``local`` under the same packing. Two readings:

- the dK/dV penalty (skewed / local medians, same packing, same rounds; paired 95% CI from the point file) per
  document length: a per-document sink's fan-in is its document's length, so the penalty should fall with it;
- dense vs one document of ``T`` through the varlen path: the same routing and the same CSR rows, only the dK/dV
  program order differs (dense ``(b*H + h)*M + s``, varlen ``(global_block)*H + h``).

The packings do not all have the same edges (the packed closed form depends on the document lengths): each
row's edges are printed. Nothing is added when the table is absent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.compare import ratio_ci
from ..core.families import BASELINE_PATTERN
from ..sweeps.table import read_sweep_table
from .data import ReportData
from .manifest import PACKING_SWEEP
from .markdown import md_table, ms, times
from .sweeps import point_stats

if TYPE_CHECKING:
    import pandas as pd


def packing_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The section's rows: dense first, then the packings by document count (one document of T, then shorter
    documents), mixed packings last."""
    frame = frame.copy()
    frame["_dense"] = frame["packing"] != "dense"
    frame["_mixed"] = ~frame["packing"].str.startswith(("dense", "docs"))
    frame = frame.sort_values(["family", "_dense", "_mixed", "documents", "point_id"], kind="stable")
    return frame.reset_index(drop=True)


def order_sentence(data: ReportData, frame: pd.DataFrame) -> list[str]:
    """Dense vs one document through the varlen path, per routing: what the program order alone changes."""
    out = []
    for family, rows in frame.groupby("family", sort=True):
        dense = rows[rows["packing"] == "dense"]
        one = rows[(rows["packing"] != "dense") & (rows["documents"] == 1)]
        if dense.empty or one.empty:
            continue
        d, v = dense.iloc[0], one.iloc[0]
        sd, sv = point_stats(data, d["sweep"], d["point_id"]), point_stats(data, v["sweep"], v["point_id"])
        if sd and sv:
            run_d = data.point(f"results/sweeps/{d['sweep']}/{d['point_id']}.json")
            run_v = data.point(f"results/sweeps/{v['sweep']}/{v['point_id']}.json")
            ci = ratio_ci(run_d.routing.stages["dkv_core"].raw_ms, run_v.routing.stages["dkv_core"].raw_ms)
            r = sv["dkv"]["median"] / sd["dkv"]["median"]
            word = data.claims.judged(ci, data.floor("dkv_core", run_d.gpu_name))
            out.append(f"- `{family}`: dense {ms(sd['dkv']['median'], sd['dkv']['ci'])} ms vs one document (varlen "
                       f"order) {ms(sv['dkv']['median'], sv['dkv']['ci'])} ms: {times(r, ci)}, {word} (the two "
                       f"points' rounds resampled on their own); `local` {d['local_dkv_median_ms']:.3f} vs "
                       f"{v['local_dkv_median_ms']:.3f} ms. Same routing and CSR rows: only the order in which the "
                       "heavy rows meet the GPU differs.")
        else:
            out.append(f"- `{family}`: dense {d['dkv_median_ms']:.3f} ms vs one document (varlen order) "
                       f"{v['dkv_median_ms']:.3f} ms ({v['dkv_median_ms'] / d['dkv_median_ms']:.3f}×; point files not "
                       "committed, no CI).")
    return out


def packing_section(data: ReportData, name: str = PACKING_SWEEP) -> list[str]:
    """``## Packed documents`` from ``results/sweeps/<name>.csv``; ``[]`` when it is absent."""
    path = data.inputs.packing_table(name)
    if not data.inputs.committed(path):
        return []
    frame = packing_table(read_sweep_table(path))
    rows = []
    for r in frame.to_dict(orient="records"):
        s = point_stats(data, r["sweep"], r["point_id"])
        if s is None:
            rows.append([r["packing"], str(r["documents"]), f"{r['edges']:,}", r["family"], f"{r['fanin_max']:.0f}",
                         f"{r['local_dkv_median_ms']:.3f}", f"{r['dkv_median_ms']:.3f}", f"{r['ratio_vs_local']:.3f}×",
                         "point file not committed"])
            continue
        run = data.runs[f"results/sweeps/{r['sweep']}/{r['point_id']}.json"]
        local = data.point_ci(run, BASELINE_PATTERN)
        d = s["dkv"]
        rows.append([r["packing"], str(r["documents"]), f"{r['edges']:,}", r["family"], f"{r['fanin_max']:.0f}",
                     ms(local["median"], local["ci"]), ms(d["median"], d["ci"]), times(d["ratio"], d["ratio_ci"]),
                     data.claims.judged(d["ratio_ci"], data.floor("dkv_core", s["gpu"]))])
    edges = sorted({int(e) for e in frame["edges"]})
    out = ["## Packed documents (cu_seqlens, H200)", "",
           f"`{data.inputs.relative(path)}` (`configs/{name}.json`): FLA's varlen path with every routing generated "
           "per document (document-local block ids; within a packing every routing has the packed closed-form edges, "
           f"which differ across packings: {edges[0]:,}–{edges[-1]:,}). The penalty is the skewed routing's dK/dV "
           "median over `local`'s under the same packing, measured in the same interleaved rounds (paired 95% CI).", "",
           md_table(["packing", "documents", "edges", "routing", "fan-in max", "local dK/dV ms (95% CI)",
                     "skewed dK/dV ms (95% CI)", "penalty (× local)", "verdict"], rows), ""]
    figure = data.inputs.figures / f"{name}_dkv.png"
    if data.inputs.committed(figure):
        out += [f"![{name}](figures/{figure.name})", "", "dK/dV median per packing vs the fan-in statistics of its "
                "varlen CSR rows (bars: p10–p90).", ""]
    sentences = order_sentence(data, frame)
    if sentences:
        out += ["Dense vs one document of T through the varlen path (program order "
                "`(b*H + h)*M + s` vs `(global_block)*H + h`):", "", *sentences, "",
                "Chunk-major numbering puts every head's block-0 row among the first H programs, so the heavy "
                "sink rows start at the head of the queue (an LPT-like order) instead of at program h·M; the "
                "makespan model's packed validation (model appendix) predicts both points from the same calibration.",
                ""]
    return out
