"""The figures' canvas: matplotlib (optional, requirements-analysis; imported only when a figure is drawn,
headless ``Agg``) and the one way a figure is written, PNG (130 dpi) and SVG, each atomically."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ..io.store import write_bytes_atomic


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the headless ``Agg`` backend (the one deferred import of matplotlib)."""
    import matplotlib  # noqa: PLC0415 - matplotlib is optional (requirements-analysis) and slow to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - matplotlib is optional (requirements-analysis) and slow to import

    return plt


def save_figure(fig: object, stem: Path) -> list[Path]:
    """Write ``fig`` as ``<stem>.png`` (130 dpi) and ``<stem>.svg``, each atomically; returns both paths."""
    out = []
    for ext in ("png", "svg"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=130)
        path = stem.with_name(f"{stem.name}.{ext}")
        write_bytes_atomic(path, buf.getvalue())
        out.append(path)
    return out
