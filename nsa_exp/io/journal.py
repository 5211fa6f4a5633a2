"""Bench journal: every completed round survives a kill, outside ``results/``.

A bench writes ``.nsa-exp/journal/<name>/meta.json`` once (config, GPU, FLA commit, autotune
configs, round orders) and then one ``round-NNNNN.json`` per completed round (all patterns of the
round), each through the atomic writer. A bench killed at any moment leaves ``results/``
untouched and the journal holding whole rounds only. The next ``bench`` with the same name refuses
to start until told what to do: ``--resume`` (verify the config and GPU match,
pin the interrupted run's autotune configs, re-run the warm-up rounds, continue at the first missing
round) or ``--discard-journal``.
A finished bench deletes its journal after the result is written.

>>> import tempfile
>>> j = Journal(tempfile.mkdtemp(), "demo")
>>> j.start({"config": {}}); j.append(0, [{"round": 0}]); j.load()[1]
[{'round': 0}]
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..errors import UserError
from .store import read_strict, sweep_stale_temps, write_text_atomic
from .strict_json import dumps_strict


class Journal:
    def __init__(self, root: str | Path, name: str):
        self.dir = Path(root) / ".nsa-exp" / "journal" / name
        self.name = name

    def exists(self) -> bool:
        return (self.dir / "meta.json").is_file()

    def rounds_done(self) -> int:
        return len(list(self.dir.glob("round-*.json")))

    def start(self, meta: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.dir / "meta.json", dumps_strict(meta))

    def append(self, round_index: int, records: list[dict[str, Any]]) -> None:
        write_text_atomic(self.dir / f"round-{round_index:05d}.json", dumps_strict(records))

    def load(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(meta, records of rounds 0..k-1); a gap in the round files is refused. Complete temp files a
        killed writer left are swept first."""
        sweep_stale_temps(self.dir)
        _, meta = read_strict(self.dir / "meta.json", f"journal {self.dir}", "discard it with --discard-journal")
        records: list[dict[str, Any]] = []
        files = sorted(self.dir.glob("round-*.json"))
        for i, path in enumerate(files):
            if path.name != f"round-{i:05d}.json":
                raise UserError(f"journal {self.dir}: round files are not consecutive at {path.name}; "
                                f"discard it with --discard-journal")
            records.extend(read_strict(path, f"journal {path}", "discard it with --discard-journal")[1])
        return meta, records

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def refuse_unless_told(self, resume: bool, discard: bool) -> None:
        """A leftover journal needs ``--resume`` or ``--discard-journal``; ``--resume`` needs a journal. Changes
        nothing: the caller discards the journal (:meth:`discard`) once its gates have passed (a refused
        ``bench --discard-journal`` deleted it: an attacker, 2026-12-07)."""
        if discard:
            return
        if self.exists() and not resume:
            raise UserError(f"bench {self.name}: an interrupted run left {self.rounds_done()} completed rounds in "
                            f"{self.dir}; pass --resume to continue it or --discard-journal to start over")
        if resume and not self.exists():
            raise UserError(f"bench {self.name}: --resume but there is no journal at {self.dir} (nothing to resume; "
                            "drop --resume to start a run)")


def check_resumable(meta: dict[str, Any], now: dict[str, Any]) -> None:
    """The interrupted run and this one must agree on everything that shapes the numbers."""
    for key in ("config", "gpu_name", "fla_commit", "autotune_best", "round_orders", "warmup_rounds",
                "routing_files"):
        if meta.get(key) != now.get(key):
            raise UserError(f"cannot resume: {key} differs from the interrupted run's; "
                            f"pass --discard-journal to start over")
