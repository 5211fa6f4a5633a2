"""The figures' canvas: matplotlib (optional, requirements-analysis; imported only when a figure is drawn,
headless ``Agg``) and the one way a figure is written, PNG (130 dpi) and SVG, each atomically."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..io.store import write_files_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the headless ``Agg`` backend (the one deferred import of matplotlib)."""
    import matplotlib  # noqa: PLC0415 - matplotlib is optional (requirements-analysis) and slow to import

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "nsa-exp"  # SVG ids from a fixed salt: the same figure, the same bytes
    import matplotlib.pyplot as plt  # noqa: PLC0415 - matplotlib is optional (requirements-analysis) and slow to import

    return plt


#: ``claim(path) -> path``: the command's output policy for one file (:class:`nsa_exp.io.store.OutputPolicy`).
Claim = Callable[[Path], Path]
#: No date in the files: a figure redrawn from the same data is byte for byte the same.
METADATA: dict[str, dict[str, Any]] = {"png": {}, "svg": {"Date": None}}


def figure_paths(stem: Path) -> list[Path]:
    """The files :func:`save_figure` writes for ``stem``: ``<stem>.png`` and ``<stem>.svg``."""
    return [stem.with_name(f"{stem.name}.{ext}") for ext in ("png", "svg")]


def claim_first(claim: Claim | None, stems: list[Path]) -> Claim | None:
    """Every figure file of ``stems`` claimed now, before any is drawn (a command writes all its figures or none, and
    refuses before its work); returns the claim :func:`save_figure` then asks, which hands back the claimed paths."""
    if claim is None:
        return None
    claimed = {p: claim(p) for stem in stems for p in figure_paths(stem)}
    return claimed.__getitem__


def save_figure(fig: Figure, stem: Path, claim: Claim | None = None) -> list[Path]:
    """Write ``fig`` as ``<stem>.png`` (130 dpi) and ``<stem>.svg``, both or neither (written atomically), with no
    date or version in them; returns both paths. ``claim`` is asked for both paths before either is written."""
    paths = figure_paths(stem)
    if claim is not None:
        paths = [claim(p) for p in paths]
    blobs = []
    for path in paths:
        buf = io.BytesIO()
        fig.savefig(buf, format=path.suffix[1:], dpi=130, metadata=METADATA[path.suffix[1:]])
        blobs.append((path, buf.getvalue()))
    write_files_atomic(blobs)
    return paths
