"""Bad input found by a hostile session (issue 10/14/15 surfaces): each is one line naming the field, exit 2,
no traceback and nothing written; and the validator catches what it can recompute (packing, CUPTI rounds)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from nsa_exp.checking.validate import validate_path
from nsa_exp.cli import main
from nsa_exp.io.progress import is_progress_line
from tests.helpers import REPO

CAL = "results/model/h200_BQ1_w4_s2.json"
H200 = REPO / "results" / "raw" / "e1_h200.json"
PACKED = REPO / "results" / "sweeps" / "sweep_packing_h200" / "T32768-docs8192-sink-heavy-sinks4.json"


def _one_line(capsys, argv: list[str], *fragments: str) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and not is_progress_line(ln)]
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), (code, err)
    assert "Traceback" not in err[0] and "internal error" not in err[0]
    for f in fragments:
        assert f in err[0], (f, err[0])


def test_compare_refuses_to_overwrite_an_input_or_to_compare_a_file_with_itself(tmp_path, capsys):
    a = tmp_path / "A.json"
    shutil.copy(H200, a)
    _one_line(capsys, ["compare", str(a), "results/raw/e1_h200_repeat.json", "--output", str(a)],
              "--output", "is an input")
    assert json.loads(a.read_text())["kind"] == "bench_result"
    _one_line(capsys, ["compare", str(H200), str(H200), "--output", ""], "same file")
    _one_line(capsys, ["compare", "A", "B", "--noise-from", "X"], "--noise-from", "expected 2 arguments")
    _one_line(capsys, ["compare", "A", "B", "--fail-on", "bogus"], "--fail-on")


@pytest.mark.parametrize(("packing", "field"), [
    ('{"documents": 512, "documents": 256}', "duplicate key 'documents'"),
    ('{"distribution": "lognormal", "mean": 512, "sigma": 1e308, "seed": 0}', "--packing.sigma"),
    ('{"distribution": "lognormal", "mean": 1e300, "sigma": 1, "seed": 0}', "--packing.mean"),
])
def test_predict_refuses_a_bad_packing_in_one_line(capsys, packing, field):
    _one_line(capsys, ["predict", "--calibration", CAL, "--pattern", "sink-heavy", "--T", "1024", "--packing", packing],
              field)


def test_predict_refuses_a_T_with_fewer_than_S_blocks(capsys):
    _one_line(capsys, ["predict", "--calibration", CAL, "--pattern", "local", "--T", "512"], "--T", "S=16")


def test_sweep_refuses_an_empty_grid_and_bad_slurm_json(tmp_path, capsys):
    cfg = tmp_path / "s.json"
    cfg.write_text(json.dumps({"schema_version": "1.0", "name": "s", "base_config": "configs/e1_h100.json",
                               "lengths": [8192], "stages": ["dkv_core"], "patterns": [],
                               "gpu": {"required_name": "H200"}}))
    _one_line(capsys, ["sweep", "--config", str(cfg)], "grid is empty")
    _one_line(capsys, ["sweep", "--config", "configs/sweep_x2_h200.json", "--executor", "slurm", "--slurm", "{bad"],
              "--slurm")


def test_routing_refuses_a_packed_npz_where_the_layout_is_dense_and_two_files_of_one_stem(tmp_path, capsys):
    cfg = json.loads((REPO / "configs" / "e1_h100.json").read_text())
    cfg["shape"]["T"] = 1024
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    assert main(["routing", "--config", str(tmp_path / "c.json"), "--save", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    bi = np.load(tmp_path / "r" / "local.npy")
    np.savez(tmp_path / "packed.npz", block_indices=bi, cu_seqlens=np.array([0, 512, 1024], dtype=np.int32))
    _one_line(capsys, ["routing", "--config", str(tmp_path / "c.json"), "--routing-file", str(tmp_path / "packed.npz")],
              "cu_seqlens", "packed")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        shutil.copy(tmp_path / "r" / "local.npy", tmp_path / d / "same.npy")
    _one_line(capsys, ["routing", "--config", str(tmp_path / "c.json"), "--routing-file", str(tmp_path / "a/same.npy"),
                       "--routing-file", str(tmp_path / "b/same.npy")], "file:same", "is taken")


def test_validate_refuses_a_companion_it_cannot_read(capsys):
    _one_line(capsys, ["validate", "results/summaries/e1_h200.csv", "--also", "no/such.json"], "--also")


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["packing"].update(cu_seqlens_sha256="a" * 64), "$.packing.cu_seqlens_sha256"),
    (lambda d: d["packing"]["cu_seqlens"].__setitem__(1, 8256), "$.packing.cu_seqlens"),
    (lambda d: d["packing"].update(documents=5), "$.packing.documents"),
    (lambda d: d.pop("packing"), "$.packing"),
])
def test_validate_recomputes_a_packed_points_packing_record(tmp_path, edit, field):
    doc = json.loads(PACKED.read_text())
    assert validate_path(PACKED)["passed"]
    edit(doc)
    edited = tmp_path / PACKED.name  # a sweep writes <point_id>.json (point_consistent)
    edited.write_text(json.dumps(doc))
    failed = [c for c in validate_path(edited)["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["packing_recompute"]
    assert failed[0]["failures"][0]["path"] == field


def test_validate_holds_the_cupti_calls_to_the_recorded_rounds(tmp_path):
    doc = json.loads(H200.read_text())
    doc["cupti"]["rounds"] = 7
    (tmp_path / "r.json").write_text(json.dumps(doc))
    failed = [c for c in validate_path(tmp_path / "r.json")["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["cupti_agreement"]
    assert "5 calls, but cupti.rounds = 7" in failed[0]["failures"][0]["message"]


def test_a_packed_bench_result_is_held_to_the_packed_closed_form():
    packed = REPO / "results" / "raw" / "e1_h200_docs8192.json"  # bench on the H200's varlen path
    report = validate_path(packed)
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    doc = json.loads(packed.read_text())
    assert doc["edges"]["closed_form"] == 1974272 < 2066432  # four documents of 8192: fewer slots than dense
