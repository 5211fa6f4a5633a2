"""Routing families: equal-edge invariants under hypothesis, semantics, placement, parameter errors."""

from __future__ import annotations

import doctest
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.errors import UserError
from nsa_exp.routing import families, sampler
from nsa_exp.routing.edges import closed_form_edges, effective_edges
from nsa_exp.routing.patterns import GENERATORS, generate_routing, routing_violations
from tests.helpers import FAMILIES, generate, validate_params


def _shape(B=1, T=64, H=2, S=4, BS=4) -> Shape:
    return Shape(B=B, T=T, HQ=16 * H, H=H, K=16, V=16, S=S, block_size=BS, dtype="float16")


@st.composite
def shapes_and_params(draw):
    BS = draw(st.sampled_from([1, 2, 4, 8, 16]))
    S = draw(st.integers(2, 12))
    M = draw(st.integers(S, 40))
    H = draw(st.integers(1, 3))
    shape = _shape(B=draw(st.integers(1, 2)), T=M * BS, H=H, S=S, BS=BS)
    name = draw(st.sampled_from(sorted(FAMILIES)))
    if name == "zipf":
        params = {"exponent": draw(st.one_of(st.sampled_from([0.0, 1.0, 8.0, 64.0]),
                                             st.floats(0, 64, allow_nan=False)))}
    elif name == "sink-heavy":
        params = {"sinks": draw(st.integers(1, S - 1))}
    else:
        params = {"block": draw(st.integers(0, M - 1))}
    if draw(st.booleans()):
        params["heads"] = draw(st.lists(st.integers(0, H - 1), min_size=1, max_size=H, unique=True))
    return shape, name, params, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes_and_params())
def test_every_family_keeps_the_equal_edge_invariants(case):
    shape, name, params, seed = case
    bi = generate(FAMILIES[name], params, shape, seed)
    assert bi.dtype == np.int32 and bi.shape == (shape.B, shape.T, shape.H, shape.S)
    # exactly n(t) distinct causal blocks in descending order, then -1
    assert routing_violations(bi, shape) == []
    assert np.all(np.diff(np.where(bi < 0, -10**9, bi), axis=-1) <= 0)
    assert effective_edges(bi, shape.block_size) == closed_form_edges(shape)
    assert np.array_equal(bi, generate(FAMILIES[name], params, shape, seed))  # deterministic from the seed
    if "heads" in params:  # heads not listed are local
        local = generate_routing(Pattern("local"), shape, seed)
        others = [h for h in range(shape.H) if h not in params["heads"]]
        assert np.array_equal(bi[:, :, others], local[:, :, others])


def test_builtin_forms_reproduce_today_generate_routing():
    shape = _shape(B=2, T=512, H=3, S=6, BS=8)
    for pattern, params in [(Pattern("zipf", exponent=1.0), {"exponent": 1.0}),
                            (Pattern("zipf", exponent=2.5), {"exponent": 2.5}),
                            (Pattern("sink-heavy", sinks=4), {"sinks": 4})]:
        want = generate_routing(pattern, shape, seed=11)
        assert np.array_equal(generate(FAMILIES[pattern.name], params, shape, seed=11), want)


def test_zipf_exponent_zero_is_uniform_and_large_exponents_pick_the_lowest_blocks():
    shape = _shape(T=4096, H=1, S=4, BS=16)
    flat = generate(FAMILIES["zipf"], {"exponent": 0.0}, shape, seed=3)[0, -256:, 0]
    counts = np.bincount(flat.reshape(-1), minlength=256)
    assert counts[:8].sum() < 0.1 * counts.sum()  # not concentrated on the low blocks
    steep = generate(FAMILIES["zipf"], {"exponent": 64.0}, shape, seed=3)
    assert steep[0, -1, 0].tolist() == [3, 2, 1, 0]


