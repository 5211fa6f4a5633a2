"""Issue 14 / 24: RESULTS.md's H100-vs-H200 section (compare's ratios judged by the one rule with the larger floor),
the CUPTI agreement, wrapper-overhead and throughput tables (each median with its CI), and the telemetry of both
GPUs render from the results that hold the data, and say so where a result predates them."""

from __future__ import annotations

import copy
import dataclasses
import json

from nsa_exp.analysis.cupti import cupti_block
from nsa_exp.checking.analysis import build as analyse
from nsa_exp.core.records import BenchResult
from nsa_exp.core.stages import TITLES
from nsa_exp.figures.fanin_latency import gpu_name
from nsa_exp.report.claims import Claims
from nsa_exp.report.data import Formal
from nsa_exp.report.gpus import _ncu_across, cross_gpu_section, instrument_sections
from nsa_exp.report.sections import setup_section
from tests.gpu.test_wrapper_extra import _with_wrapper_extra
from tests.helpers import REPO, run_cli

RAW = REPO / "results" / "raw"


def test_cross_gpu_section_shows_both_gpus_with_verdicts_in_time_and_cycles(report_data):
    text = "\n".join(cross_gpu_section(report_data))
    assert "NVIDIA H100 80GB HBM3" in text and "NVIDIA H200" in text and "in cycles" in text
    assert "| local | dQ core | 23.316 | 23.966 |" in text and "Verdicts: " in text


#: compare's verdict -> the words RESULTS.md renders for it (:func:`nsa_exp.report.gpus.judged_words`)
RENDERED = {"slower": "differs measurably (slower)", "faster": "differs measurably (faster)",
            "same": "same within noise", "unclear": "unresolved"}


def test_every_door_gives_the_same_h100_vs_h200_verdict_for_every_ratio(report_data, tmp_path):
    """Issue 28: the documented compare command, the committed compare file and RESULTS.md's section agree."""
    out = tmp_path / "cmp.json"
    proc = run_cli("compare", "results/raw/e1_h100.json", "results/raw/e1_h200.json", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    command = {(r["pattern"], r["stage"]): r["verdict"] for r in json.loads(out.read_text())["rows"]}
    committed = json.loads((REPO / "results/compare/e1_h100_vs_e1_h200.json").read_text())
    assert committed["noise_floor"]["kind"] == "table"
    assert {(r["pattern"], r["stage"]): r["verdict"] for r in committed["rows"]} == command
    title = {TITLES.get(s, s): s for s in {s for _, s in command}}
    rendered = {}
    for line in "\n".join(cross_gpu_section(report_data)).splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and len(cells) == 8 and cells[1] in title:
            rendered[cells[0], title[cells[1]]] = cells[6]
    assert len(command) == 24 and rendered == {k: RENDERED[v] for k, v in command.items()}


def test_without_an_h200_result_the_section_is_a_note(report_data):
    data = copy.copy(report_data)
    data.formal = report_data.formal[:1]
    text = "\n".join(cross_gpu_section(data))
    assert "Not both formal results" in text and "|" not in text


def test_instrument_tables_render_from_a_result_that_has_the_data():
    result = _with_wrapper_extra(0.5)
    result["cupti"] = cupti_block({"local": {"dq_core": [result["patterns"]["local"]["stages"]["dq_core"]
                                                        ["median_ms"] * 0.98] * 5}}, 5)
    run = BenchResult.from_json(result)
    data = type("D", (), {"formal": [Formal("x.json", run, analyse(run))], "by_gpu": lambda self, g: None})()
    text = "\n".join(instrument_sections(data))
    assert "| local | dQ core | 23.316 (23.302–23.394) | 22.849 (22.849–22.849) | +2.0% | yes |" in text
    assert "| wrapper extra ms |" in text and "% of peak" in text and "TFLOP/s (95% CI)" in text
    data.formal[0] = dataclasses.replace(data.formal[0], run=dataclasses.replace(run, cupti=None))
    assert "recorded before bench's CUPTI pass existed" in "\n".join(instrument_sections(data))


def test_the_telemetry_of_both_gpus_and_their_repeats_is_reported(report_data):
    text = "\n".join(setup_section(report_data))
    for path in ("results/raw/e1_h100.json", "results/raw/e1_h200.json", "results/raw/e1_h200_repeat.json"):
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| `{path}` | 1980"))
        assert "MHz" in row and "°C" in row and " W |" in row and "| 0 of 600 timed (0 of 12 warm-up) |" in row


def test_figures_name_the_gpu_the_result_recorded(tmp_path):
    summaries = REPO / "results" / "summaries"
    assert gpu_name(summaries / "e1_h100.csv") == "NVIDIA H100 80GB HBM3"
    assert gpu_name(summaries / "e1_h200_post.csv") == "NVIDIA H200"
    assert gpu_name(tmp_path / "x.csv") is None
    assert gpu_name(summaries / "e1_h100.csv", RAW / "e1_h200_post.json") == "NVIDIA H200"


def test_the_cross_gpu_ncu_reading_comes_from_the_counters_and_needs_both_gpus(report_data):
    a, b = report_data.by_gpu("H100"), report_data.by_gpu("H200")
    lines = _ncu_across(report_data, a, b, same_in_cycles=True)
    table = [ln for ln in "\n".join(lines).splitlines() if ln.startswith(("| dQ core", "| dK/dV core"))]
    assert len(table) == 8  # 2 stages x 2 GPUs x 2 patterns, from results/ncu/*_local-vs-sink-heavy_*.json
    assert "so it is not bound by HBM" in lines[-2] and "ran at 1980 MHz, so" in lines[-2]
    assert "by construction" in lines[-2]
    other = dataclasses.replace(b, path="results/raw/e1_h300.json")
    assert _ncu_across(report_data, a, other, True) == []
    assert isinstance(report_data.claims, Claims)
