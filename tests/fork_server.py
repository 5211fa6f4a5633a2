"""A fork server for the suite's ``python -m nsa_exp`` children (CI's own time, issue 30).

Every ``python -m nsa_exp`` child the suite starts spends ~0.25 CPU-s importing what the CLI imports before it reads
its arguments (numpy, jsonschema, ``nsa_exp.cli``): ~200 children through :func:`tests.helpers.run_cli` and
:func:`tests.corpus.runner.run_child`, most of them a refusal that then takes milliseconds. A fork server imports
that once per tree and environment and forks one child per command, as CPython's ``multiprocessing`` forkserver
does for its workers (Lib/multiprocessing/forkserver.py: a server process that has imported the modules, forking
a child per request; the idea, not its code).

**What a child is.** A separate process (its own pid, session, address-space cap, exit status and ``wait4`` rusage),
forked from a server that has run exactly what ``python -m nsa_exp`` runs before ``main()`` (the interpreter's
start-up with the same environment, ``import nsa_exp.cli`` from the tree a real ``python -m nsa_exp`` would import
it from) and nothing else; the child then takes the request's working folder, environment, argv and stdio and runs
``nsa_exp`` as ``__main__`` (:func:`runpy._run_module_as_main`, what ``-m`` calls), with the interpreter's own ending:
``SystemExit``'s code, a traceback and 1 for an uncaught exception, the non-daemon threads joined, ``atexit``
handlers, stdout flushed.

**When it is not used** (the child is then started by ``exec`` as before): a tree that is not a Python source tree
of ``nsa_exp`` (an installed copy), a child with the suite's interpreter harness on (``NSA_EXP_TEST_HARNESS=1``:
its start-up imports torch and Triton), no ``socket.send_fds`` (not Linux), or ``NSA_EXP_TEST_EXEC_CHILDREN=1``
in the suite's environment (every child exec'd, the way to rule the server out when a child misbehaves).

**What can differ from an exec'd child, and why it does not matter here.** A server serves only requests whose
environment equals the one it started with, except the variables no module reads at import
(:data:`CALL_TIME_PREFIXES`; the package reads its ``NSA_EXP_*`` variables only inside functions, which
``tests/test_fork_server.py`` holds to), and only while no ``nsa_exp`` source file of the tree has changed since it
started (each request compares every file's size and mtime). Children share the server's hash seed and numpy's
legacy global ``RandomState`` (Python's ``random`` re-seeds after a fork; the package draws only from seeded
generators). ``tests/test_fork_server.py`` runs the same commands both ways and compares exit codes and output.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

#: variables that nothing the server imports reads (the package reads its own only inside functions; torch, Triton
#: and FLA read theirs when a command imports them, after the fork), so one server serves every value of them
CALL_TIME_PREFIXES = ("PYTEST_CURRENT_TEST", "NSA_EXP_MEMO_DIR", "NSA_EXP_GIT_SHA", "CUDA_", "TRITON_", "FLA_",
                      "TORCH")
_OFF = "NSA_EXP_TEST_EXEC_CHILDREN"

# The server: started as ``python -c SERVER TREE FD``; imports what ``python -m nsa_exp`` imports before main(),
# then forks one child per request read from the control socket (fd FD). A request is one JSON message with four
# descriptors (the reply socket, stdin, stdout, stderr); the reply is the child's pid, then its wait status and
# rusage once it has ended. The server exits when the suite's end of the control socket closes.
SERVER = r"""
import array, builtins, json, os, resource, runpy, selectors, socket, sys, threading, types
tree, fd = sys.argv[1], int(sys.argv[2])
sys.argv = ["-c"]
sys.path[0] = tree                      # -c put the start folder ('') there; -m from TREE puts TREE
import nsa_exp.cli                      # what nsa_exp/__main__.py imports before it calls main()
ctl = socket.socket(fileno=fd)
if not {"torch", "triton", "fla"} & set(sys.modules):  # else their variables would be start-up ones: no server
    ctl.send(b"ready")

def exit_code(exc):                     # the interpreter's handling of an uncaught SystemExit
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1

def child(request, fds):
    os.setsid()
    if request["cap"]:
        resource.setrlimit(resource.RLIMIT_AS, (request["cap"], request["cap"]))
    for target, fd in zip((0, 1, 2), fds[1:]):
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    for sock in (ctl, sel, *running.values()):  # nothing of the server's or of another request's stays open
        sock.close()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = os.getcwd()           # -m puts the working folder first
    sys.argv = ["-m", *request["argv"]]
    sys.orig_argv = [sys.executable, "-m", "nsa_exp", *request["argv"]]
    main = types.ModuleType("__main__")  # as the interpreter makes it before -m runs the module in it
    main.__builtins__, main.__annotations__ = builtins, {}
    sys.modules["__main__"] = main
    try:
        runpy._run_module_as_main("nsa_exp")
        code = 0
    except SystemExit as exc:
        code = exit_code(exc)
    except BaseException:
        kind, value, tb = sys.exc_info()
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next                 # the traceback starts where -m's does, in runpy
        sys.excepthook(kind, value.with_traceback(tb), tb)
        code = 1
    threading._shutdown()
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = 120
    os._exit(code)

