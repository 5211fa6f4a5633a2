"""The doors onto the CLI: --help lists every command, every CLI option is an invoke option,
make runs without an activated venv, scripts/ are thin wrappers."""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from invoke import Program

from nsa_exp.cli import build_parser
from nsa_exp.commands import COMMANDS, OPTION_KINDS, cli_argv, cli_flags, command_named, invoke_flag, invoke_name
from nsa_exp.core.environment import CUDA_DEVICE_NODES, REQUIRED_ENV
from nsa_exp.io.progress import is_progress_line
from tests.helpers import REPO, assert_one_line_error, run_cli


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_help_lists_every_command():
    out = run_cli("--help").stdout
    for name in _subcommands():
        assert name in out


def _tasks():
    spec = importlib.util.spec_from_file_location("tasks_under_test", REPO / "tasks.py")
    tasks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tasks)
    return tasks


def test_every_cli_option_is_an_invoke_option():
    tasks = _tasks()
    for name, sub in _subcommands().items():
        task, cmd = tasks.ns.tasks[name], command_named(name)
        dests = {a.dest for a in sub._actions if not isinstance(a, argparse._HelpAction)}
        assert dests == {o.name for o in cmd.options}, name  # the parser is the table
        params = set(task.argspec(task.body).parameters) - {tasks.MORE}
        assert params == {invoke_name(o) for o in cmd.options}, name  # invoke accepts exactly the CLI's options
        flags = {s for a in sub._actions for s in a.option_strings if s not in ("-h", "--help")}
        assert flags == {f for o in cmd.options if not o.positional for f in cli_flags(o)}, name
        assert {invoke_flag(o) for o in cmd.options if not o.positional} <= flags, name  # one spelling works in both


def test_invoke_help_names_what_each_option_kind_takes():
    """``invoke --help <task>`` of every task: a value shows its STRING/INT, a flag no value and no repeat note,
    a repeatable option says to repeat its flag, a positional says it is one, nothing is SUPPRESSed, every
    option has help text."""
    seen = set()
    for cmd in COMMANDS:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):  # a fresh collection each time: invoke consumes a task's help dict
            Program(namespace=_tasks().ns).run(["invoke", "--help", cmd.name], exit=False)
        text = out.getvalue()
        assert "SUPPRESS" not in text, cmd.name
        lines = dict(_help_lines(text))
        for o in cmd.options:
            flag = invoke_flag(o)
            spec, help_ = next((s, h) for s, h in lines.items()
                               if any(p.split("=")[0].split(" ")[0] == flag for p in s.split(", ")))
            assert help_.strip(), (cmd.name, flag)
            seen.add(o.kind)
            if o.kind == "flag":
                assert "=" not in spec and "repeat" not in help_ and "once per value" not in help_, (cmd.name, flag)
            elif o.kind == "value":
                assert spec.endswith(("=STRING", "=INT", " STRING", " INT")), (cmd.name, flag, spec)
            elif o.kind in ("list", "append", "pair"):
                packed = help_.replace(" ", "")  # invoke wraps help lines, also inside a flag
                assert f"{o.flag}X{o.flag}Y" in packed or f"{o.flag}A{o.flag}B" in packed, (cmd.name, flag)
            else:
                assert "(positional" in help_, (cmd.name, flag)
    assert seen == set(OPTION_KINDS)


