"""Every routing meets the invariants, has the closed-form edge count, and is deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.errors import GateFailure, UserError
from nsa_exp.io.config_files import load_config
from nsa_exp.routing.edges import closed_form_edges, effective_edges, equal_edge_gate
from nsa_exp.routing.patterns import generate_routing, routing_violations, valid_slot_counts

PATTERNS = [Pattern("local"), Pattern("uniform"), Pattern("sink-heavy", sinks=4), Pattern("zipf", exponent=1.0),
            Pattern("sink-heavy", sinks=1), Pattern("zipf", exponent=2.5)]


@st.composite
def shapes(draw):
    block_size = draw(st.sampled_from([16, 32, 64]))
    S = draw(st.integers(1, 20))
    M = draw(st.integers(S, S + 40))
    return Shape(B=draw(st.integers(1, 2)), T=M * block_size, HQ=16, H=draw(st.integers(1, 3)), K=16, V=16, S=S,
                 block_size=block_size, dtype="float16")


@settings(max_examples=60, deadline=None)
@given(shape=shapes(), seed=st.integers(0, 2**32 - 1), pattern=st.sampled_from(PATTERNS))
def test_routing_invariants_hold(shape, seed, pattern):
    bi = generate_routing(pattern, shape, seed)
    assert bi.dtype == np.int32 and bi.shape == (shape.B, shape.T, shape.H, shape.S)
    assert routing_violations(bi, shape) == []
    assert effective_edges(bi, shape.block_size) == closed_form_edges(shape)


@settings(max_examples=30, deadline=None)
@given(shape=shapes())
def test_closed_form_matches_the_direct_sum(shape):
    n = valid_slot_counts(shape.T, shape.block_size, shape.S)
    assert closed_form_edges(shape) == shape.B * shape.H * int(n.sum())


def test_primary_shape_has_2066432_edges_for_every_pattern():
    cfg = load_config("configs/e1_h100.json")
    routings = {p.name: generate_routing(p, cfg.shape, cfg.seeds.routing) for p in cfg.patterns}
    gate = equal_edge_gate(routings, cfg.shape)
    assert gate["closed_form"] == 2_066_432
    assert set(gate["per_pattern"].values()) == {2_066_432}


def test_same_seed_same_routing_other_seed_other_routing():
    shape = Shape(B=1, T=2048, HQ=16, H=2, K=16, V=16, S=8, block_size=32, dtype="float16")
    for p in (Pattern("uniform"), Pattern("zipf", exponent=1.0)):
        a, b = generate_routing(p, shape, 5), generate_routing(p, shape, 5)
        assert np.array_equal(a, b)
        assert not np.array_equal(a, generate_routing(p, shape, 6))


def test_kv_heads_are_drawn_independently():
    shape = Shape(B=1, T=4096, HQ=32, H=2, K=16, V=16, S=8, block_size=32, dtype="float16")
    bi = generate_routing(Pattern("uniform"), shape, 0)
    assert not np.array_equal(bi[0, :, 0], bi[0, :, 1])


def test_local_takes_the_most_recent_blocks_in_descending_order():
    shape = Shape(B=1, T=512, HQ=16, H=1, K=16, V=16, S=4, block_size=32, dtype="float16")
    bi = generate_routing(Pattern("local"), shape, 0)[0, :, 0]
    t = 300  # block 9
    assert bi[t].tolist() == [9, 8, 7, 6]
    assert bi[40].tolist() == [1, 0, -1, -1]


def test_sink_heavy_keeps_the_sinks_and_fills_with_recent_blocks():
    shape = Shape(B=1, T=1024, HQ=16, H=1, K=16, V=16, S=6, block_size=32, dtype="float16")
    bi = generate_routing(Pattern("sink-heavy", sinks=2), shape, 0)[0, :, 0]
    assert bi[1000].tolist() == [31, 30, 29, 28, 1, 0]  # 4 recent + sinks 0, 1 (descending order)
    assert bi[33].tolist() == [1, 0, -1, -1, -1, -1]


def test_zipf_prefers_low_blocks_and_uniform_does_not():
    shape = Shape(B=1, T=16384, HQ=16, H=1, K=16, V=16, S=4, block_size=64, dtype="float16")
    late = slice(12288, None)
    zipf = generate_routing(Pattern("zipf", exponent=1.0), shape, 1)[0, late, 0]
    uni = generate_routing(Pattern("uniform"), shape, 1)[0, late, 0]
    assert (zipf == 0).mean() > 0.5 * (zipf >= 0).mean() / 4  # block 0 is in a large share of rows
    assert (uni == 0).mean() < 0.05


def test_uniform_is_uniform_over_causal_blocks():
    shape = Shape(B=1, T=64 * 64, HQ=16, H=1, K=16, V=16, S=4, block_size=64, dtype="float16")
    bi = generate_routing(Pattern("uniform"), shape, 3)[0, 63 * 64:, 0]  # queries in the last block: 64 choices
    counts = np.bincount(bi.reshape(-1), minlength=64)
    expected = bi.size / 64
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 120  # 63 d.o.f.: p ~ 1e-5 at 120


def test_unknown_pattern_is_refused():
    shape = Shape(B=1, T=256, HQ=16, H=1, K=16, V=16, S=2, block_size=64, dtype="float16")
    with pytest.raises(UserError, match="unknown pattern 'striped'"):
        generate_routing(Pattern("striped"), shape, 0)


def test_equal_edge_gate_aborts_on_a_dropped_edge():
    cfg = load_config("configs/e1_h100.json")
    routings = {p.name: generate_routing(p, cfg.shape, 1) for p in cfg.patterns[:2]}
    routings["uniform"] = routings["uniform"].copy()
    routings["uniform"][0, 5000, 0, 3] = -1
    with pytest.raises(GateFailure, match="equal-edge gate failed: closed form 2066432 edges, got local=2066432, "
                                          "uniform=2066431"):
        equal_edge_gate(routings, cfg.shape)


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda b: b.__setitem__((0, 100, 0, 0), 99), "outside 0..t//block_size"),
    (lambda b: b.__setitem__((0, 0, 0, 3), 0), "past n(t)"),
    (lambda b: b.__setitem__((0, 200, 0, 1), b[0, 200, 0, 0]), "same block twice"),
])
def test_routing_violations_are_reported(mutate, fragment):
    shape = Shape(B=1, T=256, HQ=16, H=1, K=16, V=16, S=4, block_size=32, dtype="float16")
    bi = generate_routing(Pattern("local"), shape, 0)
    mutate(bi)
    problems = routing_violations(bi, shape)
    assert len(problems) == 1 and fragment in problems[0]
