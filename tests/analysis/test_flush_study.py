"""Item 5 of issue 16: the flush policy is chosen from the committed H200 flush study, reproducibly."""

from __future__ import annotations

import json

from nsa_exp.analysis.flush_study import choose_policy
from nsa_exp.io.schemas import schema_errors
from tests.helpers import REPO, assert_one_line_error, run_cli

RAW = REPO / "results" / "studies" / "h200_method_study_flush.raw.json"
COMMITTED = REPO / "results" / "studies" / "h200_flush_policy.json"


def _row(study, policy, pattern, stage):
    return next(r for r in study["rows"] if (r["policy"], r["pattern"], r["stage"]) == (policy, pattern, stage))


def test_flush_study_of_the_h200_data_chooses_read_and_matches_the_committed_analysis(tmp_path):
    out = tmp_path / "study.json"
    proc = run_cli("flush-study", str(RAW.relative_to(REPO)), "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "| policy" in proc.stdout and "chosen: read" in proc.stdout
    study = json.loads(out.read_text())
    assert not schema_errors(study, "flush_study", "study")
    assert study["chosen"] == "read" and study["rounds"] == 25 and len(study["rows"]) == 3 * 4 * 6
    committed = json.loads(COMMITTED.read_text())
    assert [{k: r[k] for k in ("policy", "pattern", "stage", "ratio", "ci_low", "ci_high")} for r in study["rows"]] \
        == [{k: r[k] for k in ("policy", "pattern", "stage", "ratio", "ci_low", "ci_high")} for r in committed["rows"]]
    # What the choice rests on: the write flush slows delta_preprocess on 3 of 4 patterns (CI above 1),
    # the read flush on none of them; write's +4.5% on local's CSR is within its CI.
    assert sum(_row(study, "write", p, "delta_preprocess")["ci_low"] > 1 for p in ("local", "uniform", "sink-heavy",
                                                                                    "zipf")) == 3
    assert all(_row(study, "read", p, "delta_preprocess")["ci_low"] <= 1 for p in ("local", "uniform", "sink-heavy",
                                                                                  "zipf"))
    csr = _row(study, "write", "local", "csr")
    assert 1.04 < csr["ratio"] < 1.05 and csr["ci_low"] < 1 < csr["ci_high"]


def test_choice_counts_cells_whose_ci_lies_above_one_then_the_largest_ratio():
    def row(policy, ratio, lo):
        return {"policy": policy, "ratio": ratio, "ci_low": lo}
    assert choose_policy([row("write", 1.01, 0.99), row("read", 1.02, 1.001)])[0] == "write"
    assert choose_policy([row("write", 1.03, 0.99), row("read", 1.02, 0.99)])[0] == "read"


def test_a_file_without_a_flush_section_is_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"kind": "method_study"}))
    # the door validates the file first (issue 28): it is not a method study's schema
    assert_one_line_error(run_cli("flush-study", str(bad)), "RAW", "does not validate (schema)")
    assert not list(tmp_path.glob("*.tmp*"))


def test_the_same_study_computed_again_is_kept_not_rewritten(tmp_path):
    """METHOD.md's regeneration of the committed study (``--publish --overwrite``) rewrote it with new metadata
    alone (a new user, 2026-12-07): a study whose rows, choice and rounds are unchanged is kept, byte for byte."""
    out = tmp_path / "study.json"
    assert run_cli("flush-study", str(RAW.relative_to(REPO)), "--output", str(out)).returncode == 0
    before = out.read_bytes()
    proc = run_cli("flush-study", str(RAW.relative_to(REPO)), "--output", str(out), "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == before and f"kept {out} (the same study; only its metadata would change)" in proc.stdout
