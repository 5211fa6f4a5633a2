"""NVTX range names and profiled-pattern specs, shared by ``profile-stage`` and ``ncu`` (torch-free).

The range itself is opened with ``torch.cuda.nvtx.range`` in :mod:`nsa_exp.gpu.profiler`; ``validate`` holds an
ncu summary's ``patterns_in_launch_order`` and ``nvtx_range`` to these.

>>> range_name("local-vs-sink-heavy", "dq_core")
'nsa_local-vs-sink-heavy_dq_core'
"""

from __future__ import annotations

from ..errors import UserError
from .families import FAMILIES


def parse_patterns(spec: str) -> list[str]:
    """``local`` -> [local]; ``local-vs-sink-heavy`` -> [local, sink-heavy] (names may hold '-')."""
    names = spec.split("-vs-")
    bad = [n for n in names if n not in FAMILIES]
    if bad or not 1 <= len(names) <= 2:
        raise UserError(f"--pattern {spec!r}: give one pattern or A-vs-B with A, B in {', '.join(FAMILIES)}")
    return names


def range_name(pattern_spec: str, stage: str) -> str:
    return f"nsa_{pattern_spec}_{stage}"