def _help_lines(text: str) -> list[tuple[str, str]]:
    """``(flag spec, help)`` of each option in an invoke help text (wrapped help lines joined)."""
    out: list[tuple[str, str]] = []
    for line in text.split("Options:", 1)[1].splitlines():
        if line.startswith("  -"):
            spec, _, help_ = line.strip().partition("  ")
            out.append((spec.strip(), help_.strip()))
        elif line.strip() and out:
            out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
    return out


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
    invoke = [sys.executable, "-m", "invoke"]
    cmd = command_named("compare")
    argv = cli_argv(cmd, {invoke_name(o): [] if o.kind in ("list", "pair", "append") else None for o in cmd.options}
                    | {"a": "A.json", "b": "B.json", "noise_from": ["X.json", "Y.json"]})
    assert argv[:2] == ["A.json", "B.json"] and argv[argv.index("--noise-from"):][:3] == ["--noise-from", "X.json",
                                                                                        "Y.json"]
    proc = subprocess.run([*invoke, "predict", "--calibration", "results/model/h200_BQ1_w4_s2.json", "--pattern",
                           "sink-heavy", "--param", "sinks=2", "--json"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert '"predicted_ms"' in proc.stdout


# Doors that tell the truth (issue 27): a refusal is one line, the problem first, then the fix, exit 2.

def _one_line(proc: subprocess.CompletedProcess, code: int | tuple[int, ...], *fragments: str) -> str:
    """The one error line (a library's warning lines aside), with exit ``code`` (or one of them)."""
    shown = proc.stderr.splitlines()
    lines = [ln for i, ln in enumerate(shown) if ln.strip() and "Warning" not in ln and not is_progress_line(ln)
             and not (i and "Warning" in shown[i - 1] and ln.startswith("  "))]  # a warning's source line
    codes = code if isinstance(code, tuple) else (code,)
    assert proc.returncode in codes and len(lines) == 1 and lines[0].startswith("error: "), (proc.returncode,
                                                                                           proc.stderr)
    assert "Traceback" not in proc.stderr and all(f in lines[0] for f in fragments), lines[0]
    return lines[0]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="nvidia-smi is here: the sweep may measure")
def test_a_sweep_with_every_point_done_and_no_gpu_refuses_and_names_table_only():
    proc = run_cli("sweep", "--config", "configs/sweep_skew_h200.json", "--allow-gpu", "--publish",
                   env={"TRITON_INTERPRET": ""})  # --publish: the committed sweep, every point done
    line = _one_line(proc, 2, "no CUDA GPU", "all 25 points are already done", "--table-only")
    assert line.index("no CUDA GPU") < line.index("--table-only") and "/work" not in line


def test_sweep_without_a_sweep_config_names_config():
    _one_line(run_cli("sweep", "--table-only"), 2, "configs/e1_h100.json: an experiment config", "not a sweep config",
              "--config configs/sweep_skew_h200.json")


def test_validate_refuses_a_release_dir_that_does_not_exist(tmp_path):
    _one_line(run_cli("validate", "results/raw/e1_h100_dev.json", "--release-dir", str(tmp_path / "missing")), 2,
              "--release-dir", "no such folder")
    _one_line(run_cli("validate", "results/raw/e1_h100_dev.json", "--release-dir", str(tmp_path)), 2,
              "holds no fla/__init__.py")


def _stand_in_python(folder, step_code: int):
    """An interpreter that imports anything (``-c``) and whose every step exits ``step_code``."""
    python = folder / f"python{step_code}"
    python.write_text(f'#!/bin/sh\n[ "$1" = -c ] && exit 0\nexit {step_code}\n')
    python.chmod(0o755)
    return str(python)


@pytest.mark.parametrize("code", [1, 0])
def test_h200_session_exits_with_the_failed_steps_code(tmp_path, code):
    proc = subprocess.run(["bash", str(REPO / "scripts" / "h200_session.sh"), "calib_bq4", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHON": _stand_in_python(tmp_path, code)})
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert ("step sweep_calib_bq4 failed (rc=1" in proc.stderr) == bool(code)


@pytest.mark.parametrize(("argv", "python", "fragments"), [
    (["nopart", "{tmp}/out"], None, ["PART nopart: no such part", "calib_bq4"]),
    (["part1", "{tmp}/file"], None, ["OUTDIR", "not a folder"]),
    (["part1", "{tmp}/out"], "/nonexistent/python", ["/nonexistent/python cannot import the project"]),
])
def test_h200_session_refuses_a_bad_part_outdir_or_interpreter_in_one_line_making_nothing(tmp_path, argv, python,
                                                                                         fragments):
    """A bad PART made OUTDIR and printed the usage line; PYTHON naming no interpreter ran every step (exit 127, logs
    and a tarball left): an attacker, 2026-12-07."""
    (tmp_path / "file").write_text("x")
    env = {**os.environ, "PYTHON": python or _stand_in_python(tmp_path, 0)}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "h200_session.sh"),
                           *(a.format(tmp=tmp_path) for a in argv)], capture_output=True, text=True, env=env,
                          timeout=60)
    _one_line(proc, 2, *fragments)
    assert not (tmp_path / "out").exists()


