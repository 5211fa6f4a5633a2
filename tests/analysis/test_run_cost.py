"""``cost``'s table (:mod:`nsa_exp.analysis.run_cost`): one column per run, labelled so that runs tell apart."""

from __future__ import annotations

from pathlib import Path

from nsa_exp.analysis.run_cost import cost_of_files
from tests.helpers import REPO

STOP, STOP_COPY = str(REPO / "results/raw/e1_h200_stop.json"), str(REPO / "results/raw/e1_h200_stop_45c4a0c.json")


def test_two_files_of_one_run_name_are_labelled_by_their_file_names():
    """``results/raw/e1_h200_stop_45c4a0c.json`` records the name ``e1_h200_stop``: beside ``e1_h200_stop.json`` both
    columns were headed ``e1_h200_stop`` (a new user, 2026-12-07)."""
    header = cost_of_files([STOP, STOP_COPY]).splitlines()[0]
    assert "| e1_h200_stop " in header and "| e1_h200_stop_45c4a0c " in header
    alone = cost_of_files([STOP_COPY]).splitlines()[0]
    assert "| e1_h200_stop " in alone and "45c4a0c" not in alone  # one run: its recorded name, as before


def test_two_files_of_one_name_and_one_stem_are_labelled_by_their_paths(tmp_path):
    """The same run in two folders (or one file given twice) shared a label too (a re-attacker, 2026-12-07)."""
    copy = tmp_path / "e1_h200_stop.json"
    copy.write_bytes(Path(STOP).read_bytes())
    header = cost_of_files([STOP, str(copy)]).splitlines()[0]
    assert f"| {STOP} " in header and f"| {copy} " in header
