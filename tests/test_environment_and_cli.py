"""Environment gate messages, GPU-less failures, the routing CLI and the one validated writer."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nsa_exp.checking.validate import validate_path
from nsa_exp.core.environment import FIX, env_problems, require_env
from nsa_exp.errors import GateFailure, UserError
from nsa_exp.io import metadata
from nsa_exp.io.metadata import git_state
from nsa_exp.io.schemas import schema_errors
from nsa_exp.io.store import write_json
from tests.helpers import REPO, assert_one_line_error, run_cli

GOOD_ENV = {"TRITON_F32_DEFAULT": "ieee", "FLA_CACHE_RESULTS": "0", "FLA_DISABLE_BACKEND_DISPATCH": "1",
            "TRITON_CACHE_DIR": "/tmp/t"}


@pytest.mark.parametrize(("name", "value", "fragment"), [
    ("TRITON_F32_DEFAULT", "tf32", "TRITON_F32_DEFAULT=tf32 (must be ieee)"),
    ("FLA_CACHE_RESULTS", None, "FLA_CACHE_RESULTS=<unset> (must be 0)"),
    ("FLA_DISABLE_BACKEND_DISPATCH", "0", "FLA_DISABLE_BACKEND_DISPATCH=0 (must be 1)"),
    ("TRITON_CACHE_DIR", "", "TRITON_CACHE_DIR=<unset>"),
])
def test_each_wrong_env_var_is_named_with_the_fix(name, value, fragment):
    env = dict(GOOD_ENV)
    if value is None:
        del env[name]
    else:
        env[name] = value
    problems = env_problems(env)
    assert len(problems) == 1 and problems[0].startswith(fragment)
    with pytest.raises(GateFailure) as err:
        require_env(env)
    assert fragment in str(err.value) and FIX in str(err.value)


def test_synchronous_launches_are_refused_with_their_own_fix():
    """CUDA_LAUNCH_BLOCKING=1 makes each launch wait for the kernel before it: a stage's events would time the
    host's launch gaps. It was recorded, never refused (an attacker's forged result with it PASSed, 2026-12-06)."""
    assert env_problems({**GOOD_ENV, "CUDA_LAUNCH_BLOCKING": "0"}) == []
    with pytest.raises(GateFailure) as err:
        require_env({**GOOD_ENV, "CUDA_LAUNCH_BLOCKING": "1"})
    assert "CUDA_LAUNCH_BLOCKING=1 (must be unset or 0" in str(err.value)
    assert str(err.value).endswith("Fix: unset CUDA_LAUNCH_BLOCKING") and FIX not in str(err.value)


@pytest.mark.parametrize("command", ["smoke", "bench"])
def test_gpu_tasks_without_a_gpu_fail_in_one_line_and_write_nothing(command, tmp_path):
    out = tmp_path / "out.json"
    proc = run_cli(command, "--output", str(out), env={**GOOD_ENV, "TRITON_CACHE_DIR": str(tmp_path / "tc")})
    assert_one_line_error(proc, "gpu: no CUDA GPU is visible")
    assert list(tmp_path.glob("out*")) == []


def test_gpu_tasks_refuse_a_wrong_environment_first(tmp_path):
    proc = run_cli("bench", "--output", str(tmp_path / "o.json"), env={"FLA_CACHE_RESULTS": "1"})
    assert_one_line_error(proc, "FLA_CACHE_RESULTS=1 (must be 0)", "scripts/run_h100.sh")


def test_check_without_a_gpu_writes_a_failing_report_beside_the_passing_one_and_exits_2(tmp_path):
    out = tmp_path / "check.json"
    out.write_text("the committed passing report")
    proc = run_cli("check", "--output", str(out), env={**GOOD_ENV, "TRITON_CACHE_DIR": str(tmp_path / "tc")})
    assert_one_line_error(proc, "gpu: no CUDA GPU", "check failed (1 gate(s))", "check.failed.json")
    assert out.read_text() == "the committed passing report"  # a failed check never replaces it
    report = json.loads((tmp_path / "check.failed.json").read_text())
    assert schema_errors(report, "check_report", "r") == []
    assert not report["passed"]
    by_name = {g["name"]: g["passed"] for g in report["gates"]}
    assert by_name == {"environment": True, "gpu": False, "versions": True, "fla_sources": True, "equal_edges": True}
    # the report is the tool's own faithful record of a failed check: it validates (a failed gate carries its
    # message and no detail, which validate once held to a passed gate's: a new user, 2026-12-06); so does one
    # whose environment gate failed too
    assert validate_path(tmp_path / "check.failed.json")["passed"]
    if not any(k in os.environ for k in GOOD_ENV):  # the suite's own environment lacks the GPU variables
        assert run_cli("check", "--output", str(tmp_path / "bare.json")).returncode == 2
        both = json.loads((tmp_path / "bare.failed.json").read_text())
        assert [g["name"] for g in both["gates"] if not g["passed"]] == ["environment", "gpu"]
        assert validate_path(tmp_path / "bare.failed.json")["passed"]


@pytest.mark.parametrize("command", ["check", "reproduce"])
def test_a_failed_checks_report_never_replaces_an_input_or_a_users_file(tmp_path, command):
    """A failed check writes <stem>.failed.json beside its report; that path is claimed like any output: a config
    named so (given as --config) was overwritten by check and deleted by reproduce, and any file of the user's there
    was replaced (an attacker, 2026-12-07). An earlier failed check report is still replaced."""
    out = tmp_path / "sub"
    out.mkdir()
    config = out / "check.failed.json"
    config.write_bytes((REPO / "configs" / "e1_h100.json").read_bytes())
    argv = ["--config", str(config), *(["--output", str(out / "check.json")] if command == "check"
                                       else ["--out-dir", str(out)])]
    proc = run_cli(command, *argv, env={**GOOD_ENV, "TRITON_CACHE_DIR": str(tmp_path / "tc")})
    assert_one_line_error(proc, "check.failed.json", "input of this command", "--config")
    assert config.read_bytes() == (REPO / "configs" / "e1_h100.json").read_bytes()
    mine = out / "check.failed.json"
    mine.write_text("my notes")
    proc = run_cli(command, *argv[2:], env={**GOOD_ENV, "TRITON_CACHE_DIR": str(tmp_path / "tc")})
    assert_one_line_error(proc, "check.failed.json", "not an earlier check report")
    assert mine.read_text() == "my notes"


def test_routing_cli_json_and_save(tmp_path):
    proc = run_cli("routing", "--json", "--save", str(tmp_path / "r"), "--output", str(tmp_path / "rep.json"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert schema_errors(report, "routing_report", "r") == []
    assert f"wrote {tmp_path / 'rep.json'}" in proc.stderr  # --output says so, as --save does (a new user)
    assert {p: v["edges"] for p, v in report["patterns"].items()} == dict.fromkeys(
        ["local", "uniform", "sink-heavy", "zipf"], 2_066_432)
    assert report["patterns"]["sink-heavy"]["fanin"]["max"] == 32768  # block 0 of a head: every query
    saved = np.load(tmp_path / "r" / "zipf.npy")
    assert saved.dtype == np.int32 and saved.shape == (1, 32768, 4, 16)
    assert json.loads((tmp_path / "rep.json").read_text())["closed_form_edges"] == 2_066_432


def test_writer_refuses_an_invalid_document_and_leaves_no_file(tmp_path):
    out = tmp_path / "report.json"
    with pytest.raises(UserError, match=r"refusing to write .*report.json: 1 schema violation\(s\); first: "
                                        r"check_report: 'metadata' is a required property"):
        doc = {"schema_version": "1.0", "kind": "check_report", "config_name": "x", "config_path": "x",
               "passed": True, "allow_gpu": False, "gates": [{"name": "gpu", "passed": True}] * 5}
        write_json(out, doc, "check_report")
    assert list(tmp_path.iterdir()) == []


def test_writer_refuses_nan(tmp_path):
    doc = json.loads(run_cli("routing", "--json").stdout)
    doc["patterns"]["local"]["generation_s"] = float("nan")
    with pytest.raises(UserError):
        write_json(tmp_path / "r.json", doc, "routing_report")
    assert list(tmp_path.iterdir()) == []


def test_a_stated_commit_wins_over_the_copy_s_git_and_what_git_said_is_kept(monkeypatch, tmp_path):
    # A copied tree whose .git has another HEAD, made here (the container's copy of the tree has no .git).
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org",
                               *args], capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "the copy's stale HEAD")
    monkeypatch.setattr(metadata, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("NSA_EXP_GIT_SHA", "0" * 40)
    monkeypatch.setenv("NSA_EXP_GIT_DIRTY", "0")
    state = git_state()
    assert state["sha"] == "0" * 40 and state["source"] == "env NSA_EXP_GIT_SHA" and state["dirty"] is False
    assert state["git_head_seen"] == git("rev-parse", "HEAD") != "0" * 40


def test_a_validate_whose_reader_goes_away_never_exits_0(tmp_path):
    """A reader that leaves before the output (``validate FILE | true``, or ``| head -1`` on a long report) must not
    turn a failing verdict into success under ``set -o pipefail``: the CLI exits 141 (128 + SIGPIPE) without a
    traceback, as a shell writer would. An attacker's trial of 2026-12-05: a forged file piped so passed with 0."""
    forged = json.loads((REPO / "results" / "raw" / "e1_h200_stop.json").read_text())
    forged["timing"]["stop"]["stopped_by"] = "ci"
    bad = tmp_path / "forged.json"
    bad.write_text(json.dumps(forged))
    for flag in ("", "--json"):
        validate = f"{shlex.quote(sys.executable)} -m nsa_exp validate {flag} {shlex.quote(str(bad))}"
        cmd = f"set -o pipefail; {validate} | true"
        proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=REPO, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 141, (flag, proc.returncode, proc.stderr[-500:])
        assert "Traceback" not in proc.stderr


