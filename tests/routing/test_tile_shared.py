"""The tile-shared families (issue 31): one selection per query tile holding its diagonal block, the seed's edges,
``tile-local`` / ``tile-sink-heavy`` equal to their bases, and the drawn variants' block frequencies."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.core.families import FAMILIES, pattern_from_entry
from nsa_exp.io.config_files import load_config
from nsa_exp.routing import tiles
from nsa_exp.routing.edges import closed_form_edges, effective_edges, equal_edge_gate
from nsa_exp.routing.patterns import Rows, generate_routing, routing_sha256, routing_violations

TILE_FAMILIES = ("tile-local", "tile-uniform", "tile-sink-heavy", "tile-zipf")
PRIMARY = load_config("configs/e1_h100.json")


def _shape(B=1, T=64, H=2, S=4, BS=4) -> Shape:
    return Shape(B=B, T=T, HQ=16 * H, H=H, K=16, V=16, S=S, block_size=BS, dtype="float16")


def _by_tile(bi: np.ndarray, shape: Shape) -> np.ndarray:
    """[B, tiles, BS, H, S]: the queries of each tile side by side."""
    return bi.reshape(shape.B, shape.T // shape.block_size, shape.block_size, shape.H, shape.S)


def _tile_shared(bi: np.ndarray, shape: Shape) -> bool:
    tiled = _by_tile(bi, shape)
    return bool((tiled == tiled[:, :, :1]).all())


def _holds_its_diagonal(bi: np.ndarray, shape: Shape) -> bool:
    cur = (np.arange(shape.T) // shape.block_size)[None, :, None, None]
    return bool((bi == cur).any(axis=-1).all())


@st.composite
def tile_cases(draw):
    BS = draw(st.sampled_from([1, 2, 4, 8]))
    S = draw(st.integers(1, 10))
    H = draw(st.integers(1, 3))
    shape = _shape(B=draw(st.integers(1, 2)), T=draw(st.integers(max(S, 1), 40)) * BS, H=H, S=S, BS=BS)
    name = draw(st.sampled_from(TILE_FAMILIES))
    params: dict = {}
    if name == "tile-sink-heavy":
        if S < 2:  # sinks < S
            name = "tile-local"
        else:
            params["sinks"] = draw(st.integers(1, S - 1))
    if name == "tile-zipf":
        params["exponent"] = draw(st.one_of(st.sampled_from([0.0, 1.0, 8.0, 64.0]), st.floats(0, 64)))
    if "heads" in FAMILIES[name].params and draw(st.booleans()):
        params["heads"] = draw(st.lists(st.integers(0, H - 1), min_size=1, max_size=H, unique=True))
    return shape, pattern_from_entry({"name": name, **params}, "pattern", shape), draw(st.integers(0, 2**32 - 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tile_cases())
def test_every_tile_routing_is_valid_tile_shared_holds_its_diagonal_and_has_the_seeds_edges(case):
    shape, pattern, seed = case
    bi = generate_routing(pattern, shape, seed)
    assert routing_violations(bi, shape) == []
    assert _tile_shared(bi, shape) and _holds_its_diagonal(bi, shape)
    assert effective_edges(bi, shape.block_size) == closed_form_edges(shape)
    assert np.array_equal(bi, generate_routing(pattern, shape, seed))  # deterministic from the seed
    local = generate_routing(Pattern("local"), shape, seed)
    if pattern.params and dict(pattern.params).get("heads"):  # heads not listed are local
        others = [h for h in range(shape.H) if h not in dict(pattern.params)["heads"]]
        assert np.array_equal(bi[:, :, others], local[:, :, others])
    # block level: each tile selects whole KV blocks, as many (tile, block) pairs as local's
    pairs = [int((_by_tile(r, shape)[:, :, 0] >= 0).sum()) for r in (bi, local)]
    assert pairs[0] == pairs[1] and pairs[0] * shape.block_size == closed_form_edges(shape)


def test_the_seeds_local_and_sink_heavy_are_already_tile_shared_and_their_tile_variants_equal_them():
    shape, seed = PRIMARY.shape, PRIMARY.seeds.routing
    for base, params in [("local", {}), ("sink-heavy", {"sinks": 4}), ("sink-heavy", {"sinks": 1}),
                         ("sink-heavy", {"sinks": 15}), ("sink-heavy", {"sinks": 2, "heads": [1, 3]})]:
        seed_bi = generate_routing(pattern_from_entry({"name": base, **params}, "p", shape), shape, seed)
        tile_bi = generate_routing(pattern_from_entry({"name": f"tile-{base}", **params}, "p", shape), shape, seed)
        assert _tile_shared(seed_bi, shape) and _holds_its_diagonal(seed_bi, shape), (base, params)
        assert routing_sha256(tile_bi) == routing_sha256(seed_bi), (base, params)


def test_tile_uniform_and_tile_zipf_differ_from_the_per_token_seeds_and_keep_the_seeds_edges():
    shape, seed = PRIMARY.shape, PRIMARY.seeds.routing
    seeds = {p.name: generate_routing(p, shape, seed) for p in PRIMARY.patterns}
    drawn = {name: generate_routing(Pattern(name, **FAMILIES[name].defaults), shape, seed)
             for name in ("tile-uniform", "tile-zipf")}
    for name, bi in drawn.items():
        base = seeds[FAMILIES[name].tile_base or ""]
        assert not np.array_equal(bi, base)
        assert not _tile_shared(base, shape) and not _holds_its_diagonal(base, shape)
        assert _tile_shared(bi, shape) and _holds_its_diagonal(bi, shape)
    gate = equal_edge_gate({**seeds, **drawn}, shape)
    assert gate["equal"] and set(gate["per_pattern"].values()) == {2_066_432}


# Block frequencies, computed from the definition (not the generator): at S = 2 a tile c >= 1 takes c and one
# earlier block, b < c with probability w(b) / sum_{j < c} w(j), w(b) = (b + 1) ** -s (s = 0: uniform).
FREQ_SHAPE = _shape(B=16, T=48, H=16, S=2, BS=1)  # 47 drawing tiles x 256 (b, h) draws each


def _earlier_block(bi: np.ndarray) -> np.ndarray:
    """int [B*H, tiles - 1]: the block each tile c >= 1 takes besides c (S = 2, descending slots)."""
    return bi[:, 1:, :, 1].transpose(0, 2, 1).reshape(-1, bi.shape[1] - 1)


@pytest.mark.parametrize("name,exponent", [("tile-uniform", 0.0), ("tile-zipf", 1.0), ("tile-zipf", 2.0)])
def test_the_earlier_block_of_each_tile_follows_the_familys_weights(name, exponent):
    params = {"exponent": exponent} if name == "tile-zipf" else {}
    bi = generate_routing(pattern_from_entry({"name": name, **params}, "p", FREQ_SHAPE), FREQ_SHAPE, seed=7)
    picks = _earlier_block(bi)
    tiles_ = np.arange(1, FREQ_SHAPE.T)
    w = (np.arange(FREQ_SHAPE.T) + 1.0) ** -exponent
    prob = np.where(np.arange(FREQ_SHAPE.T)[None, :] < tiles_[:, None], w[None, :], 0.0)
    prob /= prob.sum(axis=1, keepdims=True)  # [tiles - 1, blocks]
    expected = prob.sum(axis=0) * picks.shape[0]
    observed = np.bincount(picks.reshape(-1), minlength=FREQ_SHAPE.T)
    # every block's count within 5 binomial standard deviations of its expectation, and the lowest blocks' share
    var = (prob * (1 - prob)).sum(axis=0) * picks.shape[0]
    assert np.all(np.abs(observed - expected) <= 5 * np.sqrt(var) + 1)
    low_share = observed[:4].sum() / observed.sum()
    assert abs(low_share - expected[:4].sum() / expected.sum()) < 0.02


def test_tile_zipf_tilts_toward_the_low_blocks_and_tile_uniform_does_not():
    shape = _shape(B=4, T=256, H=8, S=4, BS=2)
    share = {}
    for name in ("tile-uniform", "tile-zipf"):
        bi = generate_routing(pattern_from_entry({"name": name}, "p", shape), shape, seed=3)
        tiled = _by_tile(bi, shape)[:, 64:, 0]  # tiles 64..127: 3 earlier blocks of 0..tile-1 each
        earlier = tiled[..., 1:]
        share[name] = float((earlier < 8).mean())  # blocks 0..7: 8 of 64..127 choices
    assert share["tile-uniform"] < 0.15 and share["tile-zipf"] > 0.4


def test_tile_zero_is_block_zero_alone_and_s1_is_the_diagonal_alone():
    shape = _shape(T=32, H=2, S=1, BS=4)
    for name in TILE_FAMILIES[:2] + TILE_FAMILIES[3:]:
        bi = generate_routing(Pattern(name, **FAMILIES[name].defaults), shape, seed=0)
        assert np.array_equal(bi[0, :, :, 0], np.broadcast_to((np.arange(32) // 4)[:, None], (32, 2)))


def test_a_tile_shared_generator_takes_the_full_rows_only():
    shape = _shape()
    rows = Rows.for_shape(shape)
    with pytest.raises(ValueError, match="full"):
        tiles.tile_shared(lambda r, p, g: r.cur[:, None])(tiles.tile_rows(rows), {}, np.random.default_rng(0))


def test_module_doctest():
    assert doctest.testmod(tiles).failed == 0
