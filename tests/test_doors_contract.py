"""The bad-input contract at every door (issue 23): each case of ``tests/corpus/doors.py`` runs
``python -m nsa_exp`` as a user would (a child, in a copy of the repository, with a timeout and a memory
cap) and must end as the case says: one line naming the field, exit 2, no traceback, no "internal error",
no hang, no runaway memory, no input destroyed, no committed file rewritten by a documented command.

A case today's code fails is listed in ``KNOWN_FAILING`` (id -> what happens today) and runs as a strict
xfail: the fix that makes it pass must delete its entry, or the suite fails (tests/corpus/README.md).
The children run two at a time from one session fixture, for the cases collected in this session only.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nsa_exp.cli import build_parser
from nsa_exp.io.progress import is_progress_line

from .corpus.doors import CASES, case_files, check_table, expand, zip_bomb
from .corpus.runner import REPO, precompile, run_child

KNOWN_FAILING: dict[str, str] = {}  # id -> what happens today; every case passes (issue 23)


def user_env() -> dict[str, str]:
    """A user's shell, the GPU env vars set: this process's environment at the call (the session's routing memo,
    tests/conftest.py, included) without the interpreter switch."""
    return {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}


def _params():
    # raises=AssertionError: only the contract's assertion is the expected failure; a broken fixture or
    # harness error is reported as an error, never absorbed by the xfail.
    return [pytest.param(c, id=c["id"], marks=[pytest.mark.xfail(strict=True, raises=AssertionError,
                                                                 reason=KNOWN_FAILING[c["id"]])]
                         if c["id"] in KNOWN_FAILING else []) for c in CASES]


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=corpus", "-c", "user.email=corpus@invalid", "-c",
                           "commit.gpgsign=false", *args], cwd=repo, capture_output=True, text=True, check=True)


_NOT_COPIED = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}


def _tree_files(root: Path) -> list[str]:
    """The working tree's files: git's list (tracked and untracked, not ignored) in a clone; every file but
    caches and virtual environments where the tree is not a git repository (the image's /opt/nsa-exp, whose
    contents .dockerignore already chose)."""
    if (root / ".git").exists():
        return subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                              capture_output=True, check=True).stdout.decode().split("\0")
    found = []
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NOT_COPIED and not d.startswith(".whl")]
        found += [str((Path(here) / f).relative_to(root)) for f in files]
    return found


def _copy_repository(dst: Path) -> Path:
    """The working tree as it is now (see ``_tree_files``), committed in a new repository."""
    for rel in filter(None, _tree_files(REPO)):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():  # submodule folders (gitlinks) are not files
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst / rel)  # the mode too: scripts stay executable
    _git(dst, "init", "-q")
    _git(dst, "add", "-A")
    _git(dst, "commit", "-q", "-m", "corpus base")
    precompile(dst)  # its children import the copy's nsa_exp
    return dst


@pytest.fixture(scope="session")
def repo_copy(tmp_path_factory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is needed to copy the repository")
    return _copy_repository(tmp_path_factory.mktemp("repo"))


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _where(spec: str, files: dict[str, Path], case_dir: Path, repo: Path) -> Path:
    return repo / spec.removeprefix("repo:") if spec.startswith("repo:") else files.get(spec, case_dir / spec)


def run_case(case: dict[str, Any], base: Path, template: Path) -> dict[str, Any]:
    """Set up, run and inspect one case; returns what the contract is checked against."""
    case_dir = base / case["id"] / "files"
    case_dir.mkdir(parents=True)
    repo = template
    if case.get("git_clean") or case.get("fresh"):
        repo = base / case["id"] / "repo"
        subprocess.run(["git", "clone", "-q", "--local", str(template), str(repo)], check=True, capture_output=True)
    files = case_files(case, case_dir, repo)
    argv = expand(case["argv"], files, case_dir, repo)
    watched = {s: _where(s, files, case_dir, repo) for s in case.get("unchanged", [])}
    before = {s: _digest(p) for s, p in watched.items()}
    result = run_child(argv, repo, timeout=case.get("timeout", 60), env=user_env(), clear_env=True,
                       memory_cap_mb=case.get("memory_cap_mb", 4096))
    out: dict[str, Any] = {"result": result, "argv": argv,
                           "names": expand(case.get("names", []), files, case_dir, repo)}
    out["changed"] = [s for s, p in watched.items() if _digest(p) != before[s]]
    out["present"] = [s for s in case.get("absent", []) if _where(s, files, case_dir, repo).exists()]
    if case.get("git_clean"):
        # nothing but the ignored run folder: no tracked file modified, no untracked file left in the tree
        out["modified"] = _git(repo, "status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    return out


@pytest.fixture(scope="session")
def door_results(request, repo_copy, tmp_path_factory) -> dict[str, dict[str, Any]]:
    """Every collected case of this module, run two children at a time."""
    wanted = {item.callspec.params["case"]["id"] for item in request.session.items  # doctest items have no module
              if getattr(getattr(item, "module", None), "__name__", None) == __name__
              and "case" in getattr(getattr(item, "callspec", None), "params", {})}
    base = tmp_path_factory.mktemp("doors")
    # the longest first, so that the last seconds are short cases on both threads; but a case marked ``last`` (the
    # doors' one full report, ~70 s when it regenerates every committed routing itself) after every other, when
    # the session's routing memo (tests/conftest.py) has had the longest to fill from the other worker's children
    cases = sorted((c for c in CASES if c["id"] in wanted),
                   key=lambda c: (c.get("last", False), -c.get("timeout", 60)))
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = pool.map(lambda c: (c["id"], run_case(c, base, repo_copy)), cases)
        return dict(done)


def contract_problems(case: dict[str, Any], out: dict[str, Any]) -> list[str]:
    """Every way the run broke the case's contract (empty: kept)."""
    r = out["result"]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not is_progress_line(ln)]  # sign of life aside
    problems = []
    if r.timed_out:
        return [f"still running after {case.get('timeout', 60)} s: killed (a hang)"]
    allowed = case["exit"] if isinstance(case["exit"], (tuple, list)) else (case["exit"],)
    if r.code not in allowed:
        problems.append(f"exit {r.code}, expected {' or '.join(map(str, allowed))}")
    if "Traceback" in r.stderr or "internal error" in r.stderr:
        problems.append("a traceback / internal error")
    if r.code == 2:
        if len(lines) != 1 or not lines[0].startswith("error:"):
            problems.append(f"{len(lines)} stderr lines, expected exactly one 'error: ...' line")
        missing = [f for f in out["names"] if not lines or f not in lines[-1]]
        if missing:
            problems.append(f"the error line does not name {missing}")
        problems += [f"the error line says {f!r}" for f in case.get("not_names", []) if lines and f in lines[-1]]
    elif r.code == 0 and any("Warning" in ln for ln in lines):
        problems.append("warnings leaked on stderr")
    if out["changed"]:
        problems.append(f"input(s) {out['changed']} changed")
    if out["present"]:
        problems.append(f"{out['present']} written")
    if out.get("modified"):
        problems.append(f"the tree is not clean (only the ignored runs/ may be written): {out['modified']}")
    if case.get("max_rss_mb") and r.peak_rss_mb > case["max_rss_mb"]:
        problems.append(f"peak RSS {r.peak_rss_mb:.0f} MB > {case['max_rss_mb']} MB")
    return problems


