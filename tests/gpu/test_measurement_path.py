"""The measurement path on the CPU: round loop call order, warm-up, interleaving, resume, the pure
result builder, summary rows and memory accounting, driven by fakes of the device (never of FLA)."""

from __future__ import annotations

import json

import pytest

from nsa_exp.analysis.summary import summary_frame
from nsa_exp.checking.bench_result import build
from nsa_exp.core.measurement import Measurement
from nsa_exp.core.protocol import round_orders
from nsa_exp.core.records import recorded_stages, stage_summaries
from nsa_exp.gpu.bench import memory_accounting
from nsa_exp.gpu.gates import gate_detail
from nsa_exp.gpu.telemetry import throttled
from nsa_exp.gpu.timing import LAUNCH_GUARD_CYCLES, next_round, run_rounds
from nsa_exp.io.config_files import config_from_dict
from tests.helpers import REPO

FLUSH = 1 << 20


class FakeEvent:
    def __init__(self, device: FakeDevice, name: str):
        self.device, self.name, self.t = device, name, None

    def record(self) -> None:
        self.device.log.append(self.name)
        self.device.clock += 1.0
        self.t = self.device.clock

    def elapsed_time(self, end: FakeEvent) -> float:
        return end.t - self.t


class FakeDevice:
    """Logs every device call; each event record advances a fake clock by 1 ms, each stage call by ``cost``."""

    def __init__(self):
        self.log: list[str] = []
        self.clock = 0.0
        self.buffers: list[int] = []
        self.created = 0

    def name(self) -> str:
        return "fake GPU"  # no row in the noise table: the verdict rule's floors are compare's 2%

    def flush_buffer(self, nbytes: int) -> str:
        self.buffers.append(nbytes)
        return "flush-buffer"

    def flush(self, buffer: str, value: int) -> None:
        assert buffer == "flush-buffer"
        self.log.append("flush")

    def read_flush(self, buffer: str) -> None:
        assert buffer == "flush-buffer"
        self.log.append("read-flush")

    def spin(self, cycles: int) -> None:
        assert cycles == LAUNCH_GUARD_CYCLES
        self.log.append("spin")

    def event(self) -> FakeEvent:
        """The loop creates each stage's start event, then its end event."""
        self.created += 1
        return FakeEvent(self, "start" if self.created % 2 else "end")

    def synchronize(self) -> None:
        self.log.append("sync")


def _fns(device: FakeDevice, patterns, stages=("a", "b")):
    def call(p, s):
        def fn():
            device.log.append(f"call {p}.{s}")
            device.clock += {"x": 2.0, "y": 5.0}.get(p, 1.0)
        return fn
    return {p: {s: call(p, s) for s in stages} for p in patterns}


def test_each_stage_is_flush_spin_start_call_end_and_each_pattern_syncs_once():
    dev = FakeDevice()
    run_rounds(_fns(dev, ["x", "y"]), [["x", "y"]], warmup_rounds=0, l2_flush_bytes=FLUSH, device=dev)
    stage = ["flush", "spin", "start"]
    assert dev.log == [*stage, "call x.a", "end", *stage, "call x.b", "end", "sync",
                       *stage, "call y.a", "end", *stage, "call y.b", "end", "sync"]
    assert dev.buffers == [FLUSH]


def test_events_time_the_call_alone():
    dev = FakeDevice()
    recs = run_rounds(_fns(dev, ["x", "y"]), [["y", "x"]], warmup_rounds=0, l2_flush_bytes=FLUSH, device=dev)
    # end - start = the call's cost + the end event's own 1 ms tick, nothing from flush or spin
    assert [r["pattern"] for r in recs] == ["y", "x"]
    assert recs[0]["ms"] == {"a": 6.0, "b": 6.0} and recs[1]["ms"] == {"a": 3.0, "b": 3.0}


