"""Issue 13 + issue 16 items 3 and 7: every derived number recomputed (fuzzed), summary CSVs as
tables and against their JSON, integers written as floats, bad config input as one line / exit 2."""

from __future__ import annotations

import copy
import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsa_exp.checking import csv_checks, run_checks
from nsa_exp.checking.validate import validate_bytes, validate_path, validate_paths
from nsa_exp.core import protocol
from nsa_exp.errors import UserError
from nsa_exp.gpu import telemetry
from nsa_exp.io import schemas as schema
from nsa_exp.io.config_files import config_from_dict, load_config
from nsa_exp.io.schemas import schema_errors
from nsa_exp.report.build import build_report, is_formal
from nsa_exp.report.manifest import committed_inputs
from tests.corpus.runner import run_main
from tests.helpers import REPO, assert_one_line_error, primary_config_dict, run_cli

REPROS = Path(__file__).parents[1] / "data" / "repros"
GOLDEN = REPO / "results" / "raw" / "e1_h100_dev.json"
GOLDEN_CSV = REPO / "results" / "summaries" / "e1_h100_dev.csv"
FORMAL = REPO / "results" / "raw" / "e1_h100.json"


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def _dump(doc) -> bytes:
    return json.dumps(doc, indent=1).encode()


def failing(report: dict) -> list[str]:
    return [c["name"] for c in report["checks"] if not c["passed"]]


def paths_of(report: dict, check: str) -> list[str]:
    return [f["path"] for c in report["checks"] if c["name"] == check for f in c.get("failures", [])]


# ---- repro inputs (issue 16 items 3 and 7) ----

def test_repro_cfg_float_T_is_one_line_naming_shape_T():
    proc = run_cli("routing", "--config", str(REPROS / "cfg_float_T.json"))
    assert_one_line_error(proc, "config.shape.T", "2048.0", "integer")


def test_repro_summary_bom_is_accepted_with_one_line_saying_so():
    report = validate_path(REPROS / "summary_bom.csv")
    assert report["passed"], report["checks"]
    assert [w["check"] for w in report["warnings"]] == ["csv_encoding"]
    proc = run_cli("validate", str(REPROS / "summary_bom.csv"))
    assert proc.returncode == 0 and proc.stdout.count("byte-order mark") == 1


def test_repro_summary_inconsistent_with_json_names_row_and_column():
    csv_report = validate_paths([str(FORMAL), str(REPROS / "summary_inconsistent_with_json.csv")])[1]
    assert failing(csv_report) == ["csv_table", "csv_matches_json"]
    assert "$[16].median_ms" in paths_of(csv_report, "csv_matches_json")
    assert "$[16].median_ms" in paths_of(csv_report, "csv_table")
    text = json.dumps(csv_report)
    assert "row 18 (sink-heavy, dkv_core) column median_ms" in text and "below its own min_ms" in text
    proc = run_cli("validate", str(FORMAL), str(REPROS / "summary_inconsistent_with_json.csv"))
    assert proc.returncode == 1 and "[csv_matches_json] $[16].median_ms" in proc.stdout
    proc = run_cli("validate", str(REPROS / "summary_inconsistent_with_json.csv"), "--also", str(FORMAL))
    assert proc.returncode == 1 and "[csv_matches_json] $[16].median_ms" in proc.stdout


# ---- summary CSV as a table ----

def _csv_lines() -> list[str]:
    return GOLDEN_CSV.read_text().splitlines(keepends=True)


def _edit(kind: str) -> bytes:
    lines = _csv_lines()
    if kind == "duplicate_row":
        lines.insert(3, lines[2])
    elif kind == "missing_row":
        del lines[5]
    elif kind == "p10_above_median":
        cells = lines[1].split(",")
        cells[4] = str(float(cells[3]) * 1.5)
        lines[1] = ",".join(cells)
    elif kind == "p95_below_p90":
        cells = lines[2].split(",")
        cells[6] = str(float(cells[5]) * 0.5)
        lines[2] = ",".join(cells)
    elif kind == "unknown_stage":
        assert ",csr," in lines[3]
        lines[3] = lines[3].replace(",csr,", ",csv,")
    elif kind == "extra_column":
        lines = [ln.rstrip("\n") + ",x\n" for ln in lines]
    elif kind == "number_does_not_parse":
        lines[3] = lines[3].replace(",30,", ",thirty,", 1)
    elif kind == "crlf":
        lines = [ln.rstrip("\n") + "\r\n" for ln in lines]
    return "".join(lines).encode()


