"""Bad input found by a hostile session (issue 10/14/15 surfaces): each is one line naming the field, exit 2,
no traceback and nothing written; and the validator catches what it can recompute (packing, CUPTI rounds)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nsa_exp.arguments import MOST_ROUNDS
from nsa_exp.checking import analysis, compare
from nsa_exp.checking.noise_table import build as noise_table
from nsa_exp.checking.record_checks import MIN_PYTHON
from nsa_exp.checking.validate import validate_path
from nsa_exp.checking.whatif_result import argv_problems as whatif_argv_problems
from nsa_exp.cli import main
from nsa_exp.core.records import BenchResult
from nsa_exp.io.progress import is_progress_line
from tests.helpers import REPO, run_cli

CAL = "results/model/h200_BQ1_w4_s2.json"
H200 = REPO / "results" / "raw" / "e1_h200.json"
PACKED = REPO / "results" / "sweeps" / "sweep_packing_h200" / "T32768-docs8192-sink-heavy-sinks4.json"


def _one_line(capsys, argv: list[str], *fragments: str) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and not is_progress_line(ln)]
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), (code, err)
    assert "Traceback" not in err[0] and "internal error" not in err[0]
    for f in fragments:
        assert f in err[0], (f, err[0])


def test_compare_refuses_to_overwrite_an_input_or_to_compare_a_file_with_itself(tmp_path, capsys):
    a = tmp_path / "A.json"
    shutil.copy(H200, a)
    _one_line(capsys, ["compare", str(a), "results/raw/e1_h200_repeat.json", "--output", str(a)],
              "--output", "is an input")
    assert json.loads(a.read_text())["kind"] == "bench_result"
    _one_line(capsys, ["compare", str(H200), str(H200), "--output", ""], "same file")
    _one_line(capsys, ["compare", "A", "B", "--noise-from", "X"], "--noise-from", "expected 2 arguments")
    _one_line(capsys, ["compare", "A", "B", "--fail-on", "bogus"], "--fail-on")


@pytest.mark.parametrize(("packing", "field"), [
    ('{"documents": 512, "documents": 256}', "duplicate key 'documents'"),
    ('{"distribution": "lognormal", "mean": 512, "sigma": 1e308, "seed": 0}', "--packing.sigma"),
    ('{"distribution": "lognormal", "mean": 1e300, "sigma": 1, "seed": 0}', "--packing.mean"),
])
def test_predict_refuses_a_bad_packing_in_one_line(capsys, packing, field):
    _one_line(capsys, ["predict", "--calibration", CAL, "--pattern", "sink-heavy", "--T", "1024", "--packing", packing],
              field)


def test_predict_refuses_a_T_with_fewer_than_S_blocks(capsys):
    _one_line(capsys, ["predict", "--calibration", CAL, "--pattern", "local", "--T", "512"], "--T", "S=16")


def test_sweep_refuses_an_empty_grid_and_bad_slurm_json(tmp_path, capsys):
    cfg = tmp_path / "s.json"
    cfg.write_text(json.dumps({"schema_version": "1.0", "name": "s", "base_config": "configs/e1_h100.json",
                               "lengths": [8192], "stages": ["dkv_core"], "patterns": [],
                               "gpu": {"required_name": "H200"}}))
    _one_line(capsys, ["sweep", "--config", str(cfg)], "grid is empty")
    _one_line(capsys, ["sweep", "--config", "configs/sweep_x2_h200.json", "--executor", "slurm", "--slurm", "{bad"],
              "--slurm")


def test_routing_refuses_a_packed_npz_where_the_layout_is_dense_and_two_files_of_one_stem(tmp_path, capsys):
    cfg = json.loads((REPO / "configs" / "e1_h100.json").read_text())
    cfg["shape"]["T"] = 1024
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    assert main(["routing", "--config", str(tmp_path / "c.json"), "--save", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    bi = np.load(tmp_path / "r" / "local.npy")
    np.savez(tmp_path / "packed.npz", block_indices=bi, cu_seqlens=np.array([0, 512, 1024], dtype=np.int32))
    _one_line(capsys, ["routing", "--config", str(tmp_path / "c.json"), "--routing-file", str(tmp_path / "packed.npz")],
              "cu_seqlens", "packed")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        shutil.copy(tmp_path / "r" / "local.npy", tmp_path / d / "same.npy")
    _one_line(capsys, ["routing", "--config", str(tmp_path / "c.json"), "--routing-file", str(tmp_path / "a/same.npy"),
                       "--routing-file", str(tmp_path / "b/same.npy")], "file:same", "is taken")


def test_validate_refuses_a_companion_it_cannot_read(capsys):
    _one_line(capsys, ["validate", "results/summaries/e1_h200.csv", "--also", "no/such.json"], "--also")


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["packing"].update(cu_seqlens_sha256="a" * 64), "$.packing.cu_seqlens_sha256"),
    (lambda d: d["packing"]["cu_seqlens"].__setitem__(1, 8256), "$.packing.cu_seqlens"),
    (lambda d: d["packing"].update(documents=5), "$.packing.documents"),
    (lambda d: d.pop("packing"), "$.packing"),
])
def test_validate_recomputes_a_packed_points_packing_record(tmp_path, edit, field):
    doc = json.loads(PACKED.read_text())
    assert validate_path(PACKED)["passed"]
    edit(doc)
    edited = tmp_path / PACKED.name  # a sweep writes <point_id>.json (point_consistent)
    edited.write_text(json.dumps(doc))
    failed = [c for c in validate_path(edited)["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["packing_recompute"]
    assert failed[0]["failures"][0]["path"] == field


def test_validate_holds_the_cupti_calls_to_the_recorded_rounds(tmp_path):
    doc = json.loads(H200.read_text())
    doc["cupti"]["rounds"] = 7
    (tmp_path / "r.json").write_text(json.dumps(doc))
    failed = [c for c in validate_path(tmp_path / "r.json")["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["cupti_agreement"]
    assert "5 calls, but cupti.rounds = 7" in failed[0]["failures"][0]["message"]


def test_a_packed_bench_result_is_held_to_the_packed_closed_form():
    packed = REPO / "results" / "raw" / "e1_h200_docs8192.json"  # bench on the H200's varlen path
    report = validate_path(packed)
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    doc = json.loads(packed.read_text())
    assert doc["edges"]["closed_form"] == 1974272 < 2066432  # four documents of 8192: fewer slots than dense


@pytest.mark.parametrize(("argv", "fragments"), [
    (["whatif", "--max-fanin", "\u00b2"], ["--max-fanin", "'\u00b2'", "ASCII digits"]),
    (["whatif", "--max-fanin", "4096,\u0663"], ["--max-fanin", "ASCII digits"]),
    (["routing-time", "--repeats", "\u0663"], ["--repeats", "ASCII digits"]),
    (["model-validate", "--calibration", CAL, "--points", "x", "--max-fanin", "\uff14"], ["--max-fanin"]),
    (["compare", "A", "B", "--floor", "\u00b2"], ["--floor", "not a number"]),
])
def test_non_ascii_digits_are_refused_by_the_one_number_rule(capsys, argv, fragments):
    _one_line(capsys, argv, *fragments)


def test_predict_refuses_a_param_that_would_replace_the_pattern_or_that_nothing_reads(capsys):
    _one_line(capsys, ["predict", "--calibration", CAL, "--pattern", "zipf", "--param", "name=local"],
              "--param 'name=local'", "--pattern")
    _one_line(capsys, ["predict", "--calibration", CAL, "--routing-file", "x.npy", "--param", "sinks=4"],
              "--param sinks=4", "--routing-file")


def test_sweep_refuses_slurm_parameters_an_executor_would_ignore(capsys):
    for executor in ("inline", "local"):
        _one_line(capsys, ["sweep", "--config", "configs/sweep_x2_h200.json", "--executor", executor,
                           "--slurm", '{"slurm_partition": "gpu"}'], "--slurm", executor)


@pytest.mark.parametrize(("edit", "fragments"), [
    (lambda d: d["shape"].__setitem__("T", 16384), ["--autotune-from", "does not validate"]),
    (lambda d: d["patterns"]["local"]["stages"]["dkv_core"].__setitem__("median_ms", 1.0),
     ["--autotune-from", "stats_recompute"]),
])
def test_bench_refuses_an_autotune_source_that_fails_validate_before_any_gate(tmp_path, capsys, edit, fragments):
    doc = json.loads((REPO / "results" / "raw" / "e1_h200_pre.json").read_text())
    edit(doc)
    (tmp_path / "src.json").write_text(json.dumps(doc))
    _one_line(capsys, ["bench", "--config", "configs/e1_h200.json", "--autotune-from", str(tmp_path / "src.json"),
                       "--output", str(tmp_path / "out.json"), "--summary", str(tmp_path / "out.csv")], *fragments)
    assert not (tmp_path / "out.json").exists() and "no CUDA" not in capsys.readouterr().err


def test_bench_refuses_a_valid_autotune_source_of_another_shape(tmp_path, capsys):
    cfg = json.loads((REPO / "configs" / "e1_h200.json").read_text())
    cfg["shape"]["T"] = 16384
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    _one_line(capsys, ["bench", "--config", str(tmp_path / "c.json"), "--autotune-from", "results/raw/e1_h200.json",
                       "--output", str(tmp_path / "out.json"), "--summary", str(tmp_path / "out.csv")],
              "--autotune-from", "shape differs", "'T': 32768")


def test_plot_refuses_a_summary_that_fails_validate_and_draws_nothing(tmp_path, capsys):
    rows = (REPO / "results" / "summaries" / "e1_h200.csv").read_text().splitlines()
    i = next(i for i, r in enumerate(rows) if r.startswith("e1_h200,local,dkv_core,"))
    cells = rows[i].split(",")
    cells[3] = "15.0"  # the median, no longer the result's
    rows[i] = ",".join(cells)
    (tmp_path / "e1_h200.csv").write_text("\n".join(rows) + "\n")
    _one_line(capsys, ["plot", "--input", str(tmp_path / "e1_h200.csv"), "--result", str(H200), "--out-dir",
                       str(tmp_path / "fig")], "--input", "does not validate", "csv_matches_json")
    assert not (tmp_path / "fig").exists()


def test_an_ncu_summarys_raw_csv_is_found_beside_it_and_strict_fails_when_it_is_not(tmp_path, capsys):
    name = "e1_h200_local-vs-sink-heavy_dq_core"
    doc = json.loads((REPO / "results" / "ncu" / f"{name}.json").read_text())
    doc["raw_csv"] = f"/root/out/{name}.raw.csv"  # recorded on the GPU host, committed beside the summary
    (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    shutil.copy(REPO / "results" / "ncu" / f"{name}.raw.csv", tmp_path)
    report = validate_path(tmp_path / f"{name}.json")
    assert report["passed"] and "ncu_recompute" in [c["name"] for c in report["checks"]]
    assert not [u for u in report["unverified"] if "raw CSV" in u["why"]], report["unverified"]
    assert main(["validate", "--strict", str(tmp_path / f"{name}.json")]) == 0
    (tmp_path / f"{name}.raw.csv").unlink()
    capsys.readouterr()
    assert main(["validate", str(tmp_path / f"{name}.json")]) == 0  # unverifiable is not a failure ...
    assert main(["validate", "--strict", str(tmp_path / f"{name}.json")]) == 1  # ... unless --strict
    assert "--strict: 1 check group(s) unverifiable" in capsys.readouterr().err


@pytest.mark.parametrize("kind", [[1], {"a": 1}, 3, None])
def test_a_kind_that_is_no_string_is_a_fail_naming_it_never_an_internal_error(kind, tmp_path, capsys):
    """``{"kind": [1]}`` ended in "internal error TypeError: unhashable type" (found by the typing pass)."""
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"kind": kind, "schema_version": "1.0"}))
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "internal error" not in err and "Traceback" not in err
    assert f"{path}: FAIL" in out and "[kind] $.kind: unknown document kind" in out


@pytest.mark.parametrize("top,named", [([{"kind": "validation_report"}], "array"), ("x", "string"), (3, "number"),
                                       (None, "null")])
def test_a_top_level_that_is_no_object_is_a_fail_naming_what_it_is(top, named, tmp_path, capsys):
    """A list (what ``validate --json`` prints), a string, a number or null is no document: the kind check says
    what the top level is, not "unknown document kind None" (found by a forger's trial, 2026-12-04)."""
    path = tmp_path / "top.json"
    path.write_text(json.dumps(top))
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"[kind] $: the top level is a JSON {named}, not a document object" in out
    assert ("validate --json prints a list" in out) == (named == "array")


@pytest.mark.parametrize("version", [[1], {"a": 1}, 1.0, True])
def test_a_schema_version_that_is_no_string_is_a_fail_naming_it_never_an_internal_error(version, tmp_path, capsys):
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"kind": "bench_result", "schema_version": version}))
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "internal error" not in err and "[schema_version] $.schema_version:" in out


