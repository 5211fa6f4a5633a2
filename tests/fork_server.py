"""A fork server for the suite's ``python -m nsa_exp`` children (CI's own time, issue 30).

Every ``python -m nsa_exp`` child the suite starts spends ~0.25 CPU-s importing what the CLI imports before it reads
its arguments (numpy, jsonschema, ``nsa_exp.cli``): ~200 children through :func:`tests.helpers.run_cli` and
:func:`tests.corpus.runner.run_child`, most of them a refusal that then takes milliseconds. A fork server imports
that once per tree and environment and forks one child per command, as CPython's ``multiprocessing`` forkserver
does for its workers (Lib/multiprocessing/forkserver.py: a server process that has imported the modules, forking
a child per request; the idea, not its code).

**What a child is.** A separate process (its own pid, session, exit status and ``wait4`` rusage), forked from a
server that has run exactly what ``python -m nsa_exp`` runs before ``main()`` (the interpreter's start-up with the
same environment, ``import nsa_exp.cli`` from the tree a real ``python -m nsa_exp`` would import it from) and nothing
else. The child takes the request's working folder, environment, argv and stdio, and the caller's process state an
exec'd child inherits (umask, CPU affinity, nice, every resource limit, the blocked and the ignored signals); the
address-space cap on top; what the server's start-up printed goes first onto its stdout and stderr (an import-time
warning is seen as an exec'd child shows it); numpy's legacy global ``RandomState`` is re-seeded from the OS, as a
fresh import seeds it. It runs ``nsa_exp`` as ``__main__`` (:func:`runpy._run_module_as_main`, what ``-m`` calls)
and ends as the interpreter ends a program, at the server script's top level: a ``SystemExit`` raised there again
(the interpreter's own handling of its code or text), an uncaught exception's traceback from ``runpy`` on and exit 1,
a ``KeyboardInterrupt`` as the interpreter ends one (its shutdown, then death by SIGINT); then the interpreter's own
shutdown (threads joined, ``atexit``, objects finalised, files and stdio flushed).

**When it is not used** (the child is exec'd as before): a tree that is not a Python source tree of ``nsa_exp`` (an
installed copy), a tree whose start-up fails or imports torch, Triton or FLA (their variables would then be read at
start-up), a child with the suite's interpreter harness on (``NSA_EXP_TEST_HARNESS=1``), an argv or environment no
exec could deliver (a NUL byte) or a request over 128 KiB (the exec'd child meets the kernel's own limits), a working
folder that is missing or, other than the tree, holds a module a start-up could import (``-m`` puts it first on
``sys.path``), an address-space cap under 1 GiB (an exec'd child pays its start-up inside the cap), no
``socket.send_fds`` (not Linux), or ``NSA_EXP_TEST_EXEC_CHILDREN=1`` in the suite's environment (every child
exec'd: the way to rule the server out).

**What still differs, and why it does not matter here.** A server serves requests whose environment equals the one
it started with, except the variables nothing it imports reads (:data:`CALL_TIME_PREFIXES`;
``tests/test_fork_server.py`` logs every variable ``import nsa_exp.cli`` reads), and only while no ``nsa_exp/**/*.py``
or ``schemas/**/*.json`` file of the tree has changed (a changed tree gets a new server; the old one takes no
request after it is retired, finishes its children, then exits, and is reaped). Children share the server's hash
seed; what the start-up printed precedes all of a child's output (the package's start-up prints nothing). A child's
peak RSS does not include the import's transient peak (``--help``: 28-38 MB served, 41-46 MB exec'd), which only
loosens the doors' ``max_rss_mb`` bounds (768 MB). ``tests/test_fork_server.py`` runs the same commands both ways and
compares exit codes and output.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

#: variables that nothing the server imports reads (the package reads its own only inside functions; torch, Triton
#: and FLA read theirs when a command imports them, after the fork), so one server serves every value of them
CALL_TIME_PREFIXES = ("PYTEST_CURRENT_TEST", "NSA_EXP_MEMO_DIR", "NSA_EXP_GIT_SHA", "CUDA_", "TRITON_", "FLA_",
                      "TORCH")
_OFF = "NSA_EXP_TEST_EXEC_CHILDREN"
_MAX_REQUEST = 128 * 1024  # bytes of a request (one SOCK_SEQPACKET message; the send buffer is ~208 KiB)
_RLIMITS = [n for n in dir(resource) if n.startswith("RLIMIT_")]
_MIN_CAP = 1 << 30
_LIVE = 16  # servers kept at once (~45 MB each); the least recently used beyond that finishes its children, exits

# The server: started as ``python -c SERVER TREE FD``; imports what ``python -m nsa_exp`` imports before main(),
# then forks one child per request read from the control socket (fd FD). A request is one JSON message with four
# descriptors (the reply socket, stdin, stdout, stderr); the reply is the child's pid, then its wait status and
# rusage once it has ended. ``retire``: no more requests, exit once the running children have ended. End of file
# (the suite has gone): its running children are killed, then it exits.
SERVER = r"""
import builtins, json, os, resource, runpy, selectors, signal, socket, sys, traceback, types
tree, fd = sys.argv[1], int(sys.argv[2])
sys.argv = ["-c"]
sys.path[0] = tree                      # -c put the start folder ('') there; -m from TREE puts TREE
import nsa_exp.cli                      # what nsa_exp/__main__.py imports before it calls main()
ctl = socket.socket(fileno=fd)
if {"torch", "triton", "fla"} & set(sys.modules):
    os._exit(3)                         # their variables would be start-up ones: the suite exec's these children
