"""The measurement engine on the CPU: its hooks run in order around the one round loop; the stop rule, driven
by a fake device and a fake clock (deterministic), stops where its criterion says and records why; the CUPTI
pass goes through the same loop; the rule is turned on by a config block, ``bench --stop-rule`` or ``sweep
--stop-rule``. The device is a fake; FLA never is (the arms' end-to-end tests are in
tests/gpu/test_engine_arms.py; the stop rule's statistics in tests/analysis/test_stop_rule.py, its validate
check in tests/checking/test_stop_rule_check.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from nsa_exp.analysis.stop_rule import CI_REL_RULE, DEFAULT_RULE, STAGE_RULE, SWEEP_ROUND_CEILING
from nsa_exp.core.config import StopRule
from nsa_exp.core.measurement import RoundPlan
from nsa_exp.errors import UserError
from nsa_exp.gpu.engine import Arm, Cells, Run, measure, time_cells
from nsa_exp.io.config_files import config_from_dict
from tests.gpu.test_measurement_path import FLUSH, FakeDevice
from tests.helpers import REPO


class Ticks:
    """A fake host clock: each read advances it by ``step`` seconds."""

    def __init__(self, step: float = 1.0):
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def _cells(dev: FakeDevice, costs, cells=("x", "y"), stages=("a", "b"), **kw) -> Cells:
    """Each call advances the device clock by ``costs(round_call_index)`` ms (the event pair adds 1 ms)."""
    count = {"n": 0}

    def call(p, s):
        def fn():
            dev.log.append(f"call {p}.{s}")
            dev.clock += costs(count["n"])
            count["n"] += 1
        return fn

    fns = {p: {s: call(p, s) for s in stages} for p in cells}
    rounds = kw.pop("rounds_planned", 20)
    warmup = kw.pop("warmup", 1)
    plan = RoundPlan(tuple(cells), warmup, rounds, "fixed-rounds", 0, "write", FLUSH, stop=kw.pop("stop", None))
    return Cells(fns, plan, **kw)


def rule(**kw) -> StopRule:
    return StopRule(**{**DEFAULT_RULE.to_dict(), "min_rounds": 8, "min_seconds": 0.0, **kw})


def test_the_stop_rule_stops_at_the_first_round_every_median_is_tight_and_cuts_the_orders():
    dev = FakeDevice()
    cells = _cells(dev, lambda i: 3.0, stop=rule(min_rounds=8))
    time_cells(cells, dev, clock=Ticks(0.5))
    stop = cells.measured.stop
    assert (stop["stopped_by"], stop["rounds"], len(stop["trace"])) == ("ci", 8, 8)
    assert len(cells.measured.orders) == 1 + 8 and len(cells.measured.records) == 2 * 9
    assert dev.log.count("sync") == 2 * 9 and dev.log[-1] == "sync"  # nothing launched after the stopping round
    assert [e["unconverged"] for e in stop["trace"]] == [4] * 5 + [0] * 3  # no CI before 6 observations
    assert stop["rule"] == rule(min_rounds=8).to_dict() and stop["source"] == "config" and stop["max_rounds"] == 20


def test_every_stage_is_still_flush_spin_start_call_end_under_the_stop_rule():
    dev = FakeDevice()
    time_cells(_cells(dev, lambda i: 1.0, cells=("x",), stages=("a",), warmup=0, stop=rule(min_rounds=6)), dev,
               clock=Ticks())
    assert dev.log == ["flush", "spin", "start", "call x.a", "end", "sync"] * 6


def test_min_seconds_holds_the_stop_until_enough_gpu_time_is_timed():
    dev = FakeDevice()
    cells = _cells(dev, lambda i: 2.0, stop=rule(min_rounds=6, min_seconds=0.120))  # 4 calls x 3 ms a round
    time_cells(cells, dev, clock=Ticks())
    assert cells.measured.stop["stopped_by"] == "ci" and cells.measured.stop["rounds"] == 10
    assert cells.measured.stop["trace"][-1]["timed_seconds"] == pytest.approx(0.120)


def test_a_run_that_never_converges_stops_on_its_timeout_or_at_max_rounds():
    noisy = lambda i: 1.0 if (i // 4) % 2 else 9.0  # noqa: E731 - every call 1 ms one round, 9 ms the next
    dev = FakeDevice()
    cells = _cells(dev, noisy, stop=rule(timeout_seconds=7.0))
    time_cells(cells, dev, clock=Ticks(1.0))  # one clock read at the start, one per timed round: k s after k
    assert cells.measured.stop["stopped_by"] == "timeout" and cells.measured.stop["rounds"] == 7
    assert cells.measured.stop["trace"][-1]["unconverged"] == 4
    dev = FakeDevice()
    long = _cells(dev, noisy, rounds_planned=12, stop=rule(timeout_seconds=1e9))
    time_cells(long, dev, clock=Ticks())
    assert long.measured.stop["stopped_by"] == "max_rounds" and long.measured.stop["rounds"] == 12


def test_the_stop_rule_refuses_to_time_part_of_a_run():
    with pytest.raises(ValueError, match="cannot resume"):
        time_cells(_cells(FakeDevice(), lambda i: 1.0, rounds=range(3, 10), stop=rule()), FakeDevice())


def _verdict_run(y_noisy_calls: int = 16, drop: str = "routing"):
    """Routings x (every call 3 ms) and y (1 or 9 ms alternately for its first ``y_noisy_calls`` calls, then
    5 ms; under drop ``stage`` only its stage ``a`` is noisy, its ``b`` takes 3 ms) under the verdict rule,
    min_rounds 8, over 30 planned rounds; returns (cells, device)."""
    dev, calls = FakeDevice(), {"y": 0}

    def call(p, s):
        def fn():
            dev.log.append(f"call {p}.{s}")
            if p == "x" or (drop == "stage" and s == "b"):
                dev.clock += 3.0
            else:
                n = calls["y"]
                calls["y"] += 1
                dev.clock += (1.0 if (n // 2) % 2 else 9.0) if n < y_noisy_calls else 5.0  # per round
        return fn

    fns = {p: {s: call(p, s) for s in ("a", "b")} for p in ("x", "y")}
    plan = RoundPlan(("x", "y"), 1, 30, "shuffled-rounds", 3, "write", FLUSH, stop=rule(min_rounds=8, drop=drop))
    cells = Cells(fns, plan)
    time_cells(cells, dev, clock=Ticks(0.5))
    return cells, dev


def _document(m) -> dict:
    """The parts of a bench-shaped document the stop rule's check reads, from a measurement."""
    patterns = {p: {"stages": {s: {"raw_ms": [r["ms"][s] for r in m.records
                                              if r["pattern"] == p and not r["warmup"] and s in r["ms"]]}
                               for s in ("a", "b")}} for p in m.plan.cells}
    timing = m.timing(["a", "b"]).to_json()
    return {"patterns": patterns, "timing": timing, "config": {"timing": {"stop": m.stop["rule"]}}}


