"""Routing generators: which KV blocks each (query, KV head) selects.

Every pattern gives query ``t`` exactly ``n(t) = min(S, t // BS + 1)`` valid slots holding distinct
causal blocks (``0 <= b <= t // BS``), written in descending block order, and ``-1`` in the
remaining slots. The output is int32 ``[B, T, H, S]``, deterministic from the routing seed and the
pattern name, and each KV head (and batch row) is drawn independently. Slot order is fixed
(descending) for every pattern so that patterns differ only in *which* blocks they select.

Worked example (T=8, BS=2, S=2: blocks 0..3, query t may use blocks <= t // 2)::

    >>> from nsa_exp.core.config import Pattern, Shape
    >>> shape = Shape(B=1, T=8, HQ=16, H=1, K=16, V=16, S=2, block_size=2, dtype="float16")
    >>> generate_routing(Pattern("local"), shape, seed=0)[0, :, 0].tolist()
    [[0, -1], [0, -1], [1, 0], [1, 0], [2, 1], [2, 1], [3, 2], [3, 2]]
    >>> generate_routing(Pattern("sink-heavy", sinks=1), shape, seed=0)[0, :, 0].tolist()
    [[0, -1], [0, -1], [1, 0], [1, 0], [2, 0], [2, 0], [3, 0], [3, 0]]

Families (the table :data:`nsa_exp.core.families.FAMILIES`; adding one = one row there + one generator
bound here by :func:`register_generator`):

- ``local``: the ``n(t)`` most recent causal blocks ``t//BS, t//BS - 1, ...``.
- ``uniform``: ``n(t)`` distinct causal blocks, uniformly without replacement.
- the skew families ``sink-heavy``, ``zipf`` and ``hot-block`` (with placement on KV heads):
  :mod:`nsa_exp.routing.families`, bound when the package is imported.
- the tile-shared variants ``tile-local``, ``tile-uniform``, ``tile-sink-heavy``, ``tile-zipf``: one selection per
  query tile, drawn once by the base family's generator (:mod:`nsa_exp.routing.tiles`), bound after them.

Generators are vectorised over (batch, query, head) rows; the sampler (:mod:`.sampler`) loops over slots.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.config import Pattern, Shape
from ..core.families import family
from ..errors import UserError
from .sampler import sample_distinct


def valid_slot_counts(T: int, block_size: int, S: int) -> np.ndarray:
    """``n(t) = min(S, t // block_size + 1)`` for t in ``0..T-1``.

    >>> valid_slot_counts(8, 2, 2).tolist()
    [1, 1, 2, 2, 2, 2, 2, 2]
    """
    return np.minimum(S, np.arange(T, dtype=np.int64) // block_size + 1)


def pattern_rng(seed: int, pattern_name: str) -> np.random.Generator:
    """A generator that depends on the routing seed and the pattern *name* only (not list position)."""
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(pattern_name.encode())]))


def _most_recent(cur: np.ndarray, n: np.ndarray, S: int, offset: np.ndarray | int = 0) -> np.ndarray:
    """Slots ``j`` in ``[offset, n)`` hold ``cur - (j - offset)``; the others -1."""
    j = np.arange(S, dtype=np.int64)[None, :]
    off = np.asarray(offset)[..., None] if np.ndim(offset) else offset
    valid = (j >= off) & (j < n[:, None])
    return np.where(valid, cur[:, None] - (j - off), -1)


@dataclass(frozen=True)
class Rows:
    """Flattened (b, t, h) rows of one routing, row r = (b*T + t)*H + h (C order of [B,T,H])."""

    cur: np.ndarray    # int64 [rows]: newest causal block t // block_size
    n: np.ndarray      # int64 [rows]: valid slots min(S, t // block_size + 1)
    head: np.ndarray   # int64 [rows]: KV head h of the row
    t: np.ndarray      # int64 [rows]: query position t
    B: int
    T: int
    H: int
    S: int
    M: int
    block_size: int

    @classmethod
    def for_shape(cls, shape: Shape) -> Rows:
        """The rows of ``shape`` (``M`` = KV blocks per head)."""
        grid = (shape.B, shape.T, shape.H)
        t = np.broadcast_to(np.arange(shape.T, dtype=np.int64)[None, :, None], grid).reshape(-1)
        head = np.broadcast_to(np.arange(shape.H, dtype=np.int64)[None, None, :], grid).reshape(-1)
        cur = t // shape.block_size
        return cls(cur=cur, n=np.minimum(shape.S, cur + 1), head=head, t=t, B=shape.B, T=shape.T, H=shape.H,
                   S=shape.S, M=shape.num_blocks, block_size=shape.block_size)


# returns int64 [rows, S]: exactly n[r] distinct blocks in 0..cur[r] then -1, any slot order.
Generator = Callable[[Rows, Mapping[str, Any], np.random.Generator], np.ndarray]


#: The generator of every family the routing tier computes, by family name (:func:`register_generator`).
GENERATORS: dict[str, Generator] = {}


#: The routings computed above this tier, by family name (fla-topk: FLA's own top-k, on the GPU tier): each is
#: registered by the tier that computes it, never looked up by import path from here. ``nsa_exp.gpu.topk``
#: registers fla-topk when it is imported (every GPU arm imports it through ``gpu/gates.py``); the command line
#: registers a deferred call to it (``nsa_exp/cli.py``), so a CPU command imports torch only when it is asked for
#: a fla-topk routing.
External = Callable[[Pattern, Shape, int], np.ndarray]
EXTERNAL: dict[str, External] = {}


def register_external(name: str, compute: External) -> External:
    """Bind ``compute(pattern, shape, seed) -> int32 [B, T, H, S]`` to the family row ``name``, whose routing is
    computed above this tier (its row's ``external``); a later registration replaces an earlier one (the GPU
    tier's own function replaces the command line's deferred call to it). ValueError for a generated family."""
    if family(name).external is None:
        raise ValueError(f"pattern {name!r} is generated in the routing tier (register_generator), not external")
    EXTERNAL[name] = compute
    return compute


def register_generator(name: str, generate: Generator) -> Generator:
    """Bind ``generate`` to the family row ``name`` of :data:`nsa_exp.core.families.FAMILIES` (once)."""
    if family(name).external is not None:
        raise ValueError(f"pattern {name!r} is computed by {family(name).external}, not by a generator")
    if name in GENERATORS:
        raise ValueError(f"pattern {name!r} already has a generator")
    GENERATORS[name] = generate
    return generate


def generate_routing(pattern: Pattern, shape: Shape, seed: int) -> np.ndarray:
    """block_indices int32 ``[B, T, H, S]`` for ``pattern`` (see the module docstring); an ``external``
    pattern (fla-topk) is computed by its GPU-tier function, which raises UserError without a GPU."""
    row = family(pattern.name)
    if row.external is not None:
        compute = EXTERNAL.get(row.name)
        if compute is None:
            raise UserError(f"pattern {row.name}: computed by {row.external} on the GPU tier, which this process has "
                            "not loaded; run it through `python -m nsa_exp`, or import nsa_exp.gpu.topk first")
        return compute(pattern, shape, seed)
    generate = GENERATORS.get(row.name)
    if generate is None:
        raise RuntimeError(f"pattern {row.name!r} has a family row but no generator (register_generator)")
    rows = Rows.for_shape(shape)
    out = generate(rows, {**row.defaults, **dict(pattern.params)}, pattern_rng(seed, pattern.name))
    out = -np.sort(-out, axis=1)  # descending block order; -1 padding lands in the last slots
    return out.reshape(shape.B, shape.T, shape.H, shape.S).astype(np.int32)


def _local(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    return _most_recent(rows.cur, rows.n, rows.S)


def _uniform(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    return sample_distinct(rng, rows.cur, rows.n, rows.S, np.ones(rows.M, dtype=np.float64))


register_generator("local", _local)
register_generator("uniform", _uniform)


def routing_sha256(block_indices: np.ndarray) -> str:
    """sha256 of a routing's C-contiguous int32 bytes: its identity wherever it is handed on (the release arm's
    child receives it as such an array; validate regenerates and hashes it again)."""
    return hashlib.sha256(np.ascontiguousarray(block_indices, dtype=np.int32).tobytes()).hexdigest()


def routing_violations(block_indices: np.ndarray, shape: Shape, limit: int = 5) -> list[str]:
    """Every invariant a routing must meet, as messages (empty list = valid).

    Checks dtype int32, shape ``[B,T,H,S]``, exactly ``n(t)`` valid slots first then ``-1``,
    valid blocks causal (``0 <= b <= t // BS``) and distinct within each (query, head).
    """
    want = (shape.B, shape.T, shape.H, shape.S)
    if block_indices.dtype != np.int32:
        return [f"dtype is {block_indices.dtype}, expected int32"]
    if tuple(block_indices.shape) != want:
        return [f"shape is {list(block_indices.shape)}, expected {list(want)} ([B,T,H,S])"]
    problems: list[str] = []
    n = valid_slot_counts(shape.T, shape.block_size, shape.S)[None, :, None, None]
    slot = np.arange(shape.S)[None, None, None, :]
    cur = (np.arange(shape.T) // shape.block_size)[None, :, None, None]
    b = block_indices.astype(np.int64)
    in_valid = slot < n

    def report(mask: np.ndarray, what: str) -> None:
        if mask.any():
            where = np.argwhere(mask)[:limit].tolist()
            problems.append(f"{int(mask.sum())} slots {what}, first at [b,t,h,s]={where}")

    report(in_valid & ((b < 0) | (b > cur)), "hold a block outside 0..t//block_size")
    report(~in_valid & (b != -1), "past n(t)=min(S, t//block_size+1) are not -1")
    s = np.sort(np.where(in_valid, b, -1 - slot), axis=-1)  # padding made unique so it never collides
    dup = (np.diff(s, axis=-1) == 0).any(axis=-1)
    report(dup, "rows select the same block twice")
    return problems
