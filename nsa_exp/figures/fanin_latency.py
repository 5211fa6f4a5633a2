"""Figure: latency vs a fan-in statistic, one marker per pattern with p10-p90 bars, one panel per
backward stage (dQ, CSR, dK/dV, full backward). Reads a summary CSV; writes PNG and SVG.

Patterns are told apart by marker shape and colour in one figure legend, not by labels next to the
points: in the dQ panel the four medians lie within 1% and sink-heavy/zipf have close fan-in CVs, so
point labels overlapped. Markers are hollow and drawn largest first, so a marker under another stays
visible as a ring. The GPU in the title is the one the bench result recorded (``metadata.gpu.name``).

Axes are logarithmic where the plotted values span a decade or more, linear otherwise; a linear
latency axis starts at zero so that a 1% difference looks like one.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

from ..core import stages
from ..core.families import family
from ..errors import UserError
from ..io.reader import show_path
from ..io.store import load_document
from ..io.strict_csv import read_csv_table
from ..routing.fanin import X_STATS
from .canvas import Claim, pyplot, save_figure

PANELS = tuple((name, stages.stage(name).panel_title) for name in stages.PANEL_ORDER)


def read_summary(path: str | Path) -> list[dict[str, str]]:
    """The rows of a bench summary CSV (:func:`nsa_exp.io.strict_csv.read_csv_table`: bounded, its columns those of
    ``summary_row``); another table (a sweep table) is one line naming ``--input``."""
    label = f"--input {show_path(path)}"
    text = read_csv_table(path, label, "summary_row", "a bench summary CSV",
                          hint="a sweep table is drawn by sweep-plot --table",
                          not_found=f"{label}: no such file; run `invoke bench` first")
    return list(csv.DictReader(io.StringIO(text)))


def gpu_name(summary: str | Path, result: str | Path | None = None) -> str | None:
    """The GPU the bench result behind ``summary`` recorded: ``result``, else ``results/raw/<stem>.json``
    beside the summaries folder; None when there is no such file (UserError when it is not a result)."""
    path = Path(result) if result else Path(summary).parent.parent / "raw" / f"{Path(summary).stem}.json"
    if not path.exists():
        if result:
            raise UserError(f"--result {result}: no such file")
        return None
    doc = load_document(path, ("bench_result",), f"--result {path}")
    return (doc["metadata"].get("gpu") or {}).get("name")


def plot_fanin_latency(summary: str | Path, x_stat: str, out_dir: str | Path,
                       result: str | Path | None = None, claim: Claim | None = None) -> list[Path]:
    """Draw the figure; returns the PNG and SVG paths (written atomically). ``result``: the bench result
    whose GPU names the figure (default: the summary's companion, see :func:`gpu_name`)."""
    plt = pyplot()

    if x_stat not in X_STATS:
        raise UserError(f"--x {x_stat!r}: choose one of {', '.join(X_STATS)}")
    rows = read_summary(summary)
    gpu = gpu_name(summary, result)
    if gpu is None:  # a third party's summary without its bench result beside it: said, not silently drawn
        where = result or Path(summary).parent.parent / "raw" / f"{Path(summary).stem}.json"
        why = "records no GPU" if Path(where).exists() else "is not there (pass --result RESULT.json)"
        print(f"warning: plot: the bench result {where} {why}: the figure's title says 'GPU not recorded'",
              file=sys.stderr)
    config = rows[0]["config_name"] if rows else "?"
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 4.0), constrained_layout=True)
    for ax, (stage, title) in zip(axes, PANELS, strict=True):
        pts = [r for r in rows if r["stage"] == stage]
        if not pts:
            raise UserError(f"{summary}: no rows for stage {stage}")
        xs = [float(r[x_stat]) for r in pts]
        ys = [float(r["median_ms"]) for r in pts]
        for i, (r, x, y) in enumerate(zip(pts, xs, ys, strict=True)):
            lo, hi = float(r["p10_ms"]), float(r["p90_ms"])
            ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], fmt=family(r["pattern"]).marker,
                        ms=11 - 1.5 * i, mfc="none", mew=1.6, capsize=4, label=r["pattern"], zorder=3 + i)
        if max(xs) / max(min(xs), 1e-12) >= 10:
            ax.set_xscale("log")
        ax.margins(x=0.25, y=0.25)
        if max(ys) / min(ys) >= 10:
            ax.set_yscale("log")
        else:
            top = max(float(r["p90_ms"]) for r in pts)
            ax.set_ylim(0, 1.2 * top)  # a zero-based axis: small differences are not blown up
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(X_STATS[x_stat])
        ax.set_ylabel("latency, median (ms); bars p10-p90")
        ax.grid(True, alpha=0.3, which="both")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=9)
    fig.suptitle(f"{config}: FLA NSA stage latency vs {X_STATS[x_stat]} (equal edges, "
                 f"{gpu or 'GPU not recorded'})", fontsize=11)
    out = save_figure(fig, Path(out_dir) / f"{config}_{x_stat}_latency", claim)
    plt.close(fig)
    return out
