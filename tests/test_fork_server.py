"""The suite's fork server (tests/fork_server.py) gives a child what an exec'd ``python -m nsa_exp`` gives: the same
exit code, stdout and stderr for the same command, argv, environment and working folder (what the start-up printed
included), the interpreter's own ending (``SystemExit`` codes and texts, a traceback, late threads, ``atexit``,
finalisers, unclosed files, a closed stdout, ``KeyboardInterrupt``), a killed child on a timeout, the address-space
cap; a changed source or schema, or another start-up variable, gets a new server while the old one finishes its
children; a tree that does not start, or starts torch, is exec'd at once; a client that goes away does not take
the server down; nothing ``import nsa_exp.cli`` reads from the environment is a variable one server serves every
value of."""

from __future__ import annotations

import ast
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests import fork_server
from tests.corpus.runner import REPO, run_child
from tests.helpers import run_cli

# A stand-in package named nsa_exp: it warns at import, reports what a child can observe of its start and ends in
# each of the ways the interpreter ends a program.
_CLI = '''
import atexit, json, os, resource, signal, sys, threading, time, warnings
import numpy as np

warnings.warn("import-time warning", UserWarning)

class Loud:
    def __del__(self):
        print("finalised", file=sys.stderr)

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
            "umask": os.umask(0o22), "dont_write_bytecode": sys.dont_write_bytecode, "version": VERSION}))
        return 0
    if what == "random":
        print(np.random.randint(1 << 30))
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
    if what == "unclosed":
        main_module.kept = open(os.environ["FORK_SERVER_FILE"], "w")
        main_module.kept.write("data")
        main_module.loud = Loud()
        return 0
    if what == "close-stdout":
        sys.stdout.close()
        return 0
    if what == "interrupt":
        atexit.register(print, "at exit", file=sys.stderr)
        main_module.kept = open(os.environ["FORK_SERVER_FILE"], "w")
        main_module.kept.write("data")
        raise KeyboardInterrupt
    if what == "exit-without-stderr":
        sys.stderr = None
        sys.exit("a text")
    if what == "state":
        print(json.dumps({"core": resource.getrlimit(resource.RLIMIT_CORE), "nice": os.getpriority(os.PRIO_PROCESS, 0),
                          "blocked": sorted(map(int, signal.pthread_sigmask(signal.SIG_BLOCK, []))),
                          "usr2_ignored": signal.getsignal(signal.SIGUSR2) == signal.SIG_IGN,
                          "int": repr(signal.getsignal(signal.SIGINT)),
                          "pipe": repr(signal.getsignal(signal.SIGPIPE))}))
        return 0
    if what == "nap":
        time.sleep(1.0)
        print("rested")
        return 0
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


def _tree(root: Path, version: int = 1, cli: str = _CLI) -> Path:
    """The stand-in package under ``root``; each file replaced whole (a child starting meanwhile reads the old file
    or the new one, never a truncated one). Each version's ``cli.py`` has its own size: where bytecode is written
    (no PYTHONDONTWRITEBYTECODE), a ``.pyc`` is trusted while the source's size and mtime in whole seconds match,
    so a same-size rewrite within one second would run the old version's bytecode."""
    (root / "nsa_exp").mkdir(parents=True, exist_ok=True)
    files = {"__init__.py": "", "cli.py": cli.replace("VERSION = 1", f"VERSION = {version}") + "#" * version + "\n",
             "__main__.py": "import sys\n\nfrom .cli import main\n\nsys.exit(main())\n"}
    for name, text in files.items():
        part = root / "nsa_exp" / f".{name}.part"
        part.write_text(text)
        part.replace(root / "nsa_exp" / name)
    return root


def _env(tree: Path, **extra: str) -> dict[str, str]:
    """The environment run_child gives a child in ``tree`` with ``extra``."""
    return {**os.environ, **extra, "PYTHONPATH": str(tree)}


def _both(monkeypatch, argv: list[str], cwd: Path, **kw):
    """The same child served and exec'd (run_child, tests/corpus/runner.py)."""
    served = run_child(argv, cwd, timeout=60, **kw)
    monkeypatch.setenv("NSA_EXP_TEST_EXEC_CHILDREN", "1")
    execd = run_child(argv, cwd, timeout=60, **kw)
    monkeypatch.delenv("NSA_EXP_TEST_EXEC_CHILDREN")
    return served, execd


@pytest.mark.parametrize("what", ["facts", "raise", "exit-text", "exit-without-stderr", "thread", "atexit",
                                  "close-stdout", "interrupt", "other"])
def test_a_served_child_ends_as_an_execd_one(tmp_path, monkeypatch, what):
    tree = _tree(tmp_path / "tree")
    probe = {"FORK_SERVER_PROBE": "x", "FORK_SERVER_FILE": str(tmp_path / "s")}
    served = run_child([what], tree, timeout=60, env=probe)
    assert fork_server.running_server(tree, _env(tree, **probe)) is not None  # it was served
    monkeypatch.setenv("NSA_EXP_TEST_EXEC_CHILDREN", "1")
    execd = run_child([what], tree, timeout=60, env={**probe, "FORK_SERVER_FILE": str(tmp_path / "e")})
    assert (served.code, served.stdout, served.stderr) == (execd.code, execd.stdout, execd.stderr)
    assert served.code == {"facts": 0, "raise": 1, "exit-text": 1, "exit-without-stderr": 1, "thread": 0, "atexit": 5,
                           "close-stdout": 0, "interrupt": -2, "other": 3}[what]
    if what == "interrupt":  # the interpreter's shutdown (atexit, files flushed), then death by SIGINT
        assert served.stderr.endswith("at exit\n") and (tmp_path / "s").read_text() == "data"
    assert "UserWarning: import-time warning" in served.stderr  # what the server's start-up printed
    if what == "raise":
        assert "Traceback" in served.stderr and "<string>" not in served.stderr  # no frame of the server's


def test_a_served_child_is_finalised_as_an_execd_one(tmp_path, monkeypatch):
    """Unclosed files flushed and finalisers run at the interpreter's shutdown; numpy's global random state drawn
    afresh in each child."""
    tree = _tree(tmp_path / "tree")
    served = run_child(["unclosed"], tree, timeout=60, env={"FORK_SERVER_FILE": str(tmp_path / "served")})
    monkeypatch.setenv("NSA_EXP_TEST_EXEC_CHILDREN", "1")
    execd = run_child(["unclosed"], tree, timeout=60, env={"FORK_SERVER_FILE": str(tmp_path / "execd")})
    monkeypatch.delenv("NSA_EXP_TEST_EXEC_CHILDREN")
    assert (served.code, served.stderr) == (execd.code, execd.stderr)
    assert served.code == 0 and "finalised" in served.stderr
    assert (tmp_path / "served").read_text() == (tmp_path / "execd").read_text() == "data"
    draws = {run_child(["random"], tree, timeout=60).stdout for _ in range(3)}
    assert len(draws) == 3


def test_a_served_child_is_killed_on_its_timeout_and_capped_in_memory(tmp_path, monkeypatch):
    tree = _tree(tmp_path / "tree")
    start = time.monotonic()
    slept = run_child(["sleep"], tree, timeout=2)
    assert slept.timed_out and slept.code is None and slept.stdout == "asleep\n"
    assert time.monotonic() - start < 30
    served, execd = _both(monkeypatch, ["memory", "2048"], tree, memory_cap_mb=1536)
    assert served.code == execd.code == 1 and "MemoryError" in served.stderr and "MemoryError" in execd.stderr
    assert served.peak_rss_mb < 1536


def test_a_changed_tree_or_start_variable_gets_a_new_server_and_the_old_one_ends_its_children(tmp_path):
    tree = _tree(tmp_path / "tree")
    (tree / "schemas").mkdir()
    (tree / "schemas" / "x.schema.json").write_text("{}")
    env = _env(tree)
    first = fork_server.server_for(tree, env)
    assert fork_server.server_for(tree, {**env, "NSA_EXP_MEMO_DIR": str(tmp_path)}) is first  # read at call time
    assert fork_server.server_for(tree, {**env, "PYTHONWARNINGS": "error"}) is not first  # read at start-up
    assert '"version": 1' in run_child(["facts"], tree, timeout=60).stdout
    napping: dict = {}
    nap = threading.Thread(target=lambda: napping.update(r=run_child(["nap"], tree, timeout=60)))
    nap.start()
    time.sleep(0.3)  # the nap is running on the first server when the tree changes
    _tree(tree, version=2)
    second = fork_server.server_for(tree, env)
    assert second is not first and '"version": 2' in run_child(["facts"], tree, timeout=60).stdout
    nap.join()
    assert (napping["r"].code, napping["r"].stdout) == (0, "rested\n")  # the old server finished it, then left
    first.proc.wait(timeout=10)
    (tree / "schemas" / "x.schema.json").write_text('{"type": "object"}')
    assert fork_server.server_for(tree, env) is not second  # a schema the import may cache changed


def test_a_tree_that_does_not_start_or_starts_torch_is_execd_at_once(tmp_path):
    broken = _tree(tmp_path / "broken")
    (broken / "nsa_exp" / "cli.py").write_text("raise ImportError('broken tree')\n")
    torchy = _tree(tmp_path / "torchy", cli="import torch\n" + _CLI)
    (torchy / "torch.py").write_text("")  # a stand-in torch: the server refuses on the name
    for tree in (broken, torchy):
        starts = len(fork_server.STARTS)
        begin = time.monotonic()
        assert fork_server.server_for(tree, _env(tree)) is None
        assert fork_server.server_for(tree, _env(tree)) is None  # remembered while the tree is unchanged
        assert len(fork_server.STARTS) == starts + 1 and time.monotonic() - begin < 30
    result = run_child(["facts"], broken, timeout=60)
    assert result.code == 1 and "ImportError: broken tree" in result.stderr
    assert run_child(["other"], torchy, timeout=60).code == 3


def test_a_client_that_goes_away_does_not_take_the_server_down(tmp_path):
    tree = _tree(tmp_path / "tree")
    server = fork_server.server_for(tree, _env(tree))
    request = {"argv": ["nap"], "cwd": str(tree), "env": _env(tree), "cap": 0, "umask": 0o22, "cpus": [0],
               "nofile": [1024, 1024]}
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with open(os.devnull, "rb") as null, open(tmp_path / "out", "wb") as out:
        socket.send_fds(server.ctl, [json.dumps(request).encode()], [theirs.fileno(), null.fileno(), out.fileno(),
                                                                       out.fileno()])
    theirs.close()
    mine.close()  # gone before the child has ended
    time.sleep(1.5)
    assert server.alive()
    assert run_child(["other"], tree, timeout=60).code == 3


def test_what_no_exec_could_deliver_or_a_server_could_mistake_is_execd(tmp_path, monkeypatch):
    tree = _tree(tmp_path / "tree")
    with pytest.raises(ValueError, match="null byte"):
        run_child(["fa\0cts"], tree, timeout=60)
    with pytest.raises(OSError):  # E2BIG: an argv past the kernel's limit for one string
        run_child(["x" * 200_000], tree, timeout=60)
    wide = ["other", "é" * 40_000]  # 80 KB on the command line, over the request's bytes once JSON-escaped
    served, execd = _both(monkeypatch, wide, tree)
    assert served.code == execd.code == 3
    with pytest.raises(FileNotFoundError):  # a working folder that is not there, as the exec says it
        run_child(["facts"], tmp_path / "missing", timeout=60, env={"PYTHONPATH": str(tree)})
    shadow = tmp_path / "work"
    shadow.mkdir()
    (shadow / "numpy.py").write_text("raise ImportError('numpy shadowed by the working folder')\n")
    result = run_child(["facts"], shadow, timeout=60, env={"PYTHONPATH": str(tree)})
    assert result.code == 1 and "numpy shadowed" in result.stderr  # -m's first sys.path entry, as exec'd


def test_the_callers_process_state_reaches_a_served_child(tmp_path, monkeypatch):
    """Resource limits, blocked and ignored signals are the caller's at the call, as an exec'd child inherits them."""
    tree = _tree(tmp_path / "tree")
    assert fork_server.server_for(tree, _env(tree)) is not None  # started before the caller's state changes
    core = resource.getrlimit(resource.RLIMIT_CORE)
    usr2 = signal.getsignal(signal.SIGUSR2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, core[1]))
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    try:
        served, execd = _both(monkeypatch, ["state"], tree)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR1])
        signal.signal(signal.SIGUSR2, usr2)
        resource.setrlimit(resource.RLIMIT_CORE, core)
    assert (served.code, served.stdout) == (execd.code, execd.stdout)
    state = json.loads(served.stdout)
    assert state["core"][0] == 0 and int(signal.SIGUSR1) in state["blocked"] and state["usr2_ignored"]


def test_a_server_retired_under_a_running_caller_loses_no_request(tmp_path):
    """Two threads run children while the tree keeps changing (each thread until the last change, at least 25
    children): every child ends as asked; every retired server exits once its children have, and is reaped."""
    tree = _tree(tmp_path / "tree")
    codes: list = []
    changed = threading.Event()

    def work() -> None:
        n = 0
        while n < 25 or not changed.is_set():
            try:
                codes.append(run_child(["other"], tree, timeout=60).code)
            except Exception as exc:  # noqa: BLE001 - the failure is what the test counts
                codes.append(repr(exc))
            n += 1

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for version in range(2, 8):
        time.sleep(0.2)
        _tree(tree, version=version)
    changed.set()
    for t in threads:
        t.join()
    assert len(codes) >= 50 and codes == [3] * len(codes)
    fork_server.server_for(tree, _env(tree))  # a server that served an older version of the tree retires here
    retired = list(fork_server._RETIRED)
    deadline = time.monotonic() + 10
    while any(s.proc.poll() is None for s in retired) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(s.proc.poll() is not None for s in retired), "a retired server with no children did not exit"
    fork_server.server_for(tree, _env(tree))  # reaps what has exited
    assert not set(map(id, retired)) & set(map(id, fork_server._RETIRED))


@pytest.mark.parametrize("args", [["--help"], ["routing", "--config", "/dev/zero"], ["no-such-command"],
                                  ["validate", "--json", "results/summaries/e1_h200.csv"]])
def test_the_cli_served_and_execd_says_the_same(monkeypatch, args):
    served = run_cli(*args)
    monkeypatch.setenv("NSA_EXP_TEST_EXEC_CHILDREN", "1")
    execd = run_cli(*args)
    assert (served.returncode, served.stdout, served.stderr) == (execd.returncode, execd.stdout, execd.stderr)
    assert served.args == execd.args == [sys.executable, "-m", "nsa_exp", *args]


_LOG_READS = '''
import os, sys
seen = []
get = os._Environ.__getitem__
os._Environ.__getitem__ = lambda self, key: (seen.append(key), get(self, key))[1]
import nsa_exp.cli
os.environ.get("FORK_SERVER_PROBE")
print("\\n".join(sorted(set(seen))))
'''


def test_the_cli_import_reads_no_variable_a_server_serves_every_value_of():
    """What the server's start-up reads from the environment (numpy's and OpenBLAS's switches: part of a server's
    key) is none of :data:`tests.fork_server.CALL_TIME_PREFIXES`; the log sees a read made after the import."""
    out = subprocess.run([sys.executable, "-c", _LOG_READS], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.split()
    assert "FORK_SERVER_PROBE" in out
    assert [k for k in out if k.startswith(fork_server.CALL_TIME_PREFIXES)] == []


def _reads_at_import(tree: ast.Module) -> list[int]:
    """Lines that read ``os.environ`` / ``getenv`` outside a function body (decorators and defaults included), or
    import either by name."""
    found = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for part in (*node.decorator_list, *node.args.defaults, *filter(None, node.args.kw_defaults)):
                visit(part)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            found.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and any(a.name in ("environ", "getenv", "environb") for a in node.names):
            found.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_no_module_of_the_package_reads_the_environment_at_import():
    found = {str(p.relative_to(REPO)): lines for p in sorted((REPO / "nsa_exp").rglob("*.py"))
             if (lines := _reads_at_import(ast.parse(p.read_text())))}
    assert found == {}
    probe = ast.parse("import os\nfrom os import environ\nX = os.environ.get('A')\ndef f():\n    return os.getenv('B')"
                      "\n@cache(os.getenv('C'))\ndef g(x=os.environ['D']):\n    pass\n")
    assert _reads_at_import(probe) == [2, 3, 6, 7]  # reads at import, not the one in a function body


def test_the_fork_server_is_off_when_asked(monkeypatch):
    monkeypatch.setenv("NSA_EXP_TEST_EXEC_CHILDREN", "1")
    assert fork_server.server_for(REPO, dict(os.environ)) is None
