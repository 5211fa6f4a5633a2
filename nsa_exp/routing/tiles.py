"""The tile-shared families (issue 31): one selection per query tile, drawn once by a base family's rule.

Query ``t`` sits in tile ``t // BS``, the index of its diagonal KV block, and has ``n = min(S, tile + 1)`` slots
like every family. Per ``(b, tile, h)`` the base family's generator draws ``n - 1`` distinct blocks of
``0..tile - 1`` once, as it would for the last query of the previous tile given ``S - 1`` slots
(:func:`tile_rows`); the tile's own block completes the selection, and every query of the tile takes it. Tile 0
is block 0 alone (the base is not called for it). So edges are those of every family, at token and at block level
(each KV block is selected by whole tiles), and FlexAttention with full blocks or a block-sparse kernel can run
exactly the same work. ``tile-local`` and ``tile-sink-heavy`` give ``local`` and ``sink-heavy`` byte for byte
(those already depend on the tile only); ``tile-uniform`` and ``tile-zipf`` differ from their per-token bases.

Every row of the family table with a ``tile_base`` is bound to :func:`tile_shared` of its base's generator when
the package is imported (after the skew families). Worked example (T=10, BS=2, S=2: tiles 0..4; per token,
``uniform`` lets t=5 and t=9 drop their own block, ``tile-uniform`` keeps it and gives each pair of queries one
selection)::

    >>> from nsa_exp.core.config import Pattern, Shape
    >>> from nsa_exp.routing.patterns import generate_routing
    >>> shape = Shape(B=1, T=10, HQ=16, H=1, K=16, V=16, S=2, block_size=2, dtype="float16")
    >>> generate_routing(Pattern("uniform"), shape, seed=0)[0, :, 0].tolist()
    [[0, -1], [0, -1], [1, 0], [1, 0], [2, 0], [1, 0], [3, 2], [3, 1], [4, 3], [1, 0]]
    >>> generate_routing(Pattern("tile-uniform"), shape, seed=0)[0, :, 0].tolist()
    [[0, -1], [0, -1], [1, 0], [1, 0], [2, 1], [2, 1], [3, 2], [3, 2], [4, 0], [4, 0]]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core.families import FAMILIES
from .patterns import GENERATORS, Generator, Rows, register_generator


def tile_rows(rows: Rows) -> Rows:
    """The base family's rows of a tile-shared draw: one per ``(b, tile, h)`` with ``tile >= 1``, in C order of
    ``[B, tiles - 1, H]``, each the last query ``t = tile * BS - 1`` of the previous tile with ``S - 1`` slots:
    ``cur = tile - 1``, ``n = min(S - 1, tile)`` (int64 arrays; needs ``S >= 2``).

    >>> from nsa_exp.core.config import Shape
    >>> shape = Shape(B=1, T=8, HQ=16, H=1, K=16, V=16, S=3, block_size=2, dtype="float16")
    >>> base = tile_rows(Rows.for_shape(shape))
    >>> base.cur.tolist(), base.n.tolist(), base.t.tolist(), base.S
    ([0, 1, 2], [1, 2, 2], [1, 3, 5], 2)
    """
    tiles = -(-rows.T // rows.block_size)
    grid = (rows.B, tiles - 1, rows.H)
    tile = np.broadcast_to(np.arange(1, tiles, dtype=np.int64)[None, :, None], grid).reshape(-1)
    head = np.broadcast_to(np.arange(rows.H, dtype=np.int64)[None, None, :], grid).reshape(-1)
    return Rows(cur=tile - 1, n=np.minimum(rows.S - 1, tile), head=head, t=tile * rows.block_size - 1, B=rows.B,
                T=rows.T, H=rows.H, S=rows.S - 1, M=rows.M, block_size=rows.block_size)


def tile_shared(base: Generator) -> Generator:
    """The tile-shared variant of the generator ``base`` (see the module docstring).

    The returned generator takes the full ``(b, t, h)`` rows of a shape, as ``generate_routing`` hands them
    (:meth:`Rows.for_shape`), and returns int64 ``[rows, S]``: per tile, its block ``tile`` then ``base``'s
    ``n - 1`` blocks of ``0..tile - 1`` (drawn from ``rng`` once per ``(b, tile, h)``), then -1.
    """
    def generate(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        if rows.cur.shape[0] != rows.B * rows.T * rows.H:
            raise ValueError(f"a tile-shared generator takes the full [B,T,H] rows; got {rows.cur.shape[0]} rows")
        tiles = -(-rows.T // rows.block_size)
        chosen = np.full((rows.B, tiles, rows.H, rows.S), -1, dtype=np.int64)
        chosen[..., 0] = np.arange(tiles, dtype=np.int64)[None, :, None]
        if tiles > 1 and rows.S > 1:
            drawn = base(tile_rows(rows), params, rng)
            chosen[:, 1:, :, 1:] = drawn.reshape(rows.B, tiles - 1, rows.H, rows.S - 1)
        return chosen[:, np.arange(rows.T) // rows.block_size].reshape(-1, rows.S)

    return generate


for _row in FAMILIES.values():
    if _row.tile_base is not None:
        register_generator(_row.name, tile_shared(GENERATORS[_row.tile_base]))
