"""``report`` reads only the published tree (issue 27): in a repository only files git tracks; a user's run folder
(``runs/``) and an untracked file left in ``results/`` or ``docs/figures/`` are never folded into RESULTS.md or
PROVENANCE.md; outside a repository every file of the tree is the manifest."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from nsa_exp import REPO_ROOT
from nsa_exp.cli import main
from nsa_exp.report.manifest import committed_inputs
from nsa_exp.report.provenance import END, START, update_provenance
from nsa_exp.report.readme import README_END, README_START, update_readme
from tests.corpus.runner import run_main
from tests.report.conftest import as_a_user, from_loaded

RAW = REPO_ROOT / "results" / "raw" / "e1_h200.json"
NCU = REPO_ROOT / "results" / "ncu" / "e1_h200_local-vs-sink-heavy_dkv_core.json"


def _tree(root: Path, git: bool) -> Path:
    for rel, source in {"results/raw/e1_h200.json": RAW, "results/ncu/e1_h200_local-vs-sink-heavy_dkv_core.json": NCU,
                        "docs/figures/e1_h200_fanin_cv_latency.png": None}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / rel) if source else (root / rel).write_bytes(b"png")
    if git:
        if shutil.which("git") is None:
            pytest.skip("git is needed")
        for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@invalid", "-c",
                                                     "commit.gpgsign=false", "commit", "-q", "-m", "base"]):
            subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    # what a user's runs leave behind: untracked files in the published tree, and the run folder
    for rel, source in {"results/raw/my_run.json": RAW, "results/raw/my_tune_arm.json": RAW,
                        "results/ncu/e1_h200_mine_dkv_core.json": NCU, "runs/my_run/raw/my_run.json": RAW,
                        "docs/figures/e1_h200_fanin_gini_latency.png": None}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / rel) if source else (root / rel).write_bytes(b"png")
    return root


def test_report_inputs_in_a_repository_are_the_tracked_files_only(tmp_path):
    inputs = committed_inputs(_tree(tmp_path, git=True), result="results/raw/e1_h200.json")
    assert [inputs.relative(p) for p in inputs.bench_results()] == ["results/raw/e1_h200.json"]
    assert [inputs.relative(p) for p in inputs.result_files()] == [
        "results/ncu/e1_h200_local-vs-sink-heavy_dkv_core.json", "results/raw/e1_h200.json"]
    assert inputs.ncu == ("results/ncu/e1_h200_local-vs-sink-heavy_dkv_core.json",) and inputs.tune_arms == ()
    assert [p.name for p in inputs.glob(inputs.figures, "*.png")] == ["e1_h200_fanin_cv_latency.png"]
    assert not inputs.committed(tmp_path / "runs" / "my_run" / "raw" / "my_run.json")
    assert inputs.uncommitted() == []
    named = committed_inputs(tmp_path, result="results/raw/my_run.json")
    assert named.uncommitted() == ["results/raw/my_run.json"]  # --publish refuses it (below)


def test_outside_a_repository_every_file_of_the_tree_counts(tmp_path):
    inputs = committed_inputs(_tree(tmp_path, git=False), result="results/raw/e1_h200.json")
    assert len(inputs.bench_results()) == 3 and inputs.tracked is None and inputs.uncommitted() == []


def test_report_publish_refuses_an_untracked_input_in_one_line(capsys):
    untracked = REPO_ROOT / "results" / "raw" / "e1_h200.json"
    assert untracked.is_file()  # tracked: the refusal is for a file that is not
    stray = REPO_ROOT / "runs" / "test_manifest" / "raw" / "stray.json"
    stray.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(untracked, stray)
    try:
        if committed_inputs().tracked is None:
            pytest.skip("the tree is not a git repository: every file is the manifest")
        assert main(["report", "--result", str(stray), "--publish", "--repeat", "", "--h200", ""]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: runs/test_manifest/raw/stray.json: not a committed file; --publish"), err
    finally:
        shutil.rmtree(stray.parent.parent)


def test_a_run_folders_readme_and_provenance_copies_leave_the_published_files_alone(tmp_path):
    readme, provenance = tmp_path / "README.md", tmp_path / "PROVENANCE.md"
    readme.write_text(f"head\n{README_START}\nold\n{README_END}\ntail\n")
    provenance.write_text(f"top\n{START}\nold\n{END}\n")
    before = readme.read_bytes(), provenance.read_bytes()
    update_readme(tmp_path / "runs" / "r" / "README.md", "new", source=readme)
    update_provenance(tmp_path / "runs" / "r" / "PROVENANCE.md", "new", source=provenance)
    assert (readme.read_bytes(), provenance.read_bytes()) == before
    assert (tmp_path / "runs/r/README.md").read_text() == f"head\n{README_START}\nnew\n{README_END}\ntail\n"
    assert (tmp_path / "runs/r/PROVENANCE.md").read_text() == f"top\n{START}\nnew\n{END}\n"


def test_report_rewrites_readme_only_when_asked(tmp_path, report_data):
    """``report --output X`` (no ``--readme``, no ``--publish``) leaves README.md as it is; the command runs as the CLI
    runs it, from the session's load of the committed inputs."""
    readme = REPO_ROOT / "README.md"
    before = readme.read_bytes()
    with as_a_user(), from_loaded(report_data):  # a user's shell: fla-topk is unverifiable
        result = run_main(["report", "--output", str(tmp_path / "R.md"), "--analysis", str(tmp_path / "a.json"),
                           "--provenance", ""])
    assert result.code == 0, result.stderr
    assert (tmp_path / "R.md").is_file() and readme.read_bytes() == before
