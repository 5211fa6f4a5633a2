"""--routing-file in bench and sweep, and validate --routing-file: validated before any GPU work, recorded
with sha256 and edges vs the closed form, one sweep point per file, re-checked only when the file is given."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nsa_exp.checking.routing_checks import NOT_SUPPLIED
from nsa_exp.checking.validate import validate_path
from nsa_exp.core.config import Pattern, Shape
from nsa_exp.core.protocol import round_orders
from nsa_exp.errors import UserError
from nsa_exp.routing.files import file_routings
from nsa_exp.routing.patterns import generate_routing
from nsa_exp.sweeps.plan import load_sweep, point_done, point_path
from nsa_exp.sweeps.run import run_sweep
from nsa_exp.sweeps.table import sweep_table
from tests.helpers import REPO, assert_one_line_error, primary_config_dict, run_cli
from tests.sweeps.test_sweep import fake_measure


def _local(T: int) -> np.ndarray:
    return generate_routing(Pattern("local"), Shape(**{**primary_config_dict()["shape"], "T": T}), seed=0)


def test_bench_refuses_a_broken_or_unequal_routing_file_before_any_gpu_work(tmp_path):
    bi = _local(32768)
    bi[0, 100, 2, 1] = bi[0, 100, 2, 0]  # a duplicate within (query 100, head 2)
    np.save(tmp_path / "dup.npy", bi)
    out = tmp_path / "r.json"
    proc = run_cli("bench", "--config", "configs/e1_h100.json", "--output", str(out), "--summary",
                   str(tmp_path / "r.csv"), "--routing-file", str(tmp_path / "dup.npy"))
    assert_one_line_error(proc, "dup.npy", "(b, t, h, slot)=(0, 100, 2, 1)")
    fewer = _local(32768)
    fewer[0, 5000, 0, 3] = -1  # valid, one edge short of the closed form
    np.save(tmp_path / "fewer.npy", fewer)
    proc = run_cli("bench", "--config", "configs/e1_h100.json", "--output", str(out), "--summary",
                   str(tmp_path / "r.csv"), "--routing-file", str(tmp_path / "fewer.npy"), "--require-equal-edges")
    assert_one_line_error(proc, "--require-equal-edges", "closed form 2066432", "fewer.npy=2066431")
    assert not out.exists()


def test_a_routing_file_is_one_sweep_point_at_its_own_T_resumed_by_sha256_and_revalidated_on_request(tmp_path):
    mine = tmp_path / "mine.npy"
    bi = _local(4096)
    bi[0, 4000, 1, 3] = -1  # edges differ from the closed form: recorded, not refused
    np.save(mine, bi)
    cfg = {"schema_version": "1.0", "name": "f", "base_config": "configs/e1_h100.json", "lengths": [8192],
           "stages": ["csr", "dkv_core"], "gpu": {"required_name": "H200"}, "patterns": [{"name": "local"}],
           "routing_files": [str(mine)]}
    (tmp_path / "s.json").write_text(json.dumps(cfg))
    points = load_sweep(tmp_path / "s.json")
    assert [(p.point_id, p.T) for p in points] == [("T8192-local", 8192), ("T4096-file-mine", 4096)]
    out = tmp_path / "out"
    run_sweep(points, out, allow_gpu=True, measure=fake_measure)  # the real arm times the file beside local
    doc = json.loads(point_path(out, points[1]).read_text())
    rec = doc["routing_files"]["file:mine"]
    assert rec["path"] == str(mine) and not rec["equal_to_closed_form"] and rec["edges"] == rec["closed_form_edges"] - 1
    assert list(sweep_table(out).family) == ["file:mine", "local"]

    checks = {c["name"]: c for c in validate_path(point_path(out, points[1]))["checks"]}
    assert checks["routing_file_recompute"]["passed"]  # not supplied, but at its recorded path: found, re-checked
    mine.rename(tmp_path / "away.npy")
    report = validate_path(point_path(out, points[1]))  # nowhere it must be: listed unverified, never passed
    assert "routing_file_recompute" not in [c["name"] for c in report["checks"]]
    assert any(u["why"] == NOT_SUPPLIED and "file:mine" in u["path"] for u in report["unverified"])
    (tmp_path / "away.npy").rename(mine)
    checks = {c["name"]: c for c in validate_path(point_path(out, points[1]), routing_files=[str(mine)])["checks"]}
    assert checks["routing_file_recompute"]["passed"]

    bi[0, 4001, 1, 3] = -1  # the file changes: its point is no longer done, and the old result no longer matches
    np.save(mine, bi)
    checks = {c["name"]: c for c in validate_path(point_path(out, points[1]), routing_files=[str(mine)])["checks"]}
    paths = [f["path"] for f in checks["routing_file_recompute"]["failures"]]
    assert "$.routing_files.file:mine.sha256" in paths and "$.patterns.file:mine.edges" in paths
    reloaded = load_sweep(tmp_path / "s.json")
    assert [p.point_id for p in reloaded if not point_done(point_path(out, p), p)] == ["T4096-file-mine"]


def test_a_broken_routing_file_in_a_sweep_is_refused_when_the_sweep_loads(tmp_path):
    bi = _local(4096)
    bi[0, 64, 3, 0] = 2  # query 64 sees blocks 0..1 only
    np.save(tmp_path / "late.npy", bi)
    cfg = json.loads((REPO / "configs/sweep_x2_h200.json").read_text())
    (tmp_path / "s.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match=r"late\.npy: block 2 at \(b, t, h, slot\)=\(0, 64, 3, 0\) is not causal"):
        load_sweep(tmp_path / "s.json", routing_files=[str(tmp_path / "late.npy")])


def test_a_bench_result_that_timed_a_routing_file_validates_and_its_file_rechecks(tmp_path):
    """The committed H200 bench, as if it had also timed `routing --save`'s zipf.npy as file:zipf."""
    doc = json.loads((REPO / "results/raw/e1_h200_post.json").read_text())
    np.save(tmp_path / "zipf.npy", generate_routing(Pattern("zipf", exponent=1.0), Shape(**doc["shape"]),
                                                     doc["config"]["seeds"]["routing"]))
    _, reports = file_routings([str(tmp_path / "zipf.npy")], Shape(**doc["shape"]))
    doc["patterns"]["file:zipf"] = {**doc["patterns"]["zipf"], "params": {"name": "file:zipf"}}
    doc["autotune"]["per_pattern"]["file:zipf"] = doc["autotune"]["per_pattern"]["zipf"]
    doc["edges"] = {**doc["edges"], "per_pattern": {**doc["edges"]["per_pattern"], "file:zipf": 2066432},
                    "exempt": ["file:zipf"]}
    next(g for g in doc["gates"] if g["name"] == "equal_edges")["detail"] = doc["edges"]
    t = doc["timing"]
    t["round_orders"] = round_orders(list(doc["patterns"]), t["warmup_rounds"] + t["repetitions"], t["order_mode"],
                                     t["order_seed"])
    sample = doc["telemetry"]["samples"][0]
    doc["telemetry"]["samples"] = [{**sample, "round": r, "pattern": p, "warmup": r < t["warmup_rounds"]}
                                   for r, order in enumerate(t["round_orders"]) for p in order]
    doc["routing_files"] = reports
    (tmp_path / "r.json").write_text(json.dumps(doc))
    report = validate_path(tmp_path / "r.json", routing_files=[str(tmp_path / "zipf.npy")])
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    assert "routing_file_recompute" in [c["name"] for c in report["checks"]]
    doc["routing_files"]["file:zipf"]["fanin"]["max"] += 1  # a tampered figure is named
    (tmp_path / "r.json").write_text(json.dumps(doc))
    report = validate_path(tmp_path / "r.json", routing_files=[str(tmp_path / "zipf.npy")])
    failed = {c["name"]: c for c in report["checks"] if not c["passed"]}
    assert [f["path"] for f in failed["routing_file_recompute"]["failures"]] == ["$.routing_files.file:zipf.fanin.max"]
