"""Issue 28: the noise table — one floor per GPU x stage, each with its rule and the files that set it, written by
``noise-table``, read (strictly) by every door; a run of few rounds is listed but sets no floor."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from nsa_exp.analysis.noise import MIN_FLOOR, MIN_ROUNDS
from nsa_exp.analysis.noise_table import NOISE_TABLE, committed_sources, comparison_floors, read_floors
from nsa_exp.checking.noise_table import build as table_document
from nsa_exp.core.records import BenchResult
from nsa_exp.errors import UserError
from nsa_exp.io.schemas import schema_errors
from nsa_exp.io.store import load_record
from tests.helpers import REPO, assert_one_line_error, run_cli

H100, H100_REPEAT = "results/raw/e1_h100.json", "results/raw/e1_h100_repeat.json"
ENGINE20 = "results/raw/e1_h200_engine20.json"


def _runs(*paths):
    return [(p, load_record(REPO / p, BenchResult, p)) for p in paths]


def test_a_pair_sets_each_floor_with_its_rule_and_members_and_a_short_run_is_listed_not_counted():
    doc = table_document(_runs(H100, H100_REPEAT, "results/raw/e1_h200.json", ENGINE20))
    assert not schema_errors(doc, "noise_table", "noise_table")
    rows = {(r["gpu"], r["stage"]): r for r in doc["floors"]}
    dkv = rows["NVIDIA H100 80GB HBM3", "dkv_core"]
    assert dkv["rule"] == "spread" and dkv["floor"] == pytest.approx(dkv["set_by"]["spread"])
    assert dkv["floor"] > MIN_FLOOR
    assert {m["path"] for m in dkv["set_by"]["members"]} == {H100, H100_REPEAT}
    medians = [m["median_ms"] for m in dkv["set_by"]["members"]]
    assert dkv["set_by"]["median_spread"] == pytest.approx(max(medians) / min(medians) - 1)
    lent = rows["NVIDIA H100 80GB HBM3", "selection_fwd"]  # the repeat re-tuned it: no quantity measured twice
    assert lent["rule"] == "borrowed" and lent["floor"] == rows["NVIDIA H100 80GB HBM3",
                                                                lent["borrowed_from"]["stage"]]["floor"]
    # the H200 formal run alone with a 20-round run: nothing of 30+ rounds repeated, every H200 floor borrowed 0.5%
    h200 = [r for r in doc["floors"] if r["gpu"] == "NVIDIA H200"]
    assert h200 and all(r["rule"] == "borrowed" and r["floor"] == MIN_FLOOR for r in h200)


def test_identical_copies_give_the_minimum_and_the_sources_are_recorded():
    one = _runs(H100)
    doc = table_document([*one, ("copy.json", one[0][1])], {"x.json": "why"})
    assert {r["rule"] for r in doc["floors"]} == {"minimum"} and {r["floor"] for r in doc["floors"]} == {MIN_FLOOR}
    assert doc["sources"] == ["copy.json", H100] and doc["excluded"] == [{"path": "x.json", "why": "why"}]
    assert doc["min_rounds"] == MIN_ROUNDS


def test_read_floors_reads_the_committed_table_and_a_cross_gpu_comparison_takes_the_larger():
    table = read_floors()
    doc = json.loads((REPO / NOISE_TABLE).read_text())
    assert table == {(r["gpu"], r["stage"]): r["floor"] for r in doc["floors"]}
    both = comparison_floors(table, ["dkv_core"], "NVIDIA H100 80GB HBM3", "NVIDIA H200")["dkv_core"]
    assert both == max(table["NVIDIA H100 80GB HBM3", "dkv_core"], table["NVIDIA H200", "dkv_core"])


def test_read_floors_refuses_another_kind_an_edited_shape_or_a_missing_file_in_one_line(tmp_path):
    with pytest.raises(UserError, match="not a noise table"):
        read_floors(REPO / "results/compare/e1_h100_vs_e1_h200.json")
    doc = json.loads((REPO / NOISE_TABLE).read_text())
    doc["floors"][0]["floor"] = "0.5%"
    bad = tmp_path / "floors.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(UserError, match="floor"):
        read_floors(bad)
    with pytest.raises(UserError, match="noise-table"):
        read_floors(tmp_path / "none.json")


def test_the_command_refuses_to_replace_the_committed_table_without_overwrite():
    assert_one_line_error(run_cli("noise-table", "--publish"), "results/noise/floors.json", "--overwrite")


def _forged_table(tmp_path):
    doc = json.loads((REPO / NOISE_TABLE).read_text())
    for row in doc["floors"]:
        if "H200" in row["gpu"]:
            row["floor"] = 0.45  # schema-valid, wide enough to call every H100-vs-H200 ratio "same"
    path = tmp_path / "floors.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


def test_a_compare_judged_under_a_forged_noise_table_fails_validate(tmp_path):
    from nsa_exp.checking.compare import build as compare_results  # noqa: PLC0415
    from nsa_exp.checking.validate import validate_path  # noqa: PLC0415
    from nsa_exp.io.store import write_json  # noqa: PLC0415

    doc = compare_results(REPO / "results/raw/e1_h100.json", REPO / "results/raw/e1_h200.json",
                          noise_table=_forged_table(tmp_path))
    assert doc["counts"]["slower"] == 0  # the forgery flips every verdict the real table calls slower
    write_json(tmp_path / "cmp.json", doc, "compare")
    report = validate_path(str(tmp_path / "cmp.json"))
    failed = {c["name"]: c["failures"] for c in report["checks"] if not c["passed"]}
    assert list(failed) == ["compare_recompute"]
    assert "does not validate (noise_table_recompute)" in failed["compare_recompute"][0]["message"]


def test_a_forged_floor_is_reported_once_at_its_path(tmp_path):
    """One edited floor is one failure line (its derivation), not a second one from the rebuilt table's diff."""
    from nsa_exp.checking.validate import validate_path  # noqa: PLC0415

    doc = json.loads((REPO / NOISE_TABLE).read_text())
    i = next(i for i, r in enumerate(doc["floors"]) if "H200" in r["gpu"] and r["stage"] == "dkv_core")
    doc["floors"][i]["floor"] = 0.0556
    path = tmp_path / "floors.json"
    path.write_text(json.dumps(doc, indent=1))
    report = validate_path(str(path))
    (check,) = [c for c in report["checks"] if not c["passed"]]
    assert check["name"] == "noise_table_recompute"
    assert [f["path"] for f in check["failures"]] == [f"$.floors[{i}].floor"], check["failures"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_result_left_untracked_in_results_is_not_a_source_of_the_table(tmp_path):
    """In a git checkout the table's sources are the files git tracks: a result dropped into results/raw/ and never
    added was counted among the floors, and the committed table then failed validate (a new user, 2026-12-06).
    Outside a git checkout every file there counts."""
    raw = tmp_path / "results" / "raw"
    raw.mkdir(parents=True)
    (raw / "mine.json").write_text("{}")
    assert committed_sources(tmp_path) == ["results/raw/mine.json"]  # not a git checkout: every file
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "results/raw/mine.json"], check=True)
    (raw / "theirs.json").write_text("{}")
    assert committed_sources(tmp_path) == ["results/raw/mine.json"]


