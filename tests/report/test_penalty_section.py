"""Issue 32: RESULTS.md's "When it matters" section (nsa_exp/report/penalty.py) renders from the committed penalty
map, its numbers are the CSV's recomputed from the point files' rounds with their CIs, it renders without the
layer results and fills in from them, and the answer block points to it."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from nsa_exp.analysis.autotune_matrix import diff_ci
from nsa_exp.analysis.bootstrap import bootstrap_ratio_ci
from nsa_exp.report.manifest import PENALTY_SWEEPS, RELEASE_PRIMARY
from nsa_exp.report.markdown import anchor
from nsa_exp.report.penalty import TITLE, map_rows, penalty_section
from nsa_exp.report.summary import MAX_LINES, summary_lines
from tests.helpers import REPO

HEADING = "## When it matters (H200): batch, KV heads, group size and T"


@pytest.fixture(scope="module")
def rendered(report_data) -> list[str]:
    """The section's lines (its tables split into rows)."""
    return "\n".join(penalty_section(report_data, layers=[])).splitlines()


@pytest.fixture(scope="module")
def rows(report_data):
    return map_rows(report_data)[0]


def _table(lines: list[str]) -> list[list[str]]:
    """The penalty map's body rows, split into cells."""
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| routing | T | B | H | G | B·H |"))
    body = []
    for ln in lines[start + 2:]:
        if not ln.startswith("| "):
            break
        body.append([c.strip() for c in ln.strip("|").split("|")])
    return body


def test_the_section_renders_from_the_committed_map_with_every_point_and_its_heading(rendered, rows):
    assert rendered[0] == HEADING and HEADING[3:] == TITLE
    csv = pd.concat([pd.read_csv(REPO / "results" / "sweeps" / f"{n}.csv") for n in PENALTY_SWEEPS])
    assert len(rows) == len(csv) == len(_table(rendered))
    order = [(r["family"], r["G"], r["T"], r["BH"]) for r in rows]
    families = list(dict.fromkeys(f for f, *_ in order))
    assert families[:3] == ["sink-heavy", "zipf", "fla-topk"]
    assert order == sorted(order, key=lambda k: (families.index(k[0]), *k[1:]))


def test_its_ratios_and_excesses_equal_a_recomputation_from_the_csv(rendered, rows):
    csv = pd.concat([pd.read_csv(REPO / "results" / "sweeps" / f"{n}.csv") for n in PENALTY_SWEEPS])
    by_id = {r["point_id"]: r for r in csv.to_dict("records")}
    table = _table(rendered)
    for r, cells in zip(rows, table, strict=True):
        c = by_id[r["key"].rsplit("/", 1)[1].removesuffix(".json")]
        assert (r["B"], r["H"], r["G"], r["T"]) == (c["B"], c["H"], c["G"], c["T"])
        assert r["dkv"]["ratio"] == pytest.approx(c["ratio_vs_local"], rel=1e-9)
        assert r["dkv"]["excess"] == pytest.approx(c["dkv_excess_ms"], rel=1e-9)
        assert r["full"]["excess"] == pytest.approx(c["full_bwd_excess_ms"], rel=1e-9)
        assert r["dkv"]["base"] == pytest.approx(c["local_dkv_median_ms"], rel=1e-9)
        assert cells[:6] == [r["family"], str(c["T"]), str(c["B"]), str(c["H"]), str(c["G"]), str(c["B"] * c["H"])]
        assert cells[7].startswith(f"{c['ratio_vs_local']:.3f}×")
        assert cells[9].startswith(f"{c['dkv_excess_ms']:.2f} (") and cells[10].startswith(
            f"{c['full_bwd_excess_ms']:.2f} (")


def test_every_ratio_and_excess_is_printed_with_its_paired_ci_from_the_rounds(rendered, rows):
    """Drop the CI (or compute it from other rounds) and this fails."""
    num = r"\d+\.\d+"
    for r, cells in zip(rows, _table(rendered), strict=True):
        assert re.fullmatch(rf"{num}× \({num}–{num}\)", cells[7]), cells[7]
        assert re.fullmatch(rf"{num} \({num}–{num}\)", cells[9]) and re.fullmatch(rf"{num} \({num}–{num}\)", cells[10])
        skew = r["run"].patterns[r["family"]].stages["dkv_core"].raw_ms
        local = r["run"].patterns["local"].stages["dkv_core"].raw_ms
        lo, hi = bootstrap_ratio_ci(skew, local)
        assert r["dkv"]["ratio_ci"] == (lo, hi) and lo <= r["dkv"]["ratio"] <= hi and hi > lo
        assert cells[7] == f"{r['dkv']['ratio']:.3f}× ({lo:.3f}–{hi:.3f})"
        elo, ehi = diff_ci(np.asarray(skew), np.asarray(local))
        assert r["dkv"]["excess_ci"] == (elo, ehi) and elo <= r["dkv"]["excess"] <= ehi
        assert cells[9] == f"{r['dkv']['excess']:.2f} ({elo:.2f}–{ehi:.2f})"