def test_a_result_whose_commit_is_not_here_passes_but_strict_fails_naming_its_config(tmp_path, capsys):
    """A recorded commit this repository does not hold (a fork's, or forged) leaves the embedded config compared
    with today's file on the experiment's fields only: listed as a source not found, so ``--strict`` exits 1."""
    doc = json.loads(H200.read_text())
    doc["metadata"]["git"]["sha"] = "1" * 40
    doc["config"]["description"] += " (edited after the run)"
    path = tmp_path / "e1_h200.json"
    path.write_text(json.dumps(doc))
    assert main(["validate", str(path)]) == 0
    capsys.readouterr()
    assert main(["validate", "--strict", str(path)]) == 1
    err = capsys.readouterr().err
    assert "--strict: 1 check group(s) unverifiable" in err


def test_the_largest_round_count_a_door_takes_is_the_schemas():
    """``--repetitions`` and ``--cupti-rounds`` are refused at the door above :data:`nsa_exp.arguments.MOST_ROUNDS`:
    the most timed rounds the config and result schemas take (a larger count reached the GPU gate)."""
    for schema in ("config", "result"):
        timing = json.loads((REPO / "schemas" / f"{schema}.schema.json").read_text())["properties"]["timing"]
        assert timing["properties"]["repetitions"]["maximum"] == MOST_ROUNDS, schema