def test_the_verdict_rule_stops_timing_a_converged_routing_while_the_others_go_on():
    cells, dev = _verdict_run()
    m = cells.measured
    stop = m.stop
    assert stop["rule"]["floor_fraction"] == 0.5 and stop["floors"]["a"] == 0.02  # no table row: compare's 2%
    x_done = stop["cell_rounds"]["x"]
    assert x_done == 8 and stop["trace"][7]["dropped"] == ["x"]  # converged at min_rounds
    assert stop["stopped_by"] == "ci" and stop["held_by"] == ["y"] and stop["cell_rounds"]["y"] == stop["rounds"] > 8
    assert all(order == ["y"] for order in m.orders[1 + 8:]) and all(sorted(o) == ["x", "y"] for o in m.orders[:9])
    assert stop["saved_cell_rounds"] == 2 * 30 - 8 - stop["rounds"]
    assert dev.log.count("call x.a") == 1 + 8  # warm-up + its 8 timed rounds, nothing after it converged


def test_validate_reruns_the_verdict_rule_and_finds_a_forged_drop_or_a_missing_observation():
    from nsa_exp.checking.stats_checks import stop_rule_problems  # noqa: PLC0415

    m = _verdict_run()[0].measured
    doc = _document(m)
    assert stop_rule_problems(doc) == []
    forged = json.loads(json.dumps(doc))
    forged["timing"]["stop"]["trace"][7]["dropped"] = []  # "x was still timed" -- but its rounds say otherwise
    assert any("dropped" in msg for _, msg in stop_rule_problems(forged))
    forged = json.loads(json.dumps(doc))
    forged["patterns"]["y"]["stages"]["a"]["raw_ms"][-1] *= 3  # the last observation rewritten
    assert stop_rule_problems(forged)
    forged = json.loads(json.dumps(doc))
    forged["timing"]["stop"]["saved_cell_rounds"] += 10
    assert [p for p, _ in stop_rule_problems(forged)] == ["$.timing.stop.saved_cell_rounds"]
    forged = json.loads(json.dumps(doc))
    forged["timing"]["round_orders"][-1] = ["x", "y"]  # a round the rule had cut to y
    assert "$.timing.round_orders" in [p for p, _ in stop_rule_problems(forged)]


