"""--routing-file: formats, each validation error (one line, first offending (b, t, h, slot)), edges, CLI."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.errors import UserError
from nsa_exp.routing.edges import closed_form_edges
from nsa_exp.routing.files import file_routings, load_routing_file, routing_file_report
from nsa_exp.routing.patterns import generate_routing
from tests.helpers import assert_one_line_error, primary_config_dict, run_cli

SHAPE = Shape(B=1, T=64, HQ=32, H=2, K=16, V=16, S=4, block_size=8, dtype="float16")  # M = 8


def _good(pattern: str = "zipf") -> np.ndarray:
    p = Pattern(pattern, exponent=1.0) if pattern == "zipf" else Pattern(pattern)
    return generate_routing(p, SHAPE, seed=5)


def _error(tmp_path, arr, name="r.npy") -> str:
    path = tmp_path / name
    np.save(path, arr)
    with pytest.raises(UserError) as err:
        load_routing_file(path, SHAPE)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"routing file {path}")
    return msg


def test_npy_npz_pt_load_and_report(tmp_path):
    bi = _good()
    np.save(tmp_path / "a.npy", bi.astype(np.int64))
    np.savez(tmp_path / "one.npz", whatever=bi)
    np.savez(tmp_path / "named.npz", other=np.zeros(3), block_indices=bi)
    torch.save(torch.from_numpy(bi.astype(np.int64)), tmp_path / "t.pt")
    torch.save({"block_indices": torch.from_numpy(bi), "step": torch.tensor(3)}, tmp_path / "d.pt")
    for name, key in [("a.npy", None), ("one.npz", "whatever"), ("named.npz", "block_indices"), ("t.pt", None),
                      ("d.pt", "block_indices")]:
        loaded, info = load_routing_file(tmp_path / name, SHAPE)
        assert loaded.dtype == np.int32 and np.array_equal(loaded, bi), name
        assert info["key"] == key
        assert info["sha256"] == hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
    rep = routing_file_report(tmp_path / "a.npy", SHAPE)
    assert rep["edges"] == rep["closed_form_edges"] == closed_form_edges(SHAPE) and rep["equal_to_closed_form"]
    assert rep["dtype"] == "int64" and rep["fanin"]["mean"] > 0


def test_edges_need_not_equal_the_closed_form_and_the_report_says_so(tmp_path):
    bi = _good()
    bi[0, 40:, 1, 3] = -1  # fewer edges, -1 in a slot that is not last is allowed
    bi[0, 40:, 1, [1, 3]] = bi[0, 40:, 1, [3, 1]]
    np.save(tmp_path / "fewer.npy", bi)
    rep = routing_file_report(tmp_path / "fewer.npy", SHAPE)
    assert rep["edges"] == closed_form_edges(SHAPE) - 24 and not rep["equal_to_closed_form"]
    assert "not comparable at equal edges" in rep["note"]
    np.save(tmp_path / "full.npy", _good("local"))
    file_routings([str(tmp_path / "full.npy")], SHAPE, require_equal=True)  # the closed form: accepted
    with pytest.raises(UserError, match=r"--require-equal-edges: closed form \d+ edges, but .*fewer.npy=\d+"):
        file_routings([str(tmp_path / "full.npy"), str(tmp_path / "fewer.npy")], SHAPE, require_equal=True)
    with pytest.raises(UserError, match="fewer.npy"):  # one file is enough: held to the closed form, not to the others
        file_routings([str(tmp_path / "fewer.npy")], SHAPE, require_equal=True)


def test_each_validation_error_names_the_first_offending_slot(tmp_path):
    assert "dtype float32, expected int32 or int64" in _error(tmp_path, _good().astype(np.float32))
    assert "dtype int16" in _error(tmp_path, _good().astype(np.int16))
    assert "shape [1, 64, 2, 5], expected [1, 64, 2, 4]" in _error(tmp_path, np.full((1, 64, 2, 5), -1, np.int32))
    bi = _good()
    bi[0, 50, 1, 2] = -2
    bi[0, 60, 0, 0] = 99
    assert "block -2 at (b, t, h, slot)=(0, 50, 1, 2) is outside -1..M-1 = -1..7" in _error(tmp_path, bi)
    bi = _good()
    bi[0, 60, 0, 0] = 8
    assert "block 8 at (b, t, h, slot)=(0, 60, 0, 0) is outside -1..M-1" in _error(tmp_path, bi)
    bi = _good()
    bi[0, 17, 1, 3] = 3  # t=17 sees blocks 0..2
    bi[0, 30, 0, 0] = 7
    assert "block 3 at (b, t, h, slot)=(0, 17, 1, 3) is not causal (query t=17 sees blocks 0..2)" in _error(
        tmp_path, bi)
    bi = _good("local")
    bi[0, 33, 1, 3] = bi[0, 33, 1, 1]
    bi[0, 40, 0, 2] = bi[0, 40, 0, 0]
    assert f"block {bi[0, 33, 1, 1]} at (b, t, h, slot)=(0, 33, 1, 3) repeats an earlier slot" in _error(tmp_path, bi)


def test_unreadable_files_are_one_line_errors(tmp_path):
    for name, data in [("bad.npy", b"not numpy"), ("bad.npz", b"PK\x03\x04 junk"), ("bad.pt", b"junk")]:
        (tmp_path / name).write_bytes(data)
        want = "not a .npy file" if name.endswith(".npy") else "cannot be read as"  # a .npy is checked by magic
        with pytest.raises(UserError, match=f"routing file .*{name}: {want}") as err:
            load_routing_file(tmp_path / name, SHAPE)
        assert "\n" not in str(err.value)
    np.savez(tmp_path / "two.npz", a=_good(), b=_good())
    with pytest.raises(UserError, match=r"\.npz holds 2 arrays \['a', 'b'\]; name the routing 'block_indices'"):
        load_routing_file(tmp_path / "two.npz", SHAPE)
    with pytest.raises(UserError, match="does not exist"):
        load_routing_file(tmp_path / "missing.npy", SHAPE)
    with pytest.raises(UserError, match="unsupported suffix '.csv'"):
        load_routing_file(tmp_path / "r.csv", SHAPE)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(UserError, match="cannot be read as .npy"):
        load_routing_file(tmp_path / "obj.npy", SHAPE)


def _small_config(tmp_path) -> str:
    cfg = primary_config_dict()
    cfg["shape"]["T"] = 2048  # M = 32 >= S = 16: fast pattern generation
    path = tmp_path / "small.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_cli_routing_file_reports_edges_and_broken_file_exits_2(tmp_path):
    config = _small_config(tmp_path)
    shape = Shape(**{**primary_config_dict()["shape"], "T": 2048})
    np.save(tmp_path / "mine.npy", generate_routing(Pattern("sink-heavy", sinks=2), shape, 0))
    proc = run_cli("routing", "--config", config, "--routing-file", str(tmp_path / "mine.npy"), "--json",
                   "--output", str(tmp_path / "rep.json"))
    assert proc.returncode == 0, proc.stderr
    files = json.loads(proc.stdout)["routing_files"]
    assert files[0]["edges"] == closed_form_edges(shape) and files[0]["equal_to_closed_form"]
    assert json.loads((tmp_path / "rep.json").read_text())["routing_files"][0]["sha256"] == files[0]["sha256"]
    bad = generate_routing(Pattern("local"), shape, 0)
    bad[0, 100, 3, 0] = 2  # t=100 sees blocks 0..1
    np.save(tmp_path / "bad.npy", bad)
    proc = run_cli("routing", "--config", config, "--routing-file", str(tmp_path / "mine.npy"),
                   "--routing-file", str(tmp_path / "bad.npy"))
    assert_one_line_error(proc, "bad.npy", "(b, t, h, slot)=(0, 100, 3, 0) is not causal")
    assert proc.stdout == ""  # nothing printed before the files are validated


def test_a_pt_holding_a_module_is_refused_in_plain_words(tmp_path):
    """A .pt of a saved module (not plain tensors): torch's weights-only refusal was passed on with terminal escapes
    and advice to load an untrusted pickle, cut mid-sentence (an attacker, 2026-12-06); now what it means here."""
    torch.save(torch.nn.Linear(2, 2), tmp_path / "m.pt")
    with pytest.raises(UserError) as err:
        load_routing_file(tmp_path / "m.pt", Shape(**primary_config_dict()["shape"]))
    message = str(err.value)
    assert "objects other than tensors" in message and "torch.save(block_indices" in message
    assert "\x1b" not in message and "\n" not in message
