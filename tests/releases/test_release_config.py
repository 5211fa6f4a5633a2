"""A release config's points: one per T, or several at one T each with its own batch, KV heads or query heads
(``"shape"``), named by the shape in the files they write; the layer call behind ``"layer": true``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsa_exp.checking.validate import validate_bytes
from nsa_exp.errors import UserError
from nsa_exp.releases.config import load_release_config
from tests.helpers import REPO


def _write(tmp_path: Path, points: list[dict], **extra) -> Path:
    raw = {"schema_version": "1.0", "name": "r", "base_config": "configs/e1_h200.json", "points": points, **extra}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    return path


LOCAL = [{"name": "local"}, {"name": "sink-heavy", "sinks": 4}]


def test_a_shaped_point_keeps_the_rest_of_the_base_shape_and_is_named_by_its_shape(tmp_path):
    cfg = load_release_config(_write(tmp_path, [{"T": 8192, "patterns": LOCAL},
                                                {"T": 8192, "shape": {"B": 2}, "patterns": LOCAL},
                                                {"T": 8192, "shape": {"H": 8, "HQ": 128}, "patterns": LOCAL}]))
    assert [p.key for p in cfg.points] == ["T8192", "T8192-B2-H4-G16", "T8192-B1-H8-G16"]
    shapes = [p.config.shape for p in cfg.points]
    assert [(s.B, s.T, s.H, s.HQ, s.K, s.V) for s in shapes] == [(1, 8192, 4, 64, 192, 128), (2, 8192, 4, 64, 192, 128),
                                                                 (1, 8192, 8, 128, 192, 128)]
    assert cfg.stages == ("selection_fwd", "full_bwd", "train_step")


def test_the_same_point_twice_is_refused_naming_both(tmp_path):
    path = _write(tmp_path, [{"T": 8192, "shape": {"B": 2}, "patterns": LOCAL},
                             {"T": 8192, "shape": {"B": 2, "H": 4}, "patterns": LOCAL}])
    with pytest.raises(UserError, match=r"release.points\[1\].shape: T=8192 with B, H, HQ = 2, 4, 64 is also "
                                        r"points\[0\]"):
        load_release_config(path)


def test_a_shape_fla_cannot_run_is_refused_by_the_config_rules(tmp_path):
    path = _write(tmp_path, [{"T": 8192, "shape": {"H": 8}, "patterns": LOCAL}])  # HQ 64 / H 8: G = 8 < 16
    with pytest.raises(UserError, match=r"release.points\[0\] \(T8192-B1-H8-HQ64\)"):
        load_release_config(path)


@pytest.mark.parametrize("version", ["0.6.O", "", "0.6.0\u202e", "0.6.0\n", "\u0660.6.0", "0.6.1"])
def test_a_points_release_that_is_no_version_or_not_the_configs_is_refused_naming_the_point(tmp_path, version):
    """The schema held only the top-level ``releases`` to a pattern; a point's were any strings, and a point naming
    ``0.6.O`` (or a release the config does not list) never ran, silently."""
    path = _write(tmp_path, [{"T": 8192, "patterns": LOCAL}, {"T": 16384, "patterns": LOCAL, "releases": [version]}],
                  releases=["0.5.2", "0.6.0"])
    with pytest.raises(UserError, match=r"^release\.points\[1\]\.releases"):
        load_release_config(path)


def test_a_top_level_release_that_is_no_version_is_refused_naming_it(tmp_path):
    path = _write(tmp_path, [{"T": 8192, "patterns": LOCAL}], releases=["0.6.0", "0.6.0\n"])
    with pytest.raises(UserError, match=r"^release\.releases: '0\.6\.0\\n' is not a release version"):
        load_release_config(path)


def test_every_committed_release_config_loads():
    for path in sorted((REPO / "configs").glob("release_*.json")):
        assert load_release_config(path).points, path


def test_the_committed_layer_configs_time_the_layer_call():
    for name in ("release_layer_h200", "release_layer_shapes_h200"):
        cfg = load_release_config(REPO / "configs" / f"{name}.json")
        assert cfg.stages[-1] == "nsa_layer" and cfg.releases == ("0.5.2",)
    assert [p.key for p in load_release_config(REPO / "configs/release_layer_shapes_h200.json").points] == [
        "T32768-B2-H4-G16", "T32768-B8-H4-G16", "T32768-B1-H16-G16"]


LAYER = REPO / "results" / "releases" / "release_layer_h200" / "fla-core-0.5.2-T8192.json"
SHAPED = REPO / "results" / "releases" / "release_layer_shapes_h200" / "fla-core-0.5.2-T32768-B2-H4-G16.json"


def _drop_layer_and_flag(d):
    d["release_config"]["layer"] = False
    d["timing"]["stages"].remove("nsa_layer")
    for p in d["patterns"].values():
        del p["stages"]["nsa_layer"]
    for block in ("calls", "span_ms"):
        for st in d["kernels"][block].values():
            del st["nsa_layer"]


def _hq(d):
    d["shape"]["HQ"] = d["config"]["shape"]["HQ"] = 128


@pytest.mark.parametrize(("path", "edit", "check"), [
    (LAYER, _drop_layer_and_flag, "release_config_consistent"),  # the layer call removed and the flag with it
    (SHAPED, _hq, "release_config_consistent"),                  # HQ changes neither edges nor routing
    (SHAPED, lambda d: d["release_config"]["points"][0].update(shape={"B": 1}), "release_config_consistent"),
    (LAYER, lambda d: d["kernels"]["span_ms"]["local"].pop("nsa_layer"), "kernels_recompute"),
    (SHAPED, lambda d: d.update(name=d["name"].replace("-B2-", "-B8-")), "release_config_consistent"),
], ids=["layer-dropped-with-its-flag", "hq", "embedded-point", "profiled-stages", "name"])
def test_validate_fails_a_release_result_whose_stages_shape_or_name_disagree_with_its_release_config(path, edit,
                                                                                                     check):
    doc = json.loads(path.read_text())
    assert {c["name"]: c["passed"] for c in validate_bytes(json.dumps(doc).encode(), "x.json")["checks"]}[check]
    edit(doc)
    report = validate_bytes(json.dumps(doc).encode(), "x.json")
    assert not report["passed"] and {c["name"]: c["passed"] for c in report["checks"]}[check] is False
