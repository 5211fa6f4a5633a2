"""Issue 11 tuning arms on the CPU: FLA's real autotuners (under the Triton interpreter) are reset
between patterns, and each pattern's timed calls launch exactly the config recorded for it; the
round loop swaps configs outside the timed region. The device is a fake; FLA never is."""

from __future__ import annotations

import pytest

from nsa_exp.errors import GateFailure
from nsa_exp.gpu.timing import run_rounds
from nsa_exp.routing.config import Pattern, Shape
from nsa_exp.routing.patterns import generate_routing
from tests.helpers import assert_one_line_error, run_cli
from tests.test_measurement_path import FakeDevice

SHAPE = Shape(B=1, T=128, HQ=16, H=1, K=32, V=32, S=4, block_size=16, dtype="float16")
CFG_A = {"dq_core": {"kwargs": {}, "num_warps": 2, "num_stages": 1},
         "dkv_core": {"kwargs": {"BQ": 1}, "num_warps": 4, "num_stages": 1}}
CFG_B = {"dq_core": {"kwargs": {}, "num_warps": 8, "num_stages": 3},
         "dkv_core": {"kwargs": {"BQ": 2}, "num_warps": 8, "num_stages": 2}}


@pytest.fixture
def tuning(fla_interpreter):
    """The tuning module over the interpreter's FLA; every autotuner restored to the harness's space after."""
    from nsa_exp.gpu import tuning as module  # noqa: PLC0415 - FLA after the interpreter setup

    yield module
    module.reset_autotuners()


def _tuners(fla_interpreter):
    return {s: fla_interpreter._autotuner(k) for s, k in fla_interpreter.autotuned_kernels().items()}


def test_tuning_per_pattern_starts_every_pattern_from_empty_caches(tuning, fla_interpreter):
    tuners = _tuners(fla_interpreter)
    seen = {}

    def stage(pattern):
        def fn():  # what FLA's tuning leaves behind: a cache entry for the key
            seen.setdefault(pattern, {s: dict(t.cache) for s, t in tuners.items()})
            for t in tuners.values():
                t.cache[("BS", pattern)] = t.configs[0]
        return fn

    for t in tuners.values():
        t.cache[("stale",)] = t.configs[0]
    records = tuning.tune_per_pattern({p: {"s1": stage(p), "s2": stage(p)} for p in ("local", "zipf")}, lambda: None)
    assert seen == {"local": dict.fromkeys(tuners, {}), "zipf": dict.fromkeys(tuners, {})}
    assert list(records["zipf"]["dq_core"]["cache"]) == [str(("BS", "zipf"))]  # local's entry was cleared


def test_reset_gives_back_the_whole_space_after_a_pin(tuning, fla_interpreter):
    tuner = _tuners(fla_interpreter)["dkv_core"]
    space = list(tuning.autotune_space(tuner))
    tuning.pin_stage("dkv_core", CFG_B["dkv_core"])
    assert [c.kwargs for c in tuner.configs] == [{"BQ": 2}]
    tuner.cache[("k",)] = tuner.configs[0]
    tuning.reset_autotuners()
    assert tuner.configs == space and not tuner.cache and tuner.best_config is None


def _fns(launcher):
    fns = {}
    for name, pattern in (("local", Pattern("local")), ("zipf", Pattern("zipf", exponent=1.0))):
        inputs = launcher.make_inputs(SHAPE, 3, "cpu")
        staged = launcher.StagedBackward(launcher.make_problem(SHAPE, generate_routing(pattern, SHAPE, 11), inputs))
        inter = staged.run_staged()
        fns[name] = {"dq_core": lambda s=staged, i=inter: s.dq_core(i["lse"], i["delta"]),
                     "dkv_core": lambda s=staged, i=inter: s.dkv_core(i["lse"], i["delta"], i["csr"])}
    return fns


@pytest.mark.interpreter
def test_each_pattern_launches_its_recorded_config_and_a_missing_swap_is_caught(tuning, fla_interpreter):
    fns = _fns(fla_interpreter)
    pins = tuning.PerPatternPins({"local": CFG_A, "zipf": CFG_B})
    dev = FakeDevice()
    order = [["zipf", "local"]]
    run_rounds(fns, order, 0, 1024, device=dev, before_pattern=pins.before,
               on_pattern_done=lambda r, p: pins.after(p))
    assert pins.launches == {"local": 1, "zipf": 1}
    with pytest.raises(GateFailure, match="zipf dq_core launched"):  # no swap: zipf runs under local's config
        run_rounds(fns, [["local", "zipf"]], 0, 1024, device=FakeDevice(),
                   before_pattern=lambda p: pins.before("local"), on_pattern_done=lambda r, p: pins.after(p))


def test_the_swap_happens_before_the_first_flush_outside_the_timed_region():
    dev = FakeDevice()
    fns = {p: {"s": lambda p=p: dev.log.append(f"call {p}")} for p in ("a", "b")}
    run_rounds(fns, [["b", "a"]], 0, 1024, device=dev, before_pattern=lambda p: dev.log.append(f"pin {p}"))
    assert dev.log == ["pin b", "flush", "spin", "start", "call b", "end", "sync",
                       "pin a", "flush", "spin", "start", "call a", "end", "sync"]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--tune-on", "nope"], "--tune-on"),
    (["--tune", "per-pattern", "--autotune-from", "results/raw/e1_h100.json"], "--autotune-from"),
    (["--autotune-from", "results/raw/missing.json"], "--autotune-from"),
    (["--resume", "--tune", "per-pattern"], "--resume"),
])
def test_a_bench_arm_that_cannot_run_is_refused_in_one_line(args, fragment, tmp_path):
    proc = run_cli("bench", "--output", str(tmp_path / "r.json"), *args)
    assert_one_line_error(proc, fragment)
    assert not (tmp_path / "r.json").exists()
