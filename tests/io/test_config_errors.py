"""A bad config fails with one line naming the field and the fix, exit code 2, no traceback."""

from __future__ import annotations

import json

import pytest

from nsa_exp.errors import UserError
from nsa_exp.io.config_files import config_from_dict, load_config
from tests.helpers import assert_one_line_error, primary_config_dict, run_cli


def test_primary_config_loads_with_the_primary_shape():
    cfg = load_config("configs/e1_h100.json")
    s = cfg.shape
    got = (s.B, s.T, s.HQ, s.H, s.K, s.V, s.S, s.block_size, s.dtype)
    assert got == (1, 32768, 64, 4, 192, 128, 16, 64, "bfloat16")
    assert [p.name for p in cfg.patterns] == ["local", "uniform", "sink-heavy", "zipf"]
    assert cfg.pattern("sink-heavy").sinks == 4 and cfg.pattern("zipf").exponent == 1.0


def _mutated(path: tuple, value):
    raw = primary_config_dict()
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return raw


@pytest.mark.parametrize(("path", "value", "fragments"), [
    (("patterns", 0, "name"), "striped", ["config.patterns[0].name", "striped"]),
    (("shape", "T"), 1000, ["config.shape.T", "not a multiple of block_size 64"]),
    (("smoke", "naive", "S"), 8, ["config.smoke.naive.S", "exceeds the number of KV blocks M=T/block_size=4"]),
    (("shape", "HQ"), 32, ["config.shape.HQ", "power of two >= 16"]),
    (("shape", "HQ"), 96, ["config.shape.HQ", "power of two >= 16"]),
    (("shape", "dtype"), "int8", ["config.shape.dtype"]),
    (("timing", "repetitions"), 0, ["config.timing.repetitions"]),
    (("seeds", "routing"), -1, ["config.seeds.routing"]),
    (("smoke", "staged", "T"), 2000, ["config.smoke.staged.T", "multiple of block_size"]),
])
def test_bad_field_is_named_in_the_error(path, value, fragments):
    with pytest.raises(UserError) as err:
        config_from_dict(_mutated(path, value))
    for fragment in fragments:
        assert fragment in str(err.value)


def test_unknown_key_is_rejected():
    raw = primary_config_dict()
    raw["timing"]["warmup"] = 3
    with pytest.raises(UserError, match=r"config.timing: Additional properties are not allowed \('warmup'"):
        config_from_dict(raw)


def test_parameter_on_the_wrong_pattern_is_rejected():
    raw = primary_config_dict()
    raw["patterns"][0]["sinks"] = 2
    with pytest.raises(UserError, match=r"config.patterns\[0\].sinks: only the sink-heavy and tile-sink-heavy "):
        config_from_dict(raw)


def test_duplicate_pattern_is_rejected():
    raw = primary_config_dict()
    raw["patterns"].append({"name": "local"})
    with pytest.raises(UserError, match="listed twice"):
        config_from_dict(raw)


@pytest.mark.parametrize(("content", "fragment"), [
    ('{"schema_version": "1.0",', "invalid JSON at line 1"),
    ("[1, 2]", "top level must be a JSON object"),
])
def test_unparseable_config_file(tmp_path, content, fragment):
    path = tmp_path / "c.json"
    path.write_text(content)
    assert_one_line_error(run_cli("routing", "--config", str(path)), fragment)


def test_missing_config_file():
    assert_one_line_error(run_cli("routing", "--config", "does/not/exist.json"), "does not exist")


def test_cli_names_the_bad_field(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_mutated(("shape", "T"), 1000)))
    assert_one_line_error(run_cli("routing", "--config", str(path)), "config.shape.T", "block_size")