@pytest.mark.parametrize(("kind", "fails", "path"), [
    ("duplicate_row", ["csv_table"], "$[2]"),
    ("missing_row", ["csv_table", "csv_matches_json"], "$"),
    ("p10_above_median", ["csv_table", "csv_matches_json"], "$[0].median_ms"),
    ("p95_below_p90", ["csv_table", "csv_matches_json"], "$[1].p95_ms"),
    ("unknown_stage", ["csv_rows", "csv_table", "csv_matches_json"], "$[2].stage"),
    ("extra_column", ["csv_rows", "csv_table"], "$[0].x"),
    ("number_does_not_parse", ["csv_rows"], "$[2].n_obs"),
])
def test_csv_table_cases_fail_with_check_and_path(kind, fails, path, golden):
    report = validate_bytes(_edit(kind), "e1_h100_dev.csv", companion=(str(GOLDEN), golden))
    assert failing(report) == fails, report["checks"]
    assert path in paths_of(report, fails[0])


def test_csv_with_crlf_and_with_its_json_passes(golden):
    report = validate_bytes(_edit("crlf"), "e1_h100_dev.csv", companion=(str(GOLDEN), golden))
    assert report["passed"] and "csv_matches_json" in [c["name"] for c in report["checks"]]


def test_csv_alone_is_cross_checked_against_the_json_it_was_written_from(tmp_path):
    """A committed summary finds its bench result (results/raw/<stem>.json) and is checked against it; a copy
    whose JSON cannot be found lists the cross-check as unverified (never passed silently)."""
    report = validate_path(GOLDEN_CSV)
    assert report["passed"] and "csv_matches_json" in [c["name"] for c in report["checks"]]
    alone = tmp_path / "no_such_run.csv"
    alone.write_bytes(GOLDEN_CSV.read_bytes())
    report = validate_path(alone)
    assert report["passed"] and report["unverified"][0]["path"] == "$"
    assert "csv_matches_json" not in [c["name"] for c in report["checks"]]


def test_a_csv_of_no_kind_validate_reads_is_a_user_error_exit_2(tmp_path):
    """Text whose header is no table of the bundle's (unreadable bytes FAIL ``csv_syntax`` instead: below)."""
    path = tmp_path / "garbage.csv"
    path.write_bytes(b"hello world\n")
    assert_one_line_error(run_cli("validate", str(path)), str(path))


# ---- bench result: warnings, unverifiable list, code constants pinned ----

def test_throttled_samples_warn_but_pass(golden):
    doc = copy.deepcopy(golden)
    doc["telemetry"]["samples"][50]["throttle_reasons"] = 4
    doc["telemetry"]["throttled_samples"] = 1
    report = validate_bytes(_dump(doc), "t.json")
    assert report["passed"]
    assert [(w["check"], w["path"]) for w in report["warnings"]] == [("telemetry_recompute",
                                                                       "$.telemetry.throttled_samples")]


def test_every_bench_report_lists_what_it_cannot_recompute(golden):
    report = validate_bytes(_dump(golden), "g.json")
    assert report["passed"] and not schema_errors(report, "validation_report", "r")
    listed = " ".join(u["path"] for u in report["unverified"])
    for fragment in ("raw_ms", "autotune", "wall_seconds", "reproduces_official", "memory"):
        assert fragment in listed


@pytest.mark.parametrize(("config_flush", "recorded", "passes"), [
    (None, None, True), (None, "write", True), (None, "read", False),
    ("read", "read", True), ("read", None, False), ("none", "write", False)])
def test_timing_recompute_pins_the_recorded_flush_policy_to_the_config(golden, config_flush, recorded, passes):
    doc = copy.deepcopy(golden)
    if config_flush is not None:
        doc["config"]["timing"]["flush"] = config_flush
    if recorded is not None:
        doc["timing"]["flush_policy"] = recorded
    report = validate_bytes(_dump(doc), "f.json")
    assert report["passed"] is passes
    assert ("$.timing.flush_policy" in paths_of(report, "timing_recompute")) is not passes


def test_configs_for_future_runs_name_the_read_flush_and_results_record_the_flush_they_ran():
    for name in ("e1_h100.json", "e1_h100_dev.json", "e1_h200.json"):
        assert load_config(REPO / "configs" / name).timing.flush == "read"
    older = 0
    for path in sorted((REPO / "results" / "raw").glob("*.json")):
        doc = json.loads(path.read_text())
        flush = config_from_dict(doc["config"]).timing.flush
        if "flush_policy" in doc["timing"]:
            assert doc["timing"]["flush_policy"] == flush
        else:  # recorded before the field existed: their config has none, which means the write flush
            assert "flush" not in doc["config"]["timing"] and flush == "write"
            older += 1
    assert older >= 4  # the H100 runs and the pre-refactor H200 run


