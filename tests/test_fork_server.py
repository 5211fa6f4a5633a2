"""The suite's fork server (tests/fork_server.py) gives a child what an exec'd ``python -m nsa_exp`` gives: the same
exit code, stdout and stderr for the same command, argv, environment and working folder, the interpreter's own
ending (``SystemExit`` codes and texts, a traceback, late threads, ``atexit``), a killed child on a timeout, the
address-space cap; a changed source file or an import-time variable gets a new server; and no module of the
package reads an environment variable at import (what lets one server serve every value of those it reads later)."""

from __future__ import annotations

import ast
import os
import sys
import time
from pathlib import Path

import pytest

from tests import fork_server
from tests.corpus.runner import REPO, run_child
from tests.helpers import run_cli

# A stand-in package named nsa_exp: it reports what a child can observe of its start and ends in each of the ways
# the interpreter ends a program.
_CLI = '''
import atexit, json, os, sys, threading, time

def main():
    what = sys.argv[1]
    main_module = sys.modules["__main__"]
    if what == "facts":
        print(json.dumps({
            "argv": sys.argv, "orig_argv": sys.orig_argv, "path0": sys.path[0], "cwd": os.getcwd(),
            "main_names": sorted(vars(main_module)), "main_file": main_module.__file__,
            "main_spec": main_module.__spec__.name, "env": os.environ.get("FORK_SERVER_PROBE"),
            "memo": os.environ.get("NSA_EXP_MEMO_DIR"), "stdout": [sys.stdout.encoding, sys.stdout.line_buffering],
            "stderr": [sys.stderr.encoding, sys.stderr.errors, sys.stderr.line_buffering],
            "stdin": os.read(0, 10).decode(), "session_leader": os.getsid(0) == os.getpid(),
            "dont_write_bytecode": sys.dont_write_bytecode, "version": VERSION}))
        return 0
    if what == "raise":
        raise ValueError("boom")
    if what == "exit-text":
        sys.exit("a text")
    if what == "thread":
        threading.Thread(target=lambda: (time.sleep(0.3), print("late"))).start()
        print("early", end="")
        return 0
    if what == "atexit":
        atexit.register(print, "at exit", file=sys.stderr)
        sys.stdout.write("unflushed")
        return 5
    if what == "sleep":
        print("asleep", flush=True)
        time.sleep(120)
    if what == "memory":
        return len(bytearray(int(sys.argv[2]) << 20))
    return 3

VERSION = 1
'''


@pytest.fixture(autouse=True)
def _served(monkeypatch):
    """The server on, whatever the suite's environment says (NSA_EXP_TEST_EXEC_CHILDREN=1 turns it off for the
    rest of the suite)."""
    monkeypatch.delenv("NSA_EXP_TEST_EXEC_CHILDREN", raising=False)


def _tree(root: Path, version: int = 1) -> Path:
    (root / "nsa_exp").mkdir(parents=True, exist_ok=True)
    (root / "nsa_exp" / "__init__.py").write_text("")
    (root / "nsa_exp" / "cli.py").write_text(_CLI.replace("VERSION = 1", f"VERSION = {version}"))
    (root / "nsa_exp" / "__main__.py").write_text("import sys\n\nfrom .cli import main\n\nsys.exit(main())\n")
    return root


def _both(monkeypatch, argv: list[str], cwd: Path, **kw):
    """The same child served and exec'd (run_child, tests/corpus/runner.py)."""
    served = run_child(argv, cwd, timeout=60, **kw)
    monkeypatch.setenv("NSA_EXP_TEST_EXEC_CHILDREN", "1")
    execd = run_child(argv, cwd, timeout=60, **kw)
    monkeypatch.delenv("NSA_EXP_TEST_EXEC_CHILDREN")
    return served, execd


