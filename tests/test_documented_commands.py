"""Every command README.md and docs/*.md show runs as written (issue 23), found from the text itself
(:mod:`tests.corpus.documented`).

- A CPU command runs VERBATIM (``bash -c``) in a clone of the working tree (one clone per test process: each
  ``pytest -n`` worker has its own; the commands of one fenced block run in order, in one state; tracked files are
  restored and new files, the run folder ``runs/`` included, removed between blocks). It must exit 0, print what it
  did, and leave ``git status --porcelain`` clean: its outputs go to the ignored run folder ``runs/`` (issue 27), no
  untracked file is left in the tree and no published file changes — except a committed file it says it wrote when
  the text asks for that on purpose (``--publish``), which is restored afterwards.
- A GPU command (needs CUDA) parses in its door (argparse from the command table, invoke's parser, the Makefile),
  and, run on this CPU box with the GPU environment set, gets past every argument and output check to the one-line
  "no CUDA GPU" refusal (exit 2): so a documented GPU command cannot fail as written on a GPU host for a reason a
  CPU can see.
- A synopsis (``template``) or a mention names a command, and options, that exist in that door.

The user's own files a text refers to (``their_result.json``) are made first (:data:`USER_FILES`).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from invoke import Program
from invoke.parser import Parser, ParserContext

from nsa_exp.cli import build_parser
from nsa_exp.commands import COMMANDS, cli_flags, invoke_flag
from nsa_exp.io.progress import is_progress_line

from .corpus.documented import REPO, DocCommand, documented_commands, nsa_command
from .test_doors_contract import _copy_repository, _git

COMMANDS_FOUND = documented_commands()
#: A third party's files the docs name, made in the clone from committed files before the commands run.
USER_FILES = {"their_result.json": "results/raw/e1_h200.json", "their_summary.csv": "results/summaries/e1_h200.csv"}
#: Documented commands that take more than ~15 s on 2 cores (marked ``slow``; ``invoke test --fast`` skips them).
SLOW = re.compile(r"validate results/raw/\*\.json|model-validate|nsa_exp report|calibrate|stop-replay")
#: What a GPU command ends in on a CPU box: the GPU gate, after every argument and output check.
NO_GPU = "no CUDA GPU"
#: GPU commands that need more than CUDA (Nsight Compute's binary, a report it wrote): parsed only.
NEEDS_NCU = re.compile(r"(^|\s)(scripts/run_h100\.sh )?ncu |ncu-export|invoke ncu|nsa_exp ncu")
TIMEOUT = 240
GPU_ENV = {"TRITON_F32_DEFAULT": "ieee", "FLA_CACHE_RESULTS": "0", "FLA_DISABLE_BACKEND_DISPATCH": "1"}


def _unique(kind: str) -> list[DocCommand]:
    seen, out = set(), []
    for c in COMMANDS_FOUND:
        if c.kind == kind and c.text not in seen:
            seen.add(c.text)
            out.append(c)
    return out


def _ids(cmds: list[DocCommand]) -> list[str]:
    return [c.id for c in cmds]


CPU = _unique("cpu")
GPU = _unique("gpu")
SYNOPSES = _unique("template") + _unique("mention")


# ----------------------------------------------------------------------------------------------- the doors

def _invoke_parser() -> Parser:
    import tasks  # noqa: PLC0415 - tasks.py builds the invoke collection (imported here, after conftest)

    program = Program(namespace=tasks.ns)
    return Parser(initial=ParserContext(args=program.core_args()), contexts=tasks.ns.to_contexts())


def _make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return {t for line in text.splitlines() if line.startswith(".PHONY:") for t in line.split()[1:]}


def parse_problem(text: str) -> str | None:
    """Why ``text`` does not parse in its door (None: it parses). Looks inside ``scripts/run_h100.sh`` and
    ``ncu ... python scripts/...`` to the command they run."""
    tokens = shlex.split(text)
    for script in (t for t in tokens if t.startswith("scripts/")):
        if not (REPO / script).is_file():
            return f"{script}: no such script"
    if tokens[:2] == ["scripts/run_h100.sh", "ncu"] or tokens[:1] == ["ncu"]:
        inner = next((i for i, t in enumerate(tokens) if t.split("/")[-1].startswith("python")), None)
        if inner is None:
            return "ncu: no python command to profile"
        tokens = tokens[inner:]
    found = nsa_command(tokens)
    if found is None:
        return f"not a command of this project: {text}"
    door, name, argv = found
    if door == "cli":
        try:
            build_parser().parse_args([name, *argv])
        except SystemExit as exc:
            return f"python -m nsa_exp {name}: does not parse (exit {exc.code})" if exc.code else None
        return None
    if door == "make":
        missing = [t for t in [name, *argv] if t not in _make_targets()]
        return f"make: no target {missing}" if missing else None
    try:
        _invoke_parser().parse_argv([name, *argv])
    except Exception as exc:  # invoke's ParseError
        return f"invoke {name}: {exc}"
    return None


def synopsis_problems(text: str) -> list[str]:
    """A synopsis names an existing command and, for it, only options that exist in that door."""
    tokens = [t for t in re.split(r"[\s\[\]|()]+", text.replace("\\|", "|")) if t]
    found = nsa_command(tokens)
    if found is None:
        script = next((t for t in tokens if t.startswith("scripts/")), None)
        return [f"{script}: no such script"] if script and not (REPO / script).is_file() else []
    door, name, argv = found
    if door == "make":
        names = [n for n in re.split(r"\|", text.split()[1])]
        return [f"make: no target {n}" for n in names if n not in _make_targets()]
    if name.startswith("<") or name.startswith("-"):
        return []
    names = {c.name for c in COMMANDS} | ({"test", "lint"} if door == "invoke" else set())
    if name.replace("_", "-") not in names:
        return [f"{door} {name}: no such command"]
    if name in ("test", "lint"):
        return []
    cmd = next(c for c in COMMANDS if c.name == name.replace("_", "-"))
    if door == "invoke":
        flags = {invoke_flag(o) for o in cmd.options if not o.positional} | {"--more", "--help"}
    else:
        flags = {f for o in cmd.options if not o.positional for f in cli_flags(o)} | {"--help"}
    return [f"{door} {name}: no option {t}" for t in argv if t.startswith("-") and t.split("=")[0] not in flags]


def test_every_documented_command_was_found_and_classified():
    """The extraction finds the commands a reader sees (a regression of the extractor would silently test
    nothing): each class is present and the README's own commands are among them."""
    kinds = {c.kind for c in COMMANDS_FOUND}
    assert {"cpu", "gpu", "template", "host", "mention", "record"} <= kinds, kinds
    assert all(c.where.startswith("docs/PROVENANCE.md:") for c in COMMANDS_FOUND if c.kind == "record")
    texts = {c.text for c in COMMANDS_FOUND}
    assert "bash scripts/install.sh cpu" in texts and ".venv/bin/invoke lint test" in texts
    assert len(CPU) >= 15 and len(GPU) >= 10


