"""How the suite starts its children (CI's own time, issue 30): a worker vforks them, CPython's default, except a
child whose peak RSS it measures (:func:`tests.corpus.runner._exec_child`), which it starts by a real fork.

A real fork of a worker holding ~1.4 GB copies its page tables (~20 ms of wall, ~10 ms of system time each, then a
copy-on-write fault on every page the worker writes); the suite starts ~1,000 children (git, bash, documented
commands), and switching vfork off for all of them cost ~35 s of the suite's ~320 s (docs/METHOD.md).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

import pytest

from tests.corpus import runner
from tests.corpus.runner import REPO


def _spy_on_starts(monkeypatch) -> list[bool]:
    """The value of CPython's vfork switch at each ``subprocess.Popen`` made from now on."""
    seen: list[bool] = []
    real = subprocess.Popen

    def spy(*args, **kwargs):
        seen.append(subprocess._USE_VFORK)
        return real(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", spy)
    return seen


def test_a_worker_vforks_its_children_and_forks_only_the_one_whose_peak_it_measures(monkeypatch):
    seen = _spy_on_starts(monkeypatch)
    subprocess.run(["true"], check=True)  # git, bash, a documented command: vforked
    with open(os.devnull, "rb") as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        code, _, timed_out = runner._exec_child(["--help"], REPO, {**os.environ, "PYTHONPATH": str(REPO)},
                                                (stdin, out, err), 120, 4096, time.monotonic())
    subprocess.run(["true"], check=True)
    assert (code, timed_out) == (0, False)
    assert seen == [True, False, True]


def test_the_real_fork_switch_is_restored_when_a_start_fails():
    with pytest.raises(OSError), runner._measured_fork():
        assert subprocess._USE_VFORK is False
        subprocess.Popen(["/nonexistent/program"])
    assert subprocess._USE_VFORK is True
