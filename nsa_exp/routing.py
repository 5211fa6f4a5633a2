"""Routing generators: which KV blocks each (query, KV head) selects.

Every pattern gives query ``t`` exactly ``n(t) = min(S, t // BS + 1)`` valid slots holding distinct
causal blocks (``0 <= b <= t // BS``), written in descending block order, and ``-1`` in the
remaining slots. The output is int32 ``[B, T, H, S]``, deterministic from the routing seed and the
pattern name, and each KV head (and batch row) is drawn independently. Slot order is fixed
(descending) for every pattern so that patterns differ only in *which* blocks they select.

Worked example (T=8, BS=2, S=2: blocks 0..3, query t may use blocks <= t // 2)::

    >>> from nsa_exp.config import Pattern, Shape
    >>> shape = Shape(B=1, T=8, HQ=16, H=1, K=16, V=16, S=2, block_size=2, dtype="float16")
    >>> generate_routing(Pattern("local"), shape, seed=0)[0, :, 0].tolist()
    [[0, -1], [0, -1], [1, 0], [1, 0], [2, 1], [2, 1], [3, 2], [3, 2]]
    >>> generate_routing(Pattern("sink-heavy", sinks=1), shape, seed=0)[0, :, 0].tolist()
    [[0, -1], [0, -1], [1, 0], [1, 0], [2, 0], [2, 0], [3, 0], [3, 0]]

Patterns:

- ``local``: the ``n(t)`` most recent causal blocks ``t//BS, t//BS - 1, ...``.
- ``uniform``: ``n(t)`` distinct causal blocks, uniformly without replacement.
- ``sink-heavy``: blocks ``0 .. min(n(t), sinks) - 1``, the other slots the most recent causal blocks.
- ``zipf``: ``n(t)`` distinct causal blocks drawn without replacement with weight ``(b + 1) ** -s``
  (successive sampling: each draw is proportional to the weights of the blocks not yet drawn).

All four are vectorised over (batch, query, head) rows; the only Python loops run over the S slots.
"""

from __future__ import annotations

import zlib

import numpy as np

from .config import PATTERN_NAMES, Pattern, Shape
from .errors import UserError
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


def _row_geometry(shape: Shape) -> tuple[np.ndarray, np.ndarray]:
    """Per flattened (b, t, h) row: the newest causal block ``cur`` and the slot count ``n``."""
    t = np.arange(shape.T, dtype=np.int64)
    cur_t = t // shape.block_size
    n_t = np.minimum(shape.S, cur_t + 1)
    cur = np.broadcast_to(cur_t[None, :, None], (shape.B, shape.T, shape.H)).reshape(-1)
    n = np.broadcast_to(n_t[None, :, None], (shape.B, shape.T, shape.H)).reshape(-1)
    return cur, n


def _most_recent(cur: np.ndarray, n: np.ndarray, S: int, offset: np.ndarray | int = 0) -> np.ndarray:
    """Slots ``j`` in ``[offset, n)`` hold ``cur - (j - offset)``; the others -1."""
    j = np.arange(S, dtype=np.int64)[None, :]
    off = np.asarray(offset)[..., None] if np.ndim(offset) else offset
    valid = (j >= off) & (j < n[:, None])
    return np.where(valid, cur[:, None] - (j - off), -1)


def generate_routing(pattern: Pattern, shape: Shape, seed: int) -> np.ndarray:
    """block_indices int32 ``[B, T, H, S]`` for ``pattern`` (see the module docstring)."""
    if pattern.name not in PATTERN_NAMES:
        raise UserError(f"unknown pattern {pattern.name!r}; choose one of {', '.join(PATTERN_NAMES)}")
    cur, n = _row_geometry(shape)
    S, M = shape.S, shape.num_blocks
    if pattern.name == "local":
        out = _most_recent(cur, n, S)
    elif pattern.name == "sink-heavy":
        sinks = np.minimum(n, pattern.sinks)
        j = np.arange(S, dtype=np.int64)[None, :]
        out = np.where(j < sinks[:, None], j, _most_recent(cur, n, S, offset=sinks))
    else:
        rng = pattern_rng(seed, pattern.name)
        if pattern.name == "uniform":
            weights = np.ones(M, dtype=np.float64)
        else:
            weights = (np.arange(M, dtype=np.float64) + 1.0) ** -pattern.exponent
        out = sample_distinct(rng, cur, n, S, weights)  # nsa_exp/sampler.py (bit for bit today's draws)
    out = -np.sort(-out, axis=1)  # descending block order; -1 padding lands in the last slots
    return out.reshape(shape.B, shape.T, shape.H, S).astype(np.int32)


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
