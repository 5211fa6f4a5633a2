"""A model-validation row is the same computed and read back from the opt-in memo (nsa_exp/io/memo.py): the model
step behind it (``whatif._modelled``) keeps a JSON value, so the suite's validate/report/model-validate children that
model the same committed rows again read it instead of re-simulating every routing's makespan."""

from __future__ import annotations

import json
from pathlib import Path

from nsa_exp.io.memo import MEMO_ENV
from nsa_exp.model.points import read_points
from nsa_exp.model.whatif import validation_row
from tests.helpers import REPO

CAL = REPO / "results/model/h200_BQ4_w8_s1.json"
POINT = REPO / "results/sweeps/sweep_T_h200/T32768-sink-heavy-sinks4.json"


def _row(monkeypatch, memo: Path | None) -> dict:
    if memo is None:
        monkeypatch.delenv(MEMO_ENV, raising=False)
    else:
        monkeypatch.setenv(MEMO_ENV, str(memo))
    cal = json.loads(CAL.read_text())
    (point,) = [p for p in read_points(POINT) if p.pattern["name"] == "sink-heavy"]
    return validation_row(cal, point, 4096)  # no in-process cache: the memo (or nothing) answers


def test_a_validation_row_read_from_the_memo_is_the_one_computed(tmp_path, monkeypatch):
    plain = _row(monkeypatch, None)
    first = _row(monkeypatch, tmp_path)
    kept = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock"))
    assert kept, "the model step left no memo entry"
    second = _row(monkeypatch, tmp_path)  # now read back
    for row in (first, second):
        assert json.dumps(row) == json.dumps(plain) and [type(v) for v in row.values()] == \
            [type(v) for v in plain.values()]
    assert isinstance(plain["predicted_ms"], float) and plain["split_ms"] is not None
