"""The typed records: every committed result and sweep point reads into them and dumps back byte for byte."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Literal

import jsonschema
import pytest

from nsa_exp.core.records import BenchResult, Keywords, Record, StageStats, StageSum, SweepPoint, json_schema
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



@dataclass(frozen=True)
class _Toy(Record):
    mode: Literal["a", "b"]
    pair: tuple[int, float]
    sums: dict[str, StageSum]
    count: Annotated[int, Keywords(minimum=1)]
    note: str | None = None


@dataclass(frozen=True)
class _Opaque(Record):
    when: set[int]


def test_a_records_json_schema_follows_its_fields_and_refuses_a_hint_with_no_json_form():
    """The schema generated from a record (a new kind's schema file, issue 29): every field a property, the
    optional ones (default None: left out of the JSON) not required, nested records closed objects; a type with
    no JSON form is refused by name rather than written as an empty schema."""
    schema = json_schema(_Toy)
    assert schema["required"] == ["mode", "pair", "sums", "count"] and schema["additionalProperties"] is False
    assert schema["properties"]["mode"] == {"enum": ["a", "b"]}
    assert schema["properties"]["pair"] == {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "number"}],
                                            "minItems": 2, "maxItems": 2}
    assert schema["properties"]["count"] == {"type": "integer", "minimum": 1}
    assert schema["properties"]["note"] == {"type": "string"}  # written only when set
    inner = schema["properties"]["sums"]["additionalProperties"]
    assert inner["required"] == ["stage_sum_median_ms", "full_bwd_median_ms", "ratio"]
    assert inner["properties"]["wrapper_extra_median_ms"] == {"type": "number"}
    sums = StageSum(6.0, 5.0, 1.2)
    doc = _Toy("a", (1, 2.5), {"p": sums}, 3).to_json()
    jsonschema.Draft202012Validator(schema).validate(doc)  # what to_json writes, the schema accepts
    for bad in ({**doc, "count": 0}, {**doc, "mode": "c"}, {**doc, "pair": [1]}, {**doc, "extra": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(schema).validate(bad)
    with pytest.raises(TypeError, match="set"):
        json_schema(_Opaque)