@pytest.mark.parametrize(("policy", "sweep"), [("write", ["flush"]), ("read", ["read-flush"]), ("none", [])])
def test_each_flush_policy_puts_its_sweep_before_the_spin_of_every_stage(policy, sweep):
    dev = FakeDevice()
    run_rounds(_fns(dev, ["x"]), [["x"]], warmup_rounds=0, l2_flush_bytes=FLUSH, device=dev, flush_policy=policy)
    stage = [*sweep, "spin", "start"]
    assert dev.log == [*stage, "call x.a", "end", *stage, "call x.b", "end", "sync"]


def test_an_unknown_flush_policy_is_refused_before_any_device_call():
    dev = FakeDevice()
    with pytest.raises(ValueError, match="flush_policy 'evict'"):
        run_rounds(_fns(dev, ["x"]), [["x"]], warmup_rounds=0, l2_flush_bytes=FLUSH, device=dev, flush_policy="evict")
    assert dev.log == [] and dev.buffers == []


def test_zero_flush_bytes_skips_the_flush_but_not_the_spin():
    dev = FakeDevice()
    run_rounds(_fns(dev, ["x"], stages=("a",)), [["x"]], warmup_rounds=0, l2_flush_bytes=0, device=dev)
    assert dev.log == ["spin", "start", "call x.a", "end", "sync"]


def test_warmup_rounds_are_flagged_and_left_out_of_the_statistics():
    dev = FakeDevice()
    orders = round_orders(["x", "y"], 5, "shuffled", seed=7)
    recs = run_rounds(_fns(dev, ["x", "y"]), orders, warmup_rounds=2, l2_flush_bytes=FLUSH, device=dev)
    assert [r["warmup"] for r in recs] == [True] * 4 + [False] * 6
    stats = stage_summaries(recs, ["x", "y"], ("a", "b"))
    assert stats["x"]["a"]["n_obs"] == 3 and len(stats["x"]["a"]["warmup_ms"]) == 2


def test_patterns_interleave_in_the_recorded_round_orders():
    dev = FakeDevice()
    orders = round_orders(["x", "y", "z"], 4, "shuffled", seed=3)
    assert orders == round_orders(["x", "y", "z"], 4, "shuffled", seed=3)  # seeded, recorded
    recs = run_rounds(_fns(dev, ["x", "y", "z"]), orders, warmup_rounds=1, l2_flush_bytes=FLUSH, device=dev)
    assert [[r["pattern"] for r in recs if r["round"] == k] for k in range(4)] == orders
    calls = [line.split()[1].split(".")[0] for line in dev.log if line.startswith("call") and line.endswith(".a")]
    assert calls == [p for order in orders for p in order]


def test_resume_reruns_warmups_as_rewarm_then_continues_after_the_last_journaled_round():
    dev = FakeDevice()
    orders = round_orders(["x", "y"], 6, "shuffled", seed=1)
    journaled: list[int] = []
    done = run_rounds(_fns(dev, ["x", "y"]), orders, 2, FLUSH, rounds=range(4), device=dev,
                      on_round_done=lambda r, recs: journaled.append(r))
    assert journaled == [0, 1, 2, 3] and next_round(done) == 4
    rewarm = run_rounds(_fns(dev, ["x", "y"]), orders, 2, FLUSH, rounds=range(2), rewarm=True, device=dev)
    assert all(r["warmup"] and r["rewarm"] for r in rewarm)
    assert next_round(done + rewarm) == 4
    rest = run_rounds(_fns(dev, ["x", "y"]), orders, 2, FLUSH, rounds=range(next_round(done + rewarm), 6), device=dev)
    assert sorted({r["round"] for r in rest}) == [4, 5] and not any(r["warmup"] for r in rest)


def test_progress_and_telemetry_hooks_run_per_round_and_per_pattern():
    dev = FakeDevice()
    seen, ticks = [], []
    recs = run_rounds(_fns(dev, ["x", "y"]), [["x", "y"], ["y", "x"]], 0, FLUSH, device=dev,
                      on_pattern_done=lambda r, p: seen.append((r, p)) or {"sm_clock_mhz": 1},
                      progress=lambda d, t: ticks.append((d, t)))
    assert seen == [(0, "x"), (0, "y"), (1, "y"), (1, "x")] and ticks == [(1, 2), (2, 2)]
    assert all(r["telemetry"] == {"sm_clock_mhz": 1} for r in recs)


