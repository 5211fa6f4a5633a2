"""Issue 14: the wrapper_extra stage (the official wrapper's allocations and dq/dk reductions) is an optional
stage: a result that timed it records the itemised ratio (stage sum + wrapper_extra) / full_bwd, which
validate recomputes; results recorded before it existed stay valid."""

from __future__ import annotations

import json

import pytest

from nsa_exp.analysis.summary import summary_frame
from nsa_exp.checking.bench_result import build
from nsa_exp.checking.validate import validate_bytes
from nsa_exp.core.measurement import Measurement
from nsa_exp.core.records import recorded_stages
from nsa_exp.core.stages import BACKWARD_STAGES
from nsa_exp.gpu.gates import gate_detail
from nsa_exp.gpu.telemetry import throttled
from nsa_exp.io.config_files import config_from_dict
from nsa_exp.io.schemas import schema_errors
from tests.helpers import REPO

H100 = REPO / "results" / "raw" / "e1_h100.json"


def _with_wrapper_extra(extra_ms: float) -> dict:
    doc = json.loads(H100.read_text())
    config = config_from_dict(doc["config"], source=doc["config_path"])
    m = Measurement.from_document(doc, config)
    records = m.records
    for r in records:
        r["ms"] = {**{k: v for k, v in r["ms"].items() if k != "full_bwd"}, "wrapper_extra": extra_ms,
                   "full_bwd": r["ms"]["full_bwd"]}
    keep = ("edges", "fanin", "query_span", "adjacent_gap", "reproduces_official", "memory")
    return build(
        name=doc["name"], config=config, gates=doc["gates"], gate_detail=gate_detail, records=records,
        timing=m.timing(recorded_stages(records), resumed=False),
        per_pattern={n: {k: p[k] for k in keep} for n, p in doc["patterns"].items()},
        autotune=doc["autotune"], telemetry={"available": True}, metadata=doc["metadata"],
        wall_seconds=doc["wall_seconds"], throttled=throttled).to_json()


def test_a_result_with_wrapper_extra_records_the_itemised_ratio_and_validates():
    result = _with_wrapper_extra(0.5)
    assert result["timing"]["stages"][-2:] == ["wrapper_extra", "full_bwd"]
    assert not schema_errors(result, "result", "result")
    rec = result["patterns"]["local"]["stage_sum_vs_full_bwd"]
    stage_sum = sum(result["patterns"]["local"]["stages"][s]["median_ms"] for s in BACKWARD_STAGES)
    assert rec["wrapper_extra_median_ms"] == 0.5
    assert rec["itemised_ratio"] == pytest.approx((stage_sum + 0.5) / rec["full_bwd_median_ms"])
    report = validate_bytes(json.dumps(result).encode(), "with_extra.json")
    failed = [c for c in report["checks"] if not c["passed"]]
    assert not failed, failed
    frame = summary_frame(result)
    assert len(frame) == 4 * 7 and "wrapper_extra" in set(frame["stage"])


def test_a_wrong_itemised_ratio_fails_ratio_recompute():
    result = _with_wrapper_extra(0.5)
    result["patterns"]["zipf"]["stage_sum_vs_full_bwd"]["itemised_ratio"] = 0.5
    report = validate_bytes(json.dumps(result).encode(), "tampered.json")
    check = next(c for c in report["checks"] if c["name"] == "ratio_recompute")
    assert not check["passed"] and "zipf" in json.dumps(check)


def test_results_recorded_before_wrapper_extra_still_validate():
    report = validate_bytes(H100.read_bytes(), "e1_h100.json")
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
