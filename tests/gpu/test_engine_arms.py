"""The engine's arms end to end on the CPU: FLA's REAL kernels under the Triton interpreter (float16, tiny
shapes), the GPU replaced by a fake device (deterministic event times, host facts) and a fake clock. bench
under the stop rule writes a result whose keys are the committed H200 result's and which validate passes
(stop rule recomputed); a sweep point under its config's stop rule likewise; and an arm shaped like the
release arm (the official wrapper as a whole and ``parallel_nsa`` forward + backward as its stages) is one
small class on the same engine."""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
import torch

from nsa_exp.analysis.stop_rule import STAGE_RULE
from nsa_exp.checking.validate import validate_path
from nsa_exp.core.config import StopRule
from nsa_exp.core.measurement import PHASES
from nsa_exp.core.records import stage_summaries
from nsa_exp.core.requests import BenchRequest
from nsa_exp.core.stages import STAGE_NAMES
from nsa_exp.io.config_files import config_from_dict
from tests.gpu.test_engine import Ticks
from tests.gpu.test_measurement_path import FakeCuda, FakeDevice
from tests.helpers import REPO

pytestmark = pytest.mark.interpreter

# The smallest shape FLA takes (G = 16, one V tile, M = S = 2); the oracle shape needs M > S.
TINY = {"B": 1, "T": 32, "HQ": 16, "H": 1, "K": 16, "V": 16, "S": 2, "block_size": 16, "dtype": "float16"}
ORACLE = {**TINY, "T": 64}
# H200 medians of local (results/raw/e1_h200.json), so the fake's stage sum / full_bwd is plausible.
H200_MS = {"selection_fwd": 14.6, "delta_preprocess": 1.27, "csr": 0.35, "dq_core": 24.0, "dkv_core": 15.3,
           "wrapper_extra": 1.24, "full_bwd": 42.1}
# total memory = the fake's mem_get_info total (validate holds a sweep point's free <= total = the GPU's memory)
GPU = {"name": "NVIDIA H200", "sm_count": 132, "total_memory_bytes": 140 * 2**30, "compute_capability": "9.0",
       "l2_cache_bytes": 62_914_560, "driver": "580.95.05"}


class FakeMemory(FakeCuda):
    """The allocator's readings: the official wrapper's peak 1 MiB above the baseline the reset left, 8 MiB
    reserved."""

    def reset_peak_memory_stats(self):
        super().reset_peak_memory_stats()
        self.peak = self.allocated + 2**20

    def memory_reserved(self):
        return 8 * 2**20

    def max_memory_reserved(self):
        return 8 * 2**20


class _Event:
    def __init__(self, dev: FakeGpu, end: bool, stage: int):
        self.dev, self.end, self.stage, self.t = dev, end, stage, None

    def record(self) -> None:
        d = self.dev
        d.log.append("end" if self.end else "start")
        if self.end:  # the kernels between the pair run from now (or when the GPU is free) for ms
            cost = d.costs[self.stage % len(d.costs)]
            ms = cost() if callable(cost) else cost
            d.free_at = max(d.free_at, time.perf_counter()) + ms / 1e3
            d.clock = d.started + ms
        else:
            d.clock = d.started = d.clock + 1.0
        self.t = d.clock

    def elapsed_time(self, end: _Event) -> float:
        return end.t - self.t