def test_csv_checks_and_telemetry_share_one_definition_of_columns_and_throttling():
    assert csv_checks.SUMMARY_COLUMNS is schema.SUMMARY_COLUMNS
    assert telemetry.THROTTLE_MASK is run_checks.THROTTLE_MASK is protocol.THROTTLE_MASK


# ---- fuzzer: any derived number changed must fail validation ----

def _derived_paths(doc: dict) -> list[tuple]:
    out: list[tuple] = [("edges", "closed_form"), ("telemetry", "throttled_samples")]
    out += [("timing", k) for k in ("repetitions", "warmup_rounds", "order_seed", "l2_flush_bytes",
                                    "launch_guard_cycles")]
    for name, p in doc["patterns"].items():
        out += [("edges", "per_pattern", name), ("patterns", name, "edges")]
        for section in ("fanin", "query_span", "adjacent_gap", "stage_sum_vs_full_bwd"):
            out += [("patterns", name, section, k) for k in p[section]]
        for stage in p["stages"]:
            out += [("patterns", name, "stages", stage, k) for k in ("median_ms", "p10_ms", "p90_ms", "p95_ms",
                                                                      "min_ms", "mean_ms", "n_obs")]
        out += [("patterns", name, "memory", k) for k in p["memory"]
                if k not in ("official_baseline_allocated_bytes", "official_baseline_reserved_bytes",
                             "official_peak_reserved_bytes")]  # measured (listed unverifiable), only bounded
        for g in p["reproduces_official"]:
            out += [("patterns", name, "reproduces_official", g, k) for k in ("numel", "max_abs_rel", "bit_exact")]
    return out


DERIVED = _derived_paths(json.loads(GOLDEN.read_text()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_any_derived_number_changed_fails(golden, data):
    doc = copy.deepcopy(golden)
    path = data.draw(st.sampled_from(DERIVED))
    node = doc
    for key in path[:-1]:
        node = node[key]
    value = node[path[-1]]
    if isinstance(value, bool):
        node[path[-1]] = not value
    elif isinstance(value, int):
        node[path[-1]] = value + data.draw(st.sampled_from([-7, -2, -1, 1, 2, 64]))
    elif value == 0:
        node[path[-1]] = data.draw(st.sampled_from([1e-3, 1.0, 5.0]))
    else:
        node[path[-1]] = value * data.draw(st.one_of(st.floats(0.5, 0.9999), st.floats(1.0001, 2.0)))
    report = validate_bytes(_dump(doc), "fuzz.json")
    assert not report["passed"], path


# ---- configs: bad input is one line naming the field, exit 2 ----

def _cfg(mutate) -> dict:
    raw = primary_config_dict()
    mutate(raw)
    return raw


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda r: r["shape"].__setitem__("T", 32768.0), "config.shape.T"),
    (lambda r: r["timing"].__setitem__("repetitions", 150.0), "config.timing.repetitions"),
    (lambda r: r["seeds"].__setitem__("routing", 7.0), "config.seeds.routing"),
    (lambda r: r["patterns"][3].__setitem__("exponent", float("nan")), "config.patterns[3].exponent"),
    (lambda r: r["patterns"][3].__setitem__("exponent", float("inf")), "config.patterns[3].exponent"),
    (lambda r: r["patterns"][3].__setitem__("exponent", -1.0), "config.patterns[3].exponent"),
    (lambda r: r["patterns"][2].__setitem__("sinks", 16), "config.patterns[2].sinks"),
    (lambda r: r["patterns"][2].__setitem__("sinks", -4), "config.patterns[2].sinks"),
    (lambda r: r["shape"].update(B=64, T=1048576, H=64, HQ=1024, S=64), "config.shape"),
    (lambda r: r.__setitem__("formal", "yes"), "config.formal"),
])
def test_bad_config_values_name_the_field(mutate, fragment):
    with pytest.raises(UserError) as err:
        config_from_dict(_cfg(mutate))
    assert str(err.value).startswith(fragment), str(err.value)


