"""The sweep driver: grid expansion, one schema-valid file per point, resume, the submitit path, the tidy
table, and the dK/dV-focused stage callables on the real FLA kernels (interpreter)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsa_exp.cli import main
from nsa_exp.core.config import Pattern, Shape
from nsa_exp.core.kinds import AUTOTUNE_FILE, schema_version
from nsa_exp.core.measurement import RoundPlan
from nsa_exp.core.stages import PREPARING_STAGES
from nsa_exp.errors import GateFailure, UserError
from nsa_exp.figures.sweep import _point_cis
from nsa_exp.io.config_files import config_from_dict
from nsa_exp.io.schemas import schema_errors
from nsa_exp.io.store import write_json, write_text_atomic
from nsa_exp.routing.fanin import routing_statistics
from nsa_exp.routing.patterns import generate_routing
from nsa_exp.sweeps.plan import load_sweep, point_done, point_path
from nsa_exp.sweeps.run import run_sweep
from nsa_exp.sweeps.table import sweep_table
from tests.gpu.test_engine_arms import FakeGpu, fake_gpu_gate
from tests.gpu.test_measurement_path import FakeDevice
from tests.helpers import REPO, assert_one_line_error, run_cli

measured_ids: list[str] = []


# The configs the H200 pinned (results/sweeps/sweep_T_h200/T8192-local.json), as FLA's autotune record gives them.
H200_KERNELS = {s: {"kernel": k, "best_config": {"kwargs": kw, "num_warps": w, "num_stages": n}, "cache": {}}
                for s, k, kw, w, n in (("selection_fwd", "parallel_nsa_fwd_kernel", {}, 2, 1),
                                       ("dq_core", "parallel_nsa_bwd_kernel_dq", {}, 4, 1),
                                       ("dkv_core", "parallel_nsa_bwd_kernel_dkv", {"BQ": 1}, 4, 2))}


class FakeTimedGpu(FakeGpu):
    """The engine arms' fake H200 whose events read a clock the stage calls advance (each event record adds
    1 ms), so that a cell's time is its own call's cost."""

    event = FakeDevice.event


def _no_fla_arm():
    from nsa_exp.gpu.engine import Cells  # noqa: PLC0415 - gpu tier (torch)
    from nsa_exp.gpu.sweep_point import SweepPointArm, _pins, check_memory  # noqa: PLC0415

    class NoFlaArm(SweepPointArm):
        """The real sweep-point arm (gates at the point's T, memory check, pins, round orders, record) with
        FLA's launches replaced by calls costing 1 + fan-in max / 100 ms on the fake GPU."""

        def inputs(self, run):
            self.memory = check_memory(run.config.shape, len(run.names), run.config.timing.l2_flush_bytes,
                                       f"sweep point {self.point.point_id}", mem_get_info=run.device.mem_get_info)
            self.pins, self.source = _pins(self.point, self.out_dir)

        def tune(self, run):
            self.tune_seconds = 0.0
            if self.pins is None:
                best = {k: v["best_config"] for k, v in H200_KERNELS.items()}
                write_json(self.out_dir / AUTOTUNE_FILE, {"schema_version": schema_version("sweep_autotune"),
                                                          "kind": "sweep_autotune", "best_config": best},
                           "sweep_autotune")

        def cells(self, run):
            dev, config = run.device, run.config
            self.untimed = [s for s in PREPARING_STAGES if s not in self.point.stages]

            def call(ms):
                def fn():
                    dev.clock += ms
                return fn
            fns = {}
            for n in run.names:
                fanin = routing_statistics(run.routings[n], config.shape.block_size, config.cu_seqlens)["fanin"]
                fns[n] = {s: call(1.0 + fanin["max"] / 100) for s in self.point.stages}
            yield Cells(fns, RoundPlan.of(run.names, config, flush="write"))

        def timed(self, run, cells):
            self.measurement, self.kernels = cells.measured, H200_KERNELS

    return NoFlaArm


def fake_measure(point, allow_gpu, out_dir):
    """A sweep_point document from the real sweep-point arm and engine (every gate, the routing at the point's
    T, the record builder) on the engine arms' fake H200, FLA's launches replaced by calls costing
    1 + fan-in max / 100 ms: a document validate passes, as a GPU run's would."""
    from nsa_exp.gpu import gates  # noqa: PLC0415 - gpu tier (torch)
    from nsa_exp.gpu.engine import Run, measure  # noqa: PLC0415

    measured_ids.append(point.point_id)
    config = config_from_dict(point.config, source=f"sweep {point.sweep}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gates, "gpu_gate", fake_gpu_gate)
        dev = FakeTimedGpu([0.0])  # the host clock is the device's: the wall time covers the latencies it timed
        return measure(_no_fla_arm()(point, Path(out_dir)),
                       Run(config, allow_gpu, device=dev, clock=lambda: dev.clock / 1000))


def _sweep_config(tmp_path: Path, **extra) -> Path:
    raw = {"schema_version": "1.0", "name": "t", "base_config": "configs/e1_h100.json", "lengths": [8192, 16384],
           "stages": ["csr", "dkv_core"], "gpu": {"required_name": "H200"},
           "patterns": [{"name": "local"}, {"name": "zipf", "sweep": {"exponent": [0.0, 2.0]}},
                        {"name": "sink-heavy", "sinks": 4, "sweep": {"heads": [[0], [0, 1]]}}], **extra}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(raw))
    return path


def test_the_grid_is_patterns_times_lengths_each_with_local_as_its_baseline(tmp_path):
    points = load_sweep(_sweep_config(tmp_path))
    assert [p.point_id for p in points[:5]] == ["T8192-local", "T8192-zipf-exponent0", "T8192-zipf-exponent2",
                                                "T8192-sink-heavy-heads0-sinks4", "T8192-sink-heavy-heads0.1-sinks4"]
    assert len(points) == 10 and {p.T for p in points} == {8192, 16384}
    assert all(p.config["shape"]["T"] == p.T for p in points)
    assert [q["name"] for q in points[1].config["patterns"]] == ["local", "zipf"]
    assert [q["name"] for q in points[0].config["patterns"]] == ["local"]


def test_a_bad_point_parameter_is_one_line_naming_the_point(tmp_path):
    bad = _sweep_config(tmp_path, patterns=[{"name": "sink-heavy", "sweep": {"sinks": [4, 16]}}])
    with pytest.raises(UserError, match=r"T8192-sink-heavy-sinks16: .*sinks"):
        load_sweep(bad)
    proc = run_cli("sweep", "--config", str(bad))
    assert_one_line_error(proc, "sinks16")


def test_every_point_is_written_schema_valid_and_the_table_has_one_row_each(tmp_path):
    points = load_sweep(_sweep_config(tmp_path))
    out = tmp_path / "out"
    done = run_sweep(points, out, allow_gpu=True, executor="inline", measure=fake_measure)
    assert done == {"skipped": [], "ran": [p.point_id for p in points], "refused": []}
    for p in points:
        doc = json.loads(point_path(out, p).read_text())
        assert schema_errors(doc, "sweep_point", "$") == []
    frame = sweep_table(out, tmp_path / "t.csv")
    assert len(frame) == len(points) and frame["point_id"].is_unique
    local = frame[frame.family == "local"]
    assert np.allclose(local.ratio_vs_local, 1.0)
    sink = frame[frame.point_id == "T8192-sink-heavy-heads0.1-sinks4"].iloc[0]
    assert sink.ratio_vs_local > 1 and sink.fanin_max > local.fanin_max.iloc[0]
    assert json.loads(sink.params) == {"heads": [0, 1], "sinks": 4}


def test_resume_skips_valid_points_and_reruns_a_broken_one(tmp_path):
    points = load_sweep(_sweep_config(tmp_path))
    out = tmp_path / "out"
    run_sweep(points[:4], out, allow_gpu=True, measure=fake_measure)
    write_text_atomic(point_path(out, points[1]), '{"kind": "sweep_point"}')  # a point killed mid-way / corrupt
    assert not point_done(point_path(out, points[1]))
    measured_ids.clear()
    done = run_sweep(points, out, allow_gpu=True, measure=fake_measure)
    assert done["skipped"] == [points[0].point_id, points[2].point_id, points[3].point_id]
    assert measured_ids == [points[1].point_id, *[p.point_id for p in points[4:]]]


def test_the_submitit_debug_executor_runs_the_points_in_array_jobs(tmp_path):
    points = load_sweep(_sweep_config(tmp_path))[:5]
    out = tmp_path / "out"
    measured_ids.clear()
    done = run_sweep(points, out, allow_gpu=True, executor="debug", measure=fake_measure, points_per_job=2)
    assert done["ran"] == [p.point_id for p in points] and measured_ids == done["ran"]
    assert all(point_done(point_path(out, p)) for p in points)
    assert (tmp_path / "out_submitit").is_dir()  # submitit's job folder next to the points


def test_the_submitit_local_executor_places_one_job_per_visible_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    points = load_sweep(_sweep_config(tmp_path, autotune_from="results/raw/e1_h200_pre.json"))[:5]  # no tuning wave
    out = tmp_path / "out"
    done = run_sweep(points, out, allow_gpu=True, executor="local", measure=fake_measure)
    assert done["ran"] == [p.point_id for p in points]
    where = [json.loads(point_path(out, p).read_text())["placement"] for p in points]
    # each point records the GPU its job was pinned to and the submitit job (one job per GPU: two ids)
    assert [w["cuda_visible_devices"] for w in where] == ["2" if i % 2 == 0 else "5" for i in range(len(points))]
    assert len({w["submitit_job_id"] for w in where}) == 2 and None not in {w["submitit_job_id"] for w in where}


NO_GPU = "gpu: no CUDA GPU is visible to torch; run on an H200 host (check nvidia-smi and CUDA_VISIBLE_DEVICES)"


def refusing_measure(point, allow_gpu, out_dir):
    """The GPU gate's refusal, as a job on a box without a GPU meets it."""
    raise GateFailure(NO_GPU)


def test_a_gate_refused_inside_a_local_job_is_the_sweeps_one_line_refusal(tmp_path, monkeypatch):
    """``sweep --executor local`` on a box without a GPU ended in "internal error FailedJobError" and a page of the
    job's traceback, exit 1 (a new user's finding, 2026-12-06): the job's refusal comes back as its value and the
    sweep raises it, as ``--executor inline`` does."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    points = load_sweep(_sweep_config(tmp_path, autotune_from="results/raw/e1_h200_pre.json"))[:2]
    with pytest.raises(GateFailure) as refused:
        run_sweep(points, tmp_path / "out", allow_gpu=True, executor="local", measure=refusing_measure)
    assert str(refused.value) == NO_GPU


def test_the_committed_h200_sweep_configs_load():
    skew, lengths = load_sweep(REPO / "configs/sweep_skew_h200.json"), load_sweep(REPO / "configs/sweep_T_h200.json")
    assert len(skew) == 25 and {p.T for p in skew} == {32768}
    committed = REPO / "results/sweeps/sweep_skew_h200"  # the fla-topk points were added by resuming: all done
    assert [p.point_id for p in skew if not point_done(point_path(committed, p))] == []
    assert {p.point_id for p in skew if p.pattern["name"] == "fla-topk"} == {
        "T32768-fla-topk-salience0", "T32768-fla-topk-salience2", "T32768-fla-topk-salience8"}
    x2 = load_sweep(REPO / "configs/sweep_x2_h200.json")
    assert len(x2) == 5 and all(p.autotune_from for p in x2)  # pinned: no tuning wave, both GPUs from the start
    assert sorted({p.T for p in lengths}) == [8192, 16384, 32768, 65536, 131072] and len(lengths) == 10
    for p in skew + lengths:
        assert p.config["gpu"]["required_name"] == "H200" and p.stages == ("csr", "dkv_core")


@pytest.mark.interpreter
def test_focused_callables_time_only_the_asked_stages_and_match_the_full_staged_pass(fla_interpreter):
    import torch  # noqa: PLC0415 - torch only in this interpreter test

    from nsa_exp.gpu.sweep_point import focused_callables  # noqa: PLC0415

    launcher = fla_interpreter
    shape = Shape(B=1, T=128, HQ=16, H=1, K=32, V=32, S=4, block_size=32, dtype="float16")
    bi = generate_routing(Pattern("sink-heavy", sinks=2), shape, 3)
    inputs = launcher.make_inputs(shape, 5, "cpu")
    ref = launcher.StagedBackward(launcher.make_problem(shape, bi, inputs))
    o, lse = ref.selection_fwd()
    ref.dkv_core(lse, ref.delta_preprocess(o), ref.csr())
    focused = launcher.StagedBackward(launcher.make_problem(shape, bi, inputs))
    fns, untimed = focused_callables(focused, ("csr", "dkv_core"))
    assert list(fns) == ["csr", "dkv_core"] and untimed == ["selection_fwd", "delta_preprocess"]
    focused.dk.zero_()
    for fn in fns.values():
        fn()
    assert torch.equal(focused.dk, ref.dk) and torch.equal(focused.dv, ref.dv)


def test_a_length_that_does_not_fit_the_free_gpu_memory_is_refused_before_allocating():
    from nsa_exp.gpu.sweep_point import bytes_needed, check_memory  # noqa: PLC0415 - gpu tier (torch)

    shape = Shape(B=1, T=131072, HQ=64, H=4, K=192, V=128, S=16, block_size=64, dtype="bfloat16")
    need = bytes_needed(shape, 2, 2**28)
    assert 15 * 2**30 < need < 32 * 2**30  # q 3.2 GB, dO 2.1 GB; per pattern o 2.1 GB, dq counted as fp32 6.4 GB
    assert check_memory(shape, 2, 2**28, "p", mem_get_info=lambda: (need, 2 * need))["estimated_bytes"] == need
    with pytest.raises(UserError, match=r"^p: T=131072 needs ~.* GiB of GPU memory, only 10.0 GiB of 80.0 GiB"):
        check_memory(shape, 2, 2**28, "p", mem_get_info=lambda: (10 * 2**30, 80 * 2**30))
    assert bytes_needed(shape, 2, 2**28, shared_allocated=True) < need


def test_validate_recomputes_a_sweep_points_statistics_and_routing(tmp_path):
    from nsa_exp.checking.validate import validate_path  # noqa: PLC0415

    point = load_sweep(_sweep_config(tmp_path))[4]  # sink-heavy on heads [0, 1]
    doc = fake_measure(point, True, tmp_path)
    path = tmp_path / f"{doc['point_id']}.json"  # a sweep writes <point_id>.json (point_consistent)
    path.write_text(json.dumps(doc))
    report = validate_path(path)
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    assert {"stats_recompute", "routing_recompute", "pattern_set"} <= {c["name"] for c in report["checks"]}
    doc["patterns"]["sink-heavy"]["stages"]["dkv_core"]["median_ms"] += 1
    doc["patterns"]["sink-heavy"]["fanin"]["max"] += 1
    path.write_text(json.dumps(doc))
    failed = {c["name"] for c in validate_path(path)["checks"] if not c["passed"]}
    assert failed == {"stats_recompute", "routing_recompute"}


def test_sweep_plot_draws_png_and_svg_from_the_table(tmp_path):
    points = load_sweep(_sweep_config(tmp_path))
    run_sweep(points, tmp_path / "out", allow_gpu=True, measure=fake_measure)
    sweep_table(tmp_path / "out", tmp_path / "t.csv")
    assert main(["sweep-plot", "--table", str(tmp_path / "t.csv"), "--out-dir", str(tmp_path / "fig")]) == 0
    assert sorted(p.name for p in (tmp_path / "fig").iterdir()) == ["t_dkv.png", "t_dkv.svg"]
    assert (tmp_path / "fig" / "t_dkv.png").stat().st_size > 10_000


def test_a_shapes_sweep_table_also_draws_the_penalty_map_with_the_point_files_cis(tmp_path):
    """The committed penalty map's table (B, H, G columns) draws ``<sweep>_penalty_map`` besides ``_dkv``; its CIs
    come from the point files beside the table (a table copied without them still draws, without bars)."""
    table = REPO / "results" / "sweeps" / "sweep_penalty_h200.csv"
    assert main(["sweep-plot", "--table", str(table), "--out-dir", str(tmp_path / "fig")]) == 0
    assert sorted(p.name for p in (tmp_path / "fig").iterdir()) == [
        "sweep_penalty_h200_dkv.png", "sweep_penalty_h200_dkv.svg", "sweep_penalty_h200_penalty_map.png",
        "sweep_penalty_h200_penalty_map.svg"]
    ratio, excess = _point_cis(table.parent / "sweep_penalty_h200", "T32768-B8-H4-G16-sink-heavy-sinks4", "sink-heavy")
    row = pd.read_csv(table).set_index("point_id").loc["T32768-B8-H4-G16-sink-heavy-sinks4"]
    assert ratio[0] < row["ratio_vs_local"] < ratio[1] and excess[0] < row["dkv_excess_ms"] < excess[1]
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "t.csv").write_text(table.read_text())
    assert main(["sweep-plot", "--table", str(tmp_path / "alone" / "t.csv"), "--out-dir", str(tmp_path / "f2")]) == 0
    assert (tmp_path / "f2" / "sweep_penalty_h200_penalty_map.png").stat().st_size > 10_000
