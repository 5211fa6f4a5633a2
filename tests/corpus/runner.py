"""Run ``python -m nsa_exp`` for the corpus: in this process (fast, for ``validate`` on forged files) or as a
child with a timeout, a memory cap and its own peak RSS measured (the bad-input cases).

>>> r = run_main(["validate", "--json", "no/such/file.json"])
>>> r.code, r.stderr.startswith("error:")
(2, True)
"""

from __future__ import annotations

import compileall
import contextlib
import io
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests import fork_server

REPO = Path(__file__).resolve().parents[2]


# How a child is started changes what ``wait4`` reports as its peak RSS (``ru_maxrss``): at ``exec`` Linux keeps the
# high-water RSS of the memory map the process had. A vforked child runs in this process's map until it execs, so it
# would report the test session's own peak (1121 MB late in the full suite); a real fork gives it a copy of the map,
# so it reports the anonymous memory this process holds at that moment (a 1 GiB array held: ~1,065 MB either way).
# The doors' memory-bounded cases are therefore served by the fork server (:mod:`tests.fork_server`, a ~45 MB
# process); a child exec'd from here instead (:func:`_exec_child`) is started by a real fork
# (:func:`_measured_fork`), which at least leaves out memory this process has freed. Every other child of a worker
# (git, bash, a documented command, a fork server) is vforked, CPython's default: a real fork of a ~1.4 GB worker costs
# ~20 ms of wall and ~10 ms of system time to copy its page tables, plus a copy-on-write fault on each page it then
# writes, against ~0.7 ms (docs/METHOD.md, CI's own time).
_FORK_LOCK = threading.Lock()


@contextlib.contextmanager
def _measured_fork():
    """Within: subprocess starts children with a real fork (``subprocess._USE_VFORK``, CPython 3.11+'s documented
    switch; an older Python never vforks). One thread at a time; another thread's child started meanwhile is forked
    too, which costs time only."""
    with _FORK_LOCK:
        before, subprocess._USE_VFORK = subprocess._USE_VFORK, False
        try:
            yield
        finally:
            subprocess._USE_VFORK = before


# The child caps its own address space, then becomes ``python -m nsa_exp`` (same pid, so ``wait4`` sees it);
# no preexec_fn, which is unsafe when the children are started from threads.
_LAUNCH = ("import os, resource, sys; cap = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_AS, (cap, cap)); "
           "os.execv(sys.executable, [sys.executable, '-m', 'nsa_exp', *sys.argv[2:]])")


def precompile(root: Path) -> None:
    """Byte-compile the project's own modules under ``root`` (``nsa_exp/``, ``tasks.py``) into their ``__pycache__``
    folders (git ignores them), as pip does for an installed package: each child the suite starts from that tree then
    reads them instead of compiling ~27k lines again, also where ``PYTHONDONTWRITEBYTECODE`` keeps Python from
    writing its own (0.2-0.3 s of a 2 s ``bench`` child that stops at the GPU gate; docs/METHOD.md, CI's own time).
    A tree it cannot write (a read-only image) is left as it is; a stale file is recompiled by Python, which checks
    each source's size and mtime."""
    with contextlib.redirect_stdout(io.StringIO()):  # compileall prints every failure; none matters here
        compileall.compile_dir(root / "nsa_exp", quiet=2)
        if (root / "tasks.py").is_file():
            compileall.compile_file(root / "tasks.py", quiet=2)


@dataclass
class Result:
    code: int | None
    stdout: str
    stderr: str
    peak_rss_mb: float = 0.0
    timed_out: bool = False
    seconds: float = 0.0


@contextlib.contextmanager
def _cwd(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run_main(argv: list[str], cwd: Path = REPO) -> Result:
    """``nsa_exp.cli.main(argv)`` in this process with its stdout/stderr captured (argparse exits caught)."""
    from nsa_exp.cli import main  # noqa: PLC0415 - the tests' conftest sets the environment first

    out, err = io.StringIO(), io.StringIO()
    with _cwd(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return Result(code, out.getvalue(), err.getvalue())


def run_child(argv: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None,
              memory_cap_mb: int = 4096, clear_env: bool = False) -> Result:
    """``python -m nsa_exp ARGV`` as a child of this process, run from ``cwd`` (whose ``nsa_exp`` it imports).

    The child's address space is capped (``RLIMIT_AS``, ``memory_cap_mb``) so that a command reading
    ``/dev/zero`` fails on this machine instead of exhausting it; its own peak RSS comes from ``wait4``
    (not ``RUSAGE_CHILDREN``, which would mix in every earlier child). Past ``timeout`` seconds the
    child's process group is killed and ``timed_out`` is set (a hang is a failure, never a stuck suite).
    ``env`` is added to this process's environment, or replaces it with ``clear_env``. The suite's fork server
    (:mod:`tests.fork_server`) starts it where it can, else it is exec'd."""
    full_env = {**({} if clear_env else os.environ), **(env or {}), "PYTHONPATH": str(cwd)}
    start = time.monotonic()
    with open(os.devnull, "rb") as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        served = fork_server.run(argv, cwd, full_env, stdin.fileno(), out.fileno(), err.fileno(), timeout,
                                 memory_cap_mb * 2**20)
        if served is not None:
            code, maxrss_kb, timed_out = served.returncode, served.maxrss_kb, served.timed_out
        else:
            code, maxrss_kb, timed_out = _exec_child(argv, cwd, full_env, (stdin, out, err), timeout, memory_cap_mb,
                                                     start)
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
    return Result(None if timed_out else code, stdout, stderr, maxrss_kb / 1024, timed_out, seconds)


def _exec_child(argv: list[str], cwd: Path, env: dict[str, str], stdio: tuple, timeout: float, memory_cap_mb: int,
                start: float) -> tuple[int, int, bool]:
    """``python -m nsa_exp ARGV`` exec'd in a new session under its cap: ``(exit code, peak RSS in KiB, timed
    out)``, its session killed once ``timeout`` seconds have passed since ``start``."""
    stdin, out, err = stdio
    with _measured_fork():
        proc = subprocess.Popen([sys.executable, "-c", _LAUNCH, str(memory_cap_mb * 2**20), *argv], cwd=cwd,
                                env=env, stdin=stdin, stdout=out, stderr=err, start_new_session=True)
    timed_out, status, usage = False, None, None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > timeout:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            _, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait for it again
    return proc.returncode, usage.ru_maxrss, timed_out