def test_a_text_report_prints_a_path_holding_a_lone_surrogate(tmp_path, capsys):
    """A recorded path with a lone surrogate (JSON's "\\ud800") is printed escaped: it ended validate's text report
    in "internal error UnicodeEncodeError" (an attacker, 2026-12-06)."""
    doc = json.loads((REPO / "results/compare/e1_h200_vs_e1_h200_repeat.json").read_text())
    doc["a"]["path"] = "results/raw/\ud800.json"
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    proc = run_cli("validate", str(path))
    assert proc.returncode == 0 and "internal error" not in proc.stderr, proc.stderr
    assert "\\ud800" in proc.stdout


def _failed(report: dict) -> dict[str, list[str]]:
    return {c["name"]: [f["message"] for f in c["failures"]] for c in report["checks"] if not c["passed"]}


def test_a_derived_document_fails_when_its_source_is_forged_or_of_another_kind(tmp_path):
    """An analysis rebuilt (by its own builder) from a raw run whose sink-heavy dK/dV observations were scaled x0.3
    PASSed: only compare re-validated its sources (an attacker, 2026-12-06). Now a source found must be of its kind
    and pass validate, for every derived kind (checking/sources.source_problems); a compare naming a config as a
    side FAILs instead of counting it "not found"."""
    raw = tmp_path / "results" / "raw"
    raw.mkdir(parents=True)
    for name in ("e1_h100.json", "e1_h100_repeat.json"):
        shutil.copyfile(REPO / "results/raw" / name, raw / name)
    forged = json.loads((raw / "e1_h100.json").read_text())
    stage = forged["patterns"]["sink-heavy"]["stages"]["dkv_core"]
    stage["raw_ms"] = [x * 0.3 for x in stage["raw_ms"]]
    for key in ("median_ms", "p10_ms", "p90_ms", "p95_ms", "min_ms", "mean_ms"):
        stage[key] *= 0.3
    (raw / "e1_h100.json").write_text(json.dumps(forged))
    rebuilt = analysis.build(forged, json.loads((raw / "e1_h100_repeat.json").read_text()))
    rebuilt["metadata"] = json.loads((REPO / "results/analysis/e1_h100.json").read_text())["metadata"]
    (tmp_path / "results" / "analysis").mkdir()
    (tmp_path / "results" / "analysis" / "e1_h100.json").write_text(json.dumps(rebuilt))
    report = validate_path(tmp_path / "results" / "analysis" / "e1_h100.json")
    assert not report["passed"] and "does not validate" in " ".join(_failed(report)["analysis_recompute"]), report
    doc = json.loads((REPO / "results/compare/e1_h200_vs_e1_h200_repeat.json").read_text())
    doc["a"]["path"] = "configs/e1_h200.json"
    (tmp_path / "c.json").write_text(json.dumps(doc))
    report = validate_path(tmp_path / "c.json")
    assert "not a bench_result" in " ".join(_failed(report)["compare_recompute"]), report


