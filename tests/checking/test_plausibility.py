"""What physics and the calendar allow in a GPU result's host facts (issue 28's attack trial: a forged temperature,
power draw, future date or a driver too old for the recorded CUDA passed validate): each forgery fails
``validate`` at its own path, and the committed run passes."""

from __future__ import annotations

import json

import pytest

from nsa_exp.checking.validate import validate_bytes
from tests.helpers import REPO

STOP = REPO / "results" / "raw" / "e1_h200_stop.json"


def _failures(doc: dict) -> dict[str, list[str]]:
    report = validate_bytes(json.dumps(doc).encode(), "forged.json")
    return {c["name"]: [f["path"] for f in c.get("failures", [])] for c in report["checks"] if not c["passed"]}


def _set(doc: dict, path: list, value) -> dict:
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value", "check", "where"), [
    (["telemetry", "samples", 3, "temperature_c"], 900, "telemetry_plausible", "$.telemetry.samples[3].temperature_c"),
    (["telemetry", "samples", 3, "temperature_c"], -40, "telemetry_plausible", "$.telemetry.samples[3].temperature_c"),
    (["telemetry", "samples", 5, "power_w"], 5000.0, "telemetry_plausible", "$.telemetry.samples[5].power_w"),
    (["telemetry", "samples", 5, "power_w"], 0.0, "telemetry_plausible", "$.telemetry.samples[5].power_w"),
    (["metadata", "created_utc"], "2099-01-01T00:00:00Z", "metadata_plausible", "$.metadata.created_utc"),
    (["metadata", "gpu", "driver"], "470.57.02", "metadata_plausible", "$.metadata.gpu.driver"),
    (["metadata", "gpu", "power_limit_w"], 1e6, "metadata_plausible", "$.metadata.gpu.power_limit_w"),
    # JSON true is no number, though Python's bool is an int (attack trial: a limit of `true` passed)
    (["metadata", "gpu", "power_limit_w"], True, "metadata_plausible", "$.metadata.gpu.power_limit_w"),
    (["metadata", "gpu", "driver"], 580.65, "metadata_plausible", "$.metadata.gpu.driver"),
    (["telemetry", "samples", 2, "temperature_c"], True, "schema", "$.telemetry.samples[2].temperature_c"),
])
def test_a_host_fact_physics_or_the_calendar_rules_out_fails_validate_at_its_path(path, value, check, where):
    doc = json.loads(STOP.read_text())
    failed = _failures(_set(doc, path, value))
    assert check in failed and any(p.startswith(where) for p in failed[check]), failed


def test_the_committed_run_is_within_every_bound():
    failed = _failures(json.loads(STOP.read_text()))
    assert "telemetry_plausible" not in failed and "metadata_plausible" not in failed


def test_deleting_the_power_limit_leaves_a_ceiling_not_an_open_bound():
    doc = json.loads(STOP.read_text())
    del doc["metadata"]["gpu"]["power_limit_w"]
    doc["telemetry"]["samples"][0]["power_w"] = 99999.0
    failed = _failures(doc)
    assert "$.telemetry.samples[0].power_w" in failed.get("telemetry_plausible", []), failed


def test_a_run_dated_before_the_commit_it_records_fails_and_an_unknown_commit_is_not_judged():
    """A result records the commit it ran (metadata.git.sha), which existed before it: the committed stop run ran
    532868e at 2026-12-04 19:45 UTC; dated a month earlier it fails (a forger's leftover of 2026-12-04). A commit
    this repository does not have is not judged by its time."""
    from nsa_exp.checking.record_checks import host_problems  # noqa: PLC0415
    from nsa_exp.io.metadata import commit_time  # noqa: PLC0415

    meta = json.loads((REPO / "results" / "raw" / "e1_h200_stop.json").read_text())["metadata"]
    assert host_problems(meta) == []
    early = {**meta, "created_utc": "2026-11-04T19:45:00Z"}
    # a clone has the commit; the image's tree (no .git) does not, and there nothing is judged by its time
    here = commit_time(meta["git"]["sha"], REPO) is not None
    assert [p for p, _ in host_problems(early)] == (["$.metadata.created_utc"] if here else [])
    assert host_problems({**early, "git": {**meta["git"], "sha": "f" * 40}}) == []
