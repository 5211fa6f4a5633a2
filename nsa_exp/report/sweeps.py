"""RESULTS.md's sweep section: every committed sweep table (``results/sweeps/<name>.csv``), one row per
point, with its figure (``python -m nsa_exp sweep-plot``). Nothing is added when no table exists."""

from __future__ import annotations

import json

from ..io.store import load_document
from ..sweeps.table import read_sweep_table
from .manifest import Inputs

COLUMNS = {"point_id": "point", "T": "T", "fanin_max": "fan-in max", "fanin_cv": "fan-in CV",
           "fanin_gini": "Gini", "dkv_median_ms": "dK/dV ms", "dkv_p10_ms": "p10", "dkv_p90_ms": "p90",
           "csr_median_ms": "CSR ms", "ratio_vs_local": "× local (same T)"}


def sweep_section(inputs: Inputs) -> list[str]:
    """``## Sweeps`` with one table per committed sweep (sorted by family, then T, then point id)."""
    tables = inputs.sweep_tables()
    if not tables:
        return []
    out = ["## Sweeps (H200, dK/dV-focused)", "",
           "Each point is its own result (`results/sweeps/<name>/<point>.json`): its routing interleaved with "
           "`local` at the same T, `csr` and `dkv_core` timed with CUDA events (read L2 flush), autotune configs "
           "pinned from the bench result the sweep config names (per table below). "
           "Every routing has the closed-form edge count of its T. "
           "`× local` is the ratio of medians against that point's own `local`.", ""]
    for path in tables:
        frame = read_sweep_table(path).sort_values(["family", "T", "point_id"])
        shown = frame[list(COLUMNS)].rename(columns=COLUMNS)
        first = sorted((path.parent / path.stem).glob("T*.json"))
        kernels = load_document(first[0], ("sweep_point",))["autotune"] if first else {}
        dkv = kernels.get("kernels", {}).get("dkv_core", {}).get("best_config") or {}
        pinned = (f"autotune from `{kernels.get('source')}` (dK/dV {json.dumps(dkv, sort_keys=True)})"
                  if kernels else "autotune source not recorded")
        out += [f"### `{inputs.relative(path)}` ({len(frame)} points; {pinned})", "",
                shown.to_markdown(index=False, floatfmt=".3f"), ""]
        figure = inputs.figures / f"{path.stem}_dkv.png"
        if figure.is_file():
            out += [f"![{path.stem}](figures/{figure.name})", ""]
    return out
