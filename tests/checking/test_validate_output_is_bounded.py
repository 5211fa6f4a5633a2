"""``validate``'s console report is one line per problem whatever a forged document holds: its text is escaped (a
newline and ESC in a recorded path printed a green "PASS" line of the forger's), bounded, and a recorded path of
50,000 components is "not found" at once, not searched for minutes (a second attacker, 2026-12-07)."""

from __future__ import annotations

import json
import time

from nsa_exp.checking.validate import MAX_LINE, format_report, validate_paths
from tests.helpers import REPO


def _forged(tmp_path, edit) -> str:
    doc = json.loads((REPO / "results" / "raw" / "e1_h200.json").read_text())
    edit(doc)
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_forged_recorded_path_cannot_print_a_line_of_its_own(tmp_path):
    path = _forged(tmp_path, lambda d: d.__setitem__("config_path", "configs/x.json\n\x1b[32mPASS" + "y" * 10_000))
    text = format_report(validate_paths([path])[0])
    assert "\x1b" not in text
    assert not any(line.startswith("\x1b") or line.lstrip().startswith("PASS") for line in text.splitlines())
    assert max(len(line) for line in text.splitlines()) <= MAX_LINE


def test_a_recorded_path_of_50000_components_is_not_searched(tmp_path):
    path = _forged(tmp_path, lambda d: d.__setitem__("config_path", "c/" * 50_000))
    start = time.monotonic()
    validate_paths([path])
    assert time.monotonic() - start < 60  # it was killed after 90 s; the bound makes it the usual few seconds