def test_hot_block_every_query_that_sees_it_selects_it():
    shape = _shape(T=256, H=2, S=4, BS=8)  # M = 32
    for b in (0, 5, 31):
        bi = generate(FAMILIES["hot-block"], {"block": b}, shape, seed=0)
        for t in range(shape.T):
            cur, n = t // 8, min(4, t // 8 + 1)
            recent = list(range(cur, cur - n, -1))
            if cur >= b and b not in recent:
                recent = recent[:-1] + [b]  # b plus the n-1 most recent blocks
            want = sorted(recent, reverse=True) + [-1] * (4 - n)
            assert bi[0, t, 0].tolist() == want == bi[0, t, 1].tolist(), (b, t)


def test_sink_heavy_placement_on_one_head():
    shape = _shape(T=256, H=4, S=4, BS=8)
    bi = generate(FAMILIES["sink-heavy"], {"sinks": 2, "heads": [2]}, shape, seed=0)
    assert bi[0, -1, 2].tolist() == [31, 30, 1, 0]
    assert bi[0, -1, 0].tolist() == [31, 30, 29, 28]


@pytest.mark.parametrize("name,params,fragment", [
    ("sink-heavy", {"sinks": 4}, "config.patterns[2].sinks: 4 must be below S=4"),
    ("sink-heavy", {"sinks": 0}, "config.patterns[2].sinks: 0 is below the minimum 1"),
    ("sink-heavy", {"sinks": 2.0}, "config.patterns[2].sinks: 2.0 is not an integer"),
    ("sink-heavy", {"sinks": True}, "config.patterns[2].sinks: True is not an integer"),
    ("zipf", {"exponent": -0.5}, "config.patterns[2].exponent: -0.5 is below the minimum 0"),
    ("zipf", {"exponent": float("nan")}, "config.patterns[2].exponent: nan is not finite"),
    ("zipf", {"exponent": float("inf")}, "config.patterns[2].exponent: inf is not finite"),
    ("zipf", {"exponent": 65}, "config.patterns[2].exponent: 65 is above the maximum 64"),
    ("zipf", {"exponent": "1"}, "config.patterns[2].exponent: '1' is not a number"),
    ("zipf", {"sinks": 3}, "config.patterns[2].sinks: only the sink-heavy and tile-sink-heavy patterns take 'sinks'"),
    ("hot-block", {"block": 16}, "config.patterns[2].block: 16 is outside 0..M-1 = 0..15"),
    ("hot-block", {"block": 1, "heads": [2]}, "config.patterns[2].heads: head 2 is outside 0..H-1 = 0..1"),
    ("hot-block", {"block": 1, "heads": [1, 1]}, "config.patterns[2].heads: [1, 1] lists a head twice"),
    ("hot-block", {"block": 1, "heads": []}, "config.patterns[2].heads: [] must be a non-empty list"),
])
def test_bad_parameters_are_one_line_errors_naming_the_field(name, params, fragment):
    with pytest.raises(UserError) as err:
        validate_params(FAMILIES[name], {"name": name, **params}, _shape(), where="config.patterns[2]")
    assert str(err.value).startswith(fragment) and "\n" not in str(err.value)


def test_specs_follow_the_contract():
    for name, spec in FAMILIES.items():
        assert spec.name == name and callable(GENERATORS[name]) and spec.marker and spec.description
        assert set(spec.defaults) <= set(spec.params)
        assert "heads" in spec.params
        for rule in spec.params.values():
            assert rule["type"] in ("integer", "number", "array")
        assert validate_params(spec, dict(spec.defaults), _shape(T=256, S=8)) == dict(spec.defaults)


def test_module_doctest():
    assert doctest.testmod(families).failed == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes_and_params())
def test_invariants_hold_on_the_exponential_race_path_too(case):
    """Budgets at zero send every colliding row to the race (small shapes otherwise never reach it)."""
    shape, name, params, seed = case
    with patch.multiple(sampler, FIRST_ROUND_STALL_BUDGET=0, STALL_BUDGET=0, LEGACY_FALLBACK_BUDGET=0):
        bi = generate(FAMILIES[name], params, shape, seed)
        assert np.array_equal(bi, generate(FAMILIES[name], params, shape, seed))
    assert routing_violations(bi, shape) == []
    assert effective_edges(bi, shape.block_size) == closed_form_edges(shape)