sys.stdout.flush()
sys.stderr.flush()
ctl.send(b"ready")

def child(request, fds, others):
    os.setsid()
    os.umask(request["umask"])
    os.sched_setaffinity(0, request["cpus"])
    try:
        os.setpriority(os.PRIO_PROCESS, 0, request["nice"])
    except PermissionError:             # a lower nice than the server's needs a privilege the caller had
        pass
    for name, limits in request["rlimits"].items():
        resource.setrlimit(getattr(resource, name), tuple(limits))
    if request["cap"]:
        resource.setrlimit(resource.RLIMIT_AS, (request["cap"], request["cap"]))
    for number in request["ignored"]:   # what the caller ignores an exec'd child ignores too
        signal.signal(number, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, request["blocked"])
    for target, fd in zip((0, 1, 2), fds[1:]):
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    for sock in others:                 # nothing of the server's or of another request's stays open
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
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()  # from the OS, as a fresh import seeds the legacy global state
    try:
        runpy._run_module_as_main("nsa_exp")
    except SystemExit as exc:
        return exc                      # raised again at the top: the interpreter's own handling of it
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next                 # the traceback starts where -m's does, in runpy
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        return KeyboardInterrupt() if isinstance(exc, KeyboardInterrupt) else SystemExit(1)
    return SystemExit(0)

def reply(sock, message):
    try:
        sock.sendall(json.dumps(message).encode() + b"\n")
    except OSError:                     # the suite stopped waiting for it: nothing to tell
        pass
    sock.close()

running, accepting = {}, True
sel = selectors.DefaultSelector()
sel.register(ctl, selectors.EVENT_READ)
while True:
    for pid in list(running):
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            reply(running.pop(pid), {"status": status, "maxrss_kb": usage.ru_maxrss})
    if not accepting and not running:
        os._exit(0)
    if not sel.select(0.005 if running else None):
        continue
    try:
        message, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 4)
    except OSError:
        message, fds = b"", []
    if not message:                     # the suite has gone: so do the children it no longer waits for
        for pid in running:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in running:
            os.wait4(pid, 0)
        os._exit(0)
    if message == b"retire":
        accepting = False
        continue
    request = json.loads(message)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            outcome = child(request, fds, [ctl, sel, *running.values()])
        except BaseException:
            traceback.print_exc()
            os._exit(70)
        if isinstance(outcome, KeyboardInterrupt):
            sys.excepthook = lambda *args: None  # its traceback is printed: the shutdown, then death by SIGINT
        raise outcome                   # the interpreter's own ending and shutdown, as at the end of any program
    answer = socket.socket(fileno=fds[0])
    for fd in fds[1:]:
        os.close(fd)
    try:
        answer.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        pass
    running[pid] = answer
