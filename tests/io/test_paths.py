"""Results record paths relative to the repository, and a reader finds a recorded source on another machine
(a copy of the repository at another path, a document that recorded an absolute path) by its tails."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from nsa_exp import REPO_ROOT
from nsa_exp.checking.validate import validate_path
from nsa_exp.io.metadata import base_metadata
from nsa_exp.io.paths import locate_recorded, recorded_argv, recorded_path, tails
from tests.helpers import REPO

CALIBRATION = "results/model/h200_BQ1_w4_s2.json"


def test_a_path_inside_the_repository_is_recorded_relative_to_it():
    assert recorded_path(REPO_ROOT / "configs" / "e1_h100.json") == "configs/e1_h100.json"
    assert recorded_path("/somewhere/else/x.json") == "/somewhere/else/x.json"  # outside: kept as given


def test_argv_records_repository_paths_relative_and_leaves_options_alone():
    argv = [str(REPO_ROOT / "nsa_exp" / "__main__.py"), "validate", "--json", str(REPO_ROOT / CALIBRATION), "12"]
    assert recorded_argv(argv) == ["nsa_exp/__main__.py", "validate", "--json", CALIBRATION, "12"]
    meta = base_metadata([str(REPO_ROOT / "tasks.py"), "x"], import_gpu=False)
    assert meta["argv"] == ["tasks.py", "x"]


def test_tails_of_an_absolute_path_longest_first():
    assert [t.as_posix() for t in tails("/root/out/results/raw/x.json")] == [
        "root/out/results/raw/x.json", "out/results/raw/x.json", "results/raw/x.json", "raw/x.json", "x.json"]
    assert tails("results/raw/x.json") == [Path("results/raw/x.json"), Path("raw/x.json"), Path("x.json")]


def test_an_absolute_path_from_another_machine_is_found_by_its_tail(tmp_path):
    (tmp_path / "results" / "raw").mkdir(parents=True)
    (tmp_path / "results" / "raw" / "x.json").write_text("{}")
    found = locate_recorded("/root/out/elsewhere/results/raw/x.json", [tmp_path])
    assert found == tmp_path / "results" / "raw" / "x.json"
    assert locate_recorded("/root/out/elsewhere/results/raw/y.json", [tmp_path]) is None


def test_a_source_is_read_from_the_tree_the_document_lies_in_not_a_copy_planted_beside_it(tmp_path):
    """A compare in ``<root>/results/compare/`` recording ``results/noise/floors.json`` reads the table at
    ``<root>/results/noise/``; a file planted at ``<root>/results/compare/results/noise/floors.json`` (which the
    search beside the document met first) is not read; without the tree's own file the planted one is still found
    (beside the document, as a copied tree resolves within itself)."""
    doc_dir = tmp_path / "results" / "compare"
    planted = doc_dir / "results" / "noise" / "floors.json"
    planted.parent.mkdir(parents=True)
    planted.write_text("{}")
    assert locate_recorded("results/noise/floors.json", [doc_dir, *doc_dir.parents], beside=doc_dir) == planted
    real = tmp_path / "results" / "noise" / "floors.json"
    real.parent.mkdir(parents=True)
    real.write_text("{}")
    assert locate_recorded("results/noise/floors.json", [doc_dir, *doc_dir.parents], beside=doc_dir) == real
    # a recorded absolute path from another machine: its tail anchored the same way
    assert locate_recorded("/elsewhere/nsa/results/noise/floors.json", [doc_dir, *doc_dir.parents],
                           beside=doc_dir) == real
    # without the document's folder, the old order (beside first): what the readers that pass no folder get
    assert locate_recorded("results/noise/floors.json", [doc_dir, *doc_dir.parents]) == planted


def _sources(doc: dict) -> list[str]:
    out = [p["source"] for p in doc["points"]] + [doc["kernel_resources"]["source"], doc["calibration_set"]["path"]]
    ncu = doc["occupancy"].get("ncu_cross_check")
    return out + ([ncu["source"]] if ncu else [])


def test_a_copy_of_the_repository_elsewhere_validates_with_sources_recorded_absolute(tmp_path, monkeypatch):
    """The calibration and every file it names copied to another root; the document's sources rewritten to
    the absolute paths of a machine that is not this one; validated from an unrelated working directory."""
    doc = json.loads((REPO / CALIBRATION).read_text())
    copy = tmp_path / "elsewhere" / "nsa"
    for rel in _sources(doc):
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, copy / rel)
    gone = "/nonexistent-machine/home/them/NSA-KernelExp/"
    for p in doc["points"]:
        p["source"] = gone + p["source"]
    doc["kernel_resources"]["source"] = gone + doc["kernel_resources"]["source"]
    doc["calibration_set"]["path"] = gone + doc["calibration_set"]["path"]
    target = copy / CALIBRATION
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(doc, indent=1))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    report = validate_path(os.path.relpath(target, cwd))
    recompute = next(c for c in report["checks"] if c["name"] == "calibration_recompute")
    assert recompute["passed"], recompute
    assert not report.get("unverified"), report.get("unverified")


def test_a_recorded_path_this_user_may_not_stat_is_not_found_never_an_error(tmp_path, monkeypatch):
    """The image's user reading a document recorded as root (``/root/out/...``): not found, not PermissionError."""
    is_file = Path.is_file

    def denied(self):
        if str(self).startswith("/root/out"):
            raise PermissionError(13, "Permission denied", str(self))
        return is_file(self)

    monkeypatch.setattr(Path, "is_file", denied)
    (tmp_path / "results" / "raw").mkdir(parents=True)
    (tmp_path / "results" / "raw" / "x.json").write_text("{}")
    assert locate_recorded("/root/out/elsewhere/results/raw/none.json", [tmp_path]) is None
    assert locate_recorded("/root/out/results/raw/x.json", [tmp_path]) == tmp_path / "results" / "raw" / "x.json"


def test_a_relative_path_is_found_by_its_file_name_beside_the_document_only_and_never_as_the_document(tmp_path):
    """A submission folder moved elsewhere: ``runs/reproduce_h200/e1_h200.json`` is the ``e1_h200.json`` beside the
    compare that records it; a shorter tail is not looked for above the document or in the working directory, and a
    run named ``e1_h200.json`` that records ``configs/e1_h200.json`` is not its own config (the container check's
    submission once FAILed comparing a run with itself)."""
    sub = tmp_path / "their" / "folder"
    sub.mkdir(parents=True)
    (sub / "e1_h200.json").write_text("{}")
    (tmp_path / "other.json").write_text("{}")
    around = [sub, *sub.parents]
    assert locate_recorded("runs/reproduce_h200/e1_h200.json", around, beside=sub) == sub / "e1_h200.json"
    assert locate_recorded("runs/x/other.json", around, beside=sub) is None  # above it: not by its name
    assert locate_recorded("configs/e1_h200.json", around, beside=sub, itself=sub / "e1_h200.json") is None
