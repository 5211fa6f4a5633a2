"""The dK/dV makespan model: the simulator against hand-worked schedules, slots from the compiled
kernel, the calibration file's validation and refusals, and predict's errors."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from nsa_exp.cli import main
from nsa_exp.core.config import Shape
from nsa_exp.core.families import pattern_from_entry
from nsa_exp.core.protocol import WHATIF_LAYOUTS
from nsa_exp.io.progress import is_progress_line
from nsa_exp.io.schemas import schema_errors
from nsa_exp.model.fit import fit_params
from nsa_exp.model.makespan import heaviest_first, lower_bounds, simulate, split_rows
from nsa_exp.model.occupancy import slots_per_sm, theoretical_occupancy_pct
from nsa_exp.model.points import pattern_fanin, result_files
from nsa_exp.model.split import split_batches, split_fanin, split_routing
from nsa_exp.report.data import ReportData
from nsa_exp.report.manifest import committed_inputs
from nsa_exp.report.model import model_section
from nsa_exp.routing.fanin import row_fanin
from nsa_exp.routing.patterns import generate_routing
from tests.helpers import REPO, run_cli

SEED = "results/raw/e1_h200_pre.json"
SEED3 = {"schema_version": "1.0", "kind": "model_calibration_set", "name": "seed3", "routings": [
    {"name": "local", "pattern": {"name": "local"}, "T": 32768},
    {"name": "uniform", "pattern": {"name": "uniform"}, "T": 32768},
    {"name": "sinks4", "pattern": {"name": "sink-heavy", "sinks": 4}, "T": 32768}]}


def test_one_heavy_row_first_finishes_with_the_rest_but_last_extends_the_makespan():
    first = simulate([4.0, 1, 1, 1, 1], n_sm=2, slots=1)
    last = simulate([1, 1, 1, 1, 4.0], n_sm=2, slots=1)
    assert first.makespan == 4.0 and last.makespan == 6.0  # by hand: 4 | 1+1+1+1 ; 1+1+4 | 1+1
    assert last.start.tolist() == [0, 0, 1, 1, 2] and last.end[4] == 6.0


def test_more_rows_than_slots_run_in_waves_of_n_sm_times_slots():
    sched = simulate(np.ones(10), n_sm=2, slots=2)  # 4 slots: waves 4, 4, 2 of 1 ms each
    assert sched.makespan == 3.0
    assert sched.busy_fraction == pytest.approx(10 / 12)


def test_a_program_alone_on_its_sm_runs_gamma_times_faster():
    # SM 0 holds 3 and 1 ms programs sharing at rate 1; after 1 ms the 3 ms one is alone (rate 1.5): 1 + 2/1.5
    assert simulate([3.0, 1.0], n_sm=1, slots=2, gamma=1.5).makespan == pytest.approx(1 + 2 / 1.5)
    assert simulate([3.0, 1.0], n_sm=1, slots=2, gamma=1.0).makespan == 3.0


def test_heaviest_first_is_never_worse_on_this_skewed_case_and_bounds_hold():
    work = np.r_[np.ones(30), 10.0]
    base = simulate(work, n_sm=4, slots=1).makespan
    lpt = simulate(work[heaviest_first(work)], n_sm=4, slots=1).makespan
    lb = lower_bounds(work, n_sm=4, slots=1)
    assert base == 17.0 and lpt == 10.0 and lpt >= max(lb.values())


def test_simulator_refuses_bad_input():
    with pytest.raises(ValueError, match="gamma"):
        simulate([1.0], n_sm=1, slots=2, gamma=3.0)
    with pytest.raises(ValueError, match=">= 0"):
        simulate([-1.0], n_sm=1, slots=1)


def test_row_split_preserves_fanin_and_caps_chunks():
    f = np.array([0, 5, 9, 3])
    chunk, parent = split_rows(f, 4)
    assert np.bincount(parent, weights=chunk).tolist() == f.tolist() and chunk.max() <= 4


@pytest.mark.parametrize("seed", range(6))
def test_the_batches_counted_from_fanin_alone_are_those_the_split_routing_builds(seed):
    """validate's what-if check counts B' from the rows' fan-in (split_batches) instead of building the B'-batch
    routing (~1.5 s per arm at T=32768): the two agree on random routings, -1 padding, duplicates and an empty one."""
    rng = np.random.default_rng(seed)
    T, H, S, bs = 96, 2, 3, 8
    bi = rng.integers(-1, T // bs, size=(1, T, H, S)).astype(np.int32)
    if seed == 0:
        bi[:] = -1  # no edge at all
    elif seed == 1:
        bi[..., 0] = 0  # one row every query selects: the longest
    for F in (1, 2, 3, 5, 8, 40, 1000):
        for layout in WHATIF_LAYOUTS:
            want = split_routing(bi, bs, F, layout).shape[0]
            assert split_batches(row_fanin(bi, bs), F, layout) == want, (F, layout)


def test_slots_from_every_compiled_dkv_config_on_the_h200_and_the_ncu_cross_check():
    study = json.loads((REPO / "results/studies/h200_method_study_flush.raw.json").read_text())["kernels"]["dkv_core"]
    got = {(c["kwargs"]["BQ"], c["num_warps"], c["num_stages"]): slots_per_sm(m["n_regs"], m["num_warps"], m["shared"])
           ["slots"] for c, m in zip(study["configs"], study["compiled"], strict=True) if m["n_regs"]}
    assert got[(1, 4, 2)] == 2 and theoretical_occupancy_pct(2, 4) == 12.5  # ncu: 12.5% on the H100
    assert got[(1, 8, 2)] == 1  # 224 regs x 8 warps: one program per SM
    ncu = json.loads((REPO / "results/ncu/e1_h100_local-vs-sink-heavy_dkv_core.json").read_text())
    assert "theoretical_occupancy_pct\": 12.5" in json.dumps(ncu).replace(".0,", ",")


@pytest.fixture(scope="module")
def seed_calibration(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    (d / "set.json").write_text(json.dumps(SEED3))
    assert main(["calibrate", "--points", SEED, "--set", str(d / "set.json"), "--output", str(d / "cal.json")]) == 0
    return d


def test_calibration_is_schema_valid_and_names_its_designed_routings(seed_calibration):
    cal = json.loads((seed_calibration / "cal.json").read_text())
    assert schema_errors(cal, "model_calibration", "cal") == []
    assert [p["name"] for p in cal["points"]] == ["local", "uniform", "sinks4"]
    assert cal["occupancy"]["slots_per_sm"] == 2 and cal["occupancy"]["ncu_cross_check"]["agrees"]
    assert cal["residuals"]["max_abs_pct"] < 1.0


def test_a_calibration_computed_again_is_kept_so_that_the_validations_naming_its_sha256_stay_valid(
        seed_calibration, capsys):
    """A new user re-ran docs/MODEL.md's calibrate line: the same fit, rewritten with a new time and argv, left the
    committed validations failing validate ("the calibration at hand is another file"). The same document, its
    metadata and command aside, is now kept; another one is written."""
    cal = seed_calibration / "cal.json"
    argv = ["calibrate", "--points", SEED, "--set", str(seed_calibration / "set.json"), "--output", str(cal),
            "--overwrite"]
    before = cal.read_bytes()
    capsys.readouterr()
    assert main(argv) == 0
    assert cal.read_bytes() == before and f"kept {cal} (the same calibration;" in capsys.readouterr().out
    doc = json.loads(before)
    doc["model"]["parameters"]["a_ms"] *= 1.5  # a file holding another fit is replaced by the computed one
    cal.write_text(json.dumps(doc, indent=1))
    assert main(argv) == 0
    assert f"wrote {cal}" in capsys.readouterr().out
    assert json.loads(cal.read_text())["model"] == json.loads(before)["model"]


def test_the_model_appendix_flags_a_validation_whose_calibration_changed(tmp_path):
    model = tmp_path / "results" / "model"
    model.mkdir(parents=True)
    for name in ("h200_BQ1_w4_s2.json", "h200_BQ1_w4_s2_packing_validation.json"):
        (model / name).write_bytes((REPO / "results" / "model" / name).read_bytes())
    flag = "**Its calibration `results/model/h200_BQ1_w4_s2.json` changed since this validation**"
    assert flag not in "\n".join(model_section(ReportData(committed_inputs(root=tmp_path))))
    with (model / "h200_BQ1_w4_s2.json").open("a") as f:
        f.write("\n")  # another file now: another sha256
    assert flag in "\n".join(model_section(ReportData(committed_inputs(root=tmp_path))))


def test_validation_predicts_only_the_held_out_routing(seed_calibration, capsys):
    out = seed_calibration / "val.json"
    assert main(["model-validate", "--calibration", str(seed_calibration / "cal.json"), "--points", SEED,
                 "--output", str(out), "--figures", str(seed_calibration), "--max-fanin", "0"]) == 0
    val = json.loads(out.read_text())
    # a validation not named <calibration>_validation keeps its own figure (two validations never share one)
    assert (seed_calibration / "model_validation_val.png").stat().st_size > 0
    assert not (seed_calibration / "model_validation_cal.png").exists()
    assert schema_errors(val, "model_validation", "val") == []
    assert [r["name"] for r in val["rows"]] == ["zipf(exponent=1.0)@T=32768"]
    assert abs(val["rows"][0]["error_pct"]) < 5.0  # a held-out prediction, measured 58.228 ms
    # the console says whether the target was met, as the file records it
    said = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("1 points: |error|")]
    assert val["meets_target"] and len(said) == 1 and said[0].endswith(": meets the target"), said
    assert model_section(ReportData(committed_inputs(root=seed_calibration))) == []  # no results/model there
    (seed_calibration / "results" / "model").mkdir(parents=True)
    out.rename(seed_calibration / "results" / "model" / "seed_validation.json")
    text = "\n".join(model_section(ReportData(committed_inputs(root=seed_calibration))))
    assert "### Validation: `results/model/seed_validation.json`" in text
    # its source is not under that root, so the row has no CI and says so
    assert "| zipf(exponent=1.0)@T=32768 | 58.23 |" in text and "source not committed" in text


def test_calibrate_refuses_points_from_another_gpu(tmp_path, capsys):
    (tmp_path / "set.json").write_text(json.dumps(SEED3))  # the H100's formal run: a valid result of another GPU
    rc = main(["calibrate", "--points", SEED, "results/raw/e1_h100.json", "--set", str(tmp_path / "set.json"),
               "--output", str(tmp_path / "cal.json")])
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not is_progress_line(ln)]
    assert rc == 2 and len(err) == 1
    assert "gpu is 'NVIDIA H100 80GB HBM3' but the calibration's is 'NVIDIA H200'" in err[0]
    assert not (tmp_path / "cal.json").exists()


def test_calibrate_refuses_a_point_relabelled_to_another_gpu_because_it_no_longer_validates(tmp_path, capsys):
    doc = json.loads((REPO / SEED).read_text())
    doc["metadata"]["gpu"]["name"] = "NVIDIA H100 80GB HBM3"
    (tmp_path / "other.json").write_text(json.dumps(doc))
    (tmp_path / "set.json").write_text(json.dumps(SEED3))
    rc = main(["calibrate", "--points", SEED, str(tmp_path / "other.json"), "--set", str(tmp_path / "set.json"),
               "--output", str(tmp_path / "cal.json")])
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not is_progress_line(ln)]
    assert rc == 2 and len(err) == 1
    # its GPU against the GPU table and its gpu gate: refused before any setup check
    assert "does not validate" in err[0] and "metadata_plausible" in err[0] and "other.json" in err[0]
    assert not (tmp_path / "cal.json").exists()


def test_a_sweep_folder_is_read_recursively_and_its_other_json_skipped(tmp_path):
    (tmp_path / "zipf").mkdir()
    (tmp_path / "zipf" / "p1.json").write_bytes((REPO / SEED).read_bytes())
    (tmp_path / "manifest.json").write_text('{"kind": "sweep_manifest", "points": []}')
    assert result_files([str(tmp_path)]) == [tmp_path / "zipf" / "p1.json"]


def test_calibrate_refuses_a_set_routing_that_was_not_measured(tmp_path, capsys):
    bad = {**SEED3, "routings": [*SEED3["routings"][:2], {"name": "x", "pattern": {"name": "local"}, "T": 8192}]}
    (tmp_path / "set.json").write_text(json.dumps(bad))
    assert main(["calibrate", "--points", SEED, "--set", str(tmp_path / "set.json"),
                 "--output", str(tmp_path / "cal.json")]) == 2
    assert "routings[2] local@T=8192 is not among the --points" in capsys.readouterr().err


def test_predict_prints_bounds_and_refuses_bad_input(seed_calibration, tmp_path, capsys):
    cal = str(seed_calibration / "cal.json")
    assert main(["predict", "--calibration", cal, "--pattern", "sink-heavy", "--param", "sinks=4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["predicted_ms"] == pytest.approx(63.19, rel=0.01)  # a calibration point, reproduced
    assert out["heaviest_row"]["start_ms"] == 0.0
    assert out["predicted_ms"] >= out["lower_bounds"]["heaviest_row_alone_ms"]
    cases = [(["--pattern", "local", "--routing-file", "x.npy"], "exactly one of"),
             (["--pattern", "sink-heavy", "--param", "sinks"], "--param 'sinks': write key=value"),
             (["--pattern", "local", "--T", "100"], "--T: 100 is not a positive multiple"),
             (["--pattern", "nope"], "--pattern: unknown pattern 'nope'"),
             # a parameter's fault names the option that gave it (it read --pattern.exponnt: a new user, 2026-12-07)
             (["--pattern", "zipf", "--param", "exponnt=1.5"], "--param exponnt: pattern 'zipf' takes no parameter"),
             (["--pattern", "sink-heavy", "--param", "sinks=16"], "--param sinks: 16 must be below S=16"),
             (["--routing-file", str(tmp_path / "missing.npy")], "does not exist")]
    for extra, message in cases:
        assert main(["predict", "--calibration", cal, *extra]) == 2
        assert message in capsys.readouterr().err
    other = json.loads((seed_calibration / "cal.json").read_text())
    other["kind"] = "bench_result"
    (tmp_path / "c.json").write_text(json.dumps(other))
    assert main(["predict", "--calibration", str(tmp_path / "c.json"), "--pattern", "local"]) == 2
    assert "not a model calibration" in capsys.readouterr().err


def test_predict_refuses_a_routing_file_of_another_shape(seed_calibration, tmp_path, capsys):
    np.save(tmp_path / "r.npy", np.full((1, 1024, 2, 16), -1, dtype=np.int32))  # H=2, calibration has H=4
    assert main(["predict", "--calibration", str(seed_calibration / "cal.json"), "--routing-file",
                 str(tmp_path / "r.npy")]) == 2
    assert "expected [1, 1024, 4, 16]" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["--max-fanin", "0"], "--max-fanin: '0' is not a positive integer"),
    (["--max-fanin", "4096,x"], "--max-fanin: 'x' is not a positive integer"),
    (["--layouts", "split,lpt"], "--layouts: ['lpt'] not in split, split-heavy-first"),
    (["--rounds", "0"], "--rounds: must be a positive integer"),
])
def test_whatif_refuses_bad_options_before_touching_a_gpu(args, message, capsys):
    assert main(["whatif", "--config", "configs/e1_h100.json", *args]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not is_progress_line(ln)]
    assert len(err) == 1 and message in err[0]


def test_placement_points_hash_into_the_fanin_cache():
    """A sweep point's pattern with ``heads`` (a JSON list) must reach the cached routing generator."""
    shape = {"B": 1, "T": 256, "HQ": 16, "H": 2, "K": 16, "V": 16, "S": 2, "block_size": 16, "dtype": "float16"}
    placed = pattern_fanin({"name": "sink-heavy", "sinks": 1, "heads": [1]}, shape, 256, 0)
    everywhere = pattern_fanin({"name": "sink-heavy", "sinks": 1}, shape, 256, 0)
    assert placed.sum() == everywhere.sum() and not (placed == everywhere).all()


