"""Every number in docs/RESULTS.md, README's results block, docs/PROVENANCE.md's table, requirements-lock.txt
and the figures regenerates from the committed results; the statistics behind them are right; every committed
file has a provenance row and every committed figure is read somewhere."""

from __future__ import annotations

import copy
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nsa_exp.analysis.bootstrap import bootstrap_median_ci, bootstrap_ratio_ci
from nsa_exp.checking.analysis import build as analyse
from nsa_exp.errors import UserError
from nsa_exp.report.build import build_report
from nsa_exp.report.lock import write_lock
from nsa_exp.report.manifest import committed_inputs
from nsa_exp.report.provenance import END, START, missing_from, update_provenance
from nsa_exp.report.readme import README_END, README_START, update_readme
from nsa_exp.report.summary import ANSWER, MAX_LINES
from tests.helpers import REPO
from tests.report.conftest import as_a_user, from_loaded

RESULT = "results/raw/e1_h100.json"
REPEAT = "results/raw/e1_h100_repeat.json"


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory, report_data) -> dict[str, str]:
    """``report --formal --update-readme`` (the documented command) into copies: RESULTS.md, README, PROVENANCE.md
    (from the session's load of the committed inputs)."""
    tmp = tmp_path_factory.mktemp("report")
    readme, provenance = tmp / "README.md", tmp / "PROVENANCE.md"
    shutil.copy(REPO / "README.md", readme)
    shutil.copy(REPO / "docs" / "PROVENANCE.md", provenance)
    with as_a_user(), from_loaded(report_data):
        build_report(committed_inputs(), str(tmp / "RESULTS.md"), str(tmp / "a.json"), "python -m nsa_exp report",
                     readme=str(readme), formal=True, provenance=str(provenance))
    return {"folder": tmp, "results": (tmp / "RESULTS.md").read_text(), "readme": readme.read_text(),
            "provenance": provenance.read_text(), "analysis": (tmp / "a.json").read_text()}


#: a markdown link's relative target (not a URL, an anchor or an absolute path) and its anchor
LINK = re.compile(r"\]\((?![a-z][a-z0-9+.-]*:|#|/)([^)\s#]+)(#[^)\s]*)?\)")


def resolved(text: str, folder: Path) -> str:
    """``text`` with each relative link target replaced by the absolute path it reaches from ``folder``; every one
    must exist (a broken link fails here)."""
    def absolute(m: re.Match[str]) -> str:
        target = Path(os.path.normpath(folder / m.group(1)))
        assert target.exists(), f"broken link {m.group(0)} from {folder}"
        return f"]({target}{m.group(2) or ''})"
    return LINK.sub(absolute, text)


def test_committed_results_md_regenerates_byte_for_byte(regenerated, tmp_path):
    """Written elsewhere, RESULTS.md links the committed figures and pages from its own folder (every relative link
    resolves); with its links resolved, it is the committed file with its links resolved from docs/."""
    text = regenerated["results"]
    assert re.search(r"!\[[^]]*\]\(\.\./", text)  # the images, reached from the copy's folder
    assert resolved(text, regenerated["folder"]) == resolved((REPO / "docs" / "RESULTS.md").read_text(),
                                                             REPO / "docs")


def test_a_run_folders_readme_and_provenance_copies_link_what_the_published_ones_link(tmp_path):
    """``report --update-readme`` without ``--publish`` writes ``runs/<name>/README.md`` from README.md (and
    PROVENANCE.md likewise): their ``docs/…`` links were broken there (a new user's finding, 2026-12-06)."""
    for published, write in ((REPO / "README.md", update_readme), (REPO / "docs" / "PROVENANCE.md", update_provenance)):
        dest = tmp_path / "runs" / "e1" / published.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = published.read_text()
        marks = (README_START, README_END) if write is update_readme else (START, END)
        block = text.split(marks[0], 1)[1].split(marks[1], 1)[0].strip("\n")
        write(dest, block, published)
        assert dest.read_text() != text  # its links moved
        assert resolved(dest.read_text(), dest.parent) == resolved(text, published.parent)


def test_readme_results_block_regenerates_byte_for_byte(regenerated):
    assert regenerated["readme"] == (REPO / "README.md").read_text()
    block = regenerated["readme"].split(README_START, 1)[1].split(README_END, 1)[0]
    assert "H100" in block and "H200" in block and "2026-11-29" in block and "2026-11-30" in block


