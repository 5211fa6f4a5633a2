"""validate given an input config (a new user's ``validate configs/e1_h200.json``) fails on its kind and says what
the file is; a result stripped of its kind gets no such hint (it is no config)."""

from __future__ import annotations

import json

import pytest

from nsa_exp.checking.validate import validate_path
from tests.helpers import REPO


def _kind_failure(path) -> str:
    report = validate_path(path)
    assert not report["passed"]
    (kind,) = [c for c in report["checks"] if c["name"] == "kind"]
    assert not kind["passed"]
    return " ".join(f["message"] for f in kind["failures"])


@pytest.mark.parametrize(("config", "schema"), [("configs/e1_h200.json", "config"),
                                                ("configs/sweep_T_h200.json", "sweep_config"),
                                                ("configs/release_h200.json", "release_config")])
def test_an_input_config_is_named_as_one(config, schema):
    assert f"input config, schemas/{schema}.schema.json" in _kind_failure(REPO / config)


def test_a_result_without_its_kind_is_not_called_a_config(tmp_path):
    doc = json.loads((REPO / "results" / "raw" / "e1_h200.json").read_text())
    del doc["kind"]
    path = tmp_path / "no_kind.json"
    path.write_text(json.dumps(doc))
    message = _kind_failure(path)
    assert "unknown document kind None" in message and "input config" not in message