def test_strict_fails_a_run_record_whose_argv_is_not_the_clis(tmp_path):
    """Another program's argv[0] lists the argv-read checks (config_path, name, --resume, --allow-gpu, the stop rule)
    as unverifiable: the pre-run renamed as the formal run PASSes plain validate that way (listed, never silently),
    and ``--strict`` FAILs it (it passed --strict too: an attacker, 2026-12-06)."""
    doc = json.loads((REPO / "results/raw/e1_h200_pre.json").read_text())
    doc["metadata"]["argv"] = ["/venv/lib/python3.12/site-packages/pytest/__main__.py", "tests/test_bench.py"]
    doc["name"] = "e1_h200"
    path = tmp_path / "e1_h200.json"
    path.write_text(json.dumps(doc))
    plain, strict = run_cli("validate", str(path)), run_cli("validate", "--strict", str(path))
    assert plain.returncode == 0 and "unverified (argv not the CLI's)" in plain.stdout, plain.stdout
    assert strict.returncode == 1 and "--strict: 1 check group(s) unverifiable" in strict.stderr, strict.stderr


def test_the_oldest_python_validate_accepts_is_pyprojects():
    """``metadata.versions.python`` below :data:`~nsa_exp.checking.record_checks.MIN_PYTHON` fails
    ``metadata_plausible``: the floor is pyproject.toml's requires-python."""
    text = (REPO / "pyproject.toml").read_text()
    assert f'requires-python = ">={MIN_PYTHON[0]}.{MIN_PYTHON[1]}"' in text