def test_the_break_even_is_computed_from_the_model_and_set_against_the_largest_measured_bh(rendered, rows):
    text = "\n".join(rendered)
    model = next(ln for ln in rendered if ln.startswith("- **Model**"))
    # the model's (B·H)* from makespan.break_even on the regenerated routings (docs/MODEL.md: ~15 sink, ~0.51 local)
    found = re.search(r"`sink-heavy` (\d+\.\d+)", model)
    assert found is not None
    sink = float(found.group(1))
    assert 14 < sink < 17 and "`local` 0.51" in model and "fla-topk: not regenerable" in model
    top = max(r["BH"] for r in rows if r["T"] == 32768 and r["G"] == 16)
    data_line = next(ln for ln in rendered if ln.startswith("- **Data, `sink-heavy`**"))
    last = next(r for r in rows if r["family"] == "sink-heavy" and r["BH"] == top and r["G"] == 16
                and r["T"] == 32768)
    assert f"largest measured B·H = {top}" in data_line
    assert f"{last['dkv']['ratio']:.3f}× ({last['dkv']['ratio_ci'][0]:.3f}–{last['dkv']['ratio_ci'][1]:.3f})" \
        in data_line
    assert "the ratio never reaches 1" in data_line and "stays roughly constant" in data_line
    assert f"B·H* = {sink:.1f}" in data_line
    assert "**Advice (1)" in text and "**Advice (2)" in text


def test_the_training_step_share_is_the_release_files_train_step_excess_over_local(rendered):
    doc = json.loads((REPO / RELEASE_PRIMARY).read_text())
    local = np.median(doc["patterns"]["local"]["stages"]["train_step"]["raw_ms"])
    sink = np.median(doc["patterns"]["sink-heavy"]["stages"]["train_step"]["raw_ms"])
    row = next(ln for ln in rendered if ln.startswith("| 32768 | sink-heavy |"))
    assert f"| {local:.2f} (" in row and f"| {sink - local:.2f} (" in row
    assert f"| {100 * (sink / local - 1):.1f}% (" in row


def test_it_renders_without_the_layer_files_and_says_so(rendered):
    text = "\n".join(rendered)
    assert "not measured yet" in text and "release_layer_h200" in text
    assert "sliding-window branch is not timed" in text and "flash-attn" in text


def test_the_layer_table_is_each_committed_layer_files_nsa_layer_excess_over_local(report_data):
    """Every committed layer file (``results/releases/release_layer*_h200/``) gives one row per skewed routing:
    local's layer median, the excess and its share recomputed here from the file's rounds."""
    lines = "\n".join(penalty_section(report_data)).splitlines()
    text = "\n".join(lines)
    assert "not measured yet" not in text and "`nsa_layer` = `parallel_nsa(q, k, v, g_cmp, g_slc" in text
    files = sorted((REPO / "results" / "releases").glob("release_layer*_h200/*.json"))
    assert files, "the layer results are committed"
    n = 0
    for f in files:
        doc = json.loads(f.read_text())
        sh = doc["shape"]
        raw = {k: np.asarray(p["stages"]["nsa_layer"]["raw_ms"]) for k, p in doc["patterns"].items()}
        for name in [k for k in raw if k != "local"]:
            row = next(ln for ln in lines if ln.startswith(f"| {sh['T']} | {sh['B']} | {sh['H']} | "
                                                          f"{sh['B'] * sh['H']} | {name} |"))
            local, skew = np.median(raw["local"]), np.median(raw[name])
            assert f"| {local:.2f} (" in row and f"| {skew - local:.2f} (" in row
            assert f"| {100 * (skew / local - 1):.1f}% (" in row
            n += 1
    assert n == sum(1 for ln in lines if re.match(r"\| \d+ \| \d+ \| \d+ \| \d+ \| [a-z-]+ \| \d", ln))


def test_the_answer_block_points_to_the_section_within_max_lines(report_data, rows):
    lines = summary_lines(report_data)  # raises past MAX_LINES
    assert len(lines) - 3 <= MAX_LINES
    line = next(ln for ln in lines if ln.startswith("- **When it matters** (H200)"))
    assert f"]({anchor(TITLE)})" in line and anchor(TITLE) == "#when-it-matters-h200-batch-kv-heads-group-size-and-t"
    top = max(r["BH"] for r in rows if r["T"] == 32768 and r["G"] == 16)
    sink = next(r for r in rows if r["family"] == "sink-heavy" and r["BH"] == top and r["G"] == 16 and r["T"] == 32768)
    assert f"at B·H = {top}" in line and f"sink-heavy {sink['dkv']['excess']:.1f} ms" in line
    assert "over an NSA layer's fwd+bwd with `local`" in line and "from B·H = 4 to 32" in line
    assert "not borne out" in line


def test_its_verdict_words_pass_the_claims_guard(report_data, rendered):
    report_data.claims.audit("\n".join(rendered), "RESULTS.md")
