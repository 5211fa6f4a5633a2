"""Measure one sweep point on the GPU: its routing and the baseline ``local``, only the asked stages timed.

Steps per point: gates (env, GPU, triton, FLA sources, routing invariants and equal edges at the
point's T) -> memory check against ``torch.cuda.mem_get_info`` (one-line refusal before allocating)
-> shared seeded inputs (cached per shape within a process) -> autotune configs pinned (from the
sweep's ``autotune_from`` bench result, else from the first point this sweep tuned, stored as
``results/sweeps/<sweep>/_autotune.json``) -> the prerequisites of the asked stages once, untimed
(``selection_fwd`` for ``lse``, ``delta_preprocess`` for ``delta``, ``csr``) -> warm-up + timed
rounds through the engine's one loop (:mod:`nsa_exp.gpu.engine`; this module is its sweep-point arm), the
point's routing and ``local`` interleaved in seeded shuffled order (optionally ended early by the stop rule,
``timing.stop``) -> the ``sweep_point`` document.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from .. import RESULTS_DIR
from ..checking import sweep_autotune, sweep_point
from ..core.config import Shape, bytes_needed
from ..core.kinds import AUTOTUNE_FILE
from ..core.measurement import RoundPlan
from ..core.records import BenchResult, SweepPoint
from ..core.stages import PREPARING_STAGES
from ..errors import GateFailure, UserError
from ..io.config_files import config_from_dict
from ..io.placement import placement_record
from ..io.store import load_document, load_record, write_json
from ..routing.files import file_routings
from ..sweeps.plan import Point
from .engine import Arm, Cells, Run, measure

_INPUTS: dict[tuple[Shape, int], dict[str, torch.Tensor]] = {}
def check_memory(shape: Shape, n_patterns: int, l2_flush_bytes: int, where: str,
                 shared_allocated: bool = False, mem_get_info: Callable[[], tuple[int, int]] | None = None,
                 ) -> dict[str, int]:
    """Refuse (one line, :class:`UserError`) a point whose buffers exceed the GPU's free memory
    (``mem_get_info``, default ``torch.cuda.mem_get_info``: (free, total) bytes), before allocating;
    returns the estimate and the free/total bytes."""
    free, total = (mem_get_info or torch.cuda.mem_get_info)()
    need = bytes_needed(shape, n_patterns, l2_flush_bytes, shared_allocated)
    if need > free:
        raise UserError(f"{where}: T={shape.T} needs ~{need / 2**30:.1f} GiB of GPU memory, only "
                        f"{free / 2**30:.1f} GiB of {total / 2**30:.1f} GiB are free; lower T or free the GPU")
    return {"estimated_bytes": need, "free_bytes_before": int(free), "total_bytes": int(total)}


def focused_callables(staged: Any, stages: tuple[str, ...]) -> tuple[dict[str, Callable[[], None]], list[str]]:
    """Zero-argument callables for the asked ``stages`` only (in Stage-table order), after running
    every stage's inputs once, untimed (:meth:`StagedBackward.run_staged`); returns them and the
    preparing stages (:data:`nsa_exp.core.stages.PREPARING_STAGES`) that are not timed."""
    state = staged.run_staged()
    untimed = [s for s in PREPARING_STAGES if s not in stages]
    return staged.stage_callables(state, stages), untimed


def _pins(point: Point, out_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """The autotune configs to pin, and where they came from (None: tune at this point); both files are read by
    the one strict loader (one line, :class:`UserError`, for one that is not its kind or breaks its schema)."""
    if point.autotune_from:
        bench = load_record(RESULTS_DIR.parent / point.autotune_from, BenchResult,
                            f"sweep {point.sweep}: autotune_from {point.autotune_from}")
        return bench.best_configs(), point.autotune_from
    stored = out_dir / AUTOTUNE_FILE
    if stored.is_file():
        return load_document(stored, ("sweep_autotune",), f"sweep {point.sweep}: {stored}")["best_config"], str(stored)
    return None, "tuned"


class SweepPointArm(Arm[SweepPoint]):
    """A sweep point's hooks: the routing file re-read, the memory check and the process's shared inputs, the
    autotune configs pinned (or tuned once and stored), the asked stages only; the document is written by
    :func:`nsa_exp.sweeps.run.run_point`."""

    def __init__(self, point: Point, out_dir: Path):
        self.point, self.out_dir = point, out_dir

    def gates(self, run: Run) -> None:
        point = self.point
        run.files, run.file_reports = file_routings([point.routing_file] if point.routing_file else [],
                                                    run.config.shape)
        if point.routing_file and run.file_reports[point.routing_name]["sha256"] != point.routing_sha256:
            raise UserError(f"routing file {point.routing_file} changed since the sweep was loaded (sha256 differs)")
        super().gates(run)

    def inputs(self, run: Run) -> None:
        # Deferred on purpose: FLA/triton may only be imported once the env gate has passed.
        from .launcher import StagedBackward, make_inputs, make_problem, pin_autotune_configs  # noqa: PLC0415

        config, names = run.config, run.names
        key = (config.shape, config.seeds.inputs)
        if key not in _INPUTS:
            _INPUTS.clear()
            run.device.empty_cache()
        self.memory = check_memory(config.shape, len(names), config.timing.l2_flush_bytes,
                                   f"sweep point {self.point.point_id}", shared_allocated=key in _INPUTS,
                                   mem_get_info=run.device.mem_get_info)
        if key not in _INPUTS:
            _INPUTS[key] = make_inputs(config.shape, config.seeds.inputs, run.device.tensor_device)
        run.inputs = _INPUTS[key]
        self.pins, self.source = _pins(self.point, self.out_dir)
        if self.pins is not None:
            pin_autotune_configs(self.pins)
        run.staged = {n: StagedBackward(make_problem(config.shape, run.routings[n], run.inputs, config.cu_seqlens))
                      for n in names}

    def tune(self, run: Run) -> None:
        from .launcher import autotune_record  # noqa: PLC0415 - FLA after the env gate

        t_tune = run.clock()
        if self.pins is None:
            # From scratch, as bench does (.tuning.reset_autotuners): FLA keys its autotune cache without T, and a
            # process that ran other points or shapes first would launch what it tuned (or pinned) there.
            from .tuning import reset_autotuners  # noqa: PLC0415 - FLA after the env gate

            reset_autotuners()
            run.staged[run.names[0]].run_staged()  # autotune on local, every kernel once
            run.device.synchronize()
            best = {k: v["best_config"] for k, v in autotune_record().items()}
            write_json(self.out_dir / AUTOTUNE_FILE, sweep_autotune.build(best), "sweep_autotune")
        self.tune_seconds = run.clock() - t_tune

    def cells(self, run: Run) -> Iterator[Cells]:
        fns: dict[str, dict[str, Callable[[], None]]] = {}
        self.untimed: list[str] = []
        for n in run.names:
            fns[n], self.untimed = focused_callables(run.staged[n], self.point.stages)
        run.device.synchronize()
        # Sweep points have always swept with the write flush, whatever the config's timing.flush says (the
        # loop's default; not recorded in the point): kept, so that every point of a sweep stays comparable.
        yield Cells(fns, RoundPlan.of(run.names, run.config, flush="write"))

    def timed(self, run: Run, cells: Cells) -> None:
        from .launcher import autotune_record  # noqa: PLC0415 - FLA after the env gate

        self.measurement = cells.measured
        self.kernels = autotune_record()
        if any(len(k["cache"]) > 1 for k in self.kernels.values()):
            raise GateFailure("autotune: a kernel holds more than one tuned config; the point would mix configs")

    def record(self, run: Run) -> SweepPoint:
        config, names, point, files = run.config, run.names, self.point, run.files

        def host() -> tuple[dict[str, Any], dict[str, Any], float]:
            metadata = run.metadata()
            placement = {**placement_record(), **run.device.placement()}
            run.staged = {}
            return metadata, placement, run.elapsed()

        point_record = {"T": point.T, "pattern": point.pattern, "baseline": names[0]}
        if point.packing_label is not None:
            point_record["packing"] = point.packing_label
        if point.shape is not None:
            point_record["shape"] = dict(point.shape)
        return sweep_point.build(
            config=config, sweep=point.sweep, point_id=point.point_id, point=point_record, stages=point.stages,
            names=names, gates=run.gates, routings=run.routings, files=files, file_reports=run.file_reports,
            measurement=self.measurement, untimed=self.untimed,
            autotune={"source": self.source, "tune_seconds": self.tune_seconds, "kernels": self.kernels},
            memory=self.memory, host=host)


def measure_point(point: Point, allow_gpu: bool, out_dir: Path, device: Any = None) -> dict[str, Any]:
    """The ``sweep_point`` document of ``point`` (not written; :func:`nsa_exp.sweeps.run.run_point` writes it).
    ``device`` (default CUDA) is injectable (:mod:`.engine`)."""
    config = config_from_dict(point.config, source=f"sweep {point.sweep}")
    return measure(SweepPointArm(point, out_dir), Run(config, allow_gpu, device=device))