def test_a_one_slot_config_fits_with_gamma_exactly_one():
    """BQ=4, 8 warps holds one program per SM: gamma has no meaning and must come out as 1, not 1 + eps."""
    rng = np.random.default_rng(0)
    points = [(rng.integers(0, 2000, size=64), m) for m in (3.0, 4.0, 5.5)]
    params, fitted = fit_params(points, n_sm=8, slots=1)
    assert params.gamma == 1.0 and params.a_ms >= 0 and params.c_ms >= 0 and len(fitted) == 3


@pytest.mark.parametrize(("make", "args", "fragment"), [
    (lambda p: p.write_bytes(b""), [], "not a .npy file (no NumPy header; empty file)"),
    (lambda p: p.write_text("hello"), [], "not a .npy file"),
    (lambda p: np.save(p, np.full((1, 100, 4, 16), -1, np.int32)), [], "T=100 is not a positive multiple"),
    (None, ["--pattern", "local", "--T", "2097152"], "--T: 2097152 is not a positive multiple"),
    (None, ["--pattern", "zipf", "--param", "exponent=1", "--param", "exponent=2"], "--param exponent: given twice"),
])
def test_predict_refuses_bad_routing_files_and_arguments_in_one_line(tmp_path, make, args, fragment):
    path = tmp_path / "r.npy"
    if make is not None:
        make(path)
        args = ["--routing-file", str(path)]
    out = run_cli("predict", "--calibration", "results/model/h200_BQ1_w4_s2.json", *args)
    assert out.returncode == 2 and fragment in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_predict_takes_heads_as_a_comma_list():
    out = run_cli("predict", "--calibration", "results/model/h200_BQ1_w4_s2.json", "--pattern", "sink-heavy",
                  "--param", "heads=0,1", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["predicted_ms"] > 0


def test_predict_takes_one_kv_head_as_heads_0_like_the_list_form():
    def ms(value: str) -> float:
        proc = run_cli("predict", "--calibration", "results/model/h200_BQ1_w4_s2.json", "--pattern", "sink-heavy",
                       "--param", f"heads={value}", "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["predicted_ms"]

    assert ms("0") == ms("[0]") == ms("0,") != ms("0,3")


@pytest.mark.parametrize("layout", ["split", "split-heavy-first"])
@pytest.mark.parametrize("pattern", [{"name": "sink-heavy", "sinks": 4}, {"name": "zipf", "exponent": 1.0},
                                     {"name": "local"}, {"name": "hot-block", "block": 3}])
def test_the_split_fanin_from_row_fanins_equals_the_fanin_of_the_built_split_routing(pattern, layout):
    """model-validate prices the split what-if from the rows' fan-in alone (no B'-batch routing built, issue 23's
    6 GB): it must equal the fan-in of the routing the measured arm launches, program for program."""
    shape = Shape(B=1, T=4096, HQ=64, H=4, K=192, V=128, S=16, block_size=64, dtype="bfloat16")
    bi = generate_routing(pattern_from_entry(pattern, "pattern", shape), shape, 0)
    rows = row_fanin(bi, 64)
    for max_fanin in (64, 300, 4096, 10**6):  # B' = 64 at most (a row of 4096 queries cut every 64)
        built = row_fanin(split_routing(bi, 64, max_fanin, layout), 64)
        assert split_fanin(rows, max_fanin, layout).tolist() == built.tolist(), max_fanin


def test_a_row_whose_parameter_equals_a_valid_one_only_as_a_number_fails_in_any_batch_order(tmp_path):
    """An attacker's trial of 2026-12-05: the fan-in cache keyed a pattern by a tuple, where ``15 == 15.0`` and
    ``0 == False`` hash alike, so a validation row with ``sinks: 15.0`` (the calibration's own routing written as a
    float) validated after the calibration got ``sinks: 15``'s fan-in and passed; validated first it stopped the whole
    batch with exit 2. Now it fails its own check whatever came before."""
    from nsa_exp.checking.validate import validate_paths  # noqa: PLC0415
    from nsa_exp.model.points import MeasuredPoint, point_name  # noqa: PLC0415
    from nsa_exp.model.whatif import validation_row, validation_summary  # noqa: PLC0415

    cal_path = REPO / "results" / "model" / "h200_BQ1_w4_s2.json"
    base = json.loads((REPO / "results" / "model" / "h200_BQ1_w4_s2_validation.json").read_text())
    cal = json.loads(cal_path.read_text())
    forged = []
    for real, fake in (({"name": "sink-heavy", "sinks": 15}, {"name": "sink-heavy", "sinks": 15.0}),
                       ({"name": "hot-block", "block": 0}, {"name": "hot-block", "block": False})):
        point = MeasuredPoint(point_name(real, 32768), real, 32768, 60.0, "results/sweeps/gone/x.json", "0" * 64,
                              cal["gpu"]["name"], cal["gpu"]["sm_count"], dict(cal["shape"]), cal["seed"],
                              cal["autotune_config"], None)
        row = {**validation_row(cal, point, base["split_max_fanin"]), "pattern": fake, "name": point_name(fake, 32768)}
        summary, meets = validation_summary([row])
        doc = {**base, "rows": [row], "excluded": [], "summary": summary, "meets_target": meets,
               "command": f"python -m nsa_exp model-validate --calibration {cal_path.relative_to(REPO)} --points "
                          "results/sweeps/gone --output x.json"}
        forged.append(tmp_path / f"{fake['name']}.json")
        forged[-1].write_text(json.dumps(doc))
    for order in ([str(cal_path), *map(str, forged)], [*map(str, forged), str(cal_path)]):
        reports = {Path(r["path"]).name: r for r in validate_paths(order)}
        assert reports[cal_path.name]["passed"]
        for f in forged:
            failed = [c for c in reports[f.name]["checks"] if not c["passed"]]
            assert [c["name"] for c in failed] == ["model_validation_recompute"], failed
            assert "is not an integer" in str(failed[0]), failed


def test_a_calibration_written_to_a_path_with_a_quote_records_a_command_that_parses_and_validates(
        seed_calibration, tmp_path, capsys):
    """The command was recorded as the argv joined by spaces: an ``--output`` holding an apostrophe (or a space)
    made a command ``shlex`` cannot read, and validate FAILed the honest file (a re-attacker, 2026-12-07)."""
    out = tmp_path / "it's mine.json"
    assert main(["calibrate", "--points", SEED, "--set", str(seed_calibration / "set.json"), "--output",
                 str(out)]) == 0
    capsys.readouterr()
    assert json.loads(out.read_text())["command"].endswith(f"--output {shlex.quote(str(out))}")
    assert main(["validate", str(out)]) == 0, capsys.readouterr().out
