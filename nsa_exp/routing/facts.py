"""A regenerated routing's facts, computed together from one draw: :func:`regenerate`.

``validate`` asks two questions of the same routing in two tiers: the routing checks want its edges, CSR-row
statistics and sha256 (:func:`nsa_exp.checking.routing_checks.regenerated`), the makespan model its per-CSR-row
fan-in (:func:`nsa_exp.model.points.pattern_fanin`). Drawing the routing once for both halves a cold ``validate`` of
the committed files' routing work: it drew 294 routings, 141 distinct (42 s of 110 s on one core; a
[8, 32768, 4, 16] zipf routing alone takes ~4 s). The facts are small (the fan-in is ``B*H*M`` integers), so the
last :data:`KEPT` are kept in the process; the routing itself is not.

>>> from nsa_exp.core.config import Pattern, Shape
>>> shape = Shape(B=1, T=8, HQ=16, H=1, K=16, V=16, S=2, block_size=2, dtype="float16")
>>> facts = regenerate(Pattern("local"), shape, seed=0)
>>> facts.stats["edges"], facts.row_fanin.tolist()  # block b is selected by the queries t >= 2b that reach it
(14, [4, 4, 4, 2])
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..core.config import Pattern, Shape
from ..core.families import family
from ..io.memo import memoised
from ..io.metadata import visible_gpu_name
from .edges import effective_edges
from .fanin import csr_rows, rows_statistics
from .packing import generate_packed_routing
from .patterns import generate_routing, routing_sha256

#: regenerated routings whose facts one process keeps (least recently used out first)
KEPT = 512


@dataclass(frozen=True)
class RegeneratedRouting:
    """What the checks and the model read of one regenerated routing.

    ``stats``: ``{"edges": int, "fanin": {...}, "query_span": {...}, "adjacent_gap": {...}, "routing_sha256": str}``
    (:func:`nsa_exp.routing.fanin.routing_statistics`, packed: over the varlen CSR rows);
    ``row_fanin``: queries per CSR row, ``int64`` in FLA's program-id order (:func:`nsa_exp.routing.fanin.csr_rows`),
    read-only (copy it to change it)."""

    stats: dict[str, Any]
    row_fanin: np.ndarray


def regenerate(pattern: Pattern, shape: Shape, seed: int, cu: tuple[int, ...] | None = None) -> RegeneratedRouting:
    """The facts of ``pattern``'s routing at ``shape`` and ``seed`` (packed: ``cu``, the documents' ``cu_seqlens``
    ending at ``shape.T``), drawn once per process for both callers. A routing FLA's kernels compute (a family with
    ``external``: fla-topk) differs between GPU models, so its facts are kept under the visible GPU's name too
    (:func:`nsa_exp.io.metadata.visible_gpu_name`): a memo folder shared by an H100 host and an H200 host answers
    each with its own GPU's draw. Raises what the generators raise (UserError for an external pattern without its
    GPU tier, ValueError for a bad packing)."""
    return _regenerate(json.dumps(pattern.to_dict(), sort_keys=True), json.dumps(shape.to_dict(), sort_keys=True),
                       int(seed), None if cu is None else tuple(int(x) for x in cu), drawing_gpu(pattern))


def drawing_gpu(pattern: Pattern) -> str | None:
    """The GPU model a routing of ``pattern`` is drawn on, as a regenerated routing's facts are kept under it: the
    visible GPU's name (:func:`nsa_exp.io.metadata.visible_gpu_name`) for a routing FLA's kernels compute (a family
    with ``external``: fla-topk), whose draw differs between GPU models; None for one drawn on the CPU."""
    return visible_gpu_name() if family(pattern.name).external is not None else None


@lru_cache(maxsize=KEPT)
def _regenerate(pattern_json: str, shape_json: str, seed: int, cu: tuple[int, ...] | None,
                gpu: str | None) -> RegeneratedRouting:
    stats = _stats(pattern_json, shape_json, seed, cu, gpu)
    row_fanin = _row_fanin(pattern_json, shape_json, seed, cu, gpu)
    row_fanin.setflags(write=False)
    return RegeneratedRouting(stats=stats, row_fanin=row_fanin)


@memoised
def _stats(pattern_json: str, shape_json: str, seed: int, cu: tuple[int, ...] | None,
           gpu: str | None) -> dict[str, Any]:
    """The routing's statistics (:func:`_draw`). On disk (:mod:`nsa_exp.io.memo`) the fan-in's entry is written
    inside this one's lock, from the same draw: a process that waited for the statistics then finds the fan-in too,
    instead of drawing the routing again (the routing checks ask for the one and the model for the other, in many
    processes at once: a cold ``validate`` of the committed JSON files beside one of the sweep tables drew each
    routing in both, 92 CPU-s against 49 for the two one after the other; docs/METHOD.md, CI's own time)."""
    stats = _draw(pattern_json, shape_json, seed, cu, gpu)[0]
    _row_fanin(pattern_json, shape_json, seed, cu, gpu)
    return stats


@memoised
def _row_fanin(pattern_json: str, shape_json: str, seed: int, cu: tuple[int, ...] | None,
               gpu: str | None) -> np.ndarray:
    """The routing's per-CSR-row fan-in (int64, :func:`_draw`)."""
    return _draw(pattern_json, shape_json, seed, cu, gpu)[1]


@lru_cache(maxsize=2)
def _draw(pattern_json: str, shape_json: str, seed: int, cu: tuple[int, ...] | None,
          gpu: str | None) -> tuple[dict[str, Any], np.ndarray]:
    """The routing drawn once: its statistics and its fan-in (read-only), for :func:`_stats` and :func:`_row_fanin`
    (the last two draws are kept: the two ask for the same one in a row). ``gpu`` (:func:`regenerate`) is part of the
    question only: the draw runs on whatever GPU this process sees."""
    shape, pattern = Shape(**json.loads(shape_json)), Pattern(**json.loads(pattern_json))
    cu_arr = None if cu is None else np.asarray(cu, dtype=np.int32)
    bi = (generate_routing(pattern, shape, seed) if cu_arr is None else
        generate_packed_routing(pattern, shape, seed, cu_arr))
    rows = csr_rows(bi, shape.block_size, cu_arr)
    rows.fanin.setflags(write=False)
    stats = {"edges": effective_edges(bi, shape.block_size, cu_arr), **rows_statistics(rows),
             "routing_sha256": routing_sha256(bi)}
    return stats, rows.fanin