class FakeGpu(FakeDevice):
    """The round loop's fake device plus the host facts the engine reads; the k-th stage of a cell (the k-th
    event pair after a synchronise) measures ``costs[k]`` ms (a callable: what it returns, call by call). Like a
    GPU, it cannot have been busy longer than the host has waited: each event pair queues its milliseconds from the
    host's now, and a synchronise returns when they are done (the harness replays repeated interpreter launches,
    tests/interpreter.py, so the host side of a round can take less than the fake's kernels; validate holds
    elapsed seconds >= GPU time)."""

    tensor_device = "cpu"

    def __init__(self, costs):
        super().__init__()
        self.costs, self.pairs, self.started, self.memory = list(costs), 0, 0.0, FakeMemory()
        self.free_at = 0.0  # host clock (perf_counter) when the fake's queued kernels are done

    def event(self) -> _Event:
        self.created += 1
        end = not self.created % 2
        ev = _Event(self, end, self.pairs)
        self.pairs += end
        return ev

    def synchronize(self) -> None:
        super().synchronize()
        self.pairs = 0
        time.sleep(max(0.0, self.free_at - time.perf_counter()))

    def name(self) -> str:
        return GPU["name"]

    def empty_cache(self) -> None:
        self.log.append("empty_cache")

    def mem_get_info(self) -> tuple[int, int]:
        return (100 * 2**30, 140 * 2**30)

    def identity(self, nvml_info):
        return {**GPU, **nvml_info}

    def placement(self):
        return {"device_index": 0}


def fake_gpu_gate(required: str | None, allow: bool) -> dict:
    """``nsa_exp.gpu.gates.gpu_gate`` answered by the fake's identity (:data:`GPU`): the required GPU is there."""
    return {"name": GPU["name"], "required": required, "allow_gpu": allow, "matches_required": True}


@pytest.fixture
def fake_gpu(fla_interpreter, monkeypatch):
    """FLA under the interpreter, and the GPU gate answered by the fake's identity (every other gate is real)."""
    from nsa_exp.gpu import gates  # noqa: PLC0415 - FLA after the interpreter setup

    monkeypatch.setattr(gates, "gpu_gate", fake_gpu_gate)
    return fla_interpreter


def tiny_config(patterns=({"name": "local"}, {"name": "sink-heavy", "sinks": 1}), **timing) -> dict:
    raw = json.loads((REPO / "configs" / "e1_h200.json").read_text())
    raw.pop("formal")
    return {**raw, "name": "tiny", "shape": TINY, "patterns": list(patterns),
            "timing": {"warmup_rounds": 1, "repetitions": 8, "l2_flush_bytes": 1024, "order": "shuffled-rounds",
                       "flush": "read", **timing},
            "smoke": {"naive": TINY, "staged": TINY, "oracle": ORACLE}}


def key_paths(x, patterns, path="$") -> set[str]:
    """Every key path of a document, pattern names as ``<p>``, list items as ``[]``, autotune cache keys as ``<k>``."""
    if isinstance(x, list):
        return {f"{path}[]"}.union(*(key_paths(v, patterns, f"{path}[]") for v in x))
    if not isinstance(x, dict):
        return set()
    out = set()
    for k, v in x.items():
        name = "<p>" if k in patterns else "<k>" if path.endswith(".cache") else k
        out |= {f"{path}.{name}"} | key_paths(v, patterns, f"{path}.{name}")
    return out


# What a CPU run of a tiny config cannot share with the committed H200 run: the embedded config (another
# experiment), NVML readings (clocks, power, names), the CUPTI pass, FLA's autotune caches (one config per
# autotuner under the interpreter: nothing is cached), the interpreter's env var, the host's git and packages.
HOST_ONLY = re.compile(r"^\$\.(config\.|patterns\.<p>\.params\.|cupti|autotune\.kernels\.\w+\.cache\.<k>|"
                       r"(metadata|gates\[\]\.detail)\.env\.TRITON_INTERPRET$|metadata\.(git|versions\.packages)\.|"
                       r"telemetry\.samples\[\]\.(?!round$|pattern$|warmup$)|"
                       r"metadata\.gpu\.(?!name$|sm_count$|total_memory_bytes$|compute_capability$|l2_cache_bytes$|"
                       r"driver$))")


