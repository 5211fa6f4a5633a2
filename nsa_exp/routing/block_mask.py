"""A routing seen by query tiles: which KV blocks each tile of ``block_size`` queries visits, whether the tile's
queries share one selection, and the attention work each peer computes for it (issue 31).

Block-sparse kernels (FlexAttention, block-sparse FlashAttention) decide per (query tile, KV block) whether to
compute a ``BS x BS`` score tile; NSA's selection decides per (query, KV block). Porting a per-token routing to a
block mask therefore computes every block *some* query of the tile selected -- the tile's union -- for all of the
tile's queries, with a ``mask_mod`` that keeps only the selected (query, block) pairs (a *partial* block). Where
every query of a tile selects the same blocks (a tile-shared routing: ``local``, ``sink-heavy`` and the ``tile-*``
families), the off-diagonal blocks are *full* (no mask) and only the diagonal needs the causal mask.

Work is counted in **score pairs**: (query, key) pairs whose ``q.k`` a kernel computes, per KV head and one query
head of its group (every query head of a group does the same work; multiply by ``HQ / H`` for all heads):

- FLA's ``parallel_nsa``: every edge is one (query, block) pair of ``BS`` keys, the diagonal block included whole
  (its kernel masks ``> t`` after computing): ``edges * BS``.
- a block mask: ``BS * BS`` per (query tile, KV block) it visits (its union).
- dense causal attention (tiles on or below the diagonal): ``BS * BS * NT (NT + 1) / 2`` per head, ``NT = T / BS``.

``extra_work`` is a peer's score pairs over FLA's: 1.0 for FLA by definition.

Worked example (T = 4, BS = 2, S = 1, one KV head: two tiles; tile 1's queries pick blocks 0 and 1)::

    >>> import numpy as np
    >>> bi = np.array([0, 0, 0, 1], dtype=np.int32).reshape(1, 4, 1, 1)
    >>> tile_union(bi, 2)[0, 0].astype(int).tolist()        # [tile, block]: tile 1 visits both blocks
    [[1, 0], [1, 1]]
    >>> is_tile_shared(bi, 2), score_pairs(bi, 2)
    (False, {'edges': 4, 'fla': 8, 'block_mask': 12, 'dense': 12})
"""

from __future__ import annotations

import numpy as np


def _valid(block_indices: np.ndarray, block_size: int) -> np.ndarray:
    """bool ``[B,T,H,S]``: the slots FLA's CSR kernel keeps (``0 <= b``, ``b * BS <= t``)."""
    t = np.arange(block_indices.shape[1], dtype=np.int64)[None, :, None, None]
    b = block_indices.astype(np.int64)
    return (b >= 0) & (b * block_size <= t)


