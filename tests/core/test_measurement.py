"""The engine's measurement (core/measurement.py): the round plan from a config with the command line folded in
once, the one timing block, and a bench result's measurement read back and rebuilt byte for byte (the H200 runs,
the stop-rule run among them)."""

from __future__ import annotations

import json

import pytest

from nsa_exp.analysis.stop_rule import DEFAULT_RULE
from nsa_exp.checking import bench_result
from nsa_exp.core.config import StopRule
from nsa_exp.core.measurement import PHASES, Measurement, PhaseClock, RoundPlan
from nsa_exp.core.records import recorded_stages
from nsa_exp.gpu.gates import gate_detail
from nsa_exp.gpu.telemetry import throttled
from nsa_exp.io.config_files import config_from_dict, load_config
from tests.helpers import REPO

H200 = load_config(REPO / "configs" / "e1_h200.json")


def test_overridden_folds_the_command_line_into_the_timing_and_keeps_the_file_s_config_as_recorded():
    c = H200.overridden(repetitions=20)
    assert (c.timing.repetitions, c.raw["timing"]["repetitions"]) == (20, H200.timing.repetitions)
    assert c.timing.stop is None and H200.overridden().timing == H200.timing
    s = H200.overridden(stop=DEFAULT_RULE)
    assert (s.timing.stop, s.timing.stop_source) == (DEFAULT_RULE, "--stop-rule") and "stop" not in s.raw["timing"]
    own = StopRule(**{**DEFAULT_RULE.to_dict(), "min_rounds": 30})
    configured = s.overridden(stop=own)  # a config's own rule (here the one folded first) is never replaced
    assert configured.timing.stop == DEFAULT_RULE


def test_the_plan_is_the_config_s_unless_the_arm_s_protocol_differs():
    plan = RoundPlan.of(["local", "zipf"], H200)
    assert (plan.warmup, plan.repetitions, plan.flush_policy, plan.stop) == (
        H200.timing.warmup_rounds, H200.timing.repetitions, H200.timing.flush, None)
    assert plan.rounds == len(plan.orders()) and all(sorted(o) == ["local", "zipf"] for o in plan.orders())
    arm = RoundPlan.of(["a"], H200.overridden(stop=DEFAULT_RULE), repetitions=5, flush="write", stop=False)
    assert (arm.repetitions, arm.flush_policy, arm.stop) == (5, "write", None)


def test_the_timing_block_counts_the_rounds_that_ran_and_carries_the_stop_record():
    plan = RoundPlan(("x",), 2, 10, "fixed-rounds", 0, "read", 1 << 20, stop=DEFAULT_RULE)
    m = Measurement(plan, plan.orders()[:6], [], {"rounds": 4, "stopped_by": "ci"})
    t = m.timing(["dq"], resumed=False).to_json()
    assert (t["repetitions"], len(t["round_orders"]), t["flush_policy"], t["stop"]["rounds"]) == (4, 6, "read", 4)
    sweep = m.timing(["dq"], flush_recorded=False, untimed_prerequisites=["csr"]).to_json()
    assert "flush_policy" not in sweep and "resumed" not in sweep and sweep["untimed_prerequisites"] == ["csr"]


@pytest.mark.parametrize("name", ["e1_h200", "e1_h200_stop"])
def test_a_bench_result_s_measurement_read_back_rebuilds_it_byte_for_byte(name):
    doc = json.loads((REPO / "results" / "raw" / f"{name}.json").read_text())
    config = config_from_dict(doc["config"], source=doc["config_path"])
    m = Measurement.from_document(doc, config)
    assert (m.stop is None) == (name == "e1_h200") and m.repetitions == doc["timing"]["repetitions"]
    keep = ("edges", "fanin", "query_span", "adjacent_gap", "reproduces_official", "memory")
    rebuilt = bench_result.build(
        name=doc["name"], config=config, gates=doc["gates"], gate_detail=gate_detail, records=m.records,
        timing=m.timing(recorded_stages(m.records), resumed=doc["timing"]["resumed"]),
        per_pattern={n: {k: p[k] for k in keep if k in p} for n, p in doc["patterns"].items()},
        autotune=doc["autotune"], telemetry={"available": doc["telemetry"]["available"]}, metadata=doc["metadata"],
        wall_seconds=doc["wall_seconds"], throttled=throttled, routing_files=doc.get("routing_files"),
        packing=doc.get("packing"), cupti=doc.get("cupti"), phases=doc.get("phases")).to_json()
    assert json.dumps(rebuilt) == json.dumps(doc)


def test_phases_are_disjoint_a_nested_one_pausing_its_outer_one_and_sum_to_the_wall_time():
    ticks = iter(range(100))  # each clock read advances 1 s
    phases = PhaseClock(lambda: float(next(ticks)))
    start = float(next(ticks))         # 0: the run's start
    with phases("tune"):               # 1 .. 3
        next(ticks)
    with phases("record"):             # 4 .. 5, 6 .. 7, 8 .. 10: paused while cupti and reproduction run
        with phases("cupti"):          # 5 .. 6
            pass
        with phases("reproduction"):   # 7 .. 8
            pass
        next(ticks)
    wall = float(next(ticks)) - start  # 11
    got = phases.seconds()
    assert list(got) == list(PHASES)
    assert {k: v for k, v in got.items() if v} == {"tune": 2.0, "cupti": 1.0, "reproduction": 1.0, "record": 4.0}
    assert sum(got.values()) <= wall
    with pytest.raises(ValueError, match="phase 'writing'"), phases("writing"):
        pass
