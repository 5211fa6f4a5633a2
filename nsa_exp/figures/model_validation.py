"""Figure of a model validation: predicted vs measured dK/dV ms (log-log, the y = x line) and the error in % vs
the measurement, one marker per distinct routing x T point (a point several files measured is one marker at the
mean of their medians) with horizontal bars over its measurements' 95% CIs (bootstrap of each source file's own
rounds) and, on the error panel, the error range those CIs allow; markers by routing family (the family table's,
:data:`nsa_exp.core.families.FAMILIES`), the points over the max-error target named. Reads a ``model_validation``
document and its committed source files; writes PNG and SVG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .. import REPO_ROOT
from ..analysis.bootstrap import bootstrap_median_ci
from ..core.families import FAMILIES
from ..io.paths import locate_recorded
from ..io.store import read_strict
from .canvas import Claim, pyplot, save_figure


def measured_ci(row: dict[str, Any], root: Path, cache: dict[str, Any]) -> tuple[float, float] | None:
    """95% CI of the row's measured median from its source file's raw dK/dV observations (None if absent)."""
    path = locate_recorded(row["source"], [Path(root)])
    if path is None:
        return None
    if row["source"] not in cache:
        cache[row["source"]] = read_strict(path)[1]
    doc = cache[row["source"]]
    for p in doc.get("patterns", {}).values():
        if p.get("params") == row["pattern"]:
            return bootstrap_median_ci(p["stages"]["dkv_core"]["raw_ms"])
    return None


def grouped(doc: dict[str, Any], root: Path = REPO_ROOT) -> list[dict[str, Any]]:
    """One entry per distinct routing x T point: family, measured (mean of its files' medians) and the span of
    their CIs, predicted, errors (point and over the CI span), name, files."""
    cache: dict[str, Any] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in doc["rows"]:
        groups.setdefault(r["name"], []).append(r)
    out = []
    for name, rs in groups.items():
        cis = [c for c in (measured_ci(r, root, cache) for r in rs) if c is not None]
        meas = float(np.mean([r["measured_ms"] for r in rs]))
        lo = min([c[0] for c in cis] + [r["measured_ms"] for r in rs])
        hi = max([c[1] for c in cis] + [r["measured_ms"] for r in rs])
        pred = rs[0]["predicted_ms"]
        out.append({"name": name, "family": rs[0]["pattern"]["name"], "measured": meas, "lo": lo, "hi": hi,
                    "predicted": pred, "error": 100 * (pred / meas - 1), "error_lo": 100 * (pred / hi - 1),
                    "error_hi": 100 * (pred / lo - 1), "files": len(rs), "has_ci": bool(cis)})
    return out


def plot_validation(doc: dict[str, Any], out_dir: str | Path, root: str | Path = REPO_ROOT,
                    claim: Claim | None = None) -> list[Path]:
    """Predicted vs measured and error vs measured (module doc); returns the PNG and SVG paths."""
    plt = pyplot()
    pts = grouped(doc, Path(root))
    limit = doc["target"]["max_abs_pct"]
    fig, (ax, ex) = plt.subplots(1, 2, figsize=(11, 5), constrained_layout=True)
    values = [v for p in pts for v in (p["lo"], p["hi"], p["predicted"])]
    lo, hi = min(values) * 0.8, max(values) * 1.25
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    for family in dict.fromkeys(p["family"] for p in pts):
        sub = [p for p in pts if p["family"] == family]
        meas = np.array([p["measured"] for p in sub])
        xerr = np.array([[p["measured"] - p["lo"] for p in sub], [p["hi"] - p["measured"] for p in sub]])
        marker = FAMILIES[family].marker if family in FAMILIES else "x"
        kw = {"fmt": marker, "ms": 6, "capsize": 3, "mfc": "none", "label": family}
        ax.errorbar(meas, [p["predicted"] for p in sub], xerr=xerr, **kw)
        err = np.array([p["error"] for p in sub])
        yerr = np.array([[p["error"] - p["error_lo"] for p in sub], [p["error_hi"] - p["error"] for p in sub]])
        ex.errorbar(meas, err, xerr=xerr, yerr=yerr, **{**kw, "label": None})
    for p in pts:
        if abs(p["error"]) > limit:
            ex.annotate(f"{p['name']} {p['error']:+.1f}%", (p["measured"], p["error"]), fontsize=7,
                        xytext=(6, -10), textcoords="offset points")
    ex.axhline(0, color="k", lw=1)
    for y in (limit, -limit):
        ex.axhline(y, color="grey", ls=":", lw=1)
    n_files = sum(p["files"] for p in pts)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured dK/dV ms (bars: 95% CIs)",
           ylabel="predicted dK/dV ms",
           title=f"{doc['name']}: {len(pts)} distinct points ({n_files} rows)")
    ex.set(xscale="log", xlim=(lo, hi), xlabel="measured dK/dV ms", ylabel="error, predicted / measured - 1 (%)",
           title=f"error; bars: over the CIs; dotted: ±{limit:g}% target")
    ax.legend(fontsize=8)
    plain = plt.FuncFormatter(lambda v, _pos: f"{v:g}")
    for a in (ax, ex):
        a.grid(True, alpha=0.3, which="both")
        for axis in (a.xaxis, *((a.yaxis,) if a is ax else ())):
            axis.set_major_locator(plt.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(plain)
            axis.set_minor_formatter(plt.NullFormatter())
    paths = save_figure(fig, Path(out_dir) / figure_stem(doc), claim)
    plt.close(fig)
    return paths


def figure_stem(doc: dict[str, Any]) -> str:
    """``model_validation_<calibration>`` for the default validation (``<calibration>_validation``), else
    ``model_validation_<validation name>`` (a second validation of one calibration keeps its own figure)."""
    cal = doc["calibration"]["name"]
    return f"model_validation_{cal if doc['name'] == f'{cal}_validation' else doc['name']}"
