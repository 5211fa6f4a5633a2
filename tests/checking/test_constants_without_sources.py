"""What a document can be held to with no source at hand: the code's own constants and what its other fields
allow. An attacker's edits that PASSed with their sources found nowhere (2026-12-07)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsa_exp.checking.validate import validate_path
from tests.helpers import REPO


def _failures(path: Path) -> list[str]:
    report = validate_path(path)
    return [f["path"] for c in report["checks"] if not c["passed"] for f in c.get("failures", [])]


@pytest.mark.parametrize(("edit", "named"), [
    (lambda d: d["stages"]["dkv_core"].__setitem__("space_size", 40), "$.stages.dkv_core.space_size"),
    (lambda d: d["stages"]["dq_core"]["cells"][0].__setitem__("compile_seconds", 9999.0),
     "$.stages.*.cells[*].compile_seconds"),
])
def test_an_autotune_matrix_s_space_and_compile_times_agree_with_its_cells_and_wall_time(tmp_path, edit, named):
    doc = json.loads((REPO / "results/autotune/e1_h200.json").read_text())
    edit(doc)
    path = tmp_path / "e1_h200.json"
    path.write_text(json.dumps(doc))
    assert named in _failures(path)


@pytest.mark.parametrize(("key", "value"), [("level", 0.5), ("seed", 1), ("method", "bca"), ("resamples", 10)])
def test_a_compare_records_compare_s_own_bootstrap_with_its_sides_found_nowhere(tmp_path, key, value):
    doc = json.loads((REPO / "results/compare/e1_h200_vs_e1_h200_repeat.json").read_text())
    doc["a"]["path"], doc["b"]["path"] = "results/raw/gone_a.json", "results/raw/gone_b.json"  # rebuilt from nothing
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    assert _failures(path) == []  # the untouched copy, its sides not at hand: passes (listed unverified)
    doc["bootstrap"][key] = value
    path.write_text(json.dumps(doc))
    assert f"$.bootstrap.{key}" in _failures(path)


@pytest.mark.parametrize(("edit", "named"), [
    (lambda d: d["bootstrap"].__setitem__("confidence_level", 0.5), "$.bootstrap.confidence_level"),
    (lambda d: d["bootstrap"].__setitem__("resamples", 10**9), "$.bootstrap.resamples"),
    (lambda d: d.__setitem__("flush_bytes", 1), "$.flush_bytes"),
])
def test_a_flush_study_records_its_own_bootstrap_and_a_flush_larger_than_the_l2_with_its_source_found_nowhere(
        tmp_path, edit, named):
    doc = json.loads((REPO / "results/studies/h200_flush_policy.json").read_text())
    doc["source"] = "results/studies/gone.raw.json"
    path = tmp_path / "f.json"
    path.write_text(json.dumps(doc))
    assert _failures(path) == []  # the untouched copy: passes, its rows unverified
    edit(doc)
    path.write_text(json.dumps(doc))
    assert named in _failures(path)


@pytest.mark.parametrize(("key", "value"), [("block_size", 65), ("S", 9)])
def test_a_method_study_s_oracle_ran_at_the_study_s_shape(tmp_path, key, value):
    doc = json.loads((REPO / "results/studies/h200_method_study_oracle.raw.json").read_text())
    doc["oracle"]["shape"][key] = value
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    assert "$.oracle.shape" in _failures(path)