def test_drop_stage_stops_timing_a_converged_stage_while_the_rest_of_its_routing_goes_on():
    cells, dev = _verdict_run(drop="stage")
    m = cells.measured
    stop = m.stop
    assert stop["rule"]["drop"] == "stage" and stop["trace"][7]["dropped_stages"] == ["x/a", "x/b", "y/b"]
    assert stop["trace"][7]["dropped"] == ["x"] and stop["held_by"] == ["y"] and stop["stopped_by"] == "ci"
    n = stop["rounds"]
    assert n > 8 and stop["stage_rounds"] == {"x": {"a": 8, "b": 8}, "y": {"a": n, "b": 8}}
    assert stop["saved_stage_rounds"] == 4 * 30 - (8 + 8 + n + 8)
    assert dev.log.count("call y.b") == 1 + 8 and dev.log.count("call y.a") == 1 + n  # warm-up + timed
    later = [r for r in m.records if r["pattern"] == "y" and not r["warmup"]][8:]
    assert later and all(list(r["ms"]) == ["a"] for r in later)  # the record holds only what was timed
    # the stage still timed is flushed, spun and bracketed by its own event pair, exactly as before
    assert dev.log[-6:] == ["flush", "spin", "start", "call y.a", "end", "sync"], dev.log[-6:]


def test_validate_reruns_drop_stage_and_finds_a_forged_stage_drop_or_count():
    from nsa_exp.checking.stats_checks import stop_rule_problems  # noqa: PLC0415

    doc = _document(_verdict_run(drop="stage")[0].measured)
    assert stop_rule_problems(doc) == []
    forged = json.loads(json.dumps(doc))
    forged["timing"]["stop"]["trace"][7]["dropped_stages"] = ["x/a", "x/b"]  # "y's b went on" -- it did not
    assert any("dropped_stages" in msg for _, msg in stop_rule_problems(forged))
    forged = json.loads(json.dumps(doc))
    forged["timing"]["stop"]["stage_rounds"]["y"]["b"] = 5
    assert [p for p, _ in stop_rule_problems(forged)] == ["$.timing.stop.stage_rounds"]
    forged = json.loads(json.dumps(doc))  # y's b cut three rounds before the rule dropped it
    del forged["patterns"]["y"]["stages"]["b"]["raw_ms"][5:]
    assert stop_rule_problems(forged)
    forged = json.loads(json.dumps(doc))  # y's b timed on after the rule dropped it
    forged["patterns"]["y"]["stages"]["b"]["raw_ms"] += [3.0, 3.0]
    assert stop_rule_problems(forged) == []  # the trace never reads them ...
    from nsa_exp.checking.stats_checks import timed_rounds  # noqa: PLC0415
    assert timed_rounds(forged)["y"]["b"] == 8  # ... but timing_recompute holds raw_ms to these counts


class LoggingArm(Arm):
    """An arm whose hooks only log: the engine's order of steps, and the measurement it hands each group."""

    def __init__(self, log):
        self.log = log

    def gates(self, run):
        self.log.append("gates")

    def inputs(self, run):
        self.log.append("inputs")

    def tune(self, run):
        self.log.append("tune")

    def cells(self, run):
        for k in range(2):
            self.log.append(f"cells {k}")
            yield _cells(run.device, lambda i: 1.0, cells=(f"c{k}",), stages=("s",), warmup=0, rounds_planned=6,
                         stop=rule(min_rounds=6) if k else None, tag=k)

    def timed(self, run, cells):
        self.log.append(f"timed {cells.tag} {len(cells.measured.records)} {cells.measured.stop is not None}")
        self.last = cells.measured

    def record(self, run):
        self.log.append("record")
        return {"timing": self.last.timing(["s"]).to_json()}

    def write(self, run, doc):
        self.log.append(f"write {sorted(doc['timing'])}")


def test_measure_runs_the_hooks_in_order_and_each_group_s_measurement_carries_its_stop_into_the_timing_block():
    log = []
    run = Run(config=None, allow_gpu=False, device=FakeDevice(), clock=Ticks())
    doc = measure(LoggingArm(log), run)
    assert log[:-1] == ["gates", "inputs", "tune", "cells 0", "timed 0 6 False", "cells 1", "timed 1 6 True",
                        "record"]
    assert "stop" in log[-1] and doc["timing"]["stop"]["stopped_by"] == "ci"
    assert doc["timing"]["repetitions"] == doc["timing"]["stop"]["rounds"] == 6