def test_a_noise_table_or_sweep_table_rebuilt_from_a_forged_source_fails(tmp_path):
    """A noise table rebuilt from a repeat whose medians were x1.6 (observations untouched) matched its rebuild,
    and a compare judged by its ~0.6 floors PASSed; a sweep table whose point's dK/dV medians were set to 20 ms
    did too (an attacker, 2026-12-06). The table's sources must validate (every check when the table is validated
    itself; as a compare's floors, each stage's statistics against its observations); a sweep table's points too."""
    raw = tmp_path / "results" / "raw"
    raw.mkdir(parents=True)
    runs = []
    for name in ("e1_h200.json", "e1_h200_repeat.json"):
        doc = json.loads((REPO / "results/raw" / name).read_text())
        if name == "e1_h200_repeat.json":
            for cell in doc["patterns"].values():
                for stage in cell["stages"].values():
                    stage["median_ms"] *= 1.6
        (raw / name).write_text(json.dumps(doc))
        runs.append((f"results/raw/{name}", BenchResult.from_json(doc)))
    (tmp_path / "results" / "noise").mkdir()
    table = tmp_path / "results" / "noise" / "floors.json"
    table.write_text(json.dumps(noise_table(runs)))
    failed = _failed(validate_path(table))
    assert "does not validate" in " ".join(failed["noise_table_recompute"]), failed
    assert "stats_recompute" in " ".join(failed["noise_table_recompute"])
    sweep = tmp_path / "results" / "sweeps"
    shutil.copytree(REPO / "results/sweeps/sweep_x2_h200", sweep / "sweep_x2_h200")
    shutil.copyfile(REPO / "results/sweeps/sweep_x2_h200.csv", sweep / "sweep_x2_h200.csv")
    point = sweep / "sweep_x2_h200" / "T32768-local.json"
    doc = json.loads(point.read_text())
    stage = next(iter(next(iter(doc["patterns"].values()))["stages"].values()))
    stage["median_ms"] *= 0.5
    point.write_text(json.dumps(doc))
    failed = _failed(validate_path(sweep / "sweep_x2_h200.csv"))
    assert "T32768-local.json does not validate" in " ".join(failed["sweep_csv_recompute"]), failed