"""


@dataclass
class Ended:
    """How a served child ended: its exit code (``-N`` for signal N, as :mod:`subprocess` says it), its own peak
    RSS in KiB (``wait4``) and whether the caller killed it for running past its timeout."""

    returncode: int
    maxrss_kb: int
    timed_out: bool


class _Server:
    def __init__(self, tree: Path, env: dict[str, str], stamp: tuple) -> None:
        self.tree, self.stamp = tree, stamp
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl, self.lock, self.retired = ours, threading.Lock(), False
        # what the start-up prints (an import-time warning) is kept for each child's stdio; files, not a terminal,
        # as a child's own output is, so Python buffers the server's streams as it buffers the child's
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            self.proc = subprocess.Popen([sys.executable, "-c", SERVER, str(tree), str(theirs.fileno())], cwd=tree,
                                         env=env, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=err, start_new_session=True)
            theirs.close()
            ours.settimeout(300)
            try:
                self.ready = ours.recv(16) == b"ready"  # nothing (end of file): its start-up failed or refused
            except TimeoutError:
                self.ready = False
            ours.settimeout(None)
            out.seek(0)
            err.seek(0)
            self.startup = (out.read(), err.read())
        if not self.ready:
            self.close()
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()

    def alive(self) -> bool:
        return self.ready and self.proc.poll() is None

    def retire(self) -> None:
        """No more requests: it ends its running children's calls, then exits."""
        with self.lock:
            self.retired = True
            with contextlib.suppress(OSError):
                self.ctl.send(b"retire")

    def close(self) -> None:
        """The control socket closed: the server kills its running children and exits."""
        with contextlib.suppress(OSError):
            self.ctl.close()

    def run(self, request: bytes, stdin: int, stdout: int, stderr: int, timeout: float) -> Ended | None:
        """The child's end; None when the server was retired before the request reached it (nothing written)."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with self.lock:
            if self.retired:
                mine.close()
                theirs.close()
                return None
            os.write(stdout, self.startup[0])  # the child's descriptors share these files' offsets: it writes after
            os.write(stderr, self.startup[1])
            socket.send_fds(self.ctl, [request], [theirs.fileno(), stdin, stdout, stderr])
        theirs.close()
        with mine:
            lines = _Lines(mine)
            pid = json.loads(lines.next(None))["pid"]
            line = lines.next(time.monotonic() + timeout)
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
    """Size and mtime of every file the server's import reads from the tree (its code, the schemas it caches)."""
    files = [*(tree / "nsa_exp").rglob("*.py"), *(tree / "schemas").rglob("*.json")]
    return tuple(sorted((str(p), (s := p.stat()).st_size, s.st_mtime_ns) for p in files))


def _umask() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise RuntimeError("no Umask line in /proc/self/status")


_SERVERS: collections.OrderedDict[tuple, _Server] = collections.OrderedDict()
_UNSERVABLE: set[tuple] = set()  # (key, stamp) whose server did not start: exec'd until the tree changes
_RETIRED: list[_Server] = []
_LOCK = threading.Lock()
#: servers started in this process (tests count them)
STARTS: list[tuple] = []


def imported_tree(cwd: Path, env: dict[str, str]) -> Path | None:
    """The folder whose ``nsa_exp`` a ``python -m nsa_exp`` started in ``cwd`` with ``env`` imports when it is a
    source tree on ``sys.path``'s first entries (the working folder, then ``PYTHONPATH``); None otherwise."""
    for folder in [str(cwd), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]:
        if (Path(folder) / "nsa_exp" / "__init__.py").is_file():
            return Path(folder).resolve()
    return None


def _key(cwd: Path, env: dict[str, str]) -> tuple | None:
    tree = imported_tree(cwd, env)
    if tree is None:
        return None
    return str(tree), tuple(sorted((k, v) for k, v in env.items() if not k.startswith(CALL_TIME_PREFIXES)))


