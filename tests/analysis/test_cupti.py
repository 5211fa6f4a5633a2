"""Issue 14: the CUPTI cross-check — profiler events aggregate into per-stage kernel times (a pure function,
fed fake FunctionEvent-like events here), and validate holds them against the CUDA-event medians."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from nsa_exp.analysis.cupti import cupti_block, disagreement, kernel_ms, range_label
from nsa_exp.checking.validate import validate_bytes
from nsa_exp.io.schemas import schema_errors
from tests.helpers import REPO

H100 = REPO / "results" / "raw" / "e1_h100.json"


@dataclass
class FakeEvent:
    name: str
    device_time_total: float  # µs, as torch.autograd.profiler_util.FunctionEvent reports it
    device_type: str = "DeviceType.CUDA"  # the GPU-side gpu_user_annotation; "DeviceType.CPU" for the CPU range


def test_kernel_times_are_grouped_by_range_and_ordered_by_call():
    events = [FakeEvent(range_label("zipf", "full_bwd", 1), 84_000.0), FakeEvent("aten::sum", 500.0),
              FakeEvent(range_label("zipf", "full_bwd", 0), 83_000.0), FakeEvent("nsa_cupti/bad", 1.0),
              FakeEvent(range_label("local", "csr", 0), 300.0), FakeEvent("cudaLaunchKernel", 0.0),
              FakeEvent(range_label("zipf", "full_bwd", 0), 1_300.0, "DeviceType.CPU")]  # ATen's kernels: not twice
    assert kernel_ms(events) == {"zipf": {"full_bwd": [83.0, 84.0]}, "local": {"csr": [0.3]}}


def test_the_agreement_rule_is_tight_for_one_launch_and_looser_for_the_wrapper():
    assert disagreement("dkv_core", 60.0, 58.0) is None            # 3.3% < 5%
    assert "tight" in disagreement("dkv_core", 60.0, 56.0)          # 6.7%
    assert disagreement("delta_preprocess", 0.30, 0.285) is None   # 15 µs < 20 µs floor
    assert disagreement("full_bwd", 80.0, 72.0) is None             # 10% of gaps + allocations: allowed
    assert "loose" in disagreement("full_bwd", 80.0, 90.0)          # kernels longer than the window: not
    assert "no kernel time" in disagreement("csr", 0.4, 0.0)


def _with_cupti(scale: dict[str, float]) -> dict:
    doc = json.loads(H100.read_text())
    calls = {p: {s: [st["median_ms"] * scale.get(s, 0.99)] * 5 for s, st in v["stages"].items()}
             for p, v in doc["patterns"].items()}
    doc["cupti"] = cupti_block(calls, 5)
    return doc


def _check(doc: dict) -> dict:
    report = validate_bytes(json.dumps(doc).encode(), "with_cupti.json")
    return next(c for c in report["checks"] if c["name"] == "cupti_agreement")


def test_validate_passes_agreeing_medians_and_names_the_stage_that_disagrees():
    good = _with_cupti({})
    assert not schema_errors(good, "result", "result")
    assert _check(good)["passed"]
    bad = _check(_with_cupti({"dq_core": 0.8}))
    assert not bad["passed"] and bad["n_failures"] == 4
    assert all(f["path"].endswith(".dq_core") for f in bad["failures"])


def test_a_kernel_median_that_does_not_recompute_from_its_calls_fails():
    doc = _with_cupti({})
    doc["cupti"]["median_kernel_ms"]["local"]["csr"] = 9.0
    assert "the calls give" in _check(doc)["failures"][0]["message"]


def test_results_without_a_cupti_block_have_no_such_check():
    report = validate_bytes(H100.read_bytes(), "e1_h100.json")
    assert "cupti_agreement" not in [c["name"] for c in report["checks"]]
    with pytest.raises(StopIteration):
        _check(json.loads(H100.read_text()))
