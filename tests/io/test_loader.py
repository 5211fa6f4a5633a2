"""The one strict loader: every document read back goes through ``load_document`` (``load_validated`` when
every check of the validator must pass)."""

from __future__ import annotations

import json

import pytest

from nsa_exp.checking.validate import load_validated
from nsa_exp.errors import UserError
from nsa_exp.io.store import load_document
from tests.helpers import REPO

DEV = REPO / "results" / "raw" / "e1_h100_dev.json"


def test_a_committed_result_loads_with_every_invariant():
    doc = load_validated(DEV, ("bench_result",))
    assert doc["kind"] == "bench_result"


@pytest.mark.parametrize(("text", "fragment"), [
    ('{"kind": "bench_result", "kind": "x"}', "unreadable (duplicate key 'kind')"),
    ('{"kind": "bench_result", "wall_seconds": NaN}', "unreadable (bare NaN token"),
    ('{"kind": "check_report"}', "not a bench result (kind 'check_report')"),
    ('{"kind": "bench_result"}', "'schema_version' is a required property"),
])
def test_bad_documents_are_refused_in_one_line(tmp_path, text, fragment):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        load_document(path, ("bench_result",), "--benchmark-result r.json")
    assert fragment in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("--benchmark-result r.json")


def test_invariants_are_checked_when_asked(tmp_path):
    doc = json.loads(DEV.read_text())
    doc["patterns"]["local"]["stages"]["csr"]["median_ms"] *= 2
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    load_document(path, ("bench_result",))  # schema-valid
    with pytest.raises(UserError, match=r"does not validate \(stats_recompute.*; rerun"):
        load_validated(path, ("bench_result",), hint="rerun")


def test_missing_file_names_the_fix(tmp_path):
    with pytest.raises(UserError, match="no such file; run `invoke bench` first"):
        load_document(tmp_path / "none.json", ("bench_result",), missing_hint="run `invoke bench` first")