running = {}
sel = selectors.DefaultSelector()
sel.register(ctl, selectors.EVENT_READ)
while True:
    for pid in list(running):
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            reply = running.pop(pid)
            reply.sendall(json.dumps({"status": status, "maxrss_kb": usage.ru_maxrss,
                                      "cpu": usage.ru_utime + usage.ru_stime}).encode() + b"\n")
            reply.close()
    if not sel.select(0.005 if running else None):
        continue
    try:
        message, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 4)
    except OSError:
        message, fds = b"", []
    if not message:
        for pid in running:
            os.wait4(pid, 0)
        os._exit(0)
    request = json.loads(message)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            child(request, fds)
        finally:
            os._exit(70)
    reply = socket.socket(fileno=fds[0])
    for fd in fds[1:]:
        os.close(fd)
    reply.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    running[pid] = reply
"""


@dataclass
class Ended:
    """How a served child ended: its exit code (``-N`` for signal N, as :mod:`subprocess` says it), its own peak
    RSS in KiB (``wait4``) and whether the caller killed it for running past its timeout."""

    returncode: int
    maxrss_kb: int
    timed_out: bool


class _Server:
    def __init__(self, tree: Path, env: dict[str, str]) -> None:
        self.tree = tree
        self.stamp = _source_stamp(tree)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl = ours
        self.lock = threading.Lock()
        # stdio not a terminal, as a child's own output files are not: Python buffers its streams alike
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, str(tree), str(theirs.fileno())], cwd=tree,
                                     env=env, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        ours.settimeout(300)
        try:
            self.ready = ours.recv(16) == b"ready"  # nothing (EOF): its start-up failed, e.g. a tree that does
        except TimeoutError:                          # not import; its children are then exec'd, to fail as users see
            self.ready = False
        ours.settimeout(None)

    def alive(self) -> bool:
        return self.ready and self.proc.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.ctl.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], stdin: int, stdout: int, stderr: int,
            timeout: float, cap: int) -> Ended:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        request = json.dumps({"argv": argv, "cwd": str(cwd), "env": env, "cap": cap}).encode()
        with self.lock:
            socket.send_fds(self.ctl, [request], [theirs.fileno(), stdin, stdout, stderr])
            theirs.close()
        with mine:
            lines = _Lines(mine)
            pid = json.loads(lines.next(None))["pid"]
            end = time.monotonic() + timeout
            line = lines.next(end)
            timed_out = line is None
            if timed_out:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                line = lines.next(None)
        ended = json.loads(line)
        return Ended(os.waitstatus_to_exitcode(ended["status"]), ended["maxrss_kb"], timed_out)


class _Lines:
    """Newline-ended messages read from a stream socket, each within a deadline."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf = sock, b""

    def next(self, deadline: float | None) -> str | None:
        while b"\n" not in self.buf:
            self.sock.settimeout(None if deadline is None else max(deadline - time.monotonic(), 0.001))
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                return None
            if not chunk:
                raise RuntimeError("the fork server closed a request without an answer")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def _source_stamp(tree: Path) -> tuple:
    return tuple(sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in (tree / "nsa_exp").rglob("*.py")))


_SERVERS: dict[tuple, _Server] = {}
_LOCK = threading.Lock()


def imported_tree(cwd: Path, env: dict[str, str]) -> Path | None:
    """The folder whose ``nsa_exp`` a ``python -m nsa_exp`` started in ``cwd`` with ``env`` imports when it is a
    source tree on ``sys.path``'s first entries (the working folder, then ``PYTHONPATH``); None otherwise."""
    for folder in [str(cwd), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]:
        if (Path(folder) / "nsa_exp" / "__init__.py").is_file():
            return Path(folder).resolve()
    return None


def server_for(cwd: Path, env: dict[str, str]) -> _Server | None:
    """The fork server for a ``python -m nsa_exp`` child in ``cwd`` with ``env``; None where an exec'd child is
    the only faithful one (see the module docstring)."""
    if os.environ.get(_OFF) == "1" or env.get("NSA_EXP_TEST_HARNESS") == "1" or not hasattr(socket, "send_fds"):
        return None
    tree = imported_tree(cwd, env)
    if tree is None:
        return None
    start_env = {k: v for k, v in env.items() if not k.startswith(CALL_TIME_PREFIXES)}
    key = (str(tree), tuple(sorted(start_env.items())))
    with _LOCK:
        server = _SERVERS.get(key)
        if server is not None and (not server.alive() or server.stamp != _source_stamp(tree)):
            server.close()
            server = None
        if server is None:
            server = _SERVERS[key] = _Server(tree, start_env)

    return server if server.ready else None


def run(argv: list[str], cwd: Path, env: dict[str, str], stdin: int, stdout: int, stderr: int, timeout: float,
        memory_cap: int = 0) -> Ended | None:
    """``python -m nsa_exp ARGV`` in ``cwd`` with exactly ``env``, its stdio on the three descriptors, its address
    space capped at ``memory_cap`` bytes (0: not capped), killed with its session after ``timeout`` seconds; None
    where the child must be exec'd instead (:func:`server_for`)."""
    server = server_for(cwd, env)
    if server is None:
        return None
    return server.run(argv, cwd, env, stdin, stdout, stderr, timeout, memory_cap)


@atexit.register
def _close_all() -> None:
    for server in _SERVERS.values():
        server.close()