@pytest.fixture
def pytest_argv(monkeypatch):
    """The argv a bench run in this process records is ``python -m pytest``'s, whichever process hosts the test (an
    xdist worker's argv[0] is ``-c``): pytest's ``__main__.py``, not this CLI's, so ``validate`` reads none of its
    options (checking/record_checks.py ``recorded_cli_argv``; the same whether one file or the suite runs)."""
    monkeypatch.setattr(sys, "argv", [str(Path(pytest.__file__).parent / "__main__.py"), "-q"])


def test_bench_under_the_stop_rule_writes_todays_keys_and_validates(fake_gpu, tmp_path, pytest_argv):
    from nsa_exp.gpu.bench import run_bench  # noqa: PLC0415 - FLA after the interpreter setup

    config = config_from_dict(tiny_config(), source="tiny.json")
    out = tmp_path / f"tiny_engine_{os.getpid()}.json"
    dev = FakeGpu([H200_MS[s] for s in STAGE_NAMES])
    rule = StopRule(**{**STAGE_RULE.to_dict(), "min_rounds": 6})  # bench --stop-rule's: converged stages drop
    from nsa_exp.gpu.launcher import _autotuner, autotuned_kernels  # noqa: PLC0415
    dkv = _autotuner(autotuned_kernels()["dkv_core"])
    dkv.cache[("another shape's key",)] = dkv.configs[0]  # what an earlier call in this process (smoke) leaves
    doc = run_bench(BenchRequest(config.overridden(stop=rule), True, out, tmp_path / "tiny.csv", cupti_rounds=0),
                    device=dev, clock=Ticks(0.25))
    assert ("another shape's key",) not in dkv.cache  # the bench tuned from scratch (FLA's key holds no T)
    stop = doc["timing"].pop("stop")
    assert (stop["stopped_by"], stop["rounds"], stop["source"]) == ("ci", 6, "--stop-rule")
    assert doc["timing"]["repetitions"] == 6 and len(doc["timing"]["round_orders"]) == 7
    assert dev.log.count("sync") >= 2 * 7 and not (REPO / ".nsa-exp" / "journal" / out.stem).exists()

    committed = json.loads((REPO / "results" / "raw" / "e1_h200.json").read_text())
    ours, theirs = key_paths(doc, doc["patterns"]), key_paths(committed, committed["patterns"])
    # phases (issue 30) are newer than the committed formal run: ours has them, it has not
    assert {p for p in ours - theirs if p.startswith("$.phases")} == {"$.phases", *(f"$.phases.{k}" for k in PHASES)}
    assert {p for p in ours ^ theirs if not HOST_ONLY.match(p) and not p.startswith("$.phases")} == set()

    report = validate_path(out)
    failed = {c["name"]: [f["path"] for f in c["failures"]] for c in report["checks"] if not c["passed"]}
    # CPU torch has no CUDA version; the rule's min_rounds is 6 to keep this CPU run short, not a rule --stop-rule
    # folds in: the only checks a CPU run fails, and only on those fields (the trace, the drops and the counts
    # recompute; the recorded argv is pytest's, whose options are not read)
    assert failed == {"environment_recorded": ["$.metadata.versions.cuda"],
                      "stop_rule": ["$.timing.stop.rule"]}, failed
    # the phases (issue 30): every one of the engine's and bench's, disjoint, inside the wall time, checked
    phases = doc["phases"]
    assert list(phases) == list(PHASES) and phases["cupti"] == 0.0  # --cupti-rounds 0: no pass
    assert all(phases[p] > 0 for p in ("gates", "inputs", "tune", "rounds", "reproduction", "record"))
    assert sum(phases.values()) <= doc["wall_seconds"] and phases["tune"] >= doc["autotune"]["tune_seconds"]
    assert "phases_plausible" in {c["name"] for c in report["checks"]}


