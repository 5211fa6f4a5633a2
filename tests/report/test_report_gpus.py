"""Issue 14: RESULTS.md's H100-vs-H200 section (compare's verdicts), CUPTI agreement and wrapper-overhead tables
render from whichever result holds the data, and say so where a result predates them."""

from __future__ import annotations

from nsa_exp.analysis.cupti import cupti_block
from nsa_exp.figures.fanin_latency import gpu_name
from nsa_exp.report.gpus import cross_gpu_section, instrument_sections
from tests.gpu.test_wrapper_extra import _with_wrapper_extra
from tests.helpers import REPO

RAW = REPO / "results" / "raw"
H100, REPEAT, H200 = (str(RAW / f"{n}.json") for n in ("e1_h100", "e1_h100_repeat", "e1_h200_post"))


def test_cross_gpu_section_shows_both_gpus_with_verdicts_in_time_and_cycles():
    text = "\n".join(cross_gpu_section(H100, REPEAT, H200))
    assert "NVIDIA H100 80GB HBM3" in text and "NVIDIA H200" in text and "verdict (cycles)" in text
    assert "| local | dQ core | 23.316 | 23.893 |" in text and "Verdicts: same" in text


def test_without_an_h200_result_the_section_is_a_note(tmp_path):
    text = "\n".join(cross_gpu_section(H100, REPEAT, str(tmp_path / "e1_h200.json")))
    assert "No H200 formal result" in text and "|" not in text


def test_instrument_tables_render_from_a_result_that_has_the_data():
    result = _with_wrapper_extra(0.5)
    result["cupti"] = cupti_block({"local": {"dq_core": [result["patterns"]["local"]["stages"]["dq_core"]
                                                        ["median_ms"] * 0.98] * 5}}, 5)
    text = "\n".join(instrument_sections(result, "x.json"))
    assert "| local | dQ core | 23.316 | 22.849 | +2.0% | yes |" in text and "pattern | stage sum ms" in text
    assert "| wrapper extra ms |" in text and "% of peak" in text
    del result["cupti"]
    assert "recorded before bench's CUPTI pass existed" in "\n".join(instrument_sections(result, "x.json"))


def test_figures_name_the_gpu_the_result_recorded(tmp_path):
    summaries = REPO / "results" / "summaries"
    assert gpu_name(summaries / "e1_h100.csv") == "NVIDIA H100 80GB HBM3"
    assert gpu_name(summaries / "e1_h200_post.csv") == "NVIDIA H200"
    assert gpu_name(tmp_path / "x.csv") is None
    assert gpu_name(summaries / "e1_h100.csv", RAW / "e1_h200_post.json") == "NVIDIA H200"


def test_the_cross_gpu_ncu_reading_comes_from_the_counters_and_needs_both_gpus(tmp_path):
    from nsa_exp.report.gpus import _ncu_across  # noqa: PLC0415 - a private section helper

    lines = _ncu_across("results/raw/e1_h100.json", "results/raw/e1_h200.json", same_in_cycles=True)
    table = [ln for ln in "\n".join(lines).splitlines() if ln.startswith(("| dQ core", "| dK/dV core"))]
    assert len(table) == 8  # 2 stages x 2 GPUs x 2 patterns, from results/ncu/*_local-vs-sink-heavy_*.json
    assert "so it is not bound by HBM" in lines[-2] and "clocks do not explain" in lines[-2]
    assert _ncu_across("results/raw/e1_h100.json", str(tmp_path / "e1_h300.json"), True) == []
