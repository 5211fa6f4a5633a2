"""The doors onto the CLI: --help lists every command, every CLI option is an invoke option,
make runs without an activated venv, scripts/ are thin wrappers."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess

import pytest

from nsa_exp.cli import build_parser

from .helpers import REPO, run_cli


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_help_lists_every_command():
    out = run_cli("--help").stdout
    for name in _subcommands():
        assert name in out


def test_every_cli_option_is_an_invoke_option():
    spec = importlib.util.spec_from_file_location("tasks_under_test", REPO / "tasks.py")
    tasks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tasks)
    for name, sub in _subcommands().items():
        task = tasks.ns.tasks[name]
        dests = {a.dest for a in sub._actions if not isinstance(a, argparse._HelpAction)}
        assert dests <= set(task.argspec(task.body).parameters), name


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_uses_the_venv_python_without_activation(tmp_path):
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    assert "python3 -m invoke test" in subprocess.run(["make", "-n", "test"], cwd=tmp_path, capture_output=True,
                                                      text=True).stdout
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text("")
    assert ".venv/bin/python -m invoke bench" in subprocess.run(["make", "-n", "bench"], cwd=tmp_path,
                                                                capture_output=True, text=True).stdout


def test_scripts_are_thin_wrappers_onto_the_cli():
    for script in ("bench_backward.py", "profile_stage.py", "plot_fanin_latency.py", "bench_routing.py"):
        text = (REPO / "scripts" / script).read_text()
        assert "from nsa_exp.cli import main" in text and len(text.splitlines()) < 25, script


def test_repeatable_and_two_value_options_reach_the_cli_through_invoke(tmp_path):
    """An ``append`` option (``--routing-file``, ``--param``) unset must not reach the CLI as the text '[]';
    set, it is one CLI flag per value; ``--noise-from X Y`` (nargs=2) is the invoke flag given twice."""
    invoke = [str(REPO / ".venv" / "bin" / "invoke")] if (REPO / ".venv/bin/invoke").exists() else ["invoke"]
    if shutil.which(invoke[0]) is None:
        pytest.skip("invoke not installed")
    spec = importlib.util.spec_from_file_location("tasks_under_test", REPO / "tasks.py")
    tasks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tasks)
    actions = tasks._options(_subcommands()["compare"])
    argv = tasks._argv(actions, {a.dest: ([] if tasks._repeated(a) else "") for a in actions} | {
        "a": "A.json", "b": "B.json", "noise_from": ["X.json", "Y.json"]})
    assert argv[:2] == ["A.json", "B.json"] and argv[argv.index("--noise-from"):][:3] == ["--noise-from", "X.json",
                                                                                        "Y.json"]
    proc = subprocess.run([*invoke, "predict", "--calibration", "results/model/h200_BQ1_w4_s2.json", "--pattern",
                           "sink-heavy", "--param", "sinks=2", "--json"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert '"predicted_ms"' in proc.stdout
