"""Issue 11 tuning arms on the CPU: FLA's real autotuners (under the Triton interpreter) are reset
between patterns, and each pattern's timed calls launch exactly the config recorded for it; the
round loop swaps configs outside the timed region. The device is a fake; FLA never is."""

from __future__ import annotations

import pytest
import triton

from nsa_exp.cli import main
from nsa_exp.core.config import Pattern, Shape
from nsa_exp.errors import GateFailure
from nsa_exp.gpu.timing import run_rounds
from nsa_exp.io.config_files import load_config
from nsa_exp.routing.patterns import generate_routing
from tests.gpu.test_measurement_path import FakeDevice
from tests.helpers import PRIMARY_CONFIG

# The smallest shape FLA takes (G = 16, one V tile, M = S = 2): the interpreter runs a stage in ~1 s.
SHAPE = Shape(B=1, T=32, HQ=16, H=1, K=16, V=16, S=2, block_size=16, dtype="float16")
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


@pytest.fixture(scope="module")
def stage_fns(fla_interpreter):
    """dQ and dK/dV calls of two routings at SHAPE, their forward intermediates computed once."""
    fns = {}
    for name, pattern in (("local", Pattern("local")), ("zipf", Pattern("zipf", exponent=1.0))):
        launcher, routing = fla_interpreter, generate_routing(pattern, SHAPE, 11)
        staged = launcher.StagedBackward(launcher.make_problem(SHAPE, routing, launcher.make_inputs(SHAPE, 3, "cpu")))
        inter = staged.run_staged()
        fns[name] = {"dq_core": lambda s=staged, i=inter: s.dq_core(i["lse"], i["delta"]),
                     "dkv_core": lambda s=staged, i=inter: s.dkv_core(i["lse"], i["delta"], i["csr"])}
    return fns


@pytest.mark.interpreter
def test_each_pattern_launches_its_recorded_config_and_a_missing_swap_is_caught(tuning, stage_fns):
    fns = stage_fns
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
def test_a_bench_arm_that_cannot_run_is_refused_in_one_line(args, fragment, tmp_path, capsys):
    assert main(["bench", "--output", str(tmp_path / "r.json"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.interpreter
def test_matrix_times_every_kept_config_records_a_failing_one_and_lists_what_fla_pruned(tuning, stage_fns,
                                                                                         fla_interpreter):
    from nsa_exp.gpu.autotune_matrix import stage_matrix  # noqa: PLC0415 - FLA after the interpreter setup

    tuner = _tuners(fla_interpreter)["dkv_core"]
    space = [triton.Config({"BQ": bq}, num_warps=4, num_stages=1) for bq in (1, 3, 2, 32)]
    tuner._nsa_exp_space = space  # FLA's own prune drops BQ=32 (BQ*G > 256); BQ=3 cannot compile
    try:
        params = fla_interpreter.LaunchParams.for_shape(SHAPE)
        calls = {p: f["dkv_core"] for p, f in stage_fns.items()}
        doc = stage_matrix("dkv_core", calls, params, 2, 1, load_config(PRIMARY_CONFIG), lambda: None,
                           device=FakeDevice())
    finally:
        del tuner._nsa_exp_space
    assert [(c["config"]["kwargs"]["BQ"], c["status"]) for c in doc["cells"]] == [(1, "ok"), (3, "failed"), (2, "ok")]
    assert "power of 2" in doc["cells"][1]["reason"] and "patterns" not in doc["cells"][1]
    assert [c["kwargs"] for c in doc["pruned_by_fla"]] == [{"BQ": 32}] and doc["space_size"] == 4
    assert all(len(o["raw_ms"]) == 2 and o["rounds"] == [1, 2] for c in doc["cells"] if c["status"] == "ok"
               for o in c["patterns"].values())
    assert sorted(k for order in doc["round_orders"] for k in order) == sorted(["0|local", "0|zipf", "2|local",
                                                                               "2|zipf"] * 3)