class ForgetfulArm(LoggingArm):
    """An arm that builds its timing block by hand and drops the stop record."""

    def record(self, run):
        return {"timing": {}}


def test_measure_refuses_a_record_that_drops_the_stop_record_of_a_group_the_rule_stopped():
    log = []
    with pytest.raises(RuntimeError, match="timing.stop"):
        measure(ForgetfulArm(log), Run(config=None, allow_gpu=False, device=FakeDevice(), clock=Ticks()))
    assert not any(line.startswith("write") for line in log)  # refused before anything is written


def test_the_cupti_pass_runs_the_same_loop_inside_profiler_ranges_without_events():
    from nsa_exp.gpu.cupti import profile_kernel_times  # noqa: PLC0415 - torch.profiler

    dev = FakeDevice()
    fns = {p: {s: (lambda p=p, s=s: dev.log.append(f"call {p}.{s}")) for s in ("a", "b")} for p in ("x", "y")}
    names = profile_kernel_times(fns, FLUSH, "read", rounds=2, device=dev,
                                 aggregate=lambda events, rounds: sorted({e.name for e in events
                                                                         if e.name.startswith("nsa_cupti/")}))
    stage = ["read-flush", "spin"]
    one_round = [*stage, "call x.a", *stage, "call x.b", "sync", *stage, "call y.a", *stage, "call y.b", "sync"]
    assert dev.log == ["sync", *one_round, *one_round]  # the buffer's sync, then no event anywhere
    assert names == sorted(f"nsa_cupti/{p}/{s}/{r}" for p in "xy" for s in "ab" for r in (0, 1))


def test_bench_cupti_pass_keeps_each_calls_event_pair_so_events_and_kernels_are_of_the_same_calls():
    from nsa_exp.gpu.cupti import profile_kernel_times  # noqa: PLC0415 - torch.profiler

    dev = FakeDevice()
    costs = {"x": 2.0, "y": 5.0}

    def call(p, s):
        def fn():
            dev.log.append(f"call {p}.{s}")
            dev.clock += costs[p]
        return fn
    block = profile_kernel_times({p: {s: call(p, s) for s in ("a", "b")} for p in ("x", "y")}, FLUSH, "read",
                                 rounds=3, device=dev)
    stage = ["read-flush", "spin", "start"]
    one_round = [*stage, "call x.a", "end", *stage, "call x.b", "end", "sync",
                 *stage, "call y.a", "end", *stage, "call y.b", "end", "sync"]
    assert dev.log == ["sync", *one_round * 3]  # the timed loop's order: flush, spin, event, range, event
    # the fake clock: 1 ms per event record + the call's cost, so each call's event time is its cost + 1 ms
    assert block["event_ms"] == {p: {s: [costs[p] + 1.0] * 3 for s in "ab"} for p in "xy"}
    assert block["median_event_ms"] == {p: {s: costs[p] + 1.0 for s in "ab"} for p in "xy"}
    assert "event_ms" in block["method"] and block["rounds"] == 3


def test_a_pass_sized_per_stage_calls_each_stage_only_as_often_as_it_needs_and_its_producers_with_it():
    """Issue 30: round r of bench's pass calls the stages needing more than r calls; a stage another consumes
    (csr for dkv_core, the Stage table's consumes/produces) is called with it, in the same round, before it."""
    from nsa_exp.analysis.cupti import sizing  # noqa: PLC0415
    from nsa_exp.gpu.cupti import profile_kernel_times  # noqa: PLC0415 - torch.profiler

    dev = FakeDevice()
    stages = ("selection_fwd", "csr", "dkv_core", "full_bwd")
    fns = {p: {s: (lambda p=p, s=s: dev.log.append(f"call {p}.{s}")) for s in stages} for p in ("x", "y")}
    # x's CSR needs ceil(5 / 0.7) = 8 calls, y's ceil(5 / 1.0) = 5, every other stage min_rounds = 5
    sized = sizing({p: {s: (0.7 if p == "x" else 1.0) if s == "csr" else 20.0 for s in stages} for p in ("x", "y")},
                   per_stage=True)
    assert sized["rounds"] == 8 and sized["calls"]["x"] == {"selection_fwd": 5, "csr": 8, "dkv_core": 5,
                                                             "full_bwd": 5}
    block = profile_kernel_times(fns, FLUSH, "read", rounds=sized["rounds"], device=dev, sized=sized)
    calls = [line for line in dev.log if line.startswith("call")]
    full = [f"call {p}.{s}" for p in "xy" for s in stages]
    assert calls == full * 5 + ["call x.csr"] * 3  # rounds 5-7: x's CSR alone
    assert {p: {s: len(v) for s, v in st.items()} for p, st in block["event_ms"].items()} == sized["calls"]
    assert block["sizing"] == sized