@pytest.mark.parametrize("case", _params())
def test_each_door_refuses_bad_input_in_one_line(case, door_results):
    out = door_results[case["id"]]
    problems = contract_problems(case, out)
    r = out["result"]
    assert not problems, f"{' '.join(out['argv'])[:300]}: {'; '.join(problems)} | stderr: {r.stderr.strip()[-400:]}"


def test_the_door_table_is_well_formed_and_covers_every_command():
    check_table()
    assert set(KNOWN_FAILING) <= {c["id"] for c in CASES}, set(KNOWN_FAILING) - {c["id"] for c in CASES}
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    covered = {c["argv"][0] for c in CASES}
    assert set(commands) <= covered, sorted(set(commands) - covered)


def test_the_zip_bomb_is_small_on_disk_and_large_inside(tmp_path):
    """The memory case is only a test if the file really holds 1 GiB behind a ~1 MB file (numpy reads it)."""
    zip_bomb(tmp_path / "b.npz", (1, 1 << 22, 4, 16))
    assert (tmp_path / "b.npz").stat().st_size < 2 * 2**20
    (info,) = zipfile.ZipFile(tmp_path / "b.npz").infolist()
    assert info.file_size > 2**30
    with zipfile.ZipFile(tmp_path / "b.npz").open(info) as fh:
        assert np.lib.format.read_magic(fh) == (1, 0)
        assert np.lib.format.read_array_header_1_0(fh)[0] == (1, 1 << 22, 4, 16)
        assert fh.read(1 << 20) == b"\xff" * (1 << 20)  # -1 int32s, as many as the header claims


def test_the_shared_repository_copy_is_left_as_it_was(door_results, repo_copy):
    """No case without a clone of its own may write into the repository it runs in."""
    status = _git(repo_copy, "status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    assert status == [], status


def test_a_child_in_the_repository_copy_reads_the_project_from_bytecode(repo_copy):
    """The copy's own modules are byte-compiled when it is made (tests/corpus/runner.py ``precompile``), so a child
    there imports them from ``__pycache__`` even under ``PYTHONDONTWRITEBYTECODE=1`` (Python's ``-v`` names each
    code object it loads from bytecode) instead of compiling ~27k lines per child."""
    proc = subprocess.run([sys.executable, "-v", "-c", "import nsa_exp.cli"], cwd=repo_copy, capture_output=True,
                          text=True, env={**user_env(), "PYTHONPATH": str(repo_copy), "PYTHONDONTWRITEBYTECODE": "1"},
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cli = repo_copy / "nsa_exp" / "cli.py"
    assert f"code object from '{importlib.util.cache_from_source(str(cli))}'" in proc.stderr, proc.stderr[-2000:]
