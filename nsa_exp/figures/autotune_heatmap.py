"""Figure: the autotune-matrix heatmaps (configs × routings), one row of panels per stage: median ms,
and × local under the same config. Reads a committed ``autotune_matrix`` JSON; writes PNG and SVG."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..analysis.autotune_matrix import StageMatrix, config_text
from ..checking.validate import load_validated
from ..core.families import BASELINE_PATTERN
from .canvas import Claim, pyplot, save_figure


def heatmap_arrays(m: StageMatrix) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(config labels, ms [configs, routings], × local under the same config [configs, routings]);
    a failed config is a row of NaN (drawn blank, labelled 'failed')."""
    labels, ms = [], []
    for c in [*m.ok, *m.failed]:
        labels.append(config_text(c["config"]) + ("" if c["status"] == "ok" else " (failed)"))
        ms.append([c["patterns"][p]["median_ms"] if c["status"] == "ok" else np.nan for p in m.patterns])
    arr = np.array(ms, dtype=float)
    return labels, arr, arr / arr[:, [m.patterns.index(BASELINE_PATTERN)]]


def plot_autotune_heatmap(path: str | Path, out_dir: str | Path, claim: Claim | None = None) -> list[Path]:
    """Draw the heatmaps of every stage in the matrix; returns the PNG and SVG paths (atomic writes)."""
    plt = pyplot()

    doc = load_validated(path, ("autotune_matrix",), f"--input {path}")
    stages = list(doc["stages"])
    fig, axes = plt.subplots(len(stages), 2, figsize=(11, 0.35 * 18 * len(stages) + 1), squeeze=False,
                             constrained_layout=True)
    for row, st in zip(axes, stages, strict=True):
        m = StageMatrix(doc, st)
        labels, ms, ratio = heatmap_arrays(m)
        for ax, data, title, fmt in ((row[0], ms, f"{st}: median ms", "{:.2f}"),
                                     (row[1], ratio, f"{st}: × local, same config", "{:.3f}")):
            im = ax.imshow(np.ma.masked_invalid(data), aspect="auto", cmap="viridis")
            ax.set_xticks(range(len(m.patterns)), m.patterns)
            ax.set_yticks(range(len(labels)), labels, fontsize=7)
            for (i, j), v in np.ndenumerate(data):
                if np.isfinite(v):
                    ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=6, color="w")
            ax.set_title(title, fontsize=9)
            fig.colorbar(im, ax=ax)
    gpu = doc["metadata"].get("gpu", {}).get("name", "?")
    fig.suptitle(f"{doc['name']}: FLA NSA autotune config × routing ({gpu})")
    out = save_figure(fig, Path(out_dir) / f"{doc['name']}_autotune_heatmap", claim)
    plt.close(fig)
    return out
