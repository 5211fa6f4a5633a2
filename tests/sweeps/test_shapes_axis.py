"""A sweep's shapes axis (issue 32's penalty map): batch, KV heads and group size per point, each point's id and
config, the memory refusal before any GPU work, the table's shape and full-backward columns, validate's checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nsa_exp.checking.validate import validate_path
from nsa_exp.core.config import bytes_needed
from nsa_exp.errors import UserError
from nsa_exp.io.config_files import config_from_dict
from nsa_exp.sweeps.plan import expand_shapes, load_sweep, point_path
from nsa_exp.sweeps.run import run_sweep
from nsa_exp.sweeps.table import read_sweep_table, sweep_table
from tests.helpers import REPO, assert_one_line_error, run_cli
from tests.sweeps.test_sweep import fake_measure, measured_ids


def _config(tmp_path: Path, **extra) -> Path:
    raw = {"schema_version": "1.0", "name": "shapes", "base_config": "configs/e1_h100.json", "lengths": [8192],
           "stages": ["csr", "dkv_core", "full_bwd"], "gpu": {"required_name": "H200"},
           "shapes": [{"B": [1, 2], "H": 2}, {"B": 1, "H": 2, "G": 32}],
           "patterns": [{"name": "sink-heavy", "sinks": 4}], **extra}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(raw))
    return path


def test_each_shape_sets_B_H_and_HQ_of_its_points_and_labels_their_ids(tmp_path):
    points = load_sweep(_config(tmp_path))
    assert [p.point_id for p in points] == ["T8192-B1-H2-G16-sink-heavy-sinks4", "T8192-B2-H2-G16-sink-heavy-sinks4",
                                            "T8192-B1-H2-G32-sink-heavy-sinks4"]
    shapes = [config_from_dict(p.config, source="t").shape for p in points]
    assert [(s.B, s.H, s.HQ, s.T, s.K, s.V, s.S) for s in shapes] == [
        (1, 2, 32, 8192, 192, 128, 16), (2, 2, 32, 8192, 192, 128, 16), (1, 2, 64, 8192, 192, 128, 16)]
    assert [p.shape for p in points] == [{"B": 1, "H": 2, "G": 16}, {"B": 2, "H": 2, "G": 16},
                                         {"B": 1, "H": 2, "G": 32}]
    assert all(p.refused is None for p in points)


def test_a_shape_listed_by_two_items_is_one_shape_and_an_unset_axis_is_the_base_shapes():
    base = {"B": 1, "H": 4, "HQ": 64}
    assert expand_shapes([{"B": [1, 2]}, {"B": 2, "H": 4}], base) == [{"B": 1, "H": 4, "G": 16},
                                                                      {"B": 2, "H": 4, "G": 16}]
    assert expand_shapes(None, base) == [None]


def test_a_group_size_fla_refuses_is_one_line_naming_the_point(tmp_path):
    with pytest.raises(UserError, match=r"^sweep point T8192-B1-H2-G4-sink-heavy-sinks4: .*power of two >= 16"):
        load_sweep(_config(tmp_path, shapes=[{"G": [16, 4], "H": 2}]))


def test_a_point_the_gpu_cannot_hold_is_refused_in_one_line_and_never_measured(tmp_path):
    cfg = _config(tmp_path, lengths=[131072], shapes=[{"B": [1, 6], "H": 4}])
    points = load_sweep(cfg)
    small, big = points
    assert small.refused is None
    need = bytes_needed(config_from_dict(big.config, source="t").shape, 2, big.config["timing"]["l2_flush_bytes"])
    assert need > 141 * 2**30  # more than an H200 has, by the same estimate the point's own check uses
    assert big.refused == (f"needs ~{need / 2**30:.1f} GiB of GPU memory, more than the 134 GiB an H200 SXM 141GB "
                           "reports; not attempted")
    measured_ids.clear()
    done = run_sweep([big], tmp_path / "out", allow_gpu=True, measure=fake_measure)
    assert done == {"skipped": [], "ran": [], "refused": [big.point_id]} and measured_ids == []
    assert not point_path(tmp_path / "out", big).exists()


def test_shape_points_validate_and_their_table_has_shape_excess_and_full_backward_columns(tmp_path):
    points = load_sweep(_config(tmp_path, shapes=[{"B": [1, 2], "H": 2}]))
    out = tmp_path / "sweeps" / "shapes"
    run_sweep(points, out, allow_gpu=True, measure=fake_measure)
    for p in points:
        report = validate_path(point_path(out, p))
        assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    frame = sweep_table(out, tmp_path / "sweeps" / "shapes.csv")
    assert list(frame.columns[-8:]) == ["B", "H", "G", "dkv_excess_ms", "full_bwd_median_ms",
                                        "local_full_bwd_median_ms", "full_bwd_ratio_vs_local", "full_bwd_excess_ms"]
    for row in frame.to_dict("records"):
        assert row["dkv_excess_ms"] == pytest.approx(row["dkv_median_ms"] - row["local_dkv_median_ms"])
        assert row["full_bwd_ratio_vs_local"] == pytest.approx(row["full_bwd_median_ms"]
                                                               / row["local_full_bwd_median_ms"])
        assert row["full_bwd_excess_ms"] > 0  # the fake GPU's call costs grow with the fan-in maximum
    assert list(read_sweep_table(tmp_path / "sweeps" / "shapes.csv")["B"]) == [1, 2]
    assert validate_path(tmp_path / "sweeps" / "shapes.csv")["passed"]


def test_a_point_whose_recorded_shape_is_not_its_own_fails_validate(tmp_path):
    point = load_sweep(_config(tmp_path, shapes=[{"B": 2, "H": 2}]))[0]
    doc = fake_measure(point, True, tmp_path)
    doc["point"]["shape"]["B"] = 1
    path = tmp_path / f"{doc['point_id']}.json"
    path.write_text(json.dumps(doc))
    failed = [c for c in validate_path(path)["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["point_consistent"]
    assert "$.point.shape" in json.dumps(failed) and "but T, packing, shape and pattern give" in json.dumps(failed)


def test_a_point_against_its_schema_fails_the_table_and_sweep_plot_refuses_in_one_line(tmp_path):
    """A point of the table's folder whose pattern block was emptied was 'internal error TypeError' in validate and
    sweep-plot (an attacker, 2026-12-07): the table FAILs naming the point's schema, sweep-plot refuses in one line."""
    src = REPO / "results" / "sweeps"
    shutil.copytree(src / "sweep_skew_h200", tmp_path / "sweep_skew_h200")
    shutil.copy(src / "sweep_skew_h200.csv", tmp_path)
    point = sorted((tmp_path / "sweep_skew_h200").glob("T*.json"))[0]
    doc = json.loads(point.read_text())
    doc["patterns"][next(iter(doc["patterns"]))] = {}
    point.write_text(json.dumps(doc))
    table = str(tmp_path / "sweep_skew_h200.csv")
    proc = run_cli("validate", table)
    assert proc.returncode == 1 and f"{point.name} fails its schema" in proc.stdout, (proc.stdout[-800:], proc.stderr)
    # the point is there and the other rows in order: said once, not as every row out of place or a missing file
    assert "out of the table's order" not in proc.stdout and "no point file" not in proc.stdout, proc.stdout[-1500:]
    assert_one_line_error(run_cli("sweep-plot", "--table", table, "--out-dir", str(tmp_path / "fig")), "--table")
    assert not (tmp_path / "fig").exists()