@pytest.mark.parametrize(("data", "fragment"), [
    (b'{"name": "a", "name": "b"}', "duplicate key 'name'"),
    (b'\xff\xfe{\x00"\x00', "binary data"),
    ('{"name": "caf\u00e9"}'.encode("latin-1"), "not UTF-8"),
    (b'{"x": NaN}', "NaN"),
    (b'{"x": 1e999}', "overflows"),
    (b'[1, 2]', "top level must be a JSON object"),
])
def test_unreadable_config_files_are_one_line(tmp_path, data, fragment):
    path = tmp_path / "cfg.json"
    path.write_bytes(data)
    with pytest.raises(UserError, match=fragment):
        load_config(path)


def test_unreadable_config_via_cli_is_exit_2(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_bytes(b"\x00\x01\x02\x03")
    assert_one_line_error(run_cli("routing", "--config", str(path)), "binary data")


def test_formal_flag_defaults_false_and_is_read():
    assert load_config("configs/e1_h100.json").raw.get("formal") is True
    assert config_from_dict(_cfg(lambda r: r.pop("formal", None))).raw.get("formal", False) is False


# ---- nothing partial; ncu-export input; report labels ----

def test_routing_save_to_a_file_leaves_no_report(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    report = tmp_path / "r.json"
    proc = run_cli("routing", "--config", "configs/e1_h100_dev.json", "--output", str(report), "--save", str(blocker))
    assert_one_line_error(proc, "not a folder")
    assert not report.exists()


def test_output_pointing_at_a_folder_is_exit_2(tmp_path):
    proc = run_cli("routing", "--config", "configs/e1_h100_dev.json", "--output", str(tmp_path))
    assert_one_line_error(proc, "is a folder")


def test_ncu_export_bad_inputs_are_one_line(tmp_path):
    assert_one_line_error(run_cli("ncu-export", str(tmp_path / "missing.csv"), "--output", str(tmp_path / "o.json")),
                          "no such file")
    bad = tmp_path / "latin1.csv"
    bad.write_bytes('"ID","Kernel Name"\n"0","caf\u00e9"\n'.encode("latin-1"))
    assert_one_line_error(run_cli("ncu-export", str(bad), "--output", str(tmp_path / "o.json")), "not UTF-8")
    good = REPO / "results" / "ncu" / "e1_h100_local-vs-sink-heavy_dq_core.raw.csv"
    (tmp_path / "o.json").mkdir()
    assert_one_line_error(run_cli("ncu-export", str(good), "--output", str(tmp_path / "o.json")), "is a folder")
    assert_one_line_error(run_cli("ncu-export", str(good), "--output", str(tmp_path / "o.raw.csv")), "ending in .json")


def test_a_reexport_under_another_name_keeps_its_csv_beside_it_and_validates(tmp_path):
    """``ncu-export RAW.csv --reuse-context OLD.json --output X.json`` wrote a summary its own validate FAILed
    (``reexported_from.summary`` named OLD.json) with its raw CSV left behind (a new user, 2026-12-06): the CSV is
    kept beside it as X.raw.csv and the re-export names itself."""
    # a profile that names the bench run it replayed (the seed's export names none: its durations stay unverified)
    raw = REPO / "results/ncu/e1_h200_local-vs-sink-heavy_dkv_core.raw.csv"
    old = REPO / "results/ncu/e1_h200_local-vs-sink-heavy_dkv_core.json"
    out = tmp_path / "again.json"
    proc = run_cli("ncu-export", str(raw), "--reuse-context", str(old), "--output", str(out))
    assert proc.returncode == 0 and f"and {tmp_path / 'again.raw.csv'}" in proc.stdout, proc.stderr
    assert (tmp_path / "again.raw.csv").read_bytes() == raw.read_bytes()
    check = run_cli("validate", "--strict", str(out), str(tmp_path / "again.raw.csv"))
    assert check.returncode == 0, check.stdout + check.stderr


def test_report_with_unwritable_output_writes_nothing(tmp_path):
    analysis = tmp_path / "a.json"
    with pytest.raises(UserError, match="is a folder"):
        build_report(committed_inputs(repeat=None, ncu=[]), str(tmp_path), str(analysis), "x")
    assert not analysis.exists()


def test_report_labels_formal_only_when_config_or_flag_says_so(golden):
    assert not is_formal(golden) and is_formal(golden, flag=True)
    doc = copy.deepcopy(golden)
    doc["config"]["formal"] = True
    assert is_formal(doc)
    doc["config"]["formal"] = False
    with pytest.raises(UserError, match="--formal"):
        is_formal(doc, flag=True)


def test_an_ncu_summary_without_value_units_recomputes_and_a_wrong_one_is_named(tmp_path):
    """A summary exported before ``value_units`` existed (the schema: its values in the same units) still
    recomputes from its raw CSV; one that records the field is held to it."""
    src = REPO / "results" / "ncu" / "e1_h100_local-vs-sink-heavy_dkv_core.json"
    doc = json.loads(src.read_text())
    assert all("value_units" not in k for k in doc["kernels"])
    (tmp_path / src.name).write_text(json.dumps(doc))
    raw = src.with_name(doc["raw_csv"])
    (tmp_path / raw.name).write_bytes(raw.read_bytes())
    assert validate_path(tmp_path / src.name)["passed"]
    doc["kernels"][0]["value_units"] = {"duration_ns": "ms"}  # claims the stored duration is in ms
    (tmp_path / src.name).write_text(json.dumps(doc))
    failed = {c["name"]: c for c in validate_path(tmp_path / src.name)["checks"] if not c["passed"]}
    assert list(failed) == ["ncu_recompute"]
    assert failed["ncu_recompute"]["failures"][0]["path"].startswith("$.kernels[0].value_units")


def test_a_release_compare_is_recomputed_from_its_release_result_never_listed_as_source_not_found():
    """A compare of the pinned run against a release result found its B source as 'not found' (it looked for a
    bench result only), so a stale or forged release compare passed unverified; now validate recomputes it."""
    from nsa_exp.checking.validate import validate_bytes  # noqa: PLC0415

    path = REPO / "results" / "compare" / "e1_h200_vs_fla-core-0.6.0-T32768.json"
    report = validate_bytes(path.read_bytes(), str(path))
    assert report["passed"] and not [u for u in report.get("unverified", []) if "not found" in u["why"]]
    doc = json.loads(path.read_text())
    row = next(r for r in doc["rows"] if r["stage"] == "dkv_core" and r["pattern"] == "sink-heavy")
    row["verdict"] = "same"
    forged = validate_bytes(json.dumps(doc).encode(), str(path))
    failed = {c["name"]: [f["path"] for f in c["failures"]] for c in forged["checks"] if not c["passed"]}
    assert "compare_recompute" in failed and any(p.endswith(".verdict") for p in failed["compare_recompute"])


def test_a_sweep_table_lists_the_points_its_config_plans_but_no_file_holds(tmp_path):
    """A point removed with its row (the table rebuilt from the files present) passed --strict: a forger could hide an
    unflattering point (an attacker, 2026-12-07). The sweep config's grid is the list the table is held to; a point of
    it with no file is unverified (points not found), which --strict fails, naming it."""
    folder = tmp_path / "sweep_x2_h200"
    shutil.copytree(REPO / "results/sweeps/sweep_x2_h200", folder)
    (folder / "T32768-sink-heavy-sinks4.json").unlink()
    lines = (REPO / "results/sweeps/sweep_x2_h200.csv").read_text().splitlines(keepends=True)
    table = tmp_path / "sweep_x2_h200.csv"
    table.write_text("".join(ln for ln in lines if "sink-heavy-sinks4" not in ln))
    plain = run_main(["validate", str(table)])
    assert plain.code == 0, plain.stderr  # every row is its point's
    strict = run_main(["validate", "--strict", "--json", str(table)])
    assert strict.code == 1
    (report,) = json.loads(strict.stdout) if strict.stdout.lstrip().startswith("[") else [json.loads(strict.stdout)]
    why = [u["why"] for u in report["unverified"] if u["path"] == "$ (the sweep's grid)"]
    assert why and "1 of the 5 points" in why[0] and "T32768-sink-heavy-sinks4" in why[0], report["unverified"]


def test_a_release_results_kernel_times_are_held_to_its_event_timed_medians(tmp_path):
    """Every kernel of a routing's profiled backward halved (starts and durations), its groups and spans recomputed
    from the calls: kernels_recompute passed, and a compare built on the file flipped sink-heavy's verdict (an
    attacker, 2026-12-07). The calls are the timed ones, so their median span is held to the event-timed median."""
    from nsa_exp.analysis.release_kernels import call_span_ms, stage_groups  # noqa: PLC0415

    source = REPO / "results/releases/release_h200/fla-core-0.5.1-T32768.json"
    doc = json.loads(source.read_text())
    k = doc["kernels"]
    calls = [[[i, s * 0.5, d * 0.5] for i, s, d in call] for call in k["calls"]["sink-heavy"]["full_bwd"]]
    k["calls"]["sink-heavy"]["full_bwd"] = calls
    k["groups"]["sink-heavy"]["full_bwd"] = stage_groups(calls, k["names"], k["launched"])
    k["span_ms"]["sink-heavy"]["full_bwd"] = [round(call_span_ms(c), 6) for c in calls]
    forged = tmp_path / source.name
    forged.write_text(json.dumps(doc, indent=1))
    report = validate_path(forged)
    failed = {c["name"]: c.get("failures", []) for c in report["checks"] if not c["passed"]}
    assert set(failed) == {"kernels_recompute"}, failed
    assert any("median span" in str(p) for p in failed["kernels_recompute"]), failed
    assert validate_path(source)["passed"]


def test_a_sweep_point_is_held_to_the_config_its_sweep_plans_for_it(tmp_path):
    """A point of another sweep (sweep_calib_bq4_h200's T32768-local, its ``sweep`` renamed) took sweep_T_h200's
    planned point's place and PASSed --strict, table and point; a point renamed to another sweep switched the table's
    grid check off (an attacker, 2026-12-07). The committed points' configs are their sweep's plan, key for key."""
    folder = tmp_path / "sweeps" / "sweep_T_h200"
    shutil.copytree(REPO / "results/sweeps/sweep_T_h200", folder)
    stranger = json.loads((REPO / "results/sweeps/sweep_calib_bq4_h200/T32768-local.json").read_text())
    stranger["sweep"] = "sweep_T_h200"
    (folder / "T32768-local.json").write_text(json.dumps(stranger, indent=1))
    report = validate_path(folder / "T32768-local.json")
    failed = {c["name"]: c.get("failures", []) for c in report["checks"] if not c["passed"]}
    assert "differs in" in str(failed.get("point_consistent")), failed
    assert validate_path(REPO / "results/sweeps/sweep_T_h200/T32768-local.json")["passed"]
    renamed = json.loads((REPO / "results/sweeps/sweep_T_h200/T8192-local.json").read_text())
    renamed["sweep"] = "sweep_T_h200_other"
    (folder / "T32768-local.json").write_bytes((REPO / "results/sweeps/sweep_T_h200/T32768-local.json").read_bytes())
    (folder / "T8192-local.json").write_text(json.dumps(renamed, indent=1))
    table = tmp_path / "sweeps" / "sweep_T_h200.csv"
    table.write_text((REPO / "results/sweeps/sweep_T_h200.csv").read_text())
    report = validate_path(table)
    failed = {c["name"]: c.get("failures", []) for c in report["checks"] if not c["passed"]}
    assert "more than one sweep" in str(failed.get("sweep_csv_recompute")), failed


def test_a_point_of_a_stop_rule_sweep_is_its_plan_too():
    """``sweep --stop-rule`` plans each point with the rule in its config: such a point is its sweep's plan as well;
    a config of neither plan is named by its differing keys."""
    from nsa_exp.checking.checks import Context  # noqa: PLC0415
    from nsa_exp.checking.sweep_checks import planned_config_problems  # noqa: PLC0415
    from nsa_exp.sweeps.plan import load_sweep  # noqa: PLC0415

    doc = json.loads((REPO / "results/sweeps/sweep_T_h200/T32768-local.json").read_text())
    assert planned_config_problems(doc, Context()) == []
    ruled = {p.point_id: p.config for p in load_sweep(REPO / "configs/sweep_T_h200.json", [], stop_rule=True)}
    assert ruled[doc["point_id"]] != doc["config"]
    assert planned_config_problems({**doc, "config": ruled[doc["point_id"]]}, Context()) == []
    other = {**doc["config"], "seeds": {**doc["config"]["seeds"], "routing": 7}}
    assert "['seeds']" in str(planned_config_problems({**doc, "config": other}, Context()))


def test_an_unreadable_csv_fails_csv_syntax_and_the_batch_goes_on(tmp_path):
    """A summary CSV with a NUL byte or a byte that is not UTF-8 is a FAIL naming ``csv_syntax``, as malformed
    JSON fails ``json_syntax``; the files after it in the batch are still judged (it was exit 2 and ended the batch:
    an attacker, 2026-12-07)."""
    good = (REPO / "results/summaries/e1_h100.csv").read_bytes()
    cut = good.index(b"\n") + 30
    (tmp_path / "nul.csv").write_bytes(good[:cut] + b"\0" + good[cut:])
    (tmp_path / "latin.csv").write_bytes(good[:cut] + b"\xe9" + good[cut:])
    proc = run_cli("validate", str(tmp_path / "nul.csv"), str(tmp_path / "latin.csv"), "results/summaries/e1_h100.csv")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "error:" not in proc.stderr, proc.stderr
    assert f"{tmp_path / 'nul.csv'}: FAIL\n  [csv_syntax] $: binary data (NUL byte at offset {cut})" in proc.stdout
    assert f"{tmp_path / 'latin.csv'}: FAIL\n  [csv_syntax] $: not UTF-8 text (bad byte at offset {cut})" in proc.stdout
    assert "results/summaries/e1_h100.csv: PASS" in proc.stdout
    report = validate_path(str(tmp_path / "nul.csv"))
    assert [(c["name"], c["passed"]) for c in report["checks"]] == [("file_size", True), ("csv_syntax", False)]
    assert validate_path("results/summaries/e1_h100.csv")["passed"]


@pytest.mark.parametrize(("column", "cell", "names"), [("params", "{bad", "point_id"),
                                                         ("dkv_median_ms", "", "outside [p10, p90]")])
def test_a_sweep_table_with_an_unreadable_cell_fails_its_checks_and_the_batch_goes_on(tmp_path, column, cell, names):
    """A sweep table away from its points folder whose ``params`` cell is no JSON or whose dK/dV median is empty
    FAILs its row checks; it was 'internal error' (JSONDecodeError, TypeError), exit 1 with no report, and the files
    after it in the batch were never judged (an attacker, 2026-12-07)."""
    rows = (REPO / "results/sweeps/sweep_skew_h200.csv").read_text().splitlines()
    header, first = rows[0].split(","), next(csv.reader([rows[1]]))
    first[header.index(column)] = cell
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(first)
    (tmp_path / "t.csv").write_text("\n".join([rows[0], out.getvalue().rstrip("\n"), *rows[2:]]) + "\n")
    proc = run_cli("validate", str(tmp_path / "t.csv"), "results/summaries/e1_h100.csv")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "error:" not in proc.stderr, proc.stderr
    assert f"{tmp_path / 't.csv'}: FAIL\n  [sweep_csv_recompute] $[0]." in proc.stdout and names in proc.stdout
    assert "results/summaries/e1_h100.csv: PASS" in proc.stdout


@pytest.mark.parametrize("layout", ["beside", "run_folder"])
def test_a_summary_csv_alone_is_checked_against_its_own_json_not_the_published_one(tmp_path, layout):
    """A submission's CSV (``reproduce`` names its files as the published ones: e1_h100.json / .csv) validated alone
    is cross-checked against the JSON beside it, or ``raw/`` beside its ``summaries/`` (a run's folder); it was
    checked against results/raw/e1_h100.json and FAILed 160 cells (a new user, 2026-12-07)."""
    sub = REPO / "docs/logs/h100_2026-12-07/reproduce_6699be7"
    csv_dir, json_dir = ((tmp_path, tmp_path) if layout == "beside" else
                         (tmp_path / "x" / "summaries", tmp_path / "x" / "raw"))
    csv_dir.mkdir(parents=True, exist_ok=True)
    json_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(sub / "e1_h100.json", json_dir)
    shutil.copy(sub / "e1_h100.csv", csv_dir)
    report = validate_path(str(csv_dir / "e1_h100.csv"))
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    assert [c["name"] for c in report["checks"]].count("csv_matches_json") == 1
    text = (csv_dir / "e1_h100.csv").read_text().splitlines()
    cells = text[1].split(",")
    cells[3] = str(float(cells[3]) * 0.9)  # median_ms of the first row
    (csv_dir / "e1_h100.csv").write_text("\n".join([text[0], ",".join(cells), *text[2:]]) + "\n")
    failed = [f["message"] for c in validate_path(str(csv_dir / "e1_h100.csv"))["checks"] if not c["passed"]
              for f in c.get("failures", [])]
    assert failed and all(str(json_dir / "e1_h100.json") in m for m in failed if "gives" in m), failed


@pytest.mark.parametrize(("edit", "check"), [
    (lambda lines: [lines[0], lines[1] + ",extra", *lines[2:]], "csv_rows"),  # a row with a cell too many
    (lambda lines: [lines[0] + ",median_ms", *(ln + ",1.0" for ln in lines[1:])], "csv_table"),  # a column twice
])
def test_a_ragged_or_doubled_summary_csv_fails_a_check_and_the_batch_goes_on(tmp_path, edit, check):
    """Both were exit 2, ending a batch of validate (a re-attacker, 2026-12-07)."""
    lines = (REPO / "results/summaries/e1_h100.csv").read_text().splitlines()
    bad = tmp_path / "e1_h100.csv"
    bad.write_text("\n".join(edit(lines)) + "\n")
    proc = run_cli("validate", str(bad), "results/raw/e1_h200.json")
    assert proc.returncode == 1 and "error:" not in proc.stderr, proc.stderr
    assert f"[{check}]" in proc.stdout and "results/raw/e1_h200.json: PASS" in proc.stdout, proc.stdout


def test_a_summary_csv_named_inside_its_summaries_folder_finds_the_runs_json(tmp_path, monkeypatch):
    """``validate x.csv`` typed inside ``runs/<name>/summaries/`` reads ``../raw/x.json`` (a re-attacker found a
    halved CSV passing, listed unverified, 2026-12-07)."""
    sub = REPO / "docs/logs/h100_2026-12-07/reproduce_6699be7"
    (tmp_path / "raw").mkdir()
    (tmp_path / "summaries").mkdir()
    shutil.copy(sub / "e1_h100.json", tmp_path / "raw")
    shutil.copy(sub / "e1_h100.csv", tmp_path / "summaries")
    monkeypatch.chdir(tmp_path / "summaries")
    report = validate_path("e1_h100.csv")
    assert report["passed"] and "csv_matches_json" in [c["name"] for c in report["checks"]], report


def test_a_validation_report_whose_check_counts_disagree_with_its_list_fails():
    """A passed check counts no failures; a failed one counts what it lists (up to 50 listed): a passed check with
    n_failures 5 passed when the reported file was not at hand (a re-attacker, 2026-12-07)."""
    report = validate_bytes(b'{"a": 1, "a": 2}', "x.json")
    report["path"] = "/nowhere/x.json"
    for edit in (lambda r: r["checks"][0].update(n_failures=5),
                 lambda r: r["checks"][1].update(n_failures=1000)):
        doc = copy.deepcopy(report)
        edit(doc)
        checked = validate_bytes(json.dumps(doc).encode(), "r.json")
        assert not checked["passed"], checked
        assert any(f["path"].startswith("$.checks[") for c in checked["checks"] for f in c.get("failures", [])), checked


def test_a_csv_checked_against_the_repositorys_json_names_it_as_the_repository_records_it(tmp_path):
    """The cross-check's messages name the repository's JSON repository-relative, so that a validation report of
    the CSV rebuilds in another clone (it named the absolute path: a re-attacker, 2026-12-07)."""
    lines = (REPO / "results/summaries/e1_h100.csv").read_text().splitlines()
    cells = lines[1].split(",")
    cells[3] = str(float(cells[3]) * 0.9)
    (tmp_path / "e1_h100.csv").write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    messages = [f["message"] for c in validate_path(str(tmp_path / "e1_h100.csv"))["checks"] if not c["passed"]
                for f in c.get("failures", [])]
    assert messages and all(str(REPO) not in m for m in messages), messages
    assert any("but results/raw/e1_h100.json gives" in m for m in messages), messages


def test_a_summary_csv_in_bench_layout_is_checked_against_raw_not_a_json_put_beside_it(tmp_path):
    """In a ``summaries/`` folder, ``raw/<stem>.json`` is the CSV's bench result before a JSON beside it: e1_h200_pair's
    CSV and JSON copied into the published layout as summaries/e1_h200.csv and summaries/e1_h200.json PASSed --strict,
    the published CSV's name holding another run's numbers (an attacker, 2026-12-07). A published CSV whose JSON
    records another name (renamed when it was published: e1_h200_stop_45c4a0c) is still checked against its raw/
    JSON (a re-attacker, the same day)."""
    (tmp_path / "summaries").mkdir()
    (tmp_path / "raw").mkdir()
    shutil.copy(REPO / "results/raw/e1_h200.json", tmp_path / "raw" / "e1_h200.json")
    shutil.copy(REPO / "results/summaries/e1_h200_pair.csv", tmp_path / "summaries" / "e1_h200.csv")
    shutil.copy(REPO / "results/raw/e1_h200_pair.json", tmp_path / "summaries" / "e1_h200.json")
    report = validate_path(str(tmp_path / "summaries" / "e1_h200.csv"))
    failed = {c["name"]: c["failures"] for c in report["checks"] if not c["passed"]}
    assert "raw/e1_h200.json gives" in str(failed.get("csv_matches_json")), failed
    renamed = validate_path("results/summaries/e1_h200_stop_45c4a0c.csv")
    assert renamed["passed"] and renamed["unverified"] == [], renamed
