"""The typed records: every committed result and sweep point reads into them and dumps back byte for byte."""

from __future__ import annotations

import json

import pytest

from nsa_exp.core.records import BenchResult, StageStats, StageSum, SweepPoint
from nsa_exp.errors import UserError
from nsa_exp.io.store import load_record, write_record
from nsa_exp.io.strict_json import dumps_strict
from tests.helpers import REPO

COMMITTED = sorted((REPO / "results" / "raw").glob("*.json")) + sorted((REPO / "results" / "sweeps").glob("*/T*.json"))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.relative_to(REPO).as_posix())
def test_a_committed_document_round_trips_through_its_record_byte_for_byte(path):
    text = path.read_text()
    record = (BenchResult if json.loads(text)["kind"] == "bench_result" else SweepPoint).from_json(json.loads(text))
    assert dumps_strict(record.to_json()) == text


def test_the_records_type_what_readers_use():
    run = load_record(REPO / "results" / "raw" / "e1_h200.json", BenchResult)
    local = run.patterns["local"]
    assert isinstance(local.stages["dkv_core"], StageStats) and isinstance(local.stages["dkv_core"].raw_ms, tuple)
    assert local.median("dkv_core") == local.stages["dkv_core"].median_ms
    assert local.stage_sum_vs_full_bwd.itemised_ratio is not None and run.gpu_name.startswith("NVIDIA H200")
    assert set(run.best_configs()) == {"selection_fwd", "dq_core", "dkv_core"}


def test_stage_sum_and_stage_stats_recompute_what_bench_records():
    s = StageStats.of([3.0, 1.0, 2.0], [5.0])
    assert (s.median_ms, s.min_ms, s.n_obs, s.warmup_ms) == (2.0, 1.0, 3, (5.0,))
    medians = {"delta_preprocess": 1.0, "csr": 2.0, "dq_core": 3.0, "dkv_core": 4.0, "full_bwd": 8.0}
    assert StageSum.of(medians).to_json() == {"stage_sum_median_ms": 10.0, "full_bwd_median_ms": 8.0, "ratio": 1.25}
    assert StageSum.of({**medians, "wrapper_extra": 2.0}).itemised_ratio == 1.5


def test_a_key_the_record_does_not_know_is_refused_in_one_line(tmp_path):
    doc = json.loads((REPO / "results" / "sweeps" / "sweep_T_h200" / "T131072-local.json").read_text())
    with pytest.raises(ValueError, match="unknown key"):
        SweepPoint.from_json({**doc, "extra": 1})
    doc["patterns"]["local"]["extra"] = 1  # the sweep_point schema leaves a pattern entry open
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"^p\.json: PatternRun: unknown key\(s\) \['extra'\]$"):
        load_record(path, SweepPoint, "p.json")


def test_a_record_is_written_through_its_schema(tmp_path):
    run = load_record(REPO / "results" / "raw" / "e1_h100_dev.json", BenchResult)
    write_record(tmp_path / "r.json", run)
    assert (tmp_path / "r.json").read_text() == (REPO / "results" / "raw" / "e1_h100_dev.json").read_text()
