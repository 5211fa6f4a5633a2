"""The skew families' generators: skew as a continuum (zipf exponent, sink count), placement on KV heads,
a hot block. Their rows (parameters, defaults, shape rules, config forms) are in :mod:`nsa_exp.core.families`.

Each generator is bound to its row by :func:`.patterns.register_generator`: it gets the
flattened ``(b, t, h)`` rows of a shape (:class:`Rows`), the pattern's parameters and a seeded generator,
and returns int64 ``[rows, S]`` holding exactly ``n[r] = min(S, t // BS + 1)`` distinct causal blocks of
``0..cur[r]`` and then ``-1`` (any slot order). So every family has the equal-edge property: any two
members have the closed-form edge count and are comparable at equal edges.

Placement (``"heads": [h, ...]``): those heads carry the family, the others are ``local``. FLA's dK/dV
programs run in program-id order ``(b * H + h) * M + block``, so ``heads`` decides where the heavy CSR rows
sit in that queue.

>>> from nsa_exp.core.config import Pattern, Shape
>>> from nsa_exp.routing.patterns import generate_routing
>>> shape = Shape(B=1, T=8, HQ=16, H=1, K=16, V=16, S=2, block_size=2, dtype="float16")
>>> generate_routing(Pattern("hot-block", block=1), shape, seed=0)[0, :, 0].tolist()
[[0, -1], [0, -1], [1, 0], [1, 0], [2, 1], [2, 1], [3, 1], [3, 1]]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .patterns import Rows, register_generator
from .sampler import sample_distinct


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


register_generator("sink-heavy", sink_heavy_generator)
register_generator("zipf", zipf_generator)
register_generator("hot-block", hot_block_generator)
