"""What ``validate`` reads from a result's recorded argv (checking/record_checks.py ``recorded_cli_argv``): the options
of this CLI's argv only, and, where the argv is another program's, every field it would have checked against them is
listed as unverifiable (an attacker's trial, 2026-12-06: argv[0] rewritten, ``allow_gpu`` flipped, PASS with nothing
listed)."""

from __future__ import annotations

import copy
import json

from nsa_exp.checking.validate import validate_path
from tests.helpers import REPO

COMMITTED = json.loads((REPO / "results/raw/e1_h200.json").read_text())


def _validated(tmp_path, argv0: str) -> dict:
    doc = copy.deepcopy(COMMITTED)
    doc["metadata"]["argv"][0] = argv0
    doc["gates"][1]["detail"]["allow_gpu"] = True  # the committed run did not pass --allow-gpu
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(doc))
    return validate_path(path)


def test_the_clis_argv_is_read_and_a_flipped_switch_fails(tmp_path):
    report = _validated(tmp_path, "nsa_exp/__main__.py")
    failed = {c["name"]: [f["path"] for f in c["failures"]] for c in report["checks"] if not c["passed"]}
    assert failed == {"gates_consistent": ["$.gates[1].detail.allow_gpu"]}, failed


def test_another_programs_argv_lists_what_it_cannot_check(tmp_path):
    for argv0 in ("/venv/lib/site-packages/pytest/__main__.py", "x", "xnsa_exp/__main__.py"):
        report = _validated(tmp_path, argv0)
        listed = [u["path"] for u in report["unverified"] if "against argv" in u["path"]]
        assert len(listed) == 1 and all(f in listed[0] for f in ("$.config_path", "$.name", "$.timing.resumed",
                                                                  "allow_gpu", "$.timing.stop")), (argv0, listed)
