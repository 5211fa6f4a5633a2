"""The Mechanism line's and the skew table's busy fractions are the primary shape's (B=1, H=4, G=16), read per
measured point: a new user found "busy 0.72 for sink-heavy" where the model gives 0.23 at that shape (2026-12-05):
the report took the first validation on file, the penalty sweep's, whose rows repeat one routing name at eight
(B, H, G) shapes, and kept the last (B=8)."""

from __future__ import annotations

import json
import re

from nsa_exp.report.summary import mechanism_line

from ..helpers import REPO


def _penalty_row(name: str, point: str) -> float:
    """An independent figure: the penalty validation's row for ``point``, the penalty sweep's point at B=1, H=4,
    G=16 (a row at the calibration's own shape records no B, H, G)."""
    doc = json.loads((REPO / "results/model/h200_BQ1_w4_s2_penalty_validation.json").read_text())
    (row,) = [r for r in doc["rows"] if r["name"] == name and r["source"].endswith(point)]
    assert "B" not in row and "-B1-H4-G16-" in point
    return row["busy_fraction"]


def test_the_mechanism_line_gives_the_primary_shapes_busy_fractions(report_data):
    line = mechanism_line(report_data)
    got = re.search(r"SM slots busy ([0-9.]+) of the time for sink-heavy, ([0-9.]+) for local", line)
    assert got is not None
    sink = _penalty_row("sink-heavy(sinks=4)@T=32768", "T32768-B1-H4-G16-sink-heavy-sinks4.json")
    local = _penalty_row("local@T=32768", "T32768-B1-H4-G16-sink-heavy-sinks4.json")
    assert (got[1], got[2]) == (f"{sink:.2f}", f"{local:.2f}")
    assert sink < 0.5 < local  # the B=8 row (0.72) would fail the first test, not this one alone
