"""Issue 14: ``compare A B`` — ratio of medians with a bootstrap CI, a verdict under the stated rule, refusals of
results that are not the same experiment, SM-cycle space, and exit codes a third party's CI can use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from nsa_exp.analysis.compare import DEFAULT_FLOOR, MIN_FLOOR, noise_floors, verdict
from nsa_exp.analysis.noise import SHARED_LIMIT, shared_observations
from nsa_exp.analysis.noise_table import NOISE_TABLE, read_floors
from nsa_exp.checking.compare import build as compare_results
from nsa_exp.checking.validate import validate_path
from nsa_exp.errors import UserError
from nsa_exp.io.schemas import schema_errors
from tests.helpers import REPO, assert_one_line_error, run_cli

RAW = REPO / "results" / "raw"
H100, H100_REPEAT, H200 = (str(RAW / f"{n}.json") for n in ("e1_h100", "e1_h100_repeat", "e1_h200_post"))


def _variant(tmp_path, source, name, edit):
    doc = json.loads(Path(source).read_text())
    edit(doc)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _cell(doc, pattern, stage):
    return next(r for r in doc["rows"] if (r["pattern"], r["stage"]) == (pattern, stage))


def test_verdict_rule_at_its_edges():
    assert verdict((1.021, 1.03), 0.02) == "slower"
    assert verdict((0.97, 0.979), 0.02) == "faster"
    assert verdict((0.98, 1.02), 0.02) == "same"
    assert verdict((1.0, 1.03), 0.02) == "unclear"      # straddles the upper edge of the floor
    assert verdict((0.97, 1.03), 0.02) == "unclear"     # too wide to say anything


def test_h100_against_its_independent_repeat_is_the_same_everywhere(tmp_path):
    out = tmp_path / "cmp.json"
    proc = run_cli("compare", H100, H100_REPEAT, "--fail-on", "any-change", "--floor", "0.02", "--resamples", "1000",
                   "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert not schema_errors(doc, "compare", "compare")
    assert doc["counts"] == {"same": 24, "faster": 0, "slower": 0, "unclear": 0} and not doc["failed"]
    assert doc["noise_floor"]["kind"] == "default" and set(doc["noise_floor"]["per_stage"].values()) == {0.02}
    assert "verdict" in proc.stdout and "same 24" in proc.stdout
    cell = _cell(doc, "sink-heavy", "dkv_core")
    raw_a = json.loads(Path(H100).read_text())["patterns"]["sink-heavy"]["stages"]["dkv_core"]["raw_ms"]
    assert cell["a_median"] == pytest.approx(float(np.median(raw_a))) and cell["a_n"] == 150
    assert cell["ci95"][0] <= cell["ratio"] <= cell["ci95"][1]


def test_h200_against_h100_fails_on_slower_with_exit_1_and_still_writes(tmp_path):
    out = tmp_path / "cmp.json"
    proc = run_cli("compare", H100, H200, "--fail-on", "slower", "--resamples", "1000", "--output", str(out))
    assert proc.returncode == 1, proc.stderr
    assert "--fail-on slower" in proc.stderr
    doc = json.loads(out.read_text())
    assert doc["failed"] and doc["noise_floor"]["kind"] == "table"
    # dQ is ~2% slower on the 20-round H200 run, with a CI far from 1; the CSR transpose is faster.
    assert _cell(doc, "local", "dq_core")["verdict"] == "slower"
    assert _cell(doc, "uniform", "csr")["verdict"] == "faster"
    assert run_cli("compare", H100, H200, "--fail-on", "faster", "--floor", "0.5", "--resamples", "1000",
                   "--output", "").returncode == 0


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--noise-from", H100, H100_REPEAT], "--noise-from: the pair ran on NVIDIA H100 80GB HBM3, the comparison is of "
                                          "NVIDIA H100 80GB HBM3 and NVIDIA H200"),
    (["--noise-from", H100, H200], "--noise-from "),
])
def test_a_noise_pair_bounds_only_its_own_gpus_noise(extra, fragment, tmp_path):
    out = tmp_path / "cmp.json"
    proc = run_cli("compare", H100, H200, *extra, "--output", str(out))
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and fragment in err[0], proc.stderr
    assert not out.exists()


def test_a_floor_beside_a_pair_that_times_every_stage_is_refused_not_dropped(tmp_path):
    proc = run_cli("compare", str(RAW / "e1_h200.json"), str(RAW / "e1_h200_stop.json"), "--noise-from",
                   str(RAW / "e1_h200.json"), str(RAW / "e1_h200_repeat.json"), "--floor", "0.02",
                   "--output", str(tmp_path / "cmp.json"))
    assert proc.returncode == 2 and proc.stderr.startswith("error: --floor 0.02: unused"), proc.stderr
    assert not (tmp_path / "cmp.json").exists()


def test_noise_floor_from_a_repeat_pair_is_the_largest_spread_per_stage_and_never_below_the_minimum():
    a, b = (json.loads(Path(p).read_text()) for p in (H100, H100_REPEAT))
    floors = noise_floors(a, b, ["dkv_core", "delta_preprocess"])
    spread = max(abs(b["patterns"][p]["stages"]["dkv_core"]["median_ms"] /
                     a["patterns"][p]["stages"]["dkv_core"]["median_ms"] - 1) for p in a["patterns"])
    assert floors["dkv_core"] == pytest.approx(spread) and spread > MIN_FLOOR
    assert floors["delta_preprocess"] == MIN_FLOOR   # the repeat agrees to ~0.01%


def test_cycle_space_multiplies_each_observation_by_its_rounds_sm_clock(tmp_path):
    halved = _variant(tmp_path, H100_REPEAT, "half_clock", lambda d: [
        s.update(sm_clock_mhz=s["sm_clock_mhz"] // 2) for s in d["telemetry"]["samples"]])
    in_time = compare_results(H100, halved, floor=0.02, resamples=1000)
    in_cycles = compare_results(H100, halved, cycles=True, floor=0.02, resamples=1000)
    assert in_time["counts"]["same"] == 24 and in_cycles["unit"] == "kcycles"
    cell = _cell(in_cycles, "zipf", "full_bwd")
    assert cell["ratio"] == pytest.approx(_cell(in_time, "zipf", "full_bwd")["ratio"] / 2, rel=1e-3)
    assert cell["verdict"] == "faster"


def test_cycles_without_recorded_clocks_is_refused(tmp_path):
    blind = _variant(tmp_path, H100_REPEAT, "blind", lambda d: d["telemetry"].update(available=False, samples=[],
                                                                                      throttled_samples=0))
    with pytest.raises(UserError, match="--cycles: B has no recorded SM clock"):
        compare_results(H100, blind, cycles=True, resamples=1000)


def test_a_different_shape_is_refused_naming_the_field(tmp_path):
    other = _variant(tmp_path, H200, "short", lambda d: d["shape"].update(T=16384))
    out = tmp_path / "cmp.json"
    with pytest.raises(UserError, match=r"not the same experiment: shape\.T: A 32768 vs B 16384"):
        compare_results(H100, other)  # the rule itself, on records that do not validate
    proc = run_cli("compare", H100, other, "--output", str(out))  # the door validates B first (issue 28)
    assert_one_line_error(proc, "B ", "does not validate (shape_matches_config")
    assert not out.exists()


def test_a_different_routing_is_refused_naming_pattern_params_and_seed(tmp_path):
    def edit(d):
        d["patterns"]["zipf"]["params"]["exponent"] = 1.5
        d["config"]["seeds"]["routing"] = 1
        del d["patterns"]["uniform"]
    other = _variant(tmp_path, H200, "routed", edit)
    with pytest.raises(UserError) as err:
        compare_results(H100, other)
    for part in ("patterns: A ['local', 'uniform', 'sink-heavy', 'zipf'] vs B", "patterns.zipf.params",
                 "config.seeds.routing: A 20260726 vs B 1"):
        assert part in str(err.value)
    assert_one_line_error(run_cli("compare", H100, other, "--output", ""), "B ", "does not validate")


def test_bad_inputs_are_one_line_exit_2(tmp_path):
    assert_one_line_error(run_cli("compare", H100, str(tmp_path / "none.json")), "no such file")
    assert_one_line_error(run_cli("compare", H100, H200, "--floor", "1.5", "--output", ""), "--floor")
    assert_one_line_error(run_cli("compare", H100, str(REPO / "configs" / "e1_h200.json"), "--output", ""),
                          "not a bench result")


def test_compare_takes_its_floors_from_the_noise_table_by_default_and_says_when_a_gpu_is_missing(tmp_path):
    table = json.loads((REPO / NOISE_TABLE).read_text())
    doc = compare_results(H100, H100_REPEAT, resamples=1000)
    floors = read_floors()
    assert doc["noise_floor"]["kind"] == "table" and doc["noise_floor"]["paths"] == [NOISE_TABLE]
    assert doc["noise_floor"]["per_stage"] == {s: floors["NVIDIA H100 80GB HBM3", s] for s in
                                               doc["noise_floor"]["per_stage"]}
    assert "lacking" not in doc["noise_floor"]
    # a table without the H100's rows: every stage gets the documented fallback, and compare says so in one line
    table["floors"] = [r for r in table["floors"] if r["gpu"] != "NVIDIA H100 80GB HBM3"]
    lean = tmp_path / "floors.json"
    lean.write_text(json.dumps(table))
    doc = compare_results(H100, H100_REPEAT, resamples=1000, noise_table=lean)
    assert set(doc["noise_floor"]["per_stage"].values()) == {DEFAULT_FLOOR}
    assert doc["noise_floor"]["lacking"][0] == "NVIDIA H100 80GB HBM3 selection_fwd"


REL = str(RAW.parent / "releases" / "release_h200" / "fla-core-0.6.0-T32768.json")
REL_OLD = str(RAW.parent / "releases" / "release_h200" / "fla-core-0.5.1-T32768.json")
PINNED, PINNED_REPEAT = str(RAW / "e1_h200.json"), str(RAW / "e1_h200_repeat.json")


@pytest.mark.parametrize(("args", "fragment"), [
    # the pair is A and B themselves: the floor would be measured on the difference it judges
    ([PINNED, str(RAW / "e1_h200_tune_sink-heavy.json"), "--noise-from", PINNED,
      str(RAW / "e1_h200_tune_sink-heavy.json")], "A and B themselves"),
    # a release compare holds its pair to the same rules as a bench compare (the attack trial found none held)
    ([PINNED, REL, "--noise-from", H100, H100_REPEAT], "the pair ran on NVIDIA H100 80GB HBM3"),
    ([REL_OLD, REL, "--noise-from", str(RAW / "e1_h200_docs8192.json"), PINNED], "not the same experiment"),
    ([PINNED, REL, "--noise-from", PINNED, PINNED_REPEAT, "--floor", "0.3"], "--floor 0.3: unused"),
])
def test_every_compare_path_refuses_a_noise_pair_that_cannot_bound_its_noise(args, fragment, tmp_path):
    out = tmp_path / "cmp.json"
    proc = run_cli("compare", *args, "--output", str(out))
    err = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("error:")]
    assert proc.returncode == 2 and len(err) == 1 and fragment in err[0], proc.stderr
    assert not out.exists()


def test_compare_reads_the_committed_noise_table_as_a_source_and_validate_reads_it_in_full(monkeypatch):
    """compare's door validates the committed noise table as ``validate`` validates a compare's table (depth 1): its
    floors rebuilt from its sources' statistics, no source validated in full again (a cold compare took 43 s on a
    2-CPU VM, 3.5 s now); ``validate`` of the table itself still validates every source."""
    from nsa_exp import arguments  # noqa: PLC0415
    from nsa_exp.checking import noise_table  # noqa: PLC0415
    from nsa_exp.checking.validate import load_validated  # noqa: PLC0415

    validated: list[str] = []  # the sources validated in full (recorded only: their own checks are not the point)
    monkeypatch.setattr(noise_table, "source_problems", lambda ctx, at, p, *a: validated.append(p) or [])
    table = str(REPO / NOISE_TABLE)
    sources = json.loads((REPO / NOISE_TABLE).read_text())["sources"]
    monkeypatch.setattr(noise_table, "changed_files", lambda root: frozenset())  # the checkout as committed
    arguments.require_valid("noise table", table, ("noise_table",))
    assert validated == []
    load_validated(table, ("noise_table",))
    assert sorted(validated) == sorted(sources)
    # a source that differs from HEAD is validated in full under the committed table too: a forged one whose
    # statistics agree with its observations, beside a committed table rebuilt from it, gave compare other floors (an
    # attacker, 2026-12-06); outside a git work tree (None) every source is
    for changed, want in ((frozenset({sources[3], "results/raw/not_a_source.json"}), [sources[3]]), (None, sources)):
        validated.clear()
        monkeypatch.setattr(noise_table, "changed_files", lambda root, changed=changed: changed)
        arguments.require_valid("noise table", table, ("noise_table",))
        assert sorted(validated) == sorted(want)


def test_a_compare_whose_noise_table_is_missing_still_has_its_rows_recomputed_from_a_and_b(tmp_path):
    """Only the floors depend on the noise table: with A and B at hand, a compare whose table path names a missing
    file has its medians, ratios and CIs rebuilt from them (its floors listed as unverifiable); a median forged with
    its CI and verdict FAILs (it passed, its rows all "unverified": an attacker, 2026-12-07)."""
    doc = json.loads((REPO / "results/compare/e1_h100_vs_e1_h200.json").read_text())
    doc["noise_floor"]["paths"] = ["results/noise/floors_gone.json"]
    genuine = tmp_path / "genuine.json"
    genuine.write_text(json.dumps(doc))
    report = validate_path(str(genuine))
    assert report["passed"], report
    assert any(u["path"].startswith("$.noise_floor") for u in report["unverified"])
    assert not any("medians" in u["path"] for u in report["unverified"])
    i = next(i for i, r in enumerate(doc["rows"]) if (r["pattern"], r["stage"]) == ("sink-heavy", "dkv_core"))
    row = doc["rows"][i]
    row.update(b_median=row["a_median"] * 0.62, ratio=0.62, ci95=[0.6, 0.65], verdict="faster")
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc))
    failed = {f["path"] for c in validate_path(str(forged))["checks"] if not c["passed"] for f in c.get("failures", [])}
    assert f"$.rows[{i}].b_median" in failed and f"$.rows[{i}].ci95[0]" in failed, failed


def test_a_peer_compare_whose_noise_table_is_missing_still_has_its_peer_block_rebuilt(tmp_path):
    """With the table missing, a peer comparison's own block (patterns, peers only in B, not compared) is rebuilt
    from A and B too (cut patterns passed: a re-attacker, 2026-12-07)."""
    doc = json.loads((REPO / "results/compare/e1_h200_vs_peers_h200.json").read_text())
    doc["noise_floor"]["paths"] = ["results/noise/floors_gone.json"]
    (tmp_path / "genuine.json").write_text(json.dumps(doc))
    assert validate_path(str(tmp_path / "genuine.json"))["passed"]
    doc["peers"]["patterns"] = doc["peers"]["patterns"][:1]
    (tmp_path / "forged.json").write_text(json.dumps(doc))
    failed = {f["path"] for c in validate_path(str(tmp_path / "forged.json"))["checks"] if not c["passed"]
              for f in c.get("failures", [])}
    assert "$.peers.patterns" in failed, failed


def test_a_run_against_a_renamed_copy_of_itself_is_refused_and_its_comparison_fails(tmp_path, monkeypatch):
    """B a copy of A under another name, host and time (the published run submitted as one's own) read 'same' in
    every cell, and the comparison PASSed validate --strict (an attacker, 2026-12-07): compare refuses it in one line;
    a comparison built past that refusal FAILs validate on B."""
    def renamed(doc):
        doc["name"], doc["metadata"]["hostname"] = "e1_h200_mine", "my-h200-box"
        doc["metadata"]["created_utc"] = "2026-11-30T12:30:00Z"
        argv = doc["metadata"]["argv"]
        for option, value in (("--name", "e1_h200_mine"), ("--output", "runs/mine/e1_h200_mine.json"),
                              ("--summary", "runs/mine/e1_h200_mine.csv")):
            argv[argv.index(option) + 1] = value

    a = str(RAW / "e1_h200.json")
    copy = _variant(tmp_path, a, "e1_h200_mine", renamed)
    assert validate_path(copy)["passed"]
    assert_one_line_error(run_cli("compare", a, copy, "--floor", "0.02", "--output", str(tmp_path / "c.json")),
                          "hold the same run", "100%")

    def shuffled(doc):  # every cell's observations reordered (a re-attacker, the same day)
        renamed(doc)
        for cell in doc["patterns"].values():
            for s in cell["stages"].values():
                s["raw_ms"] = s["raw_ms"][::-1]

    other = _variant(tmp_path, a, "e1_h200_shuffled", shuffled)
    assert_one_line_error(run_cli("compare", other, a, "--floor", "0.02", "--output", str(tmp_path / "c.json")),
                          "hold the same run", "reordered or scaled")
    assert not (tmp_path / "c.json").exists()
    monkeypatch.setattr("nsa_exp.analysis.compare.SHARED_LIMIT", 1.01)  # the refusal switched off to forge one
    doc = compare_results(a, copy, floor=0.02, resamples=1000)
    assert doc["counts"]["faster"] == doc["counts"]["slower"] == 0 and doc["counts"]["same"] > 0
    (tmp_path / "c.json").write_text(json.dumps(doc, indent=1))
    monkeypatch.undo()
    report = validate_path(str(tmp_path / "c.json"))
    failed = {c["name"]: c["failures"] for c in report["checks"] if not c["passed"]}
    assert "hold the same run" in str(failed.get("compare_recompute")), failed


def test_a_cell_reordered_or_scaled_by_one_factor_is_the_same_run_and_two_runs_are_not():
    """shared_observations: a cell of B holding A's observations in another order, or times 1 + 1e-8 (a re-attacker,
    2026-12-07: both read 'same' everywhere and PASSed --strict) is the same run; the committed repeats are not."""
    run = json.loads((RAW / "e1_h200.json").read_text())
    one = json.loads((RAW / "e1_h200_repeat.json").read_text())  # another run, but for one cell copied from run
    mine = run["patterns"]["zipf"]["stages"]["dkv_core"]["raw_ms"]
    one["patterns"]["zipf"]["stages"]["dkv_core"]["raw_ms"] = [x * (1 + 1e-8) for x in reversed(mine)]
    assert shared_observations(run, one) == shared_observations(one, run) == 1.0
    # every cell cut below the cells judged (19 observations): the whole run's share in place still tells
    cut = json.loads((RAW / "e1_h200.json").read_text())
    for cell in cut["patterns"].values():
        for stage in cell["stages"].values():
            stage["raw_ms"] = stage["raw_ms"][:19]
    assert shared_observations(cut, run) == 1.0
    logs = REPO / "docs" / "logs"
    for x, y in ((RAW / "e1_h200.json", RAW / "e1_h200_repeat.json"),
                 (RAW / "e1_h100.json", RAW / "e1_h100_repeat.json"), (RAW / "e1_h200.json", RAW / "e1_h200_pair.json"),
                 # 5-round cells of the 0.01 ms preprocess shared 4 of 5 ticks at their places: cells that few, or
                 # that few distinct, are not judged (compare refused two different runs with them)
                 (logs / "h100_2026-12-07/verify_0145d61/gpu_0145d61.json",
                  logs / "h200_2026-12-05/pair30f_a608545/e1_h200_pair_f_stop.json")):
        a, b = (json.loads(p.read_text()) for p in (x, y))
        assert max(shared_observations(a, b), shared_observations(b, a)) < SHARED_LIMIT, (x, y)


def test_a_peer_result_against_a_copy_of_itself_is_refused(tmp_path):
    """Two peer results are compared cell by cell; a copy of one at another path read 'same 55, unclear 2' and its
    comparison PASSed --strict (a re-attacker, 2026-12-07): the cells hold one run, refused in one line."""
    shutil.copy(REPO / "results/peers/peers_h200.json", tmp_path / "peers_copy.json")
    assert_one_line_error(run_cli("compare", "results/peers/peers_h200.json", str(tmp_path / "peers_copy.json"),
                                  "--output", ""), "hold the same run", "100%")
