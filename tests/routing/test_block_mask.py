"""The routing seen by query tiles (nsa_exp/routing/block_mask.py), against brute-force references written from the
definitions (loops over queries, keys and tiles; not the module's vectorised code): each tile's union, the
tile-shared test, the block-mask layouts -- whose admitted (query, key) pairs must be exactly the routing's
causal pairs -- and the score pairs of each way to compute a routing."""

from __future__ import annotations

import numpy as np
import pytest

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.routing.block_mask import block_mask_layout, is_tile_shared, score_pairs, selection_bitmap, tile_union
from nsa_exp.routing.patterns import generate_routing

SHAPE = Shape(B=2, T=64, HQ=16, H=2, K=16, V=16, S=3, block_size=8, dtype="float16")


def routing(name: str, **params) -> np.ndarray:
    return generate_routing(Pattern(name, **params), SHAPE, seed=11)


def selected_pairs(bi: np.ndarray, BS: int) -> set[tuple[int, int, int, int]]:
    """(b, h, query, key) of every key of every valid selected block at or before the query."""
    out = set()
    B, T, H, S = bi.shape
    for b in range(B):
        for h in range(H):
            for t in range(T):
                for j in bi[b, t, h]:
                    if j >= 0 and j * BS <= t:
                        out |= {(b, h, t, k) for k in range(j * BS, min((j + 1) * BS, t + 1))}
    return out


def admitted_pairs(layout: dict[str, np.ndarray], bitmap: np.ndarray, BS: int) -> set[tuple[int, int, int, int]]:
    """The pairs a block-sparse kernel computes and keeps: every pair of a full block; the pairs of a partial
    block that the mask_mod (the bitmap and causality) admits."""
    out = set()
    B, H, NT = layout["kv_num_blocks"].shape
    for b in range(B):
        for h in range(H):
            for i in range(NT):
                qs = range(i * BS, (i + 1) * BS)
                for kind in ("kv", "full_kv"):
                    for j in layout[f"{kind}_indices"][b, h, i, :layout[f"{kind}_num_blocks"][b, h, i]]:
                        for t in qs:
                            for k in range(j * BS, (j + 1) * BS):
                                if kind == "full_kv" or (bitmap[b, h, t, j] and t >= k):
                                    out.add((b, h, t, k))
    return out


@pytest.mark.parametrize("name,params", [("local", {}), ("uniform", {}), ("sink-heavy", {"sinks": 1}),
                                         ("zipf", {"exponent": 1.0})])
def test_the_exact_block_mask_admits_exactly_the_routings_causal_pairs(name, params):
    bi = routing(name, **params)
    layout = block_mask_layout(bi, SHAPE.block_size, full_blocks=False)
    assert admitted_pairs(layout, selection_bitmap(bi, SHAPE.block_size), SHAPE.block_size) == \
        selected_pairs(bi, SHAPE.block_size)
    assert not layout["full_kv_num_blocks"].any()


@pytest.mark.parametrize("name,params", [("local", {}), ("sink-heavy", {"sinks": 1})])
def test_a_tile_shared_routings_full_block_mask_admits_exactly_its_pairs(name, params):
    bi = routing(name, **params)
    assert is_tile_shared(bi, SHAPE.block_size)
    layout = block_mask_layout(bi, SHAPE.block_size, full_blocks=True)
    assert admitted_pairs(layout, selection_bitmap(bi, SHAPE.block_size), SHAPE.block_size) == \
        selected_pairs(bi, SHAPE.block_size)
    # only the diagonal is partial
    assert (layout["kv_num_blocks"] == 1).all()
    assert (layout["kv_indices"][..., 0] == np.arange(SHAPE.num_blocks)).all()


def test_full_blocks_are_refused_for_a_routing_whose_tiles_disagree():
    bi = routing("uniform")
    assert not is_tile_shared(bi, SHAPE.block_size)
    with pytest.raises(ValueError, match="tile-shared"):
        block_mask_layout(bi, SHAPE.block_size, full_blocks=True)


def shared_by_definition(bi: np.ndarray, BS: int) -> bool:
    """Every query of every tile selects the same set of valid blocks (loops; duplicates count once)."""
    B, T, H, _ = bi.shape
    chosen = [[[{int(j) for j in bi[b, t, h] if j >= 0 and j * BS <= t} for t in range(T)] for h in range(H)]
              for b in range(B)]
    return all(chosen[b][h][t] == chosen[b][h][t - t % BS] for b in range(B) for h in range(H) for t in range(T))


def test_is_tile_shared_agrees_with_its_definition_on_random_routings():
    """Random block ids, -1 padding, repeated and non-causal slots; half the cases copy each tile's first query's
    row to the tile (most of those are tile-shared)."""
    rng = np.random.default_rng(7)
    seen = set()
    for case in range(600):
        BS, NT = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        bi = rng.integers(-2, NT + 1, size=(int(rng.integers(1, 3)), NT * BS, int(rng.integers(1, 3)),
                                            int(rng.integers(1, 4)))).astype(np.int32)
        if case % 2:
            bi = np.repeat(bi[:, ::BS], BS, axis=1)
        want = shared_by_definition(bi, BS)
        assert is_tile_shared(bi, BS) == want, (bi.tolist(), BS)
        seen.add(want)
    assert seen == {True, False}
    for name, params in [("local", {}), ("sink-heavy", {"sinks": 1}), ("uniform", {}), ("zipf", {"exponent": 1.0})]:
        assert is_tile_shared(routing(name, **params), SHAPE.block_size) == \
            shared_by_definition(routing(name, **params), SHAPE.block_size)


def test_tile_union_is_every_block_some_query_of_the_tile_selects():
    bi = routing("zipf", exponent=0.5)
    BS, union = SHAPE.block_size, tile_union(routing("zipf", exponent=0.5), SHAPE.block_size)
    for b in range(SHAPE.B):
        for h in range(SHAPE.H):
            for i in range(SHAPE.num_blocks):
                want = {int(j) for t in range(i * BS, (i + 1) * BS) for j in bi[b, t, h] if j >= 0}
                assert set(np.flatnonzero(union[b, h, i]).tolist()) == want


def test_score_pairs_count_fla_block_mask_and_dense_work():
    bi = routing("uniform")
    BS, NT = SHAPE.block_size, SHAPE.num_blocks
    work = score_pairs(bi, BS)
    edges = int(((bi >= 0) & (bi.astype(np.int64) * BS <= np.arange(SHAPE.T)[None, :, None, None])).sum())
    assert work["edges"] == edges and work["fla"] == edges * BS
    assert work["block_mask"] == int(tile_union(bi, BS).sum()) * BS * BS
    assert work["dense"] == SHAPE.B * SHAPE.H * BS * BS * sum(i + 1 for i in range(NT))
    # local: every query of a tile selects the same blocks, so its union is exactly its selection
    local = score_pairs(routing("local"), BS)
    assert local["block_mask"] == local["fla"]
    assert work["block_mask"] > work["fla"]   # uniform tiles disagree: the union computes more
