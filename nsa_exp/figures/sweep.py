"""Figure of a sweep table: dK/dV median (bars p10-p90) vs each fan-in statistic, and vs T.

Reads ``results/sweeps/<name>.csv`` (schema ``sweep_row``); one colour and marker per routing family,
named in a legend (no per-point labels, so nothing overlaps; a routing's parameters as ``k=v``, never as
JSON); large fan-in ticks in thousands (``32k``) so they do not run into each other; the title says "equal
edges per T" only when every point of a T has the same edges, else the range of edges; writes PNG and SVG
atomically.

>>> params_label('{"sinks": 4, "heads": [0, 1]}'), params_label("{}")
('sinks=4, heads=0,1', '')
>>> import pandas as pd
>>> edges_note(pd.DataFrame({"T": [8, 8], "edges": [5, 5]}))
'equal edges per T'
>>> edges_note(pd.DataFrame({"T": [8, 8], "edges": [1605632, 2066432]}))
'edges 1.61–2.07 M across points'
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..core.families import BASELINE_PATTERN
from ..errors import UserError
from ..io.reader import show_path
from ..io.store import read_strict
from ..io.strict_csv import read_csv_table
from ..routing.fanin import X_STATS
from .canvas import Claim, claim_first, pyplot, save_figure

if TYPE_CHECKING:
    import pandas as pd

MARKERS = "osD^v<>Pp*hX"


def params_label(params: str) -> str:
    """A routing's parameters (the table's JSON) as ``k=v`` pairs, lists comma-joined."""
    values = json.loads(params) if params else {}
    return ", ".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in values.items())


def edges_note(frame: pd.DataFrame) -> str:
    """``equal edges per T`` when every T's points have one edge count; for a packed sweep whose packings differ,
    equal per packing and the range across packings; else the range, in millions."""
    span = f"{frame['edges'].min() / 1e6:.2f}–{frame['edges'].max() / 1e6:.2f} M"
    if (frame.groupby("T")["edges"].nunique() == 1).all():
        return "equal edges per T"
    if "packing" in frame and (frame.groupby(["T", "packing"])["edges"].nunique() == 1).all():
        return f"equal edges per packing, {span} across packings"
    return f"edges {span} across points"


def _thousands(value: float, _pos: int) -> str:
    return f"{value / 1000:g}k" if abs(value) >= 1000 else f"{value:g}"


def plot_sweep(table: str | Path, out_dir: str | Path, claim: Claim | None = None) -> list[Path]:
    """Draw one panel per fan-in statistic of :data:`X_STATS` (points at every T) and, when the table
    holds several T, one panel of dK/dV median vs T per family; returns the PNG and SVG paths."""
    plt = pyplot()

    label = f"--table {show_path(table)}"
    text = read_csv_table(table, label, "sweep_row", "a sweep table",
                          hint="a bench summary is drawn by plot --input",
                          not_found=f"{label}: no such file; run `python -m nsa_exp sweep` first")
    import pandas as pd  # noqa: PLC0415 - pandas (0.2 s) where a table is built, not in every CPU command's start

    frame = pd.read_csv(io.StringIO(text)).dropna(subset=["dkv_median_ms"])
    if frame.empty:
        raise UserError(f"--table {table}: no point with a dkv_core median")
    name = str(frame["sweep"].iloc[0])
    penalty = {"B", "H", "G", "dkv_excess_ms"} <= set(frame.columns)
    claim = claim_first(claim, [Path(out_dir) / f"{name}_dkv", *([Path(out_dir) / f"{name}_penalty_map"] if penalty
                                                                  else [])])
    by_T = frame["T"].nunique() > 1
    panels = [*X_STATS, *(["T"] if by_T else [])]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), constrained_layout=True)
    for ax, x in zip(axes, panels, strict=True):
        # vs T: one line per routing (family + parameters); vs a statistic: one marker per family
        # packed sweeps (a ``packing`` column): one marker per (family, packing), so packings are told apart
        by = ["family", "params"] if x == "T" else ["family"]
        groups = frame.groupby(by + (["packing"] if "packing" in frame else []), sort=False)
        for i, (key, sub) in enumerate(groups):
            sub = sub.sort_values(x)
            key = key if isinstance(key, tuple) else (key,)
            parts = [str(k) if j != 1 or x != "T" else params_label(str(k)) for j, k in enumerate(key)]
            label = " ".join(p for p in parts if p and p != "{}")
            med = sub["dkv_median_ms"].to_numpy()
            err = [med - sub["dkv_p10_ms"].to_numpy(), sub["dkv_p90_ms"].to_numpy() - med]
            ax.errorbar(sub[x].to_numpy(), med, yerr=err, fmt=MARKERS[i % len(MARKERS)],
                        ls="-" if x == "T" else "none", ms=6, capsize=3, label=label)
        if x == "T":
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length T")
        else:
            ax.set_xlabel(X_STATS[x])
            ax.set_ylim(0, 1.15 * frame["dkv_p90_ms"].max())
            if frame[x].max() >= 10_000:
                ax.xaxis.set_major_formatter(plt.FuncFormatter(_thousands))
        ax.set_ylabel("dK/dV core, median (ms); bars p10-p90")
        ax.grid(True, alpha=0.3, which="both")
    axes[0].legend(fontsize=8, loc="best")
    if by_T:
        axes[-1].legend(fontsize=7, loc="best")
    fig.suptitle(f"{name}: FLA NSA dK/dV core latency vs fan-in ({edges_note(frame)})", fontsize=11)
    out = save_figure(fig, Path(out_dir) / f"{name}_dkv", claim)
    plt.close(fig)
    if penalty:
        out += plot_penalty_map(frame, Path(table).parent / name, out_dir, claim)
    return out


def _point_cis(folder: Path, point_id: str, family: str) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """The paired 95% CIs of a shapes point's dK/dV ratio and excess over ``local``, from its point file's rounds
    (None when the file is not beside the table)."""
    # scipy only when a penalty map is drawn: every CPU door imports this module (their peak RSS is bounded)
    from ..analysis.autotune_matrix import diff_ci  # noqa: PLC0415
    from ..analysis.bootstrap import bootstrap_ratio_ci  # noqa: PLC0415

    path = folder / f"{point_id}.json"
    if not path.is_file():
        return None
    pats = read_strict(path)[1]["patterns"]
    skew = np.asarray(pats[family]["stages"]["dkv_core"]["raw_ms"], dtype=np.float64)
    base = np.asarray(pats[BASELINE_PATTERN]["stages"]["dkv_core"]["raw_ms"], dtype=np.float64)
    return bootstrap_ratio_ci(skew, base), diff_ci(skew, base)


def plot_penalty_map(frame: pd.DataFrame, folder: Path, out_dir: str | Path, claim: Claim | None = None) -> list[Path]:
    """A sweep with a ``shapes`` axis (issue 32's penalty map): the dK/dV ratio × local (log) and the absolute
    excess per call (ms) vs B·H (log2), one line per routing family and (T, G), bars the paired 95% CIs of the
    point files' rounds (none when a point file is absent); ``<name>_penalty_map`` PNG + SVG."""
    plt = pyplot()
    frame = frame.assign(BH=frame["B"] * frame["H"]).sort_values(["family", "T", "G", "BH", "B"])
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 4.4), constrained_layout=True)
    for i, ((family, T, G), sub) in enumerate(frame.groupby(["family", "T", "G"], sort=False)):
        cis = [_point_cis(folder, str(r["point_id"]), str(family)) for _, r in sub.iterrows()]
        x = sub["BH"].to_numpy()
        label = f"{family}, T={T // 1024}k, G={G}"
        for ax, col, k in ((axes[0], "ratio_vs_local", 0), (axes[1], "dkv_excess_ms", 1)):
            y = sub[col].to_numpy(dtype=float)
            lo = np.array([y[j] - c[k][0] if c else 0.0 for j, c in enumerate(cis)])
            hi = np.array([c[k][1] - y[j] if c else 0.0 for j, c in enumerate(cis)])
            ax.errorbar(x, y, yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], fmt=MARKERS[i % len(MARKERS)],
                        ls="-" if len(x) > 1 else "none", ms=5, capsize=3, label=label)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("B·H (batch × KV heads)")
        ax.grid(True, alpha=0.3, which="both")
    axes[0].set_yscale("log")
    axes[0].axhline(1.0, color="k", lw=0.8)
    axes[0].set_ylabel("dK/dV × local (ratio of medians)")
    axes[1].set_ylabel("dK/dV excess over local per call (ms)")
    axes[1].set_ylim(bottom=0)
    axes[1].legend(fontsize=7, loc="best")
    fig.suptitle(f"{frame['sweep'].iloc[0]}: the dK/dV skew penalty vs B·H, as a ratio and as an excess "
                 "(bars: paired 95% CIs of the rounds)", fontsize=11)
    out = save_figure(fig, Path(out_dir) / f"{frame['sweep'].iloc[0]}_penalty_map", claim)
    plt.close(fig)
    return out