def test_provenance_table_regenerates_byte_for_byte_and_has_a_row_for_every_committed_file(regenerated):
    assert regenerated["provenance"] == (REPO / "docs" / "PROVENANCE.md").read_text()
    block = regenerated["provenance"].split(START, 1)[1].split(END, 1)[0]
    tracked = subprocess.run(["git", "ls-files", "results"], cwd=REPO, capture_output=True, text=True).stdout.split()
    files = tracked or [p.relative_to(REPO).as_posix() for p in committed_inputs().result_files()]
    assert files and missing_from(block, files) == []
    assert missing_from(block, ["results/raw/not_there.json"]) == ["results/raw/not_there.json"]
    row = next(ln for ln in block.splitlines() if ln.startswith("| `results/raw/e1_h200_file.json`"))
    assert "rests on a discarded run" not in row and "2026-12-01" in row  # re-run on the formal run's configs
    stop = next(ln for ln in block.splitlines() if ln.startswith("| `results/raw/e1_h200_stop.json`"))
    assert "`a608545`" in stop and "FAILs" not in stop  # the 2 us stage-rule re-run of 2026-12-05 validates
    kept = next(ln for ln in block.splitlines() if ln.startswith("| `results/raw/e1_h200_stop_45c4a0c.json`"))
    assert "`45c4a0c`" in kept and "FAILs" not in kept  # the 20 us run it replaced, kept for the noise table
    assert "FAILs" not in block  # every committed file passes validate


def test_the_answer_comes_first_in_at_most_max_lines_with_both_gpus_its_floors_and_every_ratio_with_its_ci():
    text = (REPO / "docs" / "RESULTS.md").read_text()
    assert text.index(f"## {ANSWER}") < text.index("\n## ", text.index(f"## {ANSWER}") + 1)
    body = text.split(f"## {ANSWER}\n\n", 1)[1].split("\n\n## ", 1)[0].splitlines()
    assert len(body) <= MAX_LINES
    table = [ln for ln in body if ln.startswith("| ") and "×" in ln and "stage" not in ln]
    assert len(table) == 4 and all(ln.count("H100") == 5 and ln.count("H200") == 5 for ln in table)  # f, ms, 3 ratios
    assert all(len(re.findall(r"×(?:\*\*|\*)? \(\d\.\d\d\d–\d\.\d\d\d\)", ln)) == 6 for ln in table)
    assert all(re.search(r"\| H100 \d+\.\d% · H200 \d+\.\d% \| H100 \d+\.\d\d · H200 \d+\.\d\d \|", ln) for ln in table)
    assert body[0].startswith("Equal edges") and "Scale: dK/dV core: local" in body[0]
    assert any(ln.startswith("Ratios × local") for ln in body) and any(ln.startswith("[The rule]") for ln in body)
    for words in ("**Mechanism**", "**Recovered**", "**FLA releases**", "**For FLA's maintainers (1)**",
                  "**For FLA's maintainers (2)**", "**Scope**"):
        assert any(ln.startswith(f"- {words}") for ln in body), words


def test_every_committed_figure_is_referenced_and_every_reference_exists():
    text = (REPO / "docs" / "RESULTS.md").read_text() + (REPO / "README.md").read_text()
    figures = sorted(p.name for p in (REPO / "docs" / "figures").glob("*.png"))
    assert [f for f in figures if f"figures/{f}" not in text] == []
    for ref in re.findall(r"\(((?:docs/)?figures/[^)]+\.png)\)", text):
        assert (REPO / "docs" / ref.removeprefix("docs/")).is_file(), ref


def test_the_repeated_measurement_is_stated_with_its_files_and_the_short_runs_it_does_not_count():
    text = (REPO / "docs" / "RESULTS.md").read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("| H200 | dK/dV core | sink-heavy(sinks=4) | 32768 | 5"))
    # the formal run, its same-session repeat, the bench run beside FLA's peer row (2026-12-04), 150 rounds each, and
    # the stop-rule runs of two later sessions (37 and 150 rounds of this cell): the span is the min-max of their
    # summaries' medians
    files = ("e1_h200", "e1_h200_pair", "e1_h200_repeat", "e1_h200_stop", "e1_h200_stop_45c4a0c")
    medians = [float(r["median_ms"]) for name in files
               for r in csv.DictReader((REPO / "results" / "summaries" / f"{name}.csv").open())
               if r["pattern"] == "sink-heavy" and r["stage"] == "dkv_core"]
    assert len(medians) == len(files)
    assert f"{min(medians):.3f}–{max(medians):.3f} ms" in row and \
        ", ".join(f"`{f}`" for f in files) + " (+8 of fewer than 30" in row


def test_committed_analysis_numbers_regenerate(regenerated):
    committed = json.loads((REPO / "results" / "analysis" / "e1_h100.json").read_text())
    fresh = analyse(json.loads((REPO / RESULT).read_text()), json.loads((REPO / REPEAT).read_text()))
    assert committed["rows"] == fresh["rows"] == json.loads(regenerated["analysis"])["rows"]
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
