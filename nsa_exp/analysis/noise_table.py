"""The committed noise table (issue 28): ``f(GPU, stage)`` read from one generated, committed file, so that
``compare``, ``report``, ``validate`` and ``reproduce`` judge every ratio under the same floors.

This module is the seam every door reads the floors through: :func:`read_floors` returns the table,
:func:`comparison_floors` the floor per stage of one comparison (the larger of the two GPUs' floors,
:func:`nsa_exp.analysis.noise.floor_of`). The table is derived from every repeated measurement of the
committed results by :func:`nsa_exp.analysis.noise.floors`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from .. import REPO_ROOT
from ..errors import UserError
from .noise import floor_of

#: Where the committed noise table lives, relative to the repository root.
NOISE_TABLE = "results/noise/floors.json"


def read_floors(path: str | Path | None = None) -> dict[tuple[str, str], float]:
    """``{(gpu, stage): floor}`` (fractions) from the noise table at ``path`` (default :data:`NOISE_TABLE`).

    Raises UserError (one line, with the fix) when the table is missing or malformed."""
    p = Path(path) if path is not None else REPO_ROOT / NOISE_TABLE
    try:
        doc = json.loads(p.read_text())
        return {(str(r["gpu"]), str(r["stage"])): float(r["floor"]) for r in doc["floors"]}
    except FileNotFoundError:
        raise UserError(f"{p}: no noise table; generate it with `python -m nsa_exp noise-table`") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{p}: not a noise table ({exc}); regenerate it with `python -m nsa_exp noise-table`") from None


def comparison_floors(table: Mapping[tuple[str, str], float], stages: Iterable[str], *gpus: str) -> dict[str, float]:
    """The floor of each stage when comparing runs on ``gpus`` (one GPU, or the two of a cross-GPU ratio)."""
    return {s: floor_of(table, s, *gpus) for s in stages}