def test_the_tuning_cache_keeps_a_fresh_tune_and_the_next_bench_replays_it(fake_gpu, tmp_path):
    """bench --tuning-cache: the first run tunes (the formal protocol's record) and keeps its result as the entry
    of this GPU, FLA commit and shape; the second replays it, recorded as a replay naming the entry; another shape
    has another entry."""
    from nsa_exp.gpu.bench import run_bench  # noqa: PLC0415 - FLA after the interpreter setup
    from nsa_exp.io.tuning_cache import entry_path  # noqa: PLC0415

    config = config_from_dict(tiny_config(patterns=[{"name": "local"}], repetitions=5), source="tiny.json")
    costs, cache = [H200_MS[s] for s in STAGE_NAMES], tmp_path / "cache"
    cache.mkdir()
    first = run_bench(BenchRequest(config, True, tmp_path / "first.json", None, cupti_rounds=0, tuning_cache=cache),
                      device=FakeGpu(costs), clock=Ticks())
    entry = entry_path(cache, first["metadata"]["gpu"]["name"], first["fla"]["commit"], first["shape"], None)
    assert first["autotune"]["mode"] == "tune-on" and [p.name for p in cache.iterdir()] == [entry.name]
    assert entry.read_bytes() == (tmp_path / "first.json").read_bytes()
    second = run_bench(BenchRequest(config, True, tmp_path / "second.json", None, cupti_rounds=0, tuning_cache=cache),
                       device=FakeGpu(costs), clock=Ticks())
    assert second["autotune"]["mode"] == "replay" and second["autotune"]["replayed_from"]["path"] == str(entry)
    assert second["autotune"]["kernels"].keys() == first["autotune"]["kernels"].keys()
    assert {k: v["best_config"] for k, v in second["autotune"]["kernels"].items()} == \
        {k: v["best_config"] for k, v in first["autotune"]["kernels"].items()}
    assert entry_path(cache, "NVIDIA H200", first["fla"]["commit"], {**first["shape"], "T": 128}, None) != entry
    assert entry_path(cache, "NVIDIA H100 80GB HBM3", first["fla"]["commit"], first["shape"], None) != entry
    assert entry_path(cache, "NVIDIA H200", first["fla"]["commit"], first["shape"], [0, 64]) != \
        entry_path(cache, "NVIDIA H200", first["fla"]["commit"], first["shape"], None)


class Killed(Exception):
    pass


class DyingGpu(FakeGpu):
    """Killed during its ``n``-th synchronise (a round's last, before the round is journalled)."""

    def __init__(self, costs, n):
        super().__init__(costs)
        self.n = n

    def synchronize(self):
        super().synchronize()
        if self.log.count("sync") == self.n:
            raise Killed


def test_a_bench_killed_mid_run_resumes_from_its_journal_and_validates(fake_gpu, tmp_path, pytest_argv):
    from nsa_exp.gpu.bench import run_bench  # noqa: PLC0415 - FLA after the interpreter setup
    from nsa_exp.io.journal import Journal  # noqa: PLC0415

    config = config_from_dict(tiny_config(patterns=[{"name": "local"}], repetitions=5), source="tiny.json")
    out, costs = tmp_path / f"tiny_resume_{os.getpid()}.json", [H200_MS[s] for s in STAGE_NAMES]
    journal = Journal(REPO, out.stem)
    try:  # sync 1 ends the tuning pass, syncs 2.. the rounds: killed in round 3, rounds 0-2 journalled
        with pytest.raises(Killed):
            run_bench(BenchRequest(config, True, out, None, cupti_rounds=0), device=DyingGpu(costs, 5), clock=Ticks())
        assert journal.rounds_done() == 3 and not out.exists()
        doc = run_bench(BenchRequest(config, True, out, None, resume=True, cupti_rounds=0), device=FakeGpu(costs),
                        clock=Ticks())
    finally:
        journal.discard()
    assert doc["timing"]["resumed"] is True and doc["timing"]["repetitions"] == 5
    samples = [(s["round"], s["warmup"], s.get("rewarm", False)) for s in doc["telemetry"]["samples"]]
    assert samples == [(0, True, False), (1, False, False), (2, False, False), (0, True, True),
                       (3, False, False), (4, False, False), (5, False, False)]
    failed = {c["name"] for c in validate_path(out)["checks"] if not c["passed"]}
    # CPU torch has no CUDA version (the recorded argv is pytest's, whose options are not read)
    assert failed == {"environment_recorded"}