@pytest.mark.parametrize("what", ["facts", "raise", "exit-text", "thread", "atexit", "other"])
def test_a_served_child_ends_as_an_execd_one(tmp_path, monkeypatch, what):
    tree = _tree(tmp_path / "tree")
    served, execd = _both(monkeypatch, [what], tree, env={"FORK_SERVER_PROBE": "x"})
    assert fork_server.server_for(tree, {**os.environ, "PYTHONPATH": str(tree)}) is not None  # it was served
    assert (served.code, served.stdout, served.stderr) == (execd.code, execd.stdout, execd.stderr)
    assert served.code == {"facts": 0, "raise": 1, "exit-text": 1, "thread": 0, "atexit": 5, "other": 3}[what]
    if what == "raise":
        assert served.stderr.startswith("Traceback") and "<string>" not in served.stderr  # no frame of the server's


def test_a_served_child_is_killed_on_its_timeout_and_capped_in_memory(tmp_path, monkeypatch):
    tree = _tree(tmp_path / "tree")
    start = time.monotonic()
    slept = run_child(["sleep"], tree, timeout=2)
    assert slept.timed_out and slept.code is None and slept.stdout == "asleep\n"
    assert time.monotonic() - start < 30
    served, execd = _both(monkeypatch, ["memory", "1024"], tree, memory_cap_mb=512)
    assert served.code == execd.code == 1 and "MemoryError" in served.stderr and "MemoryError" in execd.stderr
    assert served.peak_rss_mb < 512


def test_a_changed_source_or_start_variable_gets_a_new_server(tmp_path, monkeypatch):
    tree = _tree(tmp_path / "tree")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    first = fork_server.server_for(tree, env)
    assert fork_server.server_for(tree, {**env, "NSA_EXP_MEMO_DIR": str(tmp_path)}) is first  # read at call time
    assert fork_server.server_for(tree, {**env, "PYTHONWARNINGS": "error"}) is not first  # read at start-up
    assert '"version": 1' in run_child(["facts"], tree, timeout=60).stdout
    time.sleep(0.01)
    _tree(tree, version=2)
    assert fork_server.server_for(tree, env) is not first
    assert '"version": 2' in run_child(["facts"], tree, timeout=60).stdout


def test_a_tree_that_does_not_import_is_execd_and_fails_as_a_user_sees_it(tmp_path):
    tree = _tree(tmp_path / "tree")
    (tree / "nsa_exp" / "cli.py").write_text("raise ImportError('broken tree')\n")
    assert fork_server.server_for(tree, {**os.environ, "PYTHONPATH": str(tree)}) is None
    result = run_child(["facts"], tree, timeout=60)
    assert result.code == 1 and "ImportError: broken tree" in result.stderr


@pytest.mark.parametrize("args", [["--help"], ["routing", "--config", "/dev/zero"], ["no-such-command"],
                                  ["validate", "--json", "results/summaries/e1_h200.csv"]])
def test_the_cli_served_and_execd_says_the_same(monkeypatch, args):
    served = run_cli(*args)
    monkeypatch.setenv("NSA_EXP_TEST_EXEC_CHILDREN", "1")
    execd = run_cli(*args)
    assert (served.returncode, served.stdout, served.stderr) == (execd.returncode, execd.stdout, execd.stderr)
    assert served.args == execd.args == [sys.executable, "-m", "nsa_exp", *args]


def _reads_at_import(tree: ast.Module) -> list[int]:
    """Lines outside any function body that read ``os.environ`` or call ``getenv``."""
    found = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            found.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_no_module_of_the_package_reads_the_environment_at_import():
    found = {str(p.relative_to(REPO)): lines for p in sorted((REPO / "nsa_exp").rglob("*.py"))
             if (lines := _reads_at_import(ast.parse(p.read_text())))}
    assert found == {}
    probe = ast.parse("import os\nX = os.environ.get('A')\ndef f():\n    return os.getenv('B')\n")
    assert _reads_at_import(probe) == [2]  # the scan sees a read at import, not one in a function


def test_the_fork_server_is_off_when_asked(monkeypatch):
    monkeypatch.setenv("NSA_EXP_TEST_EXEC_CHILDREN", "1")
    assert fork_server.server_for(REPO, dict(os.environ)) is None
