"""Routing families: skew as a continuum (zipf exponent, sink count), placement on KV heads, a hot block.

Each family is a generator registered in the Pattern registry (:mod:`.patterns`): it gets the
flattened ``(b, t, h)`` rows of a shape (:class:`Rows`), the pattern's parameters and a seeded generator,
and returns int64 ``[rows, S]`` holding exactly ``n[r] = min(S, t // BS + 1)`` distinct causal blocks of
``0..cur[r]`` and then ``-1`` (any slot order). So every family has the equal-edge property: any two
members have the closed-form edge count and are comparable at equal edges.

Config forms (one entry of ``config.patterns``):

- ``{"name": "zipf", "exponent": s}``: successive sampling with weight ``(b + 1) ** -s``; ``s = 0`` is
  uniform, ``0 <= s <= 64`` (at ``s >= 8`` it already selects the lowest blocks almost surely).
- ``{"name": "sink-heavy", "sinks": k}``: blocks ``0 .. min(n, k) - 1`` plus the most recent; ``1 <= k < S``.
- ``{"name": "hot-block", "block": b}``: every query that can see block ``b`` (``t // BS >= b``) selects
  it, its other slots the most recent blocks; ``0 <= b < M``.
- placement, on any of them: ``"heads": [h, ...]`` (distinct KV heads ``0 <= h < H``): those heads carry
  the family, the others are ``local``. Absent = every head. FLA's dK/dV programs run in program-id order
  ``(b * H + h) * M + block``, so ``heads`` decides where the heavy CSR rows sit in that queue.

>>> from nsa_exp.routing.config import Pattern, Shape
>>> from nsa_exp.routing.patterns import generate_routing
>>> shape = Shape(B=1, T=8, HQ=16, H=1, K=16, V=16, S=2, block_size=2, dtype="float16")
>>> generate_routing(Pattern("hot-block", block=1), shape, seed=0)[0, :, 0].tolist()
[[0, -1], [0, -1], [1, 0], [1, 0], [2, 1], [2, 1], [3, 1], [3, 1]]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import UserError
from .config import Shape
from .patterns import PatternSpec, Rows, register_pattern
from .sampler import sample_distinct

MAX_ZIPF_EXPONENT = 64.0


def local_rows(cur: np.ndarray, n: np.ndarray, S: int) -> np.ndarray:
    """The ``n`` most recent causal blocks ``cur, cur - 1, ...`` then -1."""
    j = np.arange(S, dtype=np.int64)[None, :]
    return np.where(j < n[:, None], cur[:, None] - j, -1)


def _with_placement(rows: Rows, params: Mapping[str, Any],
                    family: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """``family(cur, n, t)`` on the rows of the placed heads, ``local`` on the others."""
    heads = params.get("heads")
    if heads is None:
        return family(rows.cur, rows.n, rows.t)
    mask = np.isin(rows.head, np.asarray(list(heads), dtype=np.int64))
    out = local_rows(rows.cur, rows.n, rows.S)
    if mask.any():
        out[mask] = family(rows.cur[mask], rows.n[mask], rows.t[mask])
    return out


def zipf_generator(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    s = float(params.get("exponent", 1.0))
    weights = (np.arange(rows.M, dtype=np.float64) + 1.0) ** -s  # s = 0: exactly 1.0 (uniform)
    return _with_placement(rows, params, lambda cur, n, _t: sample_distinct(rng, cur, n, rows.S, weights))


def sink_heavy_generator(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    k = int(params.get("sinks", 4))
    j = np.arange(rows.S, dtype=np.int64)[None, :]

    def family(cur: np.ndarray, n: np.ndarray, _t: np.ndarray) -> np.ndarray:
        sinks = np.minimum(n, k)[:, None]
        recent = np.where((j >= sinks) & (j < n[:, None]), cur[:, None] - (j - sinks), -1)
        return np.where(j < sinks, j, recent)

    return _with_placement(rows, params, family)


def hot_block_generator(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    b = int(params["block"])

    def family(cur: np.ndarray, n: np.ndarray, _t: np.ndarray) -> np.ndarray:
        out = local_rows(cur, n, rows.S)
        # queries that see b but whose n most recent blocks miss it: b replaces the oldest of them
        need = np.flatnonzero((cur >= b) & (cur - b >= n))
        out[need, n[need] - 1] = b
        return out

    return _with_placement(rows, params, family)


HEADS_SCHEMA = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "uniqueItems": True,
                "description": "KV heads carrying the family (others local); absent = every head"}


def _check_heads(params: Mapping[str, Any], shape: Shape, where: str) -> None:
    bad = [h for h in params.get("heads") or () if not 0 <= h < shape.H]
    if bad:
        raise UserError(f"{where}.heads: head {bad[0]} is outside 0..H-1 = 0..{shape.H - 1}")


def _check_sinks(params: Mapping[str, Any], shape: Shape, where: str) -> None:
    _check_heads(params, shape, where)
    if params["sinks"] >= shape.S:
        raise UserError(f"{where}.sinks: {params['sinks']} must be below S={shape.S} (1 <= sinks < S); "
                        f"with sinks >= S every query keeps only sinks")


def _check_block(params: Mapping[str, Any], shape: Shape, where: str) -> None:
    _check_heads(params, shape, where)
    if params["block"] >= shape.num_blocks:
        raise UserError(f"{where}.block: {params['block']} is outside 0..M-1 = 0..{shape.num_blocks - 1}")


register_pattern(PatternSpec(
    name="sink-heavy", generate=sink_heavy_generator,
    params_schema={"sinks": {"type": "integer", "minimum": 1,
                             "description": "leading blocks every query takes; 1 <= sinks < S"},
                   "heads": HEADS_SCHEMA},
    defaults={"sinks": 4}, marker="^", description="blocks 0..sinks-1 plus the most recent blocks",
    label_offset=(-12, 10), check_shape=_check_sinks))
register_pattern(PatternSpec(
    name="zipf", generate=zipf_generator,
    params_schema={"exponent": {"type": "number", "minimum": 0, "maximum": MAX_ZIPF_EXPONENT,
                                "description": "weight (b+1)^-s; 0 = uniform"},
                   "heads": HEADS_SCHEMA},
    defaults={"exponent": 1.0}, marker="D",
    description="distinct causal blocks by successive sampling with weight (b+1)^-exponent",
    label_offset=(8, -13), check_shape=_check_heads))
register_pattern(PatternSpec(
    name="hot-block", generate=hot_block_generator,
    params_schema={"block": {"type": "integer", "minimum": 0,
                             "description": "the block every query that can see it selects; < M"},
                   "heads": HEADS_SCHEMA},
    defaults={"block": 0}, marker="*",
    description="every query that can see block b selects it, the other slots the most recent",
    check_shape=_check_block))


def _check_topk(params: Mapping[str, Any], shape: Shape, where: str) -> None:
    """FLA's parallel_nsa_topk writes next_power_of_2(S) slots and asserts block_size >= 2 * that."""
    if shape.S & (shape.S - 1):
        raise UserError(f"{where}.name: fla-topk needs S a power of two (FLA's top-k writes next_power_of_2(S) "
                        f"slots); S={shape.S}")
    if shape.block_size < 2 * shape.S:
        raise UserError(f"{where}.name: fla-topk needs block_size >= 2*S (FLA's top-k asserts BC >= 2*S); "
                        f"block_size={shape.block_size}, S={shape.S}")


def _computed_on_gpu_tier(rows: Any, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    raise RuntimeError("fla-topk is generated by nsa_exp.gpu.topk (PatternSpec.external), not by Rows")


register_pattern(PatternSpec(
    name="fla-topk", generate=_computed_on_gpu_tier,
    params_schema={"salience": {"type": "number", "minimum": 0, "maximum": 1e6,
                                "description": "planted query-block alignment (nsa_exp.gpu.topk); 0 = random q"}},
    defaults={"salience": 0.0}, marker="P",
    description="FLA's own parallel_nsa_topk on seeded q and mean-pooled k (GPU, or TRITON_INTERPRET=1)",
    check_shape=_check_topk, external="nsa_exp.gpu.topk:fla_topk_routing", equal_edges=False))
