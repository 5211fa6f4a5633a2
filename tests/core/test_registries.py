"""The Stage table and the Pattern registry: one declaration, every consumer derived from it."""

from __future__ import annotations

import jsonschema
import numpy as np
import pytest

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.core.families import (
    BASELINE_PATTERN,
    FAMILIES,
    TUNE_PATTERN,
    Family,
    pattern_from_entry,
    register_family,
)
from nsa_exp.core.stages import BACKWARD_STAGES, PANEL_ORDER, STAGE_NAMES, STAGES
from nsa_exp.errors import UserError
from nsa_exp.io.config_files import config_from_dict
from nsa_exp.routing.patterns import GENERATORS, Rows, generate_routing, register_generator, routing_violations
from tests.helpers import primary_config_dict

SHAPE = Shape(B=1, T=64, HQ=16, H=2, K=16, V=16, S=4, block_size=4, dtype="float16")


def test_builtin_patterns_are_registered_in_order():
    assert list(FAMILIES)[:4] == ["local", "uniform", "sink-heavy", "zipf"]
    assert BASELINE_PATTERN in FAMILIES and TUNE_PATTERN in FAMILIES


def test_every_family_has_a_generator_or_a_gpu_tier_function_and_valid_parameter_schemas():
    for name, row in FAMILIES.items():
        assert (row.external is None) == (name in GENERATORS), name
        jsonschema.Draft202012Validator.check_schema({"type": "object", "properties": dict(row.params)})


def test_stage_table_is_the_one_vocabulary():
    assert STAGE_NAMES == ("selection_fwd", "delta_preprocess", "csr", "dq_core", "dkv_core", "wrapper_extra",
                           "full_bwd")
    assert BACKWARD_STAGES == ("delta_preprocess", "csr", "dq_core", "dkv_core")
    assert set(PANEL_ORDER) <= set(STAGE_NAMES)
    assert all(s.panel_title for s in STAGES if s.name in PANEL_ORDER)


def test_rows_follow_c_order_of_b_t_h():
    shape = Shape(B=2, T=8, HQ=16, H=2, K=16, V=16, S=2, block_size=2, dtype="float16")
    rows = Rows.for_shape(shape)
    r = (1 * shape.T + 5) * shape.H + 1
    assert (rows.t[r], rows.head[r], rows.cur[r], rows.n[r]) == (5, 1, 2, 2)
    assert rows.M == 4


def test_a_registered_pattern_is_usable_from_a_config():
    def oldest(rows, params, rng):
        j = np.arange(rows.S)[None, :]
        return np.where(j < rows.n[:, None], j + params["skip"] * 0, -1)

    row = Family("oldest", {"skip": {"type": "integer", "minimum": 0}}, {"skip": 0}, "x", "oldest n(t)")
    try:
        register_family(row)
        register_generator("oldest", oldest)
        with pytest.raises(ValueError, match="already registered"):
            register_family(row)
        raw = primary_config_dict()
        raw["patterns"].append({"name": "oldest", "skip": 1})
        cfg = config_from_dict(raw)
        assert cfg.pattern("oldest").skip == 1
        bi = generate_routing(cfg.pattern("oldest"), SHAPE, seed=0)
        assert routing_violations(bi, SHAPE) == []
        raw["patterns"][-1]["skip"] = -1
        with pytest.raises(UserError, match=r"config.patterns\[4\].skip: -1 is below the minimum 0"):
            config_from_dict(raw)
    finally:
        FAMILIES.pop("oldest", None)
        GENERATORS.pop("oldest", None)


@pytest.mark.parametrize(("entry", "fragment"), [
    ({"name": "zipf", "exponent": -1}, "config.patterns[0].exponent: -1 is below the minimum 0"),
    ({"name": "sink-heavy", "sinks": 1.5}, "config.patterns[0].sinks: 1.5 is not an integer"),
    ({"name": "uniform", "width": 3}, "config.patterns[0].width: pattern 'uniform' takes no parameter 'width'"),
    ({"name": "striped"}, "config.patterns[0].name: unknown pattern 'striped'"),
])
def test_bad_pattern_parameters_are_named(entry, fragment):
    with pytest.raises(UserError) as err:
        pattern_from_entry(entry, "config.patterns[0]")
    assert fragment in str(err.value)


def test_defaults_are_filled_and_recorded():
    assert pattern_from_entry({"name": "sink-heavy"}, "p").to_dict() == {"name": "sink-heavy", "sinks": 4}
    assert Pattern("local").to_dict() == {"name": "local"}