def _table_tree(root, runs: dict[str, dict]) -> tuple:
    """``root`` holding ``runs`` (repo-relative path -> document) under results/raw/ and the noise table built from
    them at results/noise/floors.json; returns (table path, table document)."""
    for rel, doc in runs.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(doc, indent=2) + "\n")
    table = table_document([(p, BenchResult.from_json(d)) for p, d in runs.items()])
    path = root / NOISE_TABLE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=2) + "\n")
    return path, table


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_table_of_chosen_runs_outside_this_repository_fails_also_in_a_git_checkout_of_its_own(tmp_path):
    """Which results are committed is known only in this repository: outside a git checkout every file there counted,
    so a table built from two chosen runs in a folder of their own (and a compare judged by it) PASSed --strict with
    every dK/dV verdict flipped (an attacker, 2026-12-06), and `git init` plus `git add` there made it a checkout (a
    reviewer, 2026-12-06). Outside the repository a table must be the repository's own."""
    from nsa_exp.checking.noise_table import _committed_version  # noqa: PLC0415 - the rule under test
    from nsa_exp.checking.validate import validate_path  # noqa: PLC0415

    chosen = {p: json.loads((REPO / p).read_text()) for p in (H100, H100_REPEAT)}
    path, table = _table_tree(tmp_path, chosen)
    for step in ("plain folder", "git init", "git add"):
        if step == "git init":
            subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
        if step == "git add":
            subprocess.run(["git", "-C", str(tmp_path), "add", "results"], check=True)
        report = validate_path(path)
        failures = [f for c in report["checks"] if not c["passed"] for f in c["failures"]]
        assert any("not in this repository" in f["message"] for f in failures), (step, failures)
    assert _committed_version(table) == (False, False)
    assert _committed_version(json.loads((REPO / NOISE_TABLE).read_text()))[0]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_table_whose_source_does_not_validate_fails_also_as_a_compares_source(tmp_path):
    """A noise table read as another document's source (a compare's floors, validate's depth 1) holds its sources to
    every check, as validated on its own: an H100 run relabelled H200 among them raised the H200 floors and flipped 4
    verdicts of a compare that PASSed --strict beside the FAILing table (an attacker, 2026-12-06)."""
    from nsa_exp.checking.validate import validate_path  # noqa: PLC0415

    forged = json.loads((REPO / "results/raw/e1_h100_dev.json").read_text())
    forged["metadata"]["gpu"]["name"] = forged["metadata"]["gpu"]["nvml_name"] = "NVIDIA H200"
    for g in forged["gates"]:
        if g["name"] == "gpu":
            g["detail"]["name"] = "NVIDIA H200"
    runs = {"results/raw/e1_h200.json": json.loads((REPO / "results/raw/e1_h200.json").read_text()),
            "results/raw/e1_h200_dev.json": forged}
    path, _ = _table_tree(tmp_path, runs)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "results"], check=True)
    for depth in (1, 0):
        report = validate_path(path, depth=depth)
        failures = [f for c in report["checks"] if not c["passed"] for f in c["failures"]]
        assert any("e1_h200_dev.json does not validate" in f["message"] for f in failures), (depth, failures)


def test_a_copy_of_a_run_is_not_its_repeat_among_a_tables_sources():
    """A byte copy of e1_h100.json planted beside it set the H100 selection_fwd floor to the 0.5 % minimum as a
    "repeat", and the table and a compare judged by it PASSed --strict (a re-attacker, 2026-12-06); the committed
    repeat pair is two runs."""
    from nsa_exp.checking.noise_table import _copies  # noqa: PLC0415 - the rule under test

    run, repeat = (json.loads((REPO / p).read_text()) for p in (H100, H100_REPEAT))
    assert _copies([H100, "results/raw/e1_h100_again.json"], [run, json.loads(json.dumps(run))])
    assert not _copies([H100, H100_REPEAT], [run, repeat])
