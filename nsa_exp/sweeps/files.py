"""Routing files as sweep points: each file (``routing_files`` of a sweep config, or ``sweep --routing-file``)
is one point at the file's own T, timed as pattern ``file:<stem>`` against ``local`` at that T.

Every file is read and validated here, when the sweep is loaded (shape ``[B, T, H, S]`` against the base
config at the file's T, dtype, range, causality, duplicates: one line naming the first offending
``(b, t, h, slot)``, exit 2), so a broken file costs no GPU time. The point records the file's sha256; a
point file measured on other bytes is not "done" (resume re-runs it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.config import Shape
from ..core.families import point_id
from ..errors import UserError
from ..routing.files import file_pattern_name, file_routings, read_routing_file


@dataclass(frozen=True)
class FilePoint:
    """One routing file's point: its id, T, pattern entry and the file (as given, resolved, sha256)."""

    point_id: str
    T: int
    pattern: dict[str, Any]
    path: str
    resolved: str
    sha256: str


def file_point(path: str, base_shape: dict[str, Any]) -> FilePoint:
    """The validated point of one routing file (T from its second axis); raises UserError naming the file."""
    bi, _, _ = read_routing_file(path, (base_shape["B"], None, base_shape["H"], base_shape["S"]))
    if getattr(bi, "ndim", 0) != 4:
        raise UserError(f"routing file {path}: shape {list(getattr(bi, 'shape', ()))}, expected [B, T, H, S]")
    T = int(bi.shape[1])
    _, reports = file_routings([path], Shape(**{**base_shape, "T": T}))
    name = file_pattern_name(path)
    return FilePoint(point_id(T, {"name": name}), T, {"name": name}, path, str(Path(path).resolve()),
                     reports[name]["sha256"])


def file_points(paths: Sequence[str], base_shape: dict[str, Any]) -> list[FilePoint]:
    """:func:`file_point` of each path (duplicated pattern names refused)."""
    points: dict[str, FilePoint] = {}
    for path in paths:
        p = file_point(path, base_shape)
        if p.pattern["name"] in {q.pattern["name"] for q in points.values()}:
            raise UserError(f"sweep.routing_files: {path} and another file share the pattern name "
                            f"{p.pattern['name']!r}; rename one")
        points[p.point_id] = p
    return list(points.values())