def test_h200_session_makes_a_relative_outdir_where_it_is_called(tmp_path):
    proc = subprocess.run(["bash", str(REPO / "scripts" / "h200_session.sh"), "calib_bq4", "rel"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "PYTHON": _stand_in_python(tmp_path, 0)})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rel").is_dir() and not (REPO / "rel").exists()


def test_h200_session_without_an_interpreter_of_the_project_is_one_line(tmp_path):
    """Outside the venv (no PYTHON, no .venv in the tree, a python3 that cannot import the project) each step
    printed a ModuleNotFoundError traceback (a new user, 2026-12-07); now one line names install.sh, exit 2."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "h200_session.sh", tmp_path / "scripts")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text("#!/bin/sh\nexit 1\n")  # a python3 without the project's packages
    (bin_dir / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "PYTHONPATH")}
    proc = subprocess.run(["bash", str(tmp_path / "scripts" / "h200_session.sh"), "part1", str(tmp_path / "out")],
                          capture_output=True, text=True, env={**env, "PATH": f"{bin_dir}:/usr/bin:/bin"}, timeout=60)
    _one_line(proc, 2, "python3 cannot import the project", "bash scripts/install.sh h100")


@pytest.mark.skipif(shutil.which("ncu") is not None, reason="ncu is installed here")
def test_run_h100_names_a_missing_tool_and_its_fix(tmp_path):
    proc = subprocess.run(["bash", str(REPO / "scripts" / "run_h100.sh"), "ncu", "--version"], capture_output=True,
                          text=True, env={**os.environ, "NSA_EXP_CACHE": str(tmp_path)}, timeout=60)
    _one_line(proc, 2, "ncu: command not found", "Nsight Compute")


def test_gpu_method_study_ends_a_failed_gate_in_one_line(tmp_path):
    out = tmp_path / "study.json"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_method_study.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={k: v for k, v in os.environ.items()
                               if k not in ("TRITON_INTERPRET", "FLA_CACHE_RESULTS")})
    # the environment gate (2) or the GPU gate (3), as the CLI exits; its arguments passed, nothing written
    line = _one_line(proc, (2, 3), "error: ")
    assert line.startswith(("error: environment:", "error: gpu:")) and not out.exists(), line


@functools.cache
def _method_study_script():
    """scripts/gpu_method_study.py as a module, loaded once (torch and FLA are already imported in this process)."""
    path = REPO / "scripts" / "gpu_method_study.py"
    spec = importlib.util.spec_from_file_location("gpu_method_study_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("argv", "named"), [
    (["--rounds", "0"], "--rounds"), (["--rounds", "100001"], "--rounds"), (["--warmup", "-1"], "--warmup"),
    (["--rounds", "\u0663"], "--rounds"), (["--parts", "flush,,grid"], "--parts"),
    (["--out", "study.txt"], "--out study.txt"), (["--config", "nope.json"], "nope.json"),
    (["--out", "results/studies/h200_method_study_flush.raw.json"], "lies in the published results"),
    (["--out", "configs/e1_h100.json"], "is an input of this command"),
    (["--parts", "flush,grid,flush"], "--parts: flush given more than once"),
    (["--out", f"/tmp/{'x' * 300}.json"], "File name too long"),
    (["--conf", "configs/e1_h200.json"], "unrecognized arguments: --conf"),
], ids=["rounds_0", "rounds_over_most", "warmup_negative", "rounds_arabic_digit", "parts_empty", "out_not_json",
        "config_missing", "out_published", "out_is_the_config", "parts_twice", "out_name_too_long",
        "option_abbreviated"])
def test_gpu_method_study_refuses_a_bad_argument_in_one_line_before_any_gpu_work(argv, named, monkeypatch, capsys):
    """The study script's arguments meet the CLI's contract (one line naming the option, exit 2) before its gates:
    a count out of range reached the GPU, and ``--out`` could replace a committed study or the config it read."""
    script = _method_study_script()
    ran = []
    monkeypatch.setattr(script, "run_gates", lambda *a, **k: ran.append(a) or ([], {}))
    monkeypatch.chdir(REPO)
    argv = ["--out", "runs/method_study_refusal.json", *argv] if "--out" not in argv else argv
    monkeypatch.setattr(sys, "argv", ["gpu_method_study.py", *argv])
    try:
        code = script.main()
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], (code, err)
    assert not ran and not (REPO / "runs" / "method_study_refusal.json").exists()


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="nvidia-smi is here: the GPU gate may pass")
def test_check_leads_with_no_gpu_and_gives_one_line_per_problem(tmp_path):
    env = {k: "" for k in ("TRITON_F32_DEFAULT", "FLA_CACHE_RESULTS", "FLA_DISABLE_BACKEND_DISPATCH",
                           "TRITON_CACHE_DIR", "TRITON_INTERPRET")}
    proc = run_cli("check", "--output", str(tmp_path / "check.json"), env=env)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert proc.returncode == 2 and len(lines) == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("error: gpu: no CUDA GPU") and len(lines[0]) < 200
    assert "check: running the gates: 5 gates..." in proc.stderr.splitlines()  # the sign of life first
    assert lines[1].startswith("error: environment:") and lines[1].endswith(
        f"(check failed (2 gate(s)); report {tmp_path / 'check.failed.json'})")


def test_release_bench_refuses_before_installing_any_release(tmp_path):
    """The gates (no GPU, environment) and every argument are checked before a release is downloaded or
    installed into --releases-dir (it used to fetch and install two releases, then refuse)."""
    releases = tmp_path / "releases"
    proc = run_cli("release-bench", "--config", "configs/release_h200.json", "--release", "0.5.2", "--release", "0.6.0",
                   "--releases-dir", str(releases), "--output-dir", str(tmp_path / "o"), env={"TRITON_INTERPRET": ""})
    _one_line(proc, 2, "error: ")
    assert not releases.exists() or not any(releases.iterdir()), list(releases.iterdir())
    bad = run_cli("release-bench", "--config", "configs/release_h200.json", "--release", "0.5.2", "--release", "0.5.2",
                  "--releases-dir", str(releases), "--output-dir", str(tmp_path / "o"))
    _one_line(bad, 2, "--release: a release is named twice")
    # a --fla-source tree's view made before the gates is removed when they refuse (a CPU box kept empty
    # source-<tree>/ folders: a new user, 2026-12-07); the tree itself is untouched
    shutil.copytree(Path(importlib.util.find_spec("fla").origin).parent, tmp_path / "tree" / "fla")
    proc = run_cli("release-bench", "--config", "configs/release_h200.json", "--fla-source", str(tmp_path / "tree"),
                   "--releases-dir", str(releases), "--output-dir", str(tmp_path / "o"), env={"TRITON_INTERPRET": ""})
    _one_line(proc, 2, "error: ")
    assert not releases.exists() or not any(releases.iterdir()), list(releases.iterdir())
    assert (tmp_path / "tree" / "fla" / "__init__.py").is_file()


@pytest.mark.parametrize(("argv", "line"), [
    (["routing-time", "--lengths", "1024", "--repeats", "1"],
     "routing-time: 4 patterns x 1 repeats per T: 1 length..."),
    (["validate", "results/model/h200_BQ1_w4_s2_validation.json", "configs/model_calibration_h200.json"],
     "validate: 2 files..."),
    (["sweep", "--config", "configs/sweep_x2_h200.json", "--table-only", "--publish", "--output", "{tmp}/x2.csv"],
     "sweep table: validating the points of sweep_x2_h200: 5 points..."),
], ids=["routing-time", "validate", "sweep-table-only"])
def test_long_commands_show_a_sign_of_life_on_stderr(tmp_path, argv, line):
    """Off a terminal, one start line naming the work (io/progress.py); a tqdm bar on a terminal."""
    proc = run_cli(*[a.format(tmp=tmp_path) for a in argv])
    assert proc.returncode == 0, proc.stderr
    assert line in proc.stderr.splitlines() and is_progress_line(line), proc.stderr
    assert line not in proc.stdout


@pytest.mark.parametrize("command", ["ncu", "profile-stage"])
def test_a_pattern_typo_is_refused_before_torch_is_imported(command):
    """The profiled pattern is an argument check (arguments._profile), not the handler's: one line, exit 2, and no
    torch, scipy or FLA import (2 s -> 0.2 s on a CPU box)."""
    code = ("import sys\nfrom nsa_exp.cli import main\ntry:\n"
            f"    rc = main([{command!r}, '--pattern', 'banana', '--stage', 'dq_core'])\n"
            "except SystemExit as e:\n    rc = e.code\nprint(rc, 'torch' in sys.modules, 'scipy.stats' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.split() == ["2", "False", "False"], (proc.stdout, proc.stderr)
    assert proc.stderr.strip().startswith("error: --pattern 'banana'") and len(proc.stderr.strip().splitlines()) == 1



def assert_refused_before_torch(cases: list[tuple[list[str], str]], env: dict[str, str] | None = None) -> None:
    """Each ``(argv, named)`` run through ``cli.main`` in one fresh process (``env`` added to this one's): exit 2,
    one ``error:`` line naming ``named``, and torch never imported."""
    code = ("import sys\nfrom nsa_exp.cli import main\ncodes = []\n"
            f"for argv in {[argv for argv, _ in cases]!r}:\n"
            "    try:\n        codes.append(main(argv))\n"
            "    except SystemExit as e:\n        codes.append(e.code)\n"
            "print(*codes, 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    assert proc.stdout.split() == ["2"] * len(cases) + ["False"], (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == len(cases) and all(ln.startswith("error: ") for ln in lines), lines
    for (_, named), line in zip(cases, lines, strict=True):
        assert named in line, line


def test_release_bench_refuses_bad_arguments_before_torch_is_imported(tmp_path):
    """release-bench's numbers, release config, trees and releases are arguments (arguments._release_bench), not the
    handler's: each one line, exit 2, with no torch import (1.5 s -> 0.25 s on a CPU box)."""
    bad = [(["--repetitions", "0", "--release", "0.6.0"], "--repetitions"),
           (["--cupti-rounds", "-1"], "--cupti-rounds"),
           (["--release", "latest"], "--release"), (["--release", "0.6.0", "--release", "0.6.0"], "--release"),
           (["--config", str(tmp_path / "none.json")], "release config"),
           (["--fla-source", str(tmp_path / "no-tree")], "--fla-source"),
           (["--wheel-dir", str(tmp_path / "no-wheels")], "--wheel-dir")]
    assert_refused_before_torch([(["release-bench", *argv], named) for argv, named in bad])


def test_check_smoke_and_ncu_refuse_a_bad_config_or_output_before_torch_is_imported(tmp_path):
    """Their config and report paths are arguments (arguments._gpu_report, arguments._ncu), read and claimed before
    the handler imports torch: one line each, exit 2 (1.2-1.7 s -> 0.3 s on a CPU box)."""
    assert_refused_before_torch([
        (["check", "--config", str(tmp_path / "none.json")], "none.json"),
        (["smoke", "--config", "configs/e1_h100.json", "--output", "configs/e1_h100.json"],
         "--output configs/e1_h100.json"),
        (["check", "--output", "results/reports/e1_h100_check.json"], "--output"),  # published, no --publish
        # ncu's two outputs are claimed by its argument check too (arguments._ncu): the published summary refused
        (["ncu", "--config", "configs/e1_h200.json", "--stage", "dkv_core", "--publish"],
         "results/ncu/e1_h200_local-vs-sink-heavy_dkv_core.json: exists")])


def test_gated_gpu_commands_refuse_a_box_without_a_gpu_before_torch_is_imported(tmp_path):
    """bench, smoke, peer-bench, whatif, profile-stage and ncu go straight to their strict gates once their arguments
    pass: the door runs the environment gate and the gpu gate's device-node half itself (arguments.GATED), so a box
    with no NVIDIA device node refuses each in one line without importing torch (~2 s -> 0.35 s), after every
    argument and output check (a leftover journal, a pattern the config lacks) and the environment's."""
    if any(os.path.exists(node) for node in CUDA_DEVICE_NODES):
        pytest.skip("this machine has an NVIDIA device node: torch decides")
    gpu_env = {**REQUIRED_ENV, "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    no_gpu = "gpu: no CUDA GPU is visible (no /dev/nvidiactl or /dev/dxg); run on an H100 host"
    assert_refused_before_torch([
        (["bench", "--output", str(tmp_path / "b.json")], no_gpu),
        (["smoke", "--output", str(tmp_path / "s.json")], no_gpu),
        (["peer-bench", "--output", str(tmp_path / "p.json")], no_gpu.replace("H100", "H200")),
        (["whatif", "--patterns", "sink-heavy", "--max-fanin", "4096", "--layouts", "split", "--allow-gpu",
          "--output", str(tmp_path / "w.json")], no_gpu),
        (["profile-stage", "--pattern", "local", "--stage", "dkv_core"], no_gpu),
        (["ncu", "--stage", "dkv_core", "--name", "n"], no_gpu),  # not 'install Nsight Compute' (a new user)
        (["profile-stage", "--pattern", "hot-block", "--stage", "dkv_core"], "pattern 'hot-block' is not in config"),
        (["profile-stage", "--pattern", "hot-block", "--stage", "dkv_core", "--benchmark-result",
          str(tmp_path / "none.json")], "--benchmark-result"),  # first, as the handler had it (a helper's finding)
        (["bench", "--resume", "--output", str(tmp_path / "b.json")], "--resume but there is no journal"),
    ], env=gpu_env)
    # the GPU first (fixing the environment alone would not help on this box), then the environment's fix
    both = "no CUDA GPU is visible here (no /dev/nvidiactl or /dev/dxg): run on an H100 host; there, also: "
    assert_refused_before_torch([(["smoke", "--output", str(tmp_path / "s.json")], both),
                                 (["smoke", "--output", str(tmp_path / "s.json")], "environment: TRITON_F32_DEFAULT")],
                                env={name: "" for name in (*REQUIRED_ENV, "TRITON_CACHE_DIR")})
    assert_refused_before_torch([(["bench", "--name", "n" * 121], "--name: 121 characters, more than 120")])


def test_a_run_name_is_a_name_not_a_path():
    """``bench --name ../../../tmp/x`` would have written results/raw/../../../tmp/x.json, outside the repository
    and the run folder, on a GPU (a new user's finding, 2026-12-06): a name is letters, digits, '.', '_', '-'."""
    assert_refused_before_torch([(["bench", "--name", name], f"--name {name!r}: a name, not a path")
                                 for name in ("../../../tmp/x", "a/b", "..", "")]
                                + [(["ncu", "--stage", "dq_core", "--name", "../x"], "--name '../x'")])


def test_flush_study_writes_its_document_without_importing_torch_or_triton(tmp_path):
    """A CPU command's metadata reads torch's and triton's versions from their installed distributions
    (io/metadata.software_versions, ``import_gpu=False``): flush-study imported both (1.2 s of a 2 s run)."""
    out = tmp_path / "study.json"
    raw = "results/studies/h200_method_study_flush.raw.json"
    code = ("import sys\nfrom nsa_exp.cli import main\n"
            f"rc = main(['flush-study', {raw!r}, '--output', {str(out)!r}])\n"
            "print(rc, 'torch' in sys.modules, 'triton' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.split()[-3:] == ["0", "False", "False"], (proc.stdout[-500:], proc.stderr[-2000:])
    assert json.loads(out.read_text())["metadata"]["versions"]["torch"]  # still recorded, from the distribution


@pytest.mark.parametrize("argv", [["compare", "results/raw/e1_h200.json", "no/such/b.json"],
                                  ["compare", "results/raw/e1_h200.json", "results/raw/e1_h200_repeat.json",
                                   "--noise-from", "results/raw/e1_h200.json", "no/such/y.json"],
                                  ["calibrate", "--points", "results/sweeps/sweep_skew_h200",
                                   "--set", "configs/model_calibration_h200.json", "--ncu", "no/such/n.json"]],
                         ids=["compare-B", "compare-noise-from", "calibrate-ncu"])
def test_a_missing_later_input_is_refused_before_any_input_is_validated(argv):
    """A command's inputs are all found to be files before the first is validated (arguments.require_all_valid):
    one line naming the missing one, exit 2, and validate's checkers (scipy.stats) never imported (2.5 s -> 0.2 s
    for compare on a CPU box)."""
    code = ("import sys\nfrom nsa_exp.cli import main\ntry:\n"
            f"    rc = main({argv!r})\n"
            "except SystemExit as e:\n    rc = e.code\nprint(rc, 'nsa_exp.checking.validate' in sys.modules, "
            "'scipy.stats' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.split() == ["2", "False", "False"], (proc.stdout, proc.stderr)
    missing = next(a for a in argv if a.startswith("no/such/"))
    assert proc.stderr.strip().endswith(f"{missing}: no such file") and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, named", [(["bench", "--jsn", "x"], "'--jsn'"), (["bnech"], "'bnech'"),
                                         (["bench", "--config"], "config"),
                                         (["routing", "--json", "--typo"], "--typo"),
                                         (["routing-time", "--lengths"], "--lengths"),
                                         (["validate", "results/raw/e1_h200.json", "--more"], "--more"),
                                         (["bench", "--repetitions", "abc"], "--repetitions: 'abc' is not an integer"),
                                         (["whatif", "--rounds=x1"], "--rounds: 'x1' is not an integer"),
                                         # invoke's own words were "No idea what '6' is!" and "Flag <Argument:
                                         # repetitions [int]> needed value" (an attacker, 2026-12-07)
                                         (["bench", "--repetitions", "5", "--repetitions", "6"],
                                          "flag --repetitions given twice"),
                                         (["bench", "--repetitions"], "flag --repetitions needs a value")])
def test_invoke_refuses_an_unknown_task_or_flag_in_one_line_with_exit_2(argv, named):
    """The ``invoke`` command itself (tasks.py turns invoke's parse error, exit 1, into the project's one line and
    exit 2; a repeatable flag without its value, which invoke takes as not given, and an INT flag's bad value, which
    gave a traceback, the same); no task runs."""
    proc = subprocess.run([sys.executable, "-m", "invoke", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert_one_line_error(proc, "invoke", named)
    assert proc.stdout == ""


@pytest.mark.parametrize("command", ["cost", "stop-replay"])
def test_cost_and_stop_replay_refuse_a_forged_result_before_reading_its_figures(command, tmp_path):
    """An attacker's trial of 2026-12-05: ``cost`` printed a forged file's phases and ``stop-replay`` replayed forged
    observations (exit 0), where ``compare`` refuses inputs that do not validate; now all three do."""
    doc = json.loads((REPO / "results" / "raw" / "e1_h200_repeat.json").read_text())
    doc["patterns"]["zipf"]["stages"]["dkv_core"]["raw_ms"][0] *= 2  # its statistics not updated
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc))
    proc = run_cli(command, "results/raw/e1_h200.json", str(forged))
    assert_one_line_error(proc, "does not validate", "stats_recompute")


def test_the_default_config_asked_for_from_a_subfolder_says_to_run_from_the_root():
    """``cd configs && python -m nsa_exp routing`` said "config file configs/e1_h100.json does not exist; pass --config
    with one of the files under configs/", from inside configs/ (a new user, 2026-12-07)."""
    proc = run_cli("routing", cwd=REPO / "configs")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "configs/e1_h100.json does not exist; it is a path from the repository's root: run the command from " \
           f"there ({REPO})" in lines[0], lines


def test_a_work_folder_option_names_no_folder_of_git_the_environment_or_the_repository(tmp_path):
    """``release-bench --releases-dir docs`` left a link in docs/ and ``bench --tuning-cache .git`` (or ``.venv``,
    ``/proc/self``, the repository root) reached the GPU gate; ``--tuning-cache /a/b/c`` made its folders before it
    (an attacker, 2026-12-07). Refused in one line naming the option, nothing made."""
    cases = [(["bench", "--tuning-cache", ".git"], "--tuning-cache .git: lies in a .git folder"),
             (["bench", "--tuning-cache", "docs/cache"], "--tuning-cache docs/cache: lies in the published results"),
             (["bench", "--tuning-cache", "/proc/self"], "--tuning-cache /proc/self: lies in /proc"),
             (["bench", "--tuning-cache", "configs"], "--tuning-cache configs: holds this repository's own files"),
             (["bench", "--tuning-cache", str(tmp_path / "file")], "exists and is not a folder"),
             (["release-bench", "--releases-dir", "docs"], "--releases-dir docs: lies in the published results"),
             (["release-bench", "--releases-dir", ".git/hooks"], "--releases-dir .git/hooks: lies in a .git folder")]
    (tmp_path / "file").write_text("x")
    assert_refused_before_torch(cases)
    assert not (REPO / "docs" / "cache").exists()
    made = tmp_path / "a" / "b"
    gpu_env = {**REQUIRED_ENV, "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    if not any(os.path.exists(node) for node in CUDA_DEVICE_NODES):
        assert_refused_before_torch([(["bench", "--tuning-cache", str(made), "--output", str(tmp_path / "b.json")],
                                      "no CUDA GPU")], env=gpu_env)
        assert not (tmp_path / "a").exists()  # made when the first entry is kept, after the GPU work
