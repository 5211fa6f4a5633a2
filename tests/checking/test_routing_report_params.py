"""A routing report's pattern parameters are judged as written (nsa_exp/checking/routing_report.py): a config whose
placement lists its ``heads`` validates, and a report whose parameter equals its config's only as a Python number
(``sinks: true`` or ``1.0`` for 1) fails; attacker's and new-user trials of 2026-12-05 (the first failed
``routing_report_config`` on tuple vs list, the others passed because ``1 == 1.0 == True``)."""

from __future__ import annotations

import json

import pytest

from nsa_exp.checking.validate import validate_paths
from tests.helpers import REPO, run_cli


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rr")
    config = json.loads((REPO / "configs" / "e1_h200.json").read_text())
    config["shape"]["T"] = 2048
    config["patterns"] = [{"name": "local"}, {"name": "sink-heavy", "sinks": 1, "heads": [0, 1]},
                          {"name": "zipf", "exponent": 1.0}]
    (folder / "tiny.json").write_text(json.dumps(config))
    proc = run_cli("routing", "--config", str(folder / "tiny.json"), "--output", str(folder / "rr.json"))
    assert proc.returncode == 0, proc.stderr
    return folder / "rr.json"


def _failed(path) -> list[str]:
    return [c["name"] for r in validate_paths([str(path)]) for c in r["checks"] if not c["passed"]]


def test_a_report_of_a_config_with_a_heads_list_validates(report):
    assert _failed(report) == []


@pytest.mark.parametrize("pattern, key, value", [("sink-heavy", "sinks", True), ("sink-heavy", "sinks", 1.0),
                                                 ("zipf", "exponent", True)])
def test_a_parameter_equal_only_as_a_number_fails(report, tmp_path, pattern, key, value):
    doc = json.loads(report.read_text())
    doc["patterns"][pattern]["params"][key] = value
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc))
    assert {"routing_report_recompute", "routing_report_config"} <= set(_failed(forged))
