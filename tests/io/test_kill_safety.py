"""A writer or bench journal killed with SIGKILL leaves no partial file: real subprocesses, real kills."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsa_exp.errors import UserError
from nsa_exp.io.journal import Journal, check_resumable
from nsa_exp.io.store import sweep_stale_temps, write_bytes_atomic, write_text_atomic
from tests.helpers import REPO, assert_one_line_error, run_cli

WRITER = """
import sys, itertools
sys.path.insert(0, {repo!r})
from nsa_exp.io.store import write_text_atomic
blobs = [("A" * 4_000_000) + "\\n", ("B" * 6_000_000) + "\\n"]
print("ready", flush=True)
for i in itertools.count():
    write_text_atomic({target!r}, blobs[i % 2])
"""

JOURNAL = """
import sys, itertools, time
sys.path.insert(0, {repo!r})
from nsa_exp.io.journal import Journal
j = Journal({root!r}, "killed")
j.start({{"config": {{"name": "x"}}, "round_orders": [["local"]]}})
print("ready", flush=True)
for r in itertools.count():
    j.append(r, [{{"round": r, "pattern": "local", "ms": {{"dq_core": 1.0}}, "pad": "x" * 200000}}])
"""


def _start(code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("delay", [0.05, 0.13, 0.31, 0.57])
def test_sigkilled_writer_leaves_a_whole_file_and_no_temp(tmp_path, delay):
    target = tmp_path / "results" / "raw" / "x.json"
    proc = _start(WRITER.format(repo=str(REPO), target=str(target)))
    time.sleep(delay)
    _kill(proc)
    whole = (("A" * 4_000_000) + "\n", ("B" * 6_000_000) + "\n")
    if target.exists():
        assert target.read_text() in whole
    # A kill between link and rename can leave one *complete* hidden temp; never a partial one.
    leftovers = [p for p in target.parent.iterdir() if p != target]
    assert len(leftovers) <= 1 and all(p.name.startswith(".x.json.") and p.read_text() in whole for p in leftovers)
    sweep_stale_temps(target.parent)
    assert [p for p in target.parent.iterdir() if p != target] == []


def test_a_new_file_is_linked_straight_to_its_name(tmp_path):
    write_text_atomic(tmp_path / "new.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["new.json"]


def test_stale_named_temp_of_a_dead_writer_is_swept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".x.json.{int(dead.stdout)}.deadbeef.tmp"
    stale.write_text("partial")
    write_text_atomic(tmp_path / "y.json", "{}")
    assert not stale.exists()


@pytest.mark.parametrize("delay", [0.2, 0.45])
def test_sigkilled_bench_journal_keeps_whole_rounds_only(tmp_path, delay):
    proc = _start(JOURNAL.format(repo=str(REPO), root=str(tmp_path)))
    time.sleep(delay)
    _kill(proc)
    journal = Journal(tmp_path, "killed")
    meta, records = journal.load()  # sweeps a complete temp a kill between link and rename may leave
    assert meta["config"] == {"name": "x"}
    assert [r["round"] for r in records] == list(range(len(records))) and records
    assert all(len(r["pad"]) == 200000 for r in records)
    assert not list(journal.dir.glob(".*"))  # no temp files
    with pytest.raises(UserError, match=r"left \d+ completed rounds in .*pass --resume to continue it or "
                                        r"--discard-journal to start over"):
        journal.refuse_unless_told(resume=False, discard=False)
    journal.refuse_unless_told(resume=False, discard=True)  # told: nothing to refuse, and nothing changed yet
    assert journal.dir.exists()
    journal.discard()
    assert not journal.dir.exists()


def test_resume_refuses_a_changed_setup():
    meta = {"config": {"name": "a"}, "gpu_name": "H100", "fla_commit": "c", "autotune_best": {},
            "round_orders": [["local"]], "warmup_rounds": 1}
    check_resumable(meta, dict(meta))
    with pytest.raises(UserError, match="cannot resume: gpu_name differs"):
        check_resumable(meta, {**meta, "gpu_name": "H200"})


def test_bench_cli_refuses_to_overwrite_a_journal_and_names_both_ways_out(tmp_path):
    name = f"pytest_journal_{os.getpid()}"
    journal = Journal(REPO, name)
    journal.start({"config": {}})
    journal.append(0, [{"round": 0}])
    try:
        proc = run_cli("bench", "--output", str(tmp_path / f"{name}.json"))
        assert_one_line_error(proc, "left 1 completed rounds", "--resume", "--discard-journal")
        assert not (tmp_path / f"{name}.json").exists()
    finally:
        journal.discard()
    proc = run_cli("bench", "--resume", "--output", str(tmp_path / f"{name}.json"))
    assert_one_line_error(proc, "--resume but there is no journal")


def test_a_refused_bench_discard_journal_keeps_the_journal(tmp_path):
    """``bench --discard-journal`` refused (here: no GPU) changes nothing: the journal it would discard is kept (it
    was deleted in the argument checks, before any gate: an attacker, 2026-12-07)."""
    name = f"pytest_discard_{os.getpid()}"
    journal = Journal(REPO, name)
    journal.start({"config": {}})
    journal.append(0, [{"round": 0}])
    try:
        proc = run_cli("bench", "--discard-journal", "--output", str(tmp_path / f"{name}.json"))
        assert proc.returncode == 2 and "no CUDA GPU" in proc.stderr, proc.stderr
        assert journal.rounds_done() == 1
    finally:
        journal.discard()


def test_journal_files_are_strict_json(tmp_path):
    journal = Journal(tmp_path, "j")
    journal.start({"config": {}})
    journal.append(0, [{"round": 0, "ms": {"csr": 0.5}}])
    assert json.loads((journal.dir / "round-00000.json").read_text()) == [{"round": 0, "ms": {"csr": 0.5}}]
    Path(journal.dir / "round-00002.json").write_text("[]")
    with pytest.raises(UserError, match="not consecutive"):
        journal.load()


def test_an_output_that_is_a_fifo_or_device_is_refused_and_left_as_it_was(tmp_path):
    """An attacker's trial of 2026-12-05: ``--output`` naming a FIFO (or, as root, ``/dev/full``) was renamed over
    with a plain file, even without ``--overwrite``; now one line, exit 2, the node untouched."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    proc = run_cli("compare", "results/raw/e1_h200.json", "results/raw/e1_h200_repeat.json", "--output", str(fifo))
    assert_one_line_error(proc, str(fifo), "not a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    with pytest.raises(UserError, match="not a regular file"):
        write_bytes_atomic(fifo, b"{}")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