def test_a_sweep_point_under_its_configs_stop_rule_validates(fake_gpu, tmp_path):
    from nsa_exp.gpu.sweep_point import measure_point  # noqa: PLC0415 - FLA after the interpreter setup
    from nsa_exp.sweeps.plan import Point  # noqa: PLC0415
    from nsa_exp.sweeps.run import run_point  # noqa: PLC0415

    raw = tiny_config(stop={**STAGE_RULE.to_dict(), "min_rounds": 6, "min_seconds": 0.0})  # sweep --stop-rule's
    point = Point("tiny", "T32-sink-heavy-sinks1", 32, {"name": "sink-heavy", "sinks": 1}, ("csr", "dkv_core"),
                  {**raw, "name": "T32-sink-heavy-sinks1"}, None)
    dev = FakeGpu([H200_MS["csr"], H200_MS["dkv_core"]])
    path = run_point(point, str(tmp_path), True, measure=lambda p, a, o: measure_point(p, a, o, device=dev))
    doc = json.loads(Path(path).read_text())
    assert doc["timing"]["stop"]["stopped_by"] == "ci" and doc["timing"]["repetitions"] == 6
    assert list(doc["patterns"]["local"]["stages"]) == ["csr", "dkv_core"]
    report = validate_path(path)
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    assert "stop_rule" in {c["name"] for c in report["checks"]}


def test_a_sweep_point_whose_converged_stage_drops_out_validates_and_a_forged_count_does_not(fake_gpu, tmp_path):
    """Under sweep --stop-rule's rule a converged stage stops being timed while a noisy one goes on: dK/dV (steady)
    drops out at min_rounds, the CSR (0.30 / 0.42 ms alternately, never within its 0.02 ms target) runs to the
    ceiling; the point validates, and one observation too few for the rule's count fails timing_recompute."""
    from nsa_exp.gpu.sweep_point import measure_point  # noqa: PLC0415 - FLA after the interpreter setup
    from nsa_exp.sweeps.plan import Point  # noqa: PLC0415
    from nsa_exp.sweeps.run import run_point  # noqa: PLC0415

    raw = tiny_config(stop={**STAGE_RULE.to_dict(), "min_rounds": 6, "min_seconds": 0.0})
    point = Point("tiny", "T32-sink-heavy-sinks1", 32, {"name": "sink-heavy", "sinks": 1}, ("csr", "dkv_core"),
                  {**raw, "name": "T32-sink-heavy-sinks1"}, None)
    csr = itertools.cycle([0.30, 0.42]).__next__
    dev = FakeGpu([csr, H200_MS["dkv_core"]])
    path = run_point(point, str(tmp_path), True, measure=lambda p, a, o: measure_point(p, a, o, device=dev))
    doc = json.loads(Path(path).read_text())
    stop = doc["timing"]["stop"]
    assert stop["stopped_by"] == "max_rounds" and stop["rounds"] == 8
    assert stop["stage_rounds"] == {p: {"csr": 8, "dkv_core": 6} for p in ("local", "sink-heavy")}
    assert len(doc["patterns"]["local"]["stages"]["dkv_core"]["raw_ms"]) == 6
    report = validate_path(path)
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    doc["patterns"]["local"]["stages"]["csr"]["raw_ms"].pop()
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc))
    failed = {c["name"] for c in validate_path(forged)["checks"] if not c["passed"]}
    assert "timing_recompute" in failed, failed


