"""An ncu summary and its raw CSV FAIL when one kernel's percentages are impossible, even written into both files
together: a percentage outside 0..100, achieved occupancy above the theoretical one, or an SM-throughput min above
its average (or the average above its max). The attacker's forgery (achieved occupancy 60 against a theoretical
12.5, L2 hit rate 150, SM throughput 180, its min 190, each in the CSV cell and the summary's metric) PASSed
``validate --strict`` (checking/ncu_summary.metric_bound_problems)."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from nsa_exp.checking.validate import validate_path
from nsa_exp.cli import main
from tests.helpers import REPO

NAME = "e1_h200_local-vs-sink-heavy_dkv_core"
NCU = REPO / "results" / "ncu"


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    """The committed summary and raw CSV, side by side under their own names."""
    for suffix in (".json", ".raw.csv"):
        shutil.copy(NCU / f"{NAME}{suffix}", tmp_path / f"{NAME}{suffix}")
    return tmp_path / f"{NAME}.json", tmp_path / f"{NAME}.raw.csv"


def _forge(tmp_path: Path, kernel: int, values: dict[str, float]) -> tuple[Path, Path]:
    """Write ``values`` (summary metric key -> value) into both files for one kernel, as the attacker did: the CSV
    cell in column ``metric_names[key]`` of the row ``start + 2 + id`` (header, units, then one row per kernel)."""
    summary, raw = _copy(tmp_path)
    doc = json.loads(summary.read_text())
    rows = list(csv.reader(io.StringIO(raw.read_text(), newline="")))
    start = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
    k = doc["kernels"][kernel]
    for key, value in values.items():
        rows[start + 2 + k["id"]][rows[start].index(k["metric_names"][key])] = f"{value:g}"
        k["metrics"][key] = float(value)
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    raw.write_text(out.getvalue())
    summary.write_text(json.dumps(doc, indent=1))
    return summary, raw


def _failures(report: dict) -> list[tuple[str, str, str]]:
    return [(c["name"], f["path"], f["message"]) for c in report["checks"] if not c["passed"] for f in c["failures"]]


@pytest.fixture
def at_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the bench result the summary names, as the committed files are validated


def test_the_committed_summary_and_raw_csv_copied_side_by_side_pass_strict(tmp_path, at_repo):
    summary, raw = _copy(tmp_path)
    assert _failures(validate_path(summary)) == []
    assert _failures(validate_path(raw)) == []
    assert main(["validate", "--strict", str(summary), str(raw)]) == 0


# (forged metric values, the metric the failure names, words of its message)
FORGERIES = {
    "achieved_occupancy_above_theoretical": ({"achieved_occupancy_pct": 60}, "achieved_occupancy_pct",
                                             "above the kernel's theoretical occupancy 12.5%"),
    "l2_hit_rate_above_100": ({"l2_hit_rate_pct": 150}, "l2_hit_rate_pct", "a percentage is within 0..100"),
    "sm_throughput_above_100": ({"sm_throughput_pct": 180}, "sm_throughput_pct", "a percentage is within 0..100"),
    "sm_throughput_min_above_its_average": ({"sm_throughput_min_pct": 190}, "sm_throughput_pct",
                                            "sm_throughput_min_pct (sm__throughput.min.pct_of_peak_sustained_elapsed) "
                                            "190% above sm_throughput_pct"),
    # within 0..100 and below the max: only min <= avg catches it (avg 26.182918, max 27.401428 committed)
    "sm_throughput_min_above_its_average_below_100": ({"sm_throughput_min_pct": 27}, "sm_throughput_pct",
                                                      "27% above sm_throughput_pct"),
    "sm_throughput_average_above_its_max_below_100": ({"sm_throughput_pct": 28}, "sm_throughput_max_pct",
                                                      "28% above sm_throughput_max_pct"),
    "a_percentage_below_0": ({"dram_throughput_pct": -1}, "dram_throughput_pct", "a percentage is within 0..100"),
}


@pytest.mark.parametrize("case", FORGERIES, ids=list(FORGERIES))
def test_an_impossible_percentage_forged_into_the_summary_and_its_raw_csv_together_fails(case, tmp_path, at_repo):
    values, key, words = FORGERIES[case]
    summary, raw = _forge(tmp_path, 0, values)
    ncu_name = json.loads(summary.read_text())["kernels"][0]["metric_names"][key]

    failed = _failures(validate_path(summary))
    assert [m for name, path, m in failed if name == "ncu_recompute" and path == f"$.kernels[0].metrics.{key}"
            and words in m], failed

    failed = _failures(validate_path(raw))
    assert [m for name, path, m in failed if name == "ncu_raw_csv" and path == f"$[kernel ID 0].{ncu_name}"
            and words in m], failed

    assert main(["validate", "--strict", str(summary), str(raw)]) == 1


def test_the_attackers_four_values_together_fail_both_files_naming_each_metric(tmp_path, at_repo, capsys):
    summary, raw = _forge(tmp_path, 0, {"achieved_occupancy_pct": 60, "l2_hit_rate_pct": 150,
                                        "sm_throughput_pct": 180, "sm_throughput_min_pct": 190})
    assert main(["validate", "--strict", str(summary), str(raw)]) == 1
    out = capsys.readouterr().out
    for key in ("achieved_occupancy_pct", "l2_hit_rate_pct", "sm_throughput_pct", "sm_throughput_min_pct"):
        assert f"$.kernels[0].metrics.{key}" in out, out
    for name in ("sm__warps_active.avg.pct_of_peak_sustained_active", "lts__t_sector_hit_rate.pct",
                 "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                 "sm__throughput.min.pct_of_peak_sustained_elapsed"):
        assert f"$[kernel ID 0].{name}:" in out, out


@pytest.mark.parametrize(("metric", "value", "says"), [
    ("dram_throughput_pct", 60.51, "the highest of the memory units'"),
    ("theoretical_occupancy_pct", 25.0, "registers per thread")])
def test_a_metric_its_sibling_columns_contradict_fails(metric, value, says):
    """Written into the summary and its raw CSV together, a DRAM throughput above ncu's Memory Throughput (the highest
    of the memory units') and a theoretical occupancy above what 255 registers per thread allow a 128-thread block on
    an H200 (12.5%) both PASSed (an attacker, 2026-12-07)."""
    from nsa_exp.checking.ncu_summary import metric_bound_problems  # noqa: PLC0415

    doc = json.loads((REPO / "results/ncu/e1_h200_local-vs-sink-heavy_dkv_core.json").read_text())
    path = lambda i, key: f"$.kernels[{i}].metrics.{key}"  # noqa: E731
    assert metric_bound_problems(doc["kernels"], path) == []
    doc["kernels"][0]["metrics"][metric] = value
    problems = metric_bound_problems(doc["kernels"], path)
    assert [p for p, _ in problems] == [f"$.kernels[0].metrics.{metric}"] and says in problems[0][1], problems