@pytest.mark.parametrize("name", ["e1_h100", "e1_h100_dev", "e1_h100_repeat"])
def test_the_bench_result_builder_rebuilds_the_committed_result_from_its_records(name):
    doc = json.loads((REPO / "results" / "raw" / f"{name}.json").read_text())
    keep = ("edges", "fanin", "query_span", "adjacent_gap", "reproduces_official", "memory")
    config = config_from_dict(doc["config"], source=doc["config_path"])
    m = Measurement.from_document(doc, config)
    rebuilt = build(
        name=doc["name"], config=config, gates=doc["gates"], gate_detail=gate_detail, records=m.records,
        timing=m.timing(recorded_stages(m.records), resumed=doc["timing"]["resumed"]),
        per_pattern={n: {k: p[k] for k in keep if k in p} for n, p in doc["patterns"].items()},
        autotune=doc["autotune"], telemetry={"available": doc["telemetry"]["available"]}, metadata=doc["metadata"],
        wall_seconds=doc["wall_seconds"], throttled=throttled).to_json()
    # Recorded before timing.flush existed: their configs name no policy, which means the write flush.
    assert "flush_policy" not in doc["timing"] and rebuilt["timing"].pop("flush_policy") == "write"
    assert json.dumps(rebuilt) == json.dumps(doc)


@pytest.mark.parametrize("name", ["e1_h100", "e1_h100_dev", "e1_h100_repeat"])
def test_summary_rows_are_the_committed_csv(name):
    doc = json.loads((REPO / "results" / "raw" / f"{name}.json").read_text())
    committed = (REPO / "results" / "summaries" / f"{name}.csv").read_text()
    assert summary_frame(doc).to_csv(index=False, lineterminator="\n") == committed


class FakeStaged:
    class p:  # noqa: N801 - mimics StagedBackward.p
        class shape:  # noqa: N801
            B, T, HQ = 1, 64, 16

    class T:
        def __init__(self, nbytes, numel=0):
            self.nbytes, self._numel = nbytes, numel

        def numel(self):
            return self._numel

    def __init__(self, cuda):
        self.cuda = cuda
        self.dq, self.dk, self.dv = self.T(100), self.T(200), self.T(300)

    def delta_preprocess(self, o):
        return self.T(64 * 16 * 4)

    def csr(self):
        return self.T(512), self.T(36, numel=9)

    def full_bwd(self, o, lse):
        self.cuda.allocated += 1000
        self.cuda.peak = max(self.cuda.peak, self.cuda.allocated + 50)
        return self.T(100), self.T(200), self.T(300)


class FakeCuda:
    def __init__(self):
        self.allocated, self.peak, self.log = 4000, 9999, []

    def synchronize(self):
        self.log.append("sync")

    def reset_peak_memory_stats(self):
        self.log.append("reset")
        self.peak = self.allocated

    def memory_allocated(self):
        return self.allocated

    def memory_reserved(self):
        return 8192

    def max_memory_allocated(self):
        return self.peak

    def max_memory_reserved(self):
        return 8192


def test_memory_accounting_measures_the_wrapper_peak_after_a_reset():
    cuda = FakeCuda()
    mem = memory_accounting(FakeStaged(cuda), "o", "lse", cuda=cuda)
    assert cuda.log == ["sync", "reset", "sync"]
    assert mem == {
        "delta_bytes": 64 * 16 * 4, "csr_indices_bytes": 512, "csr_offsets_bytes": 36,
        "csr_transient_cursor_bytes": 32, "aux_persistent_bytes": 64 * 16 * 4 + 548,
        "preallocated_gradient_bytes": 600, "official_outputs_bytes": 600,
        "official_baseline_allocated_bytes": 4000, "official_peak_allocated_bytes": 5050,
        "official_peak_minus_baseline_bytes": 1050, "official_baseline_reserved_bytes": 8192,
        "official_peak_reserved_bytes": 8192,
    }