def server_for(cwd: Path, env: dict[str, str]) -> _Server | None:
    """The running fork server for a ``python -m nsa_exp`` child in ``cwd`` with ``env``, started if need be; None
    where an exec'd child is the only faithful one (see the module docstring)."""
    if os.environ.get(_OFF) == "1" or env.get("NSA_EXP_TEST_HARNESS") == "1" or not hasattr(socket, "send_fds"):
        return None
    key = _key(cwd, env)
    if key is None:
        return None
    with _LOCK:
        for old in [s for s in _RETIRED if s.proc.poll() is not None]:  # reaped: no zombie, no descriptor left
            old.close()
            _RETIRED.remove(old)
        stamp = _source_stamp(Path(key[0]))
        if (key, stamp) in _UNSERVABLE:
            return None
        server = _SERVERS.pop(key, None)
        if server is not None and (not server.alive() or server.stamp != stamp):
            server.retire()
            _RETIRED.append(server)
            server = None
        if server is None:
            STARTS.append(key)
            server = _Server(Path(key[0]), dict(key[1]), stamp)
            if not server.ready:
                _UNSERVABLE.add((key, stamp))
                return None
        _SERVERS[key] = server  # the most recently used last
        while len(_SERVERS) > _LIVE:
            _, oldest = _SERVERS.popitem(last=False)
            oldest.retire()
            _RETIRED.append(oldest)
    return server


def running_server(cwd: Path, env: dict[str, str]) -> _Server | None:
    """The live server that serves ``cwd`` and ``env`` now, without starting one (for the tests)."""
    key = _key(cwd, env)
    server = _SERVERS.get(key) if key else None
    return server if server is not None and server.alive() else None


def run(argv: list[str], cwd: Path, env: dict[str, str], stdin: int, stdout: int, stderr: int, timeout: float,
        memory_cap: int = 0) -> Ended | None:
    """``python -m nsa_exp ARGV`` in ``cwd`` with exactly ``env``, its stdio on the three descriptors (files), its
    address space capped at ``memory_cap`` bytes (0: not capped), killed with its session after ``timeout`` seconds;
    None where the child must be exec'd instead (:func:`server_for`)."""
    if any("\0" in t for t in [*argv, *env, *env.values()]) or 0 < memory_cap < _MIN_CAP or _shadowed(Path(cwd), env):
        return None
    request = json.dumps({"argv": argv, "cwd": str(cwd), "env": env, "cap": memory_cap, **_process_state()}).encode()
    if len(request) > _MAX_REQUEST:
        return None
    for _ in range(3):  # a server retired between server_for and the request: the next one
        server = server_for(cwd, env)
        if server is None:
            return None
        ended = server.run(request, stdin, stdout, stderr, timeout)
        if ended is not None:
            return ended
    return None


def _shadowed(cwd: Path, env: dict[str, str]) -> bool:
    """True where an exec'd child's start-up could import something else than the server's: a working folder that
    is missing, or is not the tree and holds a module or package (``-m`` puts it first on ``sys.path``)."""
    if not cwd.is_dir():
        return True  # the exec raises FileNotFoundError, as it does for a user
    if imported_tree(cwd, env) == cwd.resolve():
        return False
    return any(p.suffix in (".py", ".pyc", ".so", ".pth") or (p / "__init__.py").is_file() for p in cwd.iterdir())


def _process_state() -> dict:
    """What an exec'd child inherits from this process and a forked one must be given: umask, CPU affinity, nice,
    resource limits, the blocked signals and the ignored ones (but those the interpreter sets itself)."""
    managed = {signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ}
    ignored = [int(n) for n in signal.valid_signals() if n not in managed and n not in (signal.SIGKILL, signal.SIGSTOP)
               and signal.getsignal(n) == signal.SIG_IGN]
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        ignored.append(int(signal.SIGINT))
    return {"umask": _umask(), "cpus": sorted(os.sched_getaffinity(0)), "nice": os.getpriority(os.PRIO_PROCESS, 0),
            "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in _RLIMITS}, "ignored": ignored,
            "blocked": sorted(int(n) for n in signal.pthread_sigmask(signal.SIG_BLOCK, []))}


@atexit.register
def _close_all() -> None:
    servers = [*_SERVERS.values(), *_RETIRED]
    for server in servers:
        server.close()
    for server in servers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.proc.wait(timeout=2)
