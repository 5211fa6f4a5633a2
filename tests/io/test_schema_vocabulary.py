"""schemas/ are generated from the vocabulary: they match it, drift is caught, and a registered family is writable."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest

from nsa_exp import SCHEMA_DIR
from nsa_exp.checking.kinds import KIND_RECORDS
from nsa_exp.checking.sweep_autotune import build
from nsa_exp.checking.validate import validate_bytes
from nsa_exp.core import stages
from nsa_exp.core.enums import VOCABULARY
from nsa_exp.core.families import FAMILIES
from nsa_exp.core.kinds import DOCUMENT_KINDS
from nsa_exp.io.schema_sync import drifted, render, sync_schemas
from nsa_exp.io.schemas import load_schema, schema_errors
from tests.helpers import REPO, run_cli


def test_committed_schemas_match_the_vocabulary():
    assert drifted() == {}
    assert drifted(records=KIND_RECORDS) == {}  # and the kinds with a record, their records
    proc = run_cli("schemas")
    assert proc.returncode == 0 and "match the vocabulary" in proc.stdout


def test_every_registered_family_and_stage_is_accepted_by_the_summary_row_and_result_schemas():
    assert load_schema("summary_row")["properties"]["pattern"]["anyOf"][0]["enum"] == list(FAMILIES)
    assert load_schema("summary_row")["properties"]["stage"]["enum"] == list(stages.STAGE_NAMES)
    result = json.loads((REPO / "results/raw/e1_h100_dev.json").read_text())
    result["patterns"]["hot-block"] = result["patterns"].pop("zipf")
    result["patterns"]["hot-block"]["params"] = {"name": "hot-block", "block": 0}
    assert schema_errors(result, "result", "$") == []  # hot-block was refused here before the enums were generated


def test_every_marked_node_names_a_vocabulary_entry_and_every_kind_has_its_schema():
    names = set()

    def walk(node):
        if isinstance(node, dict):
            names.update(node.get("x-vocabulary", {}).values())
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for path in SCHEMA_DIR.glob("*.schema.json"):
        walk(json.loads(path.read_text()))
    assert names and names <= set(VOCABULARY)
    for kind in DOCUMENT_KINDS:
        schema = load_schema(kind.schema)
        assert schema["properties"]["kind"] == {"const": kind.name}
        assert schema["properties"]["schema_version"] == {"const": kind.version}


def test_a_stale_schema_is_named_and_rewritten(tmp_path):
    folder = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, folder)
    stale = json.loads((folder / "summary_row.schema.json").read_text())
    stale["properties"]["stage"]["enum"].remove("wrapper_extra")
    (folder / "summary_row.schema.json").write_text(json.dumps(stale, indent=2) + "\n")
    assert [p.name for p in drifted(folder)] == ["summary_row.schema.json"]
    assert [p.name for p in sync_schemas(write=True, folder=folder)] == ["summary_row.schema.json"]
    assert drifted(folder) == {}


def test_a_new_stage_row_reaches_every_stage_enum_on_regeneration(monkeypatch):
    new = stages.Stage("new_stage", "new stage", None, False, "some_kernel", None)
    monkeypatch.setattr(stages, "STAGE_NAMES", (*stages.STAGE_NAMES, new.name))
    monkeypatch.setattr(stages, "LEGACY_STAGE_NAMES", (*stages.LEGACY_STAGE_NAMES, new.name))
    monkeypatch.setattr(stages, "SWEEPABLE_STAGES", (*stages.SWEEPABLE_STAGES, new.name))
    row = render(load_schema("summary_row"), "summary_row")
    assert row["properties"]["stage"]["enum"][-1] == "new_stage"
    result = render(load_schema("result"), "result")
    pattern_stages = result["$defs"]["pattern"]["properties"]["stages"]
    assert "new_stage" in pattern_stages["required"] and "new_stage" in pattern_stages["properties"]
    sweep = render(load_schema("sweep_point"), "sweep_point")
    assert "new_stage" in sweep["properties"]["timing"]["properties"]["stages"]["items"]["enum"]


def test_a_new_optional_stage_keeps_every_committed_result_valid_under_the_regenerated_schema(monkeypatch):
    names = (*stages.STAGE_NAMES[:-1], "new_stage", stages.STAGE_NAMES[-1])
    monkeypatch.setattr(stages, "STAGE_NAMES", names)
    monkeypatch.setattr(stages, "OPTIONAL_STAGES", (*stages.OPTIONAL_STAGES, "new_stage"))
    lists = stages.recorded_stage_lists()
    assert len(lists) == 4 and lists[0] == list(stages.LEGACY_STAGE_NAMES) and lists[-1] == list(names)
    schema = render(load_schema("result"), "result")
    enum = schema["properties"]["timing"]["properties"]["stages"]["enum"]
    for path in sorted((REPO / "results" / "raw").glob("*.json")):
        assert json.loads(path.read_text())["timing"]["stages"] in enum, path.name


def test_every_committed_schema_is_valid_under_its_metaschema():
    """What nsa_exp/io/schemas.py no longer checks at run time: every schema under schemas/ is a valid JSON Schema
    of the draft it declares (and an invalid one is caught: a negative minItems)."""
    kinds = sorted(p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json"))
    assert len(kinds) >= 18
    for kind in kinds:
        schema = load_schema(kind)
        jsonschema.validators.validator_for(schema).check_schema(schema)
    bad = {**load_schema(kinds[0]), "minItems": -1}
    with pytest.raises(jsonschema.exceptions.SchemaError):
        jsonschema.validators.validator_for(bad).check_schema(bad)


def test_a_kind_with_a_record_has_its_schema_file_generated_whole_from_it(tmp_path):
    """sweep_autotune's module declares its record: a hand edit of its schema file drifts, and ``--write``
    restores the record's schema (a closed object of its fields, the autotuned stages required)."""
    assert "sweep_autotune" in KIND_RECORDS
    folder = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, folder)
    path = folder / "sweep_autotune.schema.json"
    original = path.read_text()
    schema = json.loads(original)
    assert schema["additionalProperties"] is False and schema["required"] == ["schema_version", "kind", "best_config"]
    assert schema["properties"]["best_config"]["required"] == list(stages.AUTOTUNED_STAGES)
    del schema["properties"]["best_config"]["additionalProperties"]  # a hand edit: any value passes
    path.write_text(json.dumps(schema, indent=2) + "\n")
    assert drifted(folder) == {}  # as a hand-written file it is consistent ...
    assert list(drifted(folder, KIND_RECORDS)) == [path]  # ... but not its record's
    assert sync_schemas(write=True, folder=folder, records=KIND_RECORDS) == [path]
    assert path.read_text() == original
    path.unlink()  # a missing generated file drifts too
    assert sync_schemas(write=True, folder=folder, records=KIND_RECORDS) == [path] and path.read_text() == original


@pytest.mark.parametrize("warps", [True, 4.0, 0])
def test_a_sweep_autotune_config_is_typed_by_its_record(warps):
    """Its record types each stage's config (``AutotuneConfig``): ``num_warps`` true or 4.0 matched FLA's 1 and 4
    by value and passed (a re-attacker, 2026-12-07)."""
    config = {"kwargs": {}, "num_warps": 4, "num_stages": 2}
    doc = build({s: dict(config, kwargs={"BQ": 1} if s == "dkv_core" else {}) for s in stages.AUTOTUNED_STAGES})
    assert validate_bytes(json.dumps(doc).encode(), "_autotune.json")["passed"]
    doc["best_config"]["dq_core"]["num_warps"] = warps
    report = validate_bytes(json.dumps(doc).encode(), "_autotune.json")
    failed = [c["name"] for c in report["checks"] if not c["passed"]]
    assert failed == ["schema"], failed