def test_a_sweep_point_that_tunes_starts_from_scratch_whatever_its_process_pinned_before(fake_gpu, tmp_path,
                                                                                         monkeypatch):
    """FLA keys its autotune cache without T: the first point of a sweep that tunes must not launch what an earlier
    point (or shape) of the same process pinned; it resets the autotuners before tuning, as bench does."""
    from nsa_exp.gpu import tuning  # noqa: PLC0415 - FLA after the interpreter setup
    from nsa_exp.gpu.sweep_point import measure_point  # noqa: PLC0415
    from nsa_exp.sweeps.plan import Point  # noqa: PLC0415
    from nsa_exp.sweeps.run import run_point  # noqa: PLC0415

    calls = []
    reset = tuning.reset_autotuners
    monkeypatch.setattr(tuning, "reset_autotuners", lambda: (calls.append("reset"), reset())[1])
    raw = tiny_config(repetitions=5)
    point = Point("tiny", "T32-local", 32, {"name": "local"}, ("csr",), {**raw, "name": "T32-local"}, None)
    dev = FakeGpu([H200_MS["csr"]])
    run_point(point, str(tmp_path), True, measure=lambda p, a, o: measure_point(p, a, o, device=dev))
    assert calls == ["reset"] and (tmp_path / "_autotune.json").is_file()  # tuned here, from scratch, once


def test_an_arm_shaped_like_the_release_arm_is_one_small_class(fake_gpu, tmp_path):
    """Issue 22's arm: the official wrapper as a whole and ``parallel_nsa`` forward + backward per routing,
    tuned once on local, timed interleaved by the same loop; here over the pinned FLA."""
    from fla.ops.nsa.parallel import parallel_nsa  # noqa: PLC0415 - FLA after the interpreter setup

    from nsa_exp.core.measurement import RoundPlan  # noqa: PLC0415
    from nsa_exp.gpu.engine import Arm, Cells, Run, measure  # noqa: PLC0415
    from nsa_exp.gpu.topk import _interpreter_single_config  # noqa: PLC0415

    _interpreter_single_config()  # parallel_nsa mean-pools k and v: one config for that autotuner too

    class ReleaseLikeArm(Arm):
        def tune(self, run):
            for fn in self.fns(run, "local").values():  # the autotune key holds no routing: tune on local
                fn()

        def fns(self, run, n):
            s = run.staged[n]
            o, lse = s.selection_fwd()
            q, k, v = (t.detach().requires_grad_(True) for t in (s.p.q, s.p.k, s.p.v))

            def train_step():
                out = parallel_nsa(q, k, v, block_indices=s.p.block_indices, block_counts=s.p.shape.S,
                                   block_size=s.p.shape.block_size)
                out.backward(s.p.do)

            return {"full_bwd": lambda: s.full_bwd(o, lse), "parallel_nsa": train_step}

        def cells(self, run):  # one warm-up and two timed rounds (the interpreter is slow)
            t = run.config.timing
            plan = RoundPlan(tuple(run.names), 1, 2, t.order, 7, t.flush, t.l2_flush_bytes)
            yield Cells({n: self.fns(run, n) for n in run.names}, plan, telemetry=True, label="release")

        def timed(self, run, cells):
            self.records = cells.measured.records

        def record(self, run):
            return {"patterns": stage_summaries(self.records, run.names, ("full_bwd", "parallel_nsa"))}

    config = config_from_dict(tiny_config(), source="tiny.json")
    dev = FakeGpu([42.1, 57.0])
    doc = measure(ReleaseLikeArm(), Run(config, True, device=dev))
    assert {n: {s: v["n_obs"] for s, v in st.items()} for n, st in doc["patterns"].items()} == {
        n: {"full_bwd": 2, "parallel_nsa": 2} for n in ("local", "sink-heavy")}
    assert dev.log.count("sync") == 2 * 3  # one synchronise per cell per round
    assert doc["patterns"]["local"]["parallel_nsa"]["median_ms"] == pytest.approx(57.0)
    assert torch.isfinite(torch.tensor(doc["patterns"]["sink-heavy"]["full_bwd"]["raw_ms"])).all()
