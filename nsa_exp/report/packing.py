"""RESULTS.md's packed-documents section (issue 15), from the packing sweep's table when it exists.

Reads ``results/sweeps/<name>.csv`` (schema ``sweep_row`` with the ``packing`` and ``documents``
columns of a sweep with a ``packings`` axis, e.g. ``configs/sweep_packing_h200.json``): each row is a
skewed routing's point, timed interleaved with ``local`` under the same packing. Two readings:

- the dK/dV penalty (skewed / local medians, same packing, same rounds) per document length: a
  per-document sink's fan-in is its document's length, so the penalty should fall with it;
- dense vs one document of ``T`` through the varlen path: the same routing and the same CSR rows, only
  the dK/dV program order differs (dense ``(b*H + h)*M + s``, varlen ``(global_block)*H + h``).

Nothing is added when the table is absent.
"""

from __future__ import annotations

import pandas as pd

from ..sweeps.table import read_sweep_table
from .manifest import PACKING_SWEEP, Inputs

COLUMNS = {"packing": "packing", "documents": "documents", "family": "routing", "fanin_max": "fan-in max",
           "local_dkv_median_ms": "local dK/dV ms", "dkv_median_ms": "skewed dK/dV ms",
           "ratio_vs_local": "penalty (× local)"}


def packing_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The section's rows: dense first, then the packings by descending document count order of length
    (one document of T, then shorter documents), mixed packings last; columns :data:`COLUMNS`."""
    frame = frame.copy()
    frame["_dense"] = frame["packing"] != "dense"
    frame["_mixed"] = ~frame["packing"].str.startswith(("dense", "docs"))
    frame = frame.sort_values(["family", "_dense", "_mixed", "documents", "point_id"], kind="stable")
    return frame[list(COLUMNS)].rename(columns=COLUMNS).reset_index(drop=True)


def order_sentence(frame: pd.DataFrame) -> list[str]:
    """Dense vs one document through the varlen path, per routing: what the program order alone changes."""
    out = []
    for family, rows in frame.groupby("family", sort=True):
        dense = rows[rows["packing"] == "dense"]
        one = rows[(rows["packing"] != "dense") & (rows["documents"] == 1)]
        if dense.empty or one.empty:
            continue
        d, v = dense.iloc[0], one.iloc[0]
        out.append(f"- `{family}`: dense {d['dkv_median_ms']:.3f} ms vs one document (varlen order) "
                   f"{v['dkv_median_ms']:.3f} ms ({v['dkv_median_ms'] / d['dkv_median_ms']:.3f}×); `local` "
                   f"{d['local_dkv_median_ms']:.3f} vs {v['local_dkv_median_ms']:.3f} ms. Same routing and CSR rows: "
                   f"only the order in which the heavy rows meet the GPU differs.")
    return out


def packing_section(inputs: Inputs, name: str = PACKING_SWEEP) -> list[str]:
    """``## Packed documents`` from ``results/sweeps/<name>.csv``; ``[]`` when it is absent."""
    path = inputs.packing_table(name)
    if not path.is_file():
        return []
    frame = read_sweep_table(path)
    out = ["## Packed documents (cu_seqlens, H200)", "",
           f"`{inputs.relative(path)}` (`configs/{name}.json`): FLA's varlen path with every routing generated "
           "per document (document-local block ids, packed closed-form edges equal across routings). "
           "The penalty is the skewed routing's dK/dV median over `local`'s under the same packing, "
           "measured in the same interleaved rounds.", "",
           packing_table(frame).to_markdown(index=False, floatfmt=".3f"), ""]
    sentences = order_sentence(frame)
    if sentences:
        out += ["Dense vs one document of T through the varlen path (program order "
                "`(b*H + h)*M + s` vs `(global_block)*H + h`):", "", *sentences, "",
                "Chunk-major numbering puts every head's block-0 row among the first H programs, so the heavy "
                "sink rows start at the head of the queue (an LPT-like order) instead of at program h·M; the "
                "makespan model's packed validation below predicts both points from the same calibration.", ""]
    return out
