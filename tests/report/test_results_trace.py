"""Every number in docs/RESULTS.md, requirements-lock.txt and the figures regenerates from the
committed raw results; the statistics behind them are right."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import numpy as np
import pytest

from nsa_exp.analysis.bootstrap import analyse, bootstrap_median_ci, bootstrap_ratio_ci
from nsa_exp.errors import UserError
from nsa_exp.report.build import build_report
from nsa_exp.report.lock import write_lock
from nsa_exp.report.manifest import committed_inputs
from nsa_exp.report.readme import README_END, README_START, headline
from tests.helpers import REPO

RESULT = "results/raw/e1_h100.json"
REPEAT = "results/raw/e1_h100_repeat.json"
NCU = ["results/ncu/e1_h100_local-vs-sink-heavy_dkv_core.json", "results/ncu/e1_h100_local-vs-sink-heavy_dq_core.json"]


def test_committed_results_md_regenerates_exactly(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    out = tmp_path / "RESULTS.md"
    arms = sorted(str(p.relative_to(REPO)) for p in (REPO / "results" / "raw").glob("*_tune_*.json"))
    inputs = committed_inputs(result=RESULT, repeat=REPEAT, ncu=NCU, autotune_matrix="results/autotune/e1_h200.json",
                              tune_arms=arms)  # the CLI's defaults
    build_report(inputs, str(out), str(tmp_path / "a.json"), "python -m nsa_exp report", formal=True)
    assert out.read_text() == (REPO / "docs" / "RESULTS.md").read_text()


def test_committed_analysis_numbers_regenerate(tmp_path):
    committed = json.loads((REPO / "results" / "analysis" / "e1_h100.json").read_text())
    fresh = analyse(json.loads((REPO / RESULT).read_text()), json.loads((REPO / REPEAT).read_text()))
    assert committed["rows"] == fresh["rows"]
    assert committed["dkv_ci_within_1pct"] is True


def test_committed_lock_regenerates_and_pins_the_run(tmp_path):
    out = tmp_path / "lock.txt"
    write_lock(str(REPO / RESULT), str(out))
    committed = (REPO / "requirements-lock.txt").read_text()
    assert out.read_text().splitlines()[2:] == committed.splitlines()[2:]
    assert "torch==2.11.0" in committed and "triton==3.6.0" in committed and "fla-core==0.5.2" in committed


def test_lock_refuses_a_result_that_failed_a_gate(tmp_path):
    doc = json.loads((REPO / RESULT).read_text())
    bad = copy.deepcopy(doc)
    bad["gates"][1]["passed"] = False
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(UserError, match="does not validate .*schema.*a lock must come from a run that passed"):
        write_lock(str(path), str(tmp_path / "lock.txt"))
    assert not (tmp_path / "lock.txt").exists()


def test_bootstrap_ci_brackets_the_median_and_is_deterministic():
    rng = np.random.default_rng(0)
    x = rng.normal(10, 1, 200)
    lo, hi = bootstrap_median_ci(x)
    assert lo < np.median(x) < hi and (lo, hi) == bootstrap_median_ci(x)
    assert hi - lo < 0.5
    # Rounds are resampled as pairs: unrelated rounds give a CI around the ratio of medians ...
    rlo, rhi = bootstrap_ratio_ci(2 * x, rng.permutation(x))
    assert rlo < 2.0 < rhi
    # ... while a pattern that is exactly 2x the other in every round has no uncertainty at all.
    assert bootstrap_ratio_ci(2 * x, x) == (2.0, 2.0)


def test_readme_results_block_regenerates_exactly():

    result = json.loads((REPO / RESULT).read_text())
    analysis = analyse(result, json.loads((REPO / REPEAT).read_text()))
    readme = (REPO / "README.md").read_text()
    block = readme.split(README_START, 1)[1].split(README_END, 1)[0].strip("\n")
    assert block == headline(result, analysis, "docs/RESULTS.md", formal=True)  # `report --formal` (tasks.py)


def test_readme_headline_numbers_come_from_the_analysis():
    readme = (REPO / "README.md").read_text()
    rows = {(r["pattern"], r["stage"]): r for r in json.loads(
        (REPO / "results" / "analysis" / "e1_h100.json").read_text())["rows"]}
    for pattern in ("uniform", "sink-heavy", "zipf"):
        assert f"{rows[(pattern, 'dkv_core')]['ratio_vs_local']:.2f}×" in readme


def test_plot_script_writes_png_and_svg(tmp_path):
    proc = subprocess.run([sys.executable, "scripts/plot_fanin_latency.py", "--input", "results/summaries/e1_h100.csv",
                           "--x", "fanin_gini", "--out-dir", str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    png = tmp_path / "e1_h100_fanin_gini_latency.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "e1_h100_fanin_gini_latency.svg").read_text().lstrip().startswith("<?xml")


def test_plot_script_bad_input_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "scripts/plot_fanin_latency.py", "--input", str(tmp_path / "x.csv")],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --input") and "Traceback" not in proc.stderr