# --- turning the rule on: config, CLI, sweep -------------------------------------------------------------------


@pytest.mark.parametrize(("args", "start"), [
    (["--resume"], "error: --resume: a run under the stop rule"),
    (["--repetitions", "12"], "error: bench --stop-rule: the run times 12 rounds, fewer than the default rule's"),
])
def test_a_stop_rule_bench_that_cannot_run_is_refused_in_one_line(args, start, tmp_path, capsys):
    from nsa_exp.cli import main  # noqa: PLC0415

    assert main(["bench", "--output", str(tmp_path / "r.json"), "--stop-rule", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(start), err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(("stop", "fragment"), [
    ({**DEFAULT_RULE.to_dict(), "min_rounds": 151}, "config.timing.stop.min_rounds: 151 exceeds timing.repetitions"),
    ({k: v for k, v in DEFAULT_RULE.to_dict().items() if k != "ci_rel"}, "'ci_rel' is a required property"),
    ({**DEFAULT_RULE.to_dict(), "confidence": 1.0}, "config.timing.stop.confidence"),
    ({**CI_REL_RULE.to_dict(), "drop": "stage"}, "config.timing.stop.drop: 'stage' is the verdict rule's"),
    ({**DEFAULT_RULE.to_dict(), "drop": "cell"}, "config.timing.stop.drop"),
])
def test_a_bad_stop_block_is_one_line_naming_the_field(stop, fragment, tmp_path):

    raw = json.loads((REPO / "configs" / "e1_h200.json").read_text())
    raw["timing"]["stop"] = stop
    with pytest.raises(UserError, match=re.escape(fragment)):
        config_from_dict(raw)


def test_a_config_block_turns_the_rule_on_and_sweep_stop_rule_puts_the_default_in_every_point(tmp_path):
    from nsa_exp.sweeps.plan import load_sweep  # noqa: PLC0415

    raw = json.loads((REPO / "configs" / "e1_h200.json").read_text())
    raw["timing"]["stop"] = {**DEFAULT_RULE.to_dict(), "min_rounds": 30}
    assert config_from_dict(raw).timing.stop == StopRule(**{**DEFAULT_RULE.to_dict(), "min_rounds": 30})
    assert config_from_dict(json.loads((REPO / "configs" / "e1_h200.json").read_text())).timing.stop is None
    sweep = REPO / "configs" / "sweep_x2_h200.json"  # 10 rounds a point: too few for the default rule
    assert all("stop" not in p.config["timing"] for p in load_sweep(sweep))
    # the rule sets its own round ceiling for a sweep shorter than min_rounds (docs/METHOD.md)
    short = load_sweep(sweep, stop_rule=True)  # bench's rule since 2026-12-05: converged stages drop out
    assert short and all(p.config["timing"]["stop"] == STAGE_RULE.to_dict()
                         and p.config["timing"]["repetitions"] == SWEEP_ROUND_CEILING for p in short)
    own = json.loads(sweep.read_text())
    own["timing"]["repetitions"] = 60  # the cap the rule may stop short of
    (tmp_path / "s.json").write_text(json.dumps(own))
    points = load_sweep(tmp_path / "s.json", stop_rule=True)
    assert points and all(p.config["timing"]["stop"] == STAGE_RULE.to_dict() for p in points)
    own["timing"]["stop"] = {**CI_REL_RULE.to_dict(), "ci_rel": 0.02}  # a sweep's own block wins, the ci_rel rule too
    (tmp_path / "s.json").write_text(json.dumps(own))
    assert all(p.config["timing"]["stop"]["ci_rel"] == 0.02 for p in load_sweep(tmp_path / "s.json", stop_rule=True))
    own["timing"]["stop"] = DEFAULT_RULE.to_dict()  # the verdict rule dropping whole routings: accepted too
    (tmp_path / "s.json").write_text(json.dumps(own))
    assert all(p.config["timing"]["stop"] == DEFAULT_RULE.to_dict() for p in load_sweep(tmp_path / "s.json"))


def test_importing_the_engine_imports_neither_fla_nor_triton():
    """The release arm runs the engine in a process that puts another FLA on sys.path first."""
    code = ("import sys, nsa_exp.gpu.engine, nsa_exp.gpu.release; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('fla', 'triton')]; print(bad); sys.exit(bool(bad))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
