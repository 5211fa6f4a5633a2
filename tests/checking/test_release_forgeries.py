"""A release result is held to what its own record allows: its events enclose its kernels, and the release it
names is one target throughout (label, versions, wheel, folder, the run's releases and the point's). Each case
passed before (an attacker, 2026-12-07)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from nsa_exp.checking.validate import validate_path
from tests.helpers import REPO

RELEASES = REPO / "results/releases/release_h200"


def _failures(doc: dict[str, Any], folder: Path) -> dict[str, list[str]]:
    """``{check: [failure paths]}`` of ``doc`` validated as ``<name>.json`` in ``folder``."""
    path = folder / f"{doc['name']}.json"
    path.write_text(json.dumps(doc))
    return {c["name"]: [f["path"] for f in c.get("failures", [])]
            for c in validate_path(str(path))["checks"] if not c["passed"]}


def test_an_event_median_below_its_own_kernels_fails(tmp_path):
    doc = json.loads((RELEASES / "fla-core-0.5.2-T32768.json").read_text())
    stage = doc["patterns"]["sink-heavy"]["stages"]["full_bwd"]
    stage["median_ms"] *= 0.7  # the kernels it encloses are left as they ran
    failed = _failures(doc, tmp_path)
    assert "$.patterns.sink-heavy.stages.full_bwd.median_ms" in failed.get("kernels_recompute", []), failed


def _relabel(doc: dict[str, Any], version: str) -> dict[str, Any]:
    """``doc`` relabelled as fla-core ``version`` everywhere a careful forger would."""
    out = copy.deepcopy(doc)
    old = out["release"]["version_declared"]
    rel = out["release"]
    rel.update(label=f"fla-core-{version}", version_declared=version, version_imported=version,
               distributions=[f"fla-core=={version}"], package_dir=rel["package_dir"].replace(old, version))
    rel["origin"]["wheel"] = rel["origin"]["wheel"].replace(old, version)
    out["name"] = out["name"].replace(old, version)
    return out


def test_a_point_relabelled_to_a_release_the_config_does_not_run_there_fails(tmp_path):
    """0.6.0's T=8192 point relabelled 0.5.2 throughout: the release config runs T=8192 for 0.6.0 only."""
    doc = _relabel(json.loads((RELEASES / "fla-core-0.6.0-T8192.json").read_text()), "0.5.2")
    assert "$.release.version_declared" in _failures(doc, tmp_path).get("release_config_consistent", [])


def test_a_release_the_run_did_not_time_fails(tmp_path):
    doc = _relabel(json.loads((RELEASES / "fla-core-0.5.1-T32768.json").read_text()), "0.5.0")
    assert "$.release.version_declared" in _failures(doc, tmp_path).get("release_config_consistent", [])


@pytest.mark.parametrize(("field", "value"), [
    ("version_imported", "0.6.0"),
    ("distributions", ["fla-core==0.6.0"]),
    ("origin.wheel", "fla_core-0.6.0-py3-none-any.whl"),
    ("package_dir", "/host/.nsa-exp/releases/fla-core-0.6.0/fla"),
    ("label", "fla-core-0.6.0"),
])
def test_a_release_whose_record_names_two_versions_fails_naming_the_field(tmp_path, field, value):
    doc = json.loads((RELEASES / "fla-core-0.5.1-T32768.json").read_text())
    *parents, key = field.split(".")
    node = doc["release"]
    for p in parents:
        node = node[p]
    node[key] = value
    assert f"$.release.{field}" in _failures(doc, tmp_path).get("release_config_consistent", [])


def test_a_relabel_as_a_source_tree_or_under_an_added_fla_source_fails(tmp_path):
    """The identity check cannot be skipped: ``kind`` set to ``source`` on a wheel run, or ``--fla-source`` added to
    the argv, with the release relabelled (a re-attacker, 2026-12-07)."""
    base = json.loads((RELEASES / "fla-core-0.6.0-T32768.json").read_text())
    as_source = _relabel(base, "0.5.1")
    as_source["release"]["kind"] = "source"
    assert "$.release.kind" in _failures(as_source, tmp_path).get("release_config_consistent", [])
    added = _relabel(base, "0.5.0")
    added["metadata"]["argv"] = [*added["metadata"]["argv"], "--fla-source", "/x"]
    assert "$.release.version_declared" in _failures(added, tmp_path).get("release_config_consistent", [])


def test_a_relabel_that_leaves_another_version_in_the_origin_fails(tmp_path):
    """Every version the origin names (wheel path, folder) must be the declared one."""
    doc = _relabel(json.loads((RELEASES / "fla-core-0.6.0-T32768.json").read_text()), "0.5.1")
    doc["release"]["origin"]["wheel_path"] = ".whl-fla/fla_core-0.6.0-py3-none-any.whl"
    assert "$.release.origin" in _failures(doc, tmp_path).get("release_config_consistent", [])
