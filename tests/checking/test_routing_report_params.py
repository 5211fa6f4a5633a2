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


@pytest.fixture(scope="module")
def packed_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rr_packed")
    config = json.loads((REPO / "configs" / "e1_h200_docs8192.json").read_text())
    config["shape"]["T"], config["packing"] = 4096, {"documents": 2048}
    (folder / "packed.json").write_text(json.dumps(config))
    proc = run_cli("routing", "--config", str(folder / "packed.json"), "--output", str(folder / "rr.json"))
    assert proc.returncode == 0, proc.stderr
    return folder / "rr.json"


def test_a_report_of_a_packed_config_validates(packed_report):
    """A packed config's report failed ``routing_report_config`` on every host: the config's ``cu_seqlens`` (a
    numpy array) could not be written as JSON to compare (found on an H100 call of 2026-12-07)."""
    assert _failed(packed_report) == []


def test_a_report_whose_documents_are_not_its_configs_fails(packed_report, tmp_path):
    doc = json.loads(packed_report.read_text())
    doc["packing"]["cu_seqlens"] = [0, 1024, 4096]
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc))
    assert "routing_report_config" in _failed(forged)
