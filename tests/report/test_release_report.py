"""RESULTS.md's FLA-releases section and README's release line (issue 22's Report), and how the report treats a
bench result validate FAILs (reported as measured, out of every floor; none is committed since the stop run's
re-run): computed from the committed files, as the data say."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from nsa_exp.commands import command_named
from nsa_exp.errors import UserError
from nsa_exp.report import manifest as manifest_module
from nsa_exp.report.benches import engine_section
from nsa_exp.report.data import ReportData, load_report_data
from nsa_exp.report.manifest import committed_inputs
from nsa_exp.report.releases import SOURCE_COMMAND, maintainers_paragraph, release_section, releases, verdict_line
from tests.helpers import REPO
from tests.report.conftest import as_a_user

STOP = "results/raw/e1_h200_stop.json"


def _row(lines: list[str], release: str, T: int, routing: str) -> list[str]:
    return next(ln for ln in lines if ln.startswith(f"| fla-core-{release} | {T} | {routing} |")).split(" | ")


def test_each_release_gives_wrapper_and_dkv_of_every_routing_with_cis_and_the_penalty(report_data):
    with as_a_user():  # validating a release result outside the interpreter, as the report's user does
        found = releases(report_data)
        lines = "\n".join(release_section(report_data)).splitlines()
    assert [(run.release["label"], run.shape["T"]) for _, run, _ in found] == [
        ("fla-core-0.5.1", 32768), ("fla-core-0.5.2", 32768), ("fla-core-0.6.0", 8192), ("fla-core-0.6.0", 32768),
        ("fla-core-0.6.0", 131072)]
    sink = _row(lines, "0.6.0", 32768, "sink-heavy")
    assert sink[6].startswith("4.19× (") and sink[6].endswith(": differs measurably")
    assert _row(lines, "0.5.2", 32768, "uniform")[6].startswith("1.19× (")
    assert _row(lines, "0.5.1", 32768, "local")[5].startswith("60.99")  # the pre-rewrite kernel: 61 ms on local
    for release in ("0.5.1", "0.5.2", "0.6.0"):
        for routing in ("uniform", "sink-heavy", "zipf", "fla-topk"):
            assert "×" in _row(lines, release, 32768, routing)[4] and "×" in _row(lines, release, 32768, routing)[6]


def test_the_maintainers_paragraph_answers_tail_rewrite_and_the_command(report_data):
    with as_a_user():
        text = maintainers_paragraph(report_data, releases(report_data))
    assert "the tail is still there in the newest release measured, fla-core-0.6.0" in text
    assert "between fla-core-0.5.1 and fla-core-0.5.2" in text and "local 3.95× (" in text
    assert "sink-heavy 1.79× (" in text and "largest for the routing with no long CSR rows" in text
    assert f"`{SOURCE_COMMAND}`" in text and "--fla-source PATH" in SOURCE_COMMAND


def test_the_fla_source_command_is_a_real_option_of_release_bench():
    cmd = command_named("release-bench")
    assert "--fla-source" in {o.flag for o in cmd.options} and "--config" in {o.flag for o in cmd.options}


def test_readme_and_summary_carry_the_release_verdict():
    readme = (REPO / "README.md").read_text()
    results = (REPO / "docs" / "RESULTS.md").read_text()
    line = next(ln for ln in readme.splitlines() if ln.startswith("FLA releases (release arm"))
    assert "--fla-source PATH" in line and "(docs/RESULTS.md#fla-releases)" in line
    # every routing whose dK/dV penalty differs measurably, not only the seed skews: fla-topk too (it was left out
    # of a line that says "that differ measurably": a new user, 2026-12-07)
    for text in (line, results.split("## The answer per stage", 1)[0]):
        release = text.split("0.6.0: ", 1)[1].split(";", 1)[0]
        assert "sink-heavy 4.19× (" in release and "fla-topk 4.37× (" in release and "uniform 1.19× (" in release


def test_the_release_control_never_differs_on_dkv_or_the_wrapper_and_its_counts_are_the_files(report_data):
    """fla-core 0.5.2 through the release arm is the pinned code: under the noise table's H200 floors (0.5%) its
    dK/dV and wrapper rows never differ measurably from the pinned run; the selection forward and dQ kernels do,
    by 0.5-0.8% (another session, the public API), which RESULTS.md reports as the file records it."""
    cmp = json.loads((REPO / "results/compare/e1_h200_vs_fla-core-0.5.2-T32768.json").read_text())
    assert cmp["noise_floor"]["kind"] == "table"
    assert all(r["verdict"] in ("same", "unclear") for r in cmp["rows"] if r["stage"] in ("dkv_core", "full_bwd"))
    with as_a_user():
        lines = "\n".join(release_section(report_data)).splitlines()
    control = next(ln for ln in lines if "e1_h200_vs_fla-core-0.5.2-T32768.json" in ln)
    n = cmp["counts"]
    words = {"differs measurably": n["slower"] + n["faster"], "same within noise": n["same"],
             "unresolved": n["unclear"]}
    assert control.endswith(", ".join(f"{v} {k}" for k, v in words.items() if v))


def _failing_stop(root) -> str:
    """A copy of the committed stop run whose uniform CSR kernels run 30% longer than their own calls' CUDA events
    (the median recomputed, so only the agreement rule can catch it): ``validate`` FAILs it on cupti_agreement
    alone, as the stop run of 2026-12-01 did before its re-run (every committed file passes now)."""
    doc = json.loads((REPO / STOP).read_text())
    calls = [round(1.3 * x, 6) for x in doc["cupti"]["event_ms"]["uniform"]["csr"]]
    doc["cupti"]["kernel_ms"]["uniform"]["csr"] = calls
    doc["cupti"]["median_kernel_ms"]["uniform"]["csr"] = float(np.median(calls))
    (root / "results" / "raw").mkdir(parents=True, exist_ok=True)
    (root / STOP).write_text(json.dumps(doc))
    return STOP


def test_every_committed_bench_result_validates_so_the_report_lists_no_failing_file(report_data):
    assert manifest_module.KNOWN_FAILING == {} and report_data.failing == {}
    with as_a_user():
        row = next(ln for ln in "\n".join(engine_section(report_data)).splitlines() if ln.startswith(f"| `{STOP}`"))
    doc = json.loads((REPO / STOP).read_text())  # 108.0 s: the 2 us-rule re-run of 2026-12-05, stopped by its CI rule
    wall, stop = doc["wall_seconds"], doc["timing"]["stop"]
    assert f"stopped by {stop['stopped_by']} after {stop['rounds']} rounds" in row and stop["stopped_by"] == "ci"
    assert f"{wall:.1f} s" in row and row.endswith("| passes |")


def test_a_listed_failing_file_is_reported_with_its_failure_and_out_of_every_floor(tmp_path, monkeypatch):
    _failing_stop(tmp_path)
    monkeypatch.setitem(manifest_module.KNOWN_FAILING, STOP, (("cupti_agreement",), "here"))
    data = ReportData(committed_inputs(root=tmp_path))
    with as_a_user():
        record, failed = data.known_failing(STOP)
    assert record.name == "e1_h200_stop" and len(failed) == 1
    assert failed[0].startswith("cupti_agreement at $.cupti.median_kernel_ms.uniform.csr: profiled calls' CUDA-event")


def test_a_listed_failing_file_that_now_fails_otherwise_stops_the_report(tmp_path, monkeypatch):
    _failing_stop(tmp_path)
    monkeypatch.setitem(manifest_module.KNOWN_FAILING, STOP, (("cupti_agreement", "stats"), "here"))
    data = ReportData(committed_inputs(root=tmp_path))
    with as_a_user(), pytest.raises(UserError, match=r"KNOWN_FAILING as failing cupti_agreement, stats .*but "
                                                     r"validate fails cupti_agreement; update the list"):
        data.known_failing(STOP)


def test_a_listed_file_that_now_passes_stops_the_report(tmp_path, monkeypatch):
    (tmp_path / "results" / "raw").mkdir(parents=True)
    shutil.copy(REPO / STOP, tmp_path / STOP)
    monkeypatch.setitem(manifest_module.KNOWN_FAILING, STOP, (("cupti_agreement",), "here"))
    with as_a_user(), pytest.raises(UserError, match=r"validate fails nothing; update the list"):
        ReportData(committed_inputs(root=tmp_path)).known_failing(STOP)


def test_an_unlisted_failing_bench_result_stops_the_report(tmp_path):
    _failing_stop(tmp_path)
    shutil.copy(tmp_path / STOP, tmp_path / "results" / "raw" / "other.json")
    shutil.copy(tmp_path / STOP, tmp_path / "results" / "raw" / "e1_h100.json")
    with as_a_user(), pytest.raises(UserError, match="does not validate .cupti_agreement."):
        load_report_data(committed_inputs(root=tmp_path))
    assert json.loads((tmp_path / "results" / "raw" / "other.json").read_text())["kind"] == "bench_result"


def test_no_release_committed_says_not_yet_measured(report_data, monkeypatch):
    monkeypatch.setattr(type(report_data.inputs), "releases", lambda self: [])
    assert verdict_line(report_data).startswith("not yet measured")
