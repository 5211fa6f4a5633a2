"""Figure of a model validation: predicted vs measured dK/dV ms, log-log, the y = x line; the points over
the max-error target named. Reads a ``model_validation`` document; writes PNG and SVG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .canvas import Claim, pyplot, save_figure


def plot_validation(doc: dict[str, Any], out_dir: str | Path, claim: Claim | None = None) -> list[Path]:
    """Predicted vs measured dK/dV ms (log-log, the y = x line); returns the PNG and SVG paths."""
    plt = pyplot()

    meas = [r["measured_ms"] for r in doc["rows"]]
    pred = [r["predicted_ms"] for r in doc["rows"]]
    fig, ax = plt.subplots(figsize=(5, 5), constrained_layout=True)
    lo, hi = min(meas + pred) * 0.8, max(meas + pred) * 1.25
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    ax.scatter(meas, pred, s=22)
    for r in doc["rows"]:  # only the points over the max-error target are named (no overlapping labels)
        if abs(r["error_pct"]) > doc["target"]["max_abs_pct"]:
            ax.annotate(f"{r['name']} {r['error_pct']:+.1f}%", (r["measured_ms"], r["predicted_ms"]), fontsize=7,
                        xytext=(6, -10), textcoords="offset points")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured dK/dV ms",
           ylabel="predicted dK/dV ms", title=f"{doc['calibration']['name']}: {len(meas)} held-out points")
    ax.legend()
    paths = save_figure(fig, Path(out_dir) / figure_stem(doc), claim)
    plt.close(fig)
    return paths


def figure_stem(doc: dict[str, Any]) -> str:
    """``model_validation_<calibration>`` for the default validation (``<calibration>_validation``), else
    ``model_validation_<validation name>`` (a second validation of one calibration keeps its own figure)."""
    cal = doc["calibration"]["name"]
    return f"model_validation_{cal if doc['name'] == f'{cal}_validation' else doc['name']}"