def test_a_model_validation_row_whose_source_point_was_forged_fails(tmp_path, monkeypatch):
    """A validation row's point was matched by its sha256 alone: a sweep point whose sink-heavy dK/dV median was
    halved (its observations untouched), its new sha256 written into the row, PASSed (an attacker, 2026-12-06).
    A row's source must validate, as a calibration's points must."""
    rel = "results/model/h200_BQ1_w4_s2_validation.json"
    doc = json.loads((REPO / rel).read_text())
    k = next(i for i, r in enumerate(doc["rows"]) if r["pattern"]["name"] == "sink-heavy")
    source = doc["rows"][k]["source"]
    point = json.loads((REPO / source).read_text())
    point["patterns"]["sink-heavy"]["stages"]["dkv_core"]["median_ms"] *= 0.5
    forged = tmp_path / source
    forged.parent.mkdir(parents=True)
    forged.write_text(json.dumps(point))
    doc["rows"][k]["sha256"] = hashlib.sha256(forged.read_bytes()).hexdigest()
    target = tmp_path / rel
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(doc))
    monkeypatch.chdir(REPO)  # the calibration and the other rows' points: the committed ones
    check = next(c for c in validate_path(target)["checks"] if c["name"] == "model_validation_recompute")
    assert {"path": f"$.rows[{k}].source", "message": f"{source} does not validate (stats_recompute); a document "
            "rebuilt from it proves nothing"} in check["failures"], check


@pytest.mark.parametrize("repeat", ["e1_h100", "e1_h200", "copy"])
def test_an_analysis_whose_repeat_is_the_run_itself_or_another_gpus_fails(repeat, tmp_path):
    """An analysis rebuilt by its own builder with the run as its own repeat (every repeat_diff_pct 0.0), or with
    the H200 run as the H100 run's repeat, PASSed (an attacker, 2026-12-06): a repeat is a second run of the same
    experiment on the same GPU; so did a copy of the run renamed, one warm-up latency nudged (a re-attacker): its
    timed observations are the run's, bit for bit."""
    run = json.loads((REPO / "results/raw/e1_h100.json").read_text())
    other = json.loads((REPO / f"results/raw/{'e1_h100' if repeat == 'copy' else repeat}.json").read_text())
    if repeat == "copy":  # renamed (its argv too), an hour later, one warm-up nudged: a valid run of its own
        other["name"], other["metadata"]["created_utc"] = "e1_h100_rep2", "2026-11-29T12:34:07Z"
        other["metadata"]["argv"] = [a.replace("out/e1_h100.", "out/e1_h100_rep2.") for a in other["metadata"]["argv"]]
        other["patterns"]["local"]["stages"]["csr"]["warmup_ms"][0] += 1e-6
        (tmp_path / "results" / "raw").mkdir(parents=True)
        (tmp_path / "results" / "raw" / "e1_h100_rep2.json").write_text(json.dumps(other))
    doc = analysis.build(run, other)
    doc["metadata"] = json.loads((REPO / "results/analysis/e1_h100.json").read_text())["metadata"]
    (tmp_path / "results" / "analysis").mkdir(parents=True)
    (tmp_path / "results" / "analysis" / "a.json").write_text(json.dumps(doc))
    failed = _failed(validate_path(tmp_path / "results" / "analysis" / "a.json"))
    want = "the same experiment on the same GPU" if repeat == "e1_h200" else "itself"
    assert want in " ".join(failed["analysis_recompute"]), failed


def test_an_ncu_profile_whose_csv_and_summary_were_halved_together_fails(tmp_path, monkeypatch):
    """The sink-heavy dK/dV duration halved in the raw CSV and its summary together (64.24 -> 32.12 ms) PASSed
    (an attacker, 2026-12-06): its SM cycles now run at 3.7 GHz (ncu measured 1.84), and the bench it replayed
    measured 63.6 ms."""
    name = "results/ncu/e1_h200_local-vs-sink-heavy_dkv_core"
    rows = list(csv.reader(io.StringIO((REPO / f"{name}.raw.csv").read_text(), newline="")))
    rows[3][rows[0].index("gpu__time_duration.sum")] = "32.120000"  # rows[3]: kernel ID 1, sink-heavy
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    (tmp_path / f"{Path(name).name}.raw.csv").write_text(out.getvalue())
    doc = json.loads((REPO / f"{name}.json").read_text())
    doc["kernels"][1]["metrics"]["duration_ns"] = 32.12e6
    (tmp_path / f"{Path(name).name}.json").write_text(json.dumps(doc))
    monkeypatch.chdir(REPO)  # the bench result it names
    messages = " ".join(_failed(validate_path(tmp_path / f"{Path(name).name}.json"))["ncu_recompute"])
    assert "run at 3.6811 GHz, but ncu measured 1.8406 GHz" in messages, messages
    assert "0.505x the results/raw/e1_h200.json median of sink-heavy dkv_core" in messages, messages


