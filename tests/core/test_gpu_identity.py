"""``metadata.gpu`` has one home, :class:`nsa_exp.core.records.GpuIdentity` (issue 29: its keys were spelled in the
GPU tier's writer, the checks and the report): what every committed GPU run recorded is that record's fields, in
their order, and reads back whole."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from nsa_exp.core.records import GpuIdentity
from tests.corpus.runner import REPO

FIELDS = [f.name for f in dataclasses.fields(GpuIdentity)]
RECORDED = [(p, doc["metadata"]["gpu"]) for p in sorted((REPO / "results").rglob("*.json"))
            if isinstance(doc := json.loads(p.read_text()), dict) and isinstance(doc.get("metadata"), dict)
            and isinstance(doc["metadata"].get("gpu"), dict)]


def test_every_committed_gpu_record_is_the_records_fields_in_order():
    assert len(RECORDED) > 100  # bench results, sweep points, peers, releases, reports ...
    for path, gpu in RECORDED:
        assert [k for k in FIELDS if k in gpu] == list(gpu), path.relative_to(REPO)
        assert dataclasses.asdict(GpuIdentity.read(gpu)) == {k: gpu.get(k) for k in FIELDS}, path


def test_the_gpu_tiers_writer_writes_the_records_keys(monkeypatch):
    torch = pytest.importorskip("torch")
    from nsa_exp.gpu import telemetry  # noqa: PLC0415 - the GPU tier, with the device faked

    props = SimpleNamespace(name="NVIDIA H200", multi_processor_count=132, total_memory=150109880320, major=9,
                            minor=0, L2_cache_size=62914560)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    nvml = {"driver": "580.159.04", "nvml_name": "NVIDIA H200", "max_sm_clock_mhz": 1980, "max_mem_clock_mhz": 3201,
            "power_limit_w": 700.0, "applications_sm_clock_mhz": 1980}
    written = telemetry.gpu_identity(nvml)
    assert list(written) == FIELDS and GpuIdentity.read(written) == GpuIdentity(**written)
    # without NVML: torch's facts and no driver
    assert list(telemetry.gpu_identity({})) == ["name", "sm_count", "total_memory_bytes", "compute_capability",
                                                "l2_cache_bytes", "driver"]