def test_an_invoke_task_whose_reader_goes_away_says_so_as_the_cli_does():
    """``invoke routing --json | true``: the task's command writes to the pipe itself, so it exits 141 and invoke with
    it, without a traceback (invoke's own output threads ended in a 435-line BrokenPipeError traceback, exit 1: a new
    user, 2026-12-06); a task's exit code is its command's (2 for a missing file)."""
    invoke = shlex.quote(str(Path(sys.executable).parent / "invoke"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(["bash", "-c", f"set -o pipefail; {invoke} routing --json | true"], capture_output=True,
                          text=True, cwd=REPO, timeout=300, env=env)
    assert proc.returncode == 141 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-800:])
    # invoke's own listing too (tasks.py restores SIGPIPE's default: it ended in a BrokenPipeError traceback, exit 1)
    proc = subprocess.run(["bash", "-c", f"set -o pipefail; {invoke} --list | true"], capture_output=True, text=True,
                          cwd=REPO, timeout=300, env=env)
    assert proc.returncode == 141 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-800:])
    proc = subprocess.run(["bash", "-c", f"{invoke} validate no-such-file.json"], capture_output=True, text=True,
                          cwd=REPO, timeout=300, env=env)
    assert proc.returncode == 2 and "no-such-file.json" in proc.stderr and "Traceback" not in proc.stderr