def tile_union(block_indices: np.ndarray, block_size: int) -> np.ndarray:
    """bool ``[B, H, NT, M]``: block ``j`` is selected by at least one query of tile ``i`` (``NT = M = T / BS``).

    ``block_indices``: int32/int64 ``[B, T, H, S]``, ``-1`` padding; ``T`` a multiple of ``block_size``.
    """
    B, T, H, _ = block_indices.shape
    M = T // block_size
    out = np.zeros((B, H, M, M), dtype=bool)
    valid = _valid(block_indices, block_size)
    b, t, h, _s = np.nonzero(valid)
    out[b, h, t // block_size, block_indices[b, t, h, _s]] = True
    return out


def selection_bitmap(block_indices: np.ndarray, block_size: int) -> np.ndarray:
    """bool ``[B, H, T, M]``: query ``t`` of KV head ``h`` selects block ``j`` (a valid slot): what a block mask's
    ``mask_mod`` looks up to admit exactly the routing's (query, block) pairs."""
    B, T, H, _ = block_indices.shape
    out = np.zeros((B, H, T, T // block_size), dtype=bool)
    b, t, h, s = np.nonzero(_valid(block_indices, block_size))
    out[b, h, t, block_indices[b, t, h, s]] = True
    return out


def is_tile_shared(block_indices: np.ndarray, block_size: int) -> bool:
    """True when every query of every tile selects the same set of blocks (the tile's union) -- the routings a
    block mask computes exactly, with full off-diagonal blocks.

    A query's set is a subset of its tile's union, so the two are equal exactly when they are the same size: each
    query's count of distinct valid blocks against its tile's union count (the ``[B, H, T, M]`` selection bitmap
    compared with the union, without building it: 64 MiB at T=32768, H=4).

    >>> bi = np.array([0, -1, 0, -1, 1, 0, 0, 1], dtype=np.int32).reshape(1, 4, 1, 2)  # tile 1: {0, 1} twice
    >>> is_tile_shared(bi, 2)
    True
    >>> bi[0, 3, 0] = [0, 0]   # t=3 selects block 0 twice: {0}, not its tile's union {0, 1}
    >>> is_tile_shared(bi, 2)
    False
    """
    B, T, H, _ = block_indices.shape
    slots = np.sort(np.where(_valid(block_indices, block_size), block_indices, -1), axis=-1)
    first = np.ones_like(slots, dtype=bool)
    first[..., 1:] = slots[..., 1:] != slots[..., :-1]  # a repeated block counts once
    per_query = ((slots >= 0) & first).sum(axis=-1)  # [B, T, H]: distinct valid blocks
    union = tile_union(block_indices, block_size).sum(axis=-1)  # [B, H, NT]
    per_query = per_query.transpose(0, 2, 1).reshape(B, H, T // block_size, block_size)
    return bool((per_query == union[..., None]).all())


def block_mask_layout(block_indices: np.ndarray, block_size: int, full_blocks: bool) -> dict[str, np.ndarray]:
    """The block mask of a routing, per (batch, KV head, query tile), as FlexAttention's
    ``BlockMask.from_kv_blocks`` takes it: int32 ``kv_num_blocks [B, H, NT]`` and ``kv_indices [B, H, NT, M]``
    (the partial blocks, ascending, padded with 0), and ``full_kv_num_blocks`` / ``full_kv_indices`` likewise (the
    blocks computed without a mask; all zero unless ``full_blocks``).

    ``full_blocks=False``: the exact per-token port -- every block of the tile's union is partial (its ``mask_mod``
    admits the selected (query, block) pairs and causality). ``full_blocks=True``: a tile-shared routing's layout --
    every union block below the diagonal is full, the diagonal partial (causal); ValueError for a routing that is
    not tile-shared (:func:`is_tile_shared`), whose full blocks would compute pairs the routing never selected.

    >>> bi = np.array([0, 0, 1, 0], dtype=np.int32).reshape(1, 4, 1, 1)   # tile 1: t=2 picks 1, t=3 picks 0
    >>> block_mask_layout(bi, 2, full_blocks=False)["kv_num_blocks"].tolist()
    [[[1, 2]]]
    """
    union = tile_union(block_indices, block_size)
    B, H, NT, M = union.shape
    partial = union.copy()
    full = np.zeros_like(union)
    if full_blocks:
        if not is_tile_shared(block_indices, block_size):
            raise ValueError("full blocks need a tile-shared routing: every query of a tile selecting the same blocks")
        diag = np.eye(NT, M, dtype=bool)[None, None]
        full = union & ~diag
        partial = union & diag
    out: dict[str, np.ndarray] = {}
    for name, mask in (("kv", partial), ("full_kv", full)):
        count = mask.sum(axis=-1).astype(np.int32)
        order = np.argsort(~mask, axis=-1, kind="stable").astype(np.int32)   # selected blocks first, ascending
        index = np.where(np.arange(M)[None, None, None, :] < count[..., None], order, 0).astype(np.int32)
        out[f"{name}_num_blocks"], out[f"{name}_indices"] = count, index
    return out


def score_pairs(block_indices: np.ndarray, block_size: int) -> dict[str, int]:
    """Score pairs (module docstring) of each way to compute the routing, summed over batch and KV heads, one query
    head per group: ``edges`` (the routing's (query, block) pairs), ``fla`` (``edges * BS``), ``block_mask`` (the
    tile unions' blocks ``* BS * BS``) and ``dense`` (the causal tiles ``* BS * BS``)."""
    B, T, H, _ = block_indices.shape
    NT = T // block_size
    edges = int(_valid(block_indices, block_size).sum())
    visited = int(tile_union(block_indices, block_size).sum())
    return {"edges": edges, "fla": edges * block_size, "block_mask": visited * block_size * block_size,
            "dense": B * H * block_size * block_size * NT * (NT + 1) // 2}