def test_a_whatif_result_is_held_to_its_recorded_command_line():
    """A what-if of 10 rounds recorded as 5, or with its F=8192 arms or its zipf routing dropped (the rest re-sorted
    and recomputed), PASSed (an attacker, 2026-12-06): its routings, arms and rounds are its argv's."""
    doc = json.loads((REPO / "results/whatif/e1_h200_whatif.json").read_text())
    assert whatif_argv_problems(doc) == []
    fewer = json.loads(json.dumps(doc))
    fewer["timing"]["rounds"] = 5
    assert [p for p, _ in whatif_argv_problems(fewer)] == ["$.timing.rounds"]
    dropped = json.loads(json.dumps(doc))
    for p in dropped["patterns"].values():
        p["arms"] = {k: v for k, v in p["arms"].items() if not k.endswith("F=8192")}
    assert [p for p, _ in whatif_argv_problems(dropped)] == ["$.patterns.sink-heavy.arms", "$.patterns.zipf.arms"]
    del dropped["patterns"]["zipf"]
    assert "$.patterns" in [p for p, _ in whatif_argv_problems(dropped)]


def test_a_compare_judged_by_a_noise_table_replaced_before_its_run_fails(tmp_path):
    """A compare is judged by the floors of its day when the table at hand does not give its recorded ones
    (a reproduce submission's), but only by a version still committed when its later side was measured: the
    formal H200 run against the stop-rule run of 2026-12-05 19:09, rebuilt with the table of f7f95fc (replaced
    twice before that run), flipped 4 verdicts and PASSed (a re-attacker, 2026-12-06)."""
    doc = json.loads((REPO / "results/compare/e1_h200_vs_stop.json").read_text())
    old = tmp_path / "floors.json"
    old.write_bytes(subprocess.run(["git", "-C", str(REPO), "show", "f7f95fc:results/noise/floors.json"],
                                   capture_output=True, check=True).stdout)
    forged = compare.build(doc["a"]["path"], doc["b"]["path"], fail_on=doc["fail_on"],
                           resamples=doc["bootstrap"]["resamples"], noise_table=old)
    forged["noise_floor"]["paths"] = doc["noise_floor"]["paths"]
    forged["noise_floor"]["rule"] = forged["noise_floor"]["rule"].replace(str(old), doc["noise_floor"]["paths"][0])
    assert forged["counts"] != doc["counts"]  # the old floors change verdicts
    (tmp_path / "c.json").write_text(json.dumps(forged))
    failed = _failed(validate_path(tmp_path / "c.json"))
    assert any(m.startswith("recorded") for m in failed["compare_recompute"]), failed


def test_an_ncu_summary_naming_no_bench_run_leaves_its_durations_unverified_and_strict_fails(tmp_path, capsys):
    """An attacker's trial of 2026-12-07: the sink-heavy dK/dV kernel halved in the summary and its raw CSV alike,
    and ``benchmark_result`` deleted, so that no bench median held it: PASS ``--strict``. Without a bench run the
    durations are listed unverified (a source not found), and ``--strict`` exits 1."""
    name = "e1_h200_local-vs-sink-heavy_dkv_core"
    rows = list(csv.reader(io.StringIO((REPO / "results" / "ncu" / f"{name}.raw.csv").read_text())))
    for j, head in enumerate(rows[0]):
        if head.startswith(("gpu__time_duration.", "sm__cycles_active.")) or (
                head.startswith("sm__cycles_elapsed.") and "per_second" not in head):
            rows[3][j] = f"{float(rows[3][j]) * 0.5:.6f}"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    (tmp_path / f"{name}.raw.csv").write_text(out.getvalue())
    doc = json.loads((REPO / "results" / "ncu" / f"{name}.json").read_text())
    doc["kernels"][1]["metrics"]["duration_ns"] *= 0.5
    doc.pop("benchmark_result")
    (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    report = validate_path(tmp_path / f"{name}.json")
    assert report["passed"], report  # the CSV agrees with it: nothing here recomputes the halving ...
    assert any(u["path"] == "$.kernels[*].metrics.duration_ns" for u in report["unverified"]), report["unverified"]
    capsys.readouterr()
    assert main(["validate", "--strict", str(tmp_path / f"{name}.json")]) == 1  # ... so --strict fails
    assert "duration_ns" in capsys.readouterr().err