@pytest.mark.parametrize("cmd", SYNOPSES, ids=_ids(SYNOPSES))
def test_each_synopsis_names_a_command_and_options_that_exist(cmd):
    assert not synopsis_problems(cmd.text), f"{cmd.where}: {cmd.text}: {synopsis_problems(cmd.text)}"


@pytest.mark.parametrize("cmd", GPU, ids=_ids(GPU))
def test_each_gpu_command_parses_in_its_door(cmd):
    assert parse_problem(cmd.text) is None, f"{cmd.where}: {cmd.text}: {parse_problem(cmd.text)}"


# ----------------------------------------------------------------------------------------------- running

def _tool_path() -> str:
    """PATH with this interpreter's bin folder first: ``python`` and ``invoke`` are the suite's own (the venv
    README's install line makes)."""
    return f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture(scope="session")
def docs_clone(tmp_path_factory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is needed to copy the repository")
    repo = _copy_repository(tmp_path_factory.mktemp("docs") / "repo")
    venv = repo / ".venv"
    if not venv.exists():  # README's commands say .venv/bin/...: the suite's own environment
        venv.symlink_to(Path(sys.executable).parent.parent)
    return repo


#: The ignored run folder every default output goes to without --publish (nsa_exp.io.store.RUNS_DIR).
RUNS = "runs"


def _reset(repo: Path) -> None:
    """Back to the committed state: tracked files restored, new files and the run folder removed (the venv link
    kept)."""
    _git(repo, "checkout", "-q", "--", ".")
    _git(repo, "clean", "-fdq", "-e", ".venv")
    shutil.rmtree(repo / RUNS, ignore_errors=True)
    for name, source in USER_FILES.items():
        shutil.copyfile(repo / source, repo / name)


def _env(repo: Path, gpu: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", *GPU_ENV)}  # a user's shell
    env |= {"PATH": _tool_path(), "PYTHONPATH": str(repo), "NSA_EXP_GIT_SHA": "0" * 40}
    return env | (GPU_ENV if gpu else {})


def _run(text: str, repo: Path, gpu: bool = False) -> dict[str, Any]:
    start = time.monotonic()
    try:
        proc = subprocess.run(["bash", "-c", text], cwd=repo, env=_env(repo, gpu), capture_output=True, text=True,
                              timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = None, str(exc.stdout or ""), str(exc.stderr or "")
    status = _git(repo, "status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    untracked = [m[3:] for m in status if m.startswith("??") and m[3:] not in (*USER_FILES, ".venv")]  # ours
    return {"code": code, "stdout": out, "stderr": err, "modified": [m[3:] for m in status if not m.startswith("??")],
            "untracked": untracked, "seconds": time.monotonic() - start}


RUNNABLE_GPU = [c for c in GPU if not NEEDS_NCU.search(c.text)]


def one_task_each(text: str) -> list[str]:
    """``text`` as one command per invoke task (``invoke check smoke bench --name x`` -> three commands, each
    with its own flags): on a CPU box the first task stops at the GPU gate, so each is run on its own."""
    tokens = shlex.split(text)
    at = next((i for i, t in enumerate(tokens) if t.split("/")[-1] == "invoke"), None)
    if at is None:
        return [text]
    out = []
    for ctx in _invoke_parser().parse_argv(tokens[at + 1:]):
        if not ctx.name:
            continue
        flags: list[str] = []
        for key, arg in ctx.args.items():
            if not arg.got_value:
                continue
            flag = f"-{key}" if len(key) == 1 else f"--{key}"
            values = arg.value if isinstance(arg.value, list) else [arg.value]
            flags += [flag] if arg.value is True else [x for v in values for x in (flag, str(v))]
        out.append(shlex.join([*tokens[:at + 1], ctx.name, *flags]))
    return out


def _gpu_gate(run: dict[str, Any]) -> bool:
    """The run stopped at the GPU gate in one line (exit 2), at the Slurm check (a Slurm-only command on a host
    without Slurm), or had no GPU work left (a sweep whose points are all measured: resumed, nothing run)."""
    lines = [ln for ln in run["stderr"].splitlines() if ln.strip() and not is_progress_line(ln)]  # check's start line
    nothing_to_run = run["code"] == 0 and re.search(r": 0 points run", run["stdout"]) is not None
    no_slurm = "--executor slurm: no Slurm here" in (lines or [""])[0]  # checked before the gate, as every argument
    return nothing_to_run or (run["code"] == 2 and len(lines) == 1 and (NO_GPU in lines[0] or no_slurm))


#: The fenced blocks (groups) with something to run, each its runnable commands in document order.
GROUPS: dict[str, list[DocCommand]] = {}
_RUNNABLE = {c.text for c in CPU} | {c.text for c in RUNNABLE_GPU}
for _c in COMMANDS_FOUND:
    if _c.text in _RUNNABLE:
        GROUPS.setdefault(_c.group, []).append(_c)
#: Each runnable text's home: the group of its first occurrence, whose run its test asserts.
HOME: dict[str, str] = {}
for _g, _members in GROUPS.items():
    for _c in _members:
        HOME.setdefault(_c.text, _g)


def xdist_group(item: pytest.Item) -> str | None:
    """Under ``pytest -n`` (``invoke test``), the commands of one fenced block run on one worker, in its clone."""
    cmd = getattr(item, "callspec", None) and item.callspec.params.get("cmd")
    return f"docs:{HOME[cmd.text]}" if isinstance(cmd, DocCommand) and cmd.text in HOME else None


class DocRuns:
    """Every runnable command's run, a fenced block at a time, on the first test that asks for one of its commands
    (so each worker of ``pytest -n`` runs the blocks of its own tests only). A block's commands run in order, in one
    state (a later one may read what an earlier one wrote under ``runs/``; GPU commands with the GPU environment
    set); a text's test asserts its run in its home block (:data:`HOME`). A text whose home is another block is
    still run here when a later command of this block could read what it writes; the last command of a block
    whose home is elsewhere is not run again (nothing after it could read its output, and its own run is
    asserted where it is at home)."""

    def __init__(self, clone: Path) -> None:
        self.clone, self.results = clone, {}

    def __getitem__(self, text: str) -> dict[str, Any]:
        if text not in self.results:
            self._run_group(HOME[text])
        return self.results[text]

    def _run_group(self, group: str) -> None:
        members = GROUPS[group]
        _reset(self.clone)
        for i, c in enumerate(members):
            home = HOME[c.text] == group
            if not home and i == len(members) - 1:
                continue
            for text in one_task_each(c.text) if c.kind == "gpu" else [c.text]:
                run = _run(text, self.clone, gpu=c.kind == "gpu")
                run["text"] = text
                if home and (c.text not in self.results or (c.kind == "gpu" and _gpu_gate(self.results[c.text]))):
                    self.results[c.text] = run  # a GPU line with several tasks: the first that fails the gate check
                if run["modified"]:  # regenerated on purpose (checked by the test), then restored
                    _git(self.clone, "checkout", "-q", "--", ".")
                if run["untracked"]:  # a stray file (the test fails on it): removed, so the next command starts clean
                    _git(self.clone, "clean", "-fdq", "-e", ".venv", "-e", "/their_*")
        _reset(self.clone)


@pytest.fixture(scope="session")
def doc_runs(docs_clone) -> DocRuns:
    return DocRuns(docs_clone)


def _slow(cmds: list[DocCommand]) -> list[Any]:
    return [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if SLOW.search(c.text) else []) for c in cmds]


def _wrote(run: dict[str, Any]) -> set[str]:
    """The paths a run said it wrote (``wrote PATH`` on stdout or stderr), relative to the clone."""
    text = run["stdout"] + "\n" + run["stderr"]
    return {m.group(1) for m in re.finditer(r"^wrote (\S+)", text, re.MULTILINE)}


@pytest.mark.parametrize("cmd", _slow(CPU))
def test_each_cpu_command_runs_as_written(cmd, doc_runs):
    run = doc_runs[cmd.text]
    said = f"{cmd.where}: {cmd.text}\nexit {run['code']} in {run['seconds']:.0f} s; stderr: {run['stderr'][-600:]}"
    assert run["code"] == 0, said
    assert (run["stdout"] + run["stderr"]).strip(), f"{said}: printed nothing (no feedback)"
    assert not run["untracked"], f"{said}: left untracked files in the tree (outside the ignored {RUNS}/): " \
                                 f"{run['untracked']}"
    if "--publish" not in cmd.text:  # every file it wrote is in the run folder, or a path the text names
        stray = [w for w in _wrote(run) if not (w.startswith(f"{RUNS}/") or w in cmd.text)]
        assert not stray, f"{said}: wrote {stray} outside {RUNS}/ without --publish"
    for path in run["modified"]:  # only a published file the text asked for on purpose, which the run said it wrote
        assert "--publish" in cmd.text and any(w.endswith(path) for w in _wrote(run)), \
            f"{said}: rewrote the published {path} without --publish"


@pytest.mark.parametrize("cmd", _slow(RUNNABLE_GPU))
def test_each_gpu_command_reaches_the_gpu_gate(cmd, doc_runs):
    """On a CPU box the documented GPU command passes every argument and output check and stops at the GPU gate
    in one line (it would run on a GPU host as written), or has no GPU work left (a sweep whose points are all
    measured: resumed, nothing run); nothing committed is touched."""
    run = doc_runs[cmd.text]
    said = f"{cmd.where}: {run['text']}\nexit {run['code']}; stderr: {run['stderr'][-600:]}"
    assert _gpu_gate(run), said
    assert "Traceback" not in run["stderr"] and "internal error" not in run["stderr"], said
    assert not run["modified"] and not run["untracked"], \
        f"{said}: modified {run['modified']}, left {run['untracked']}"
