"""A derived document computed again is kept when only its metadata would change (``write_json_unless_same``):
its sha256, which other documents record, stays; anything else is written as ``write_json`` writes it."""

from __future__ import annotations

import json

from nsa_exp.io.store import file_sha256, write_json_unless_same
from tests.helpers import REPO

CALIBRATION = REPO / "results" / "model" / "h200_BQ1_w4_s2.json"


def _doc(dirty: bool = False) -> dict:
    doc = json.loads(CALIBRATION.read_text())
    doc["metadata"] = {**doc["metadata"], "created_utc": "2030-01-01T00:00:00Z",
                       "git": {**doc["metadata"]["git"], "dirty": dirty}}
    return doc


def test_the_same_document_but_for_its_metadata_is_kept_byte_for_byte(tmp_path):
    path = tmp_path / "cal.json"
    path.write_bytes(CALIBRATION.read_bytes())
    sha = file_sha256(path)
    assert write_json_unless_same(path, _doc(), "model_calibration") is False
    assert write_json_unless_same(path, _doc(dirty=True), "model_calibration") is False  # clean file, dirty tree
    assert file_sha256(path) == sha


def test_another_document_a_dirty_file_from_a_clean_tree_or_a_damaged_file_is_replaced(tmp_path):
    path = tmp_path / "cal.json"
    changed = _doc()
    changed["command"] = "python -m nsa_exp calibrate --points elsewhere"
    path.write_bytes(CALIBRATION.read_bytes())
    assert write_json_unless_same(path, changed, "model_calibration") is True  # command is not volatile by default
    assert json.loads(path.read_text())["command"] == changed["command"]
    assert write_json_unless_same(path, _doc(), "model_calibration", ("metadata", "command")) is False
    path.write_text(json.dumps(_doc(dirty=True)))
    assert write_json_unless_same(path, _doc(), "model_calibration") is True  # a clean tree replaces a dirty one
    assert json.loads(path.read_text())["metadata"]["git"]["dirty"] is False
    for damaged in ("{", "[]"):
        path.write_text(damaged)
        assert write_json_unless_same(path, _doc(), "model_calibration") is True
        assert json.loads(path.read_text())["kind"] == "model_calibration"
