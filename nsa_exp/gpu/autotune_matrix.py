"""``autotune-matrix``: every autotune config x every routing of FLA's autotuned NSA kernels, timed.

For each stage (default ``dq_core`` and ``dkv_core``): the kernel's autotune space after FLA's own
``early_config_prune`` (:func:`nsa_exp.gpu.tuning.pruned_space`), each config pinned in turn by
restricting the ``triton.Autotuner`` to it (FLA's code untouched). Every config is first launched
once per routing (this compiles it); one that fails to compile or launch (e.g. ``OutOfResources``:
BQ=8 with num_stages=2 needs ~247 KB of shared memory on the H200, above the 227 KB a block may use)
is recorded with its reason and left out of the timing. The rest are timed with the project's own
loop (the engine's, :mod:`nsa_exp.gpu.engine`, of which this module is an arm: CUDA events, L2 flush,
spin, every raw observation kept) where one cell of the loop is one (config, routing) pair, so all cells
are interleaved in a seeded shuffled order each round and the cell's config is pinned before its call,
outside the timed region. FLA's own choice (its autotuner run on each routing, caches reset in between) is
recorded too, so the report can compare the seed's protocol (tuned on ``local``), the config tuned
on each routing, and each routing's best config. Output: schema ``autotune_matrix``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..checking import autotune_matrix
from ..checking.autotune_matrix import cell_key
from ..core.config import Config
from ..core.measurement import RoundPlan
from ..core.protocol import summarize
from ..core.stages import BACKWARD_AUTOTUNE_KEY
from ..core.stages import stage as stage_row
from ..errors import GateFailure
from .engine import Arm, Cells, Run, measure, time_cells
from .gates import gate_detail


def _failure(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def matrix_cells(stage: str, calls: dict[str, Callable[[], Any]], params: Any, rounds: int, warmup: int,
                 config: Config, synchronize: Callable[[], None], telemetry: bool = False) -> Cells:
    """One stage's group of cells: every config of its pruned autotune space pinned in turn and launched
    once per routing (``calls[routing]``; a config that raises is recorded ``failed`` with its reason), then
    one cell per ok (config, routing), its config pinned before its call and checked after it
    (:class:`GateFailure` if the kernel launched another). ``tag`` holds the stage, the configs' records and
    FLA's pruning; :func:`stage_document` turns the timed group into the stage's document part."""
    from .tuning import launched_configs, pin_stage, pruned_space  # noqa: PLC0415 - FLA after the env gate

    names = list(calls)
    kept, pruned = pruned_space(stage, params)
    configs: list[dict[str, Any]] = []
    for cfg in kept:
        pin_stage(stage, cfg)
        t0 = time.monotonic()
        try:
            for n in names:
                calls[n]()
            synchronize()
            configs.append({"config": cfg, "status": "ok", "compile_seconds": time.monotonic() - t0})
        except Exception as exc:  # noqa: BLE001 - a config that does not compile/launch is a result, not a crash
            configs.append({"config": cfg, "status": "failed", "reason": _failure(exc),
                            "compile_seconds": time.monotonic() - t0})
    ok = [i for i, c in enumerate(configs) if c["status"] == "ok"]
    fns = {cell_key(i, n): {stage: calls[n]} for i in ok for n in names}
    # the matrix's own --rounds / --warmup-rounds; every round timed (no stop rule)
    plan = replace(RoundPlan.of(list(fns), config, repetitions=rounds, stop=False), warmup=warmup)

    def before(key: str) -> None:
        pin_stage(stage, configs[int(key.split("|")[0])]["config"])

    def after(key: str) -> None:
        want = configs[int(key.split("|")[0])]["config"]
        if launched_configs()[stage] != want:
            raise GateFailure(f"autotune-matrix: {stage} cell {key} launched {launched_configs()[stage]}, not {want}")

    return Cells(fns, plan, telemetry=telemetry,
                 before_cell=before, after_cell=after, label=f"matrix {stage}",
                 tag={"stage": stage, "names": names, "ok": ok, "configs": configs, "kept": kept, "pruned": pruned})


def stage_document(cells: Cells) -> dict[str, Any]:
    """The stage's part of the ``autotune_matrix`` document from its timed group (:func:`matrix_cells`)."""
    tag, records, stage = cells.tag, cells.measured.records, cells.tag["stage"]
    configs = tag["configs"]
    for i in tag["ok"]:
        configs[i]["patterns"] = {}
        for n in tag["names"]:
            mine = [r for r in records if r["pattern"] == cell_key(i, n)]
            raw = [r["ms"][stage] for r in mine if not r["warmup"]]
            configs[i]["patterns"][n] = {"raw_ms": raw, "warmup_ms": [r["ms"][stage] for r in mine if r["warmup"]],
                                         "rounds": [r["round"] for r in mine if not r["warmup"]], **summarize(raw)}
    return {"kernel": stage_row(stage).autotuned_kernel, "autotune_key": list(BACKWARD_AUTOTUNE_KEY),
            "space_size": len(tag["kept"]) + len(tag["pruned"]), "pruned_by_fla": tag["pruned"], "cells": configs,
            "round_orders": cells.measured.orders}


def stage_matrix(stage: str, calls: dict[str, Callable[[], Any]], params: Any, rounds: int, warmup: int,
                 config: Config, synchronize: Callable[[], None], device: Any = None,
                 on_cell_done: Callable[[], Any] | None = None) -> dict[str, Any]:
    """One stage's matrix on its own (:func:`matrix_cells` timed by the engine's loop over ``device``,
    default CUDA; ``on_cell_done()`` sampled after each cell); returns the stage's document part."""
    cells = matrix_cells(stage, calls, params, rounds, warmup, config, synchronize, telemetry=on_cell_done is not None)
    return stage_document(time_cells(cells, device, SimpleNamespace(sample=on_cell_done)))


class MatrixArm(Arm[dict[str, Any]]):
    """The matrix's hooks: every routing's intermediates once, FLA's own choice per routing (autotuners reset
    in between), then one group of cells per stage."""

    prefetch_inputs = True
    schema = "autotune_matrix"
    packed = False  # as before packing existed: the matrix times the dense launch

    def __init__(self, stages: list[str], rounds: int, warmup: int):
        self.stages, self.rounds, self.warmup = stages, rounds, warmup
        self.out_stages: dict[str, Any] = {}

    def inputs(self, run: Run) -> None:
        super().inputs(run)
        inter = {n: run.staged[n].run_staged() for n in run.names}
        self.calls = {st: {n: run.staged[n].stage_callables(inter[n], (st,))[st] for n in run.names}
                      for st in self.stages}
        run.device.synchronize()

    def tune(self, run: Run) -> None:
        """FLA's autotuner on each routing, from a reset: what FLA itself would pick there."""
        from .tuning import launched_configs, reset_autotuners  # noqa: PLC0415 - FLA after the env gate

        self.fla_choice: dict[str, dict[str, Any]] = {st: {} for st in self.stages}
        for n in run.names:
            reset_autotuners()
            for st in self.stages:
                self.calls[st][n]()
            run.device.synchronize()
            for st, cfg in launched_configs().items():
                if st in self.stages:
                    self.fla_choice[st][n] = cfg

    def cells(self, run: Run) -> Iterator[Cells]:
        params = next(iter(run.staged.values())).params
        for st in self.stages:
            yield matrix_cells(st, self.calls[st], params, self.rounds, self.warmup, run.config,
                               run.device.synchronize, telemetry=True)

    def timed(self, run: Run, cells: Cells) -> None:
        st = cells.tag["stage"]
        self.out_stages[st] = {**stage_document(cells), "fla_choice": self.fla_choice[st]}

    def record(self, run: Run) -> dict[str, Any]:
        return autotune_matrix.build(name=run.output_path().stem, config=run.config, patterns=run.names,
                                     warmup=self.warmup, rounds=self.rounds,
                                     fla_commit=gate_detail(run.gates, "fla_sources")["commit"], gates=run.gates,
                                     stages=self.out_stages, metadata=run.metadata(), wall_seconds=run.elapsed())


def run_matrix(config: Config, allow_gpu: bool, output: str | Path, stages: list[str], rounds: int,
               warmup: int, device: Any = None) -> dict[str, Any]:
    """The whole matrix; returns the document (schema ``autotune_matrix``, already written)."""
    return measure(MatrixArm(stages, rounds, warmup), Run(config, allow_gpu, Path(output), device=device))


def command(args: argparse.Namespace) -> int:
    """``python -m nsa_exp autotune-matrix``: validate the options, run, print the best config per routing."""
    config = args.run_config  # read once by the door (nsa_exp.arguments), which checked the rounds, claimed the output
    stages = args.matrix_stages  # parsed by the door too
    doc = run_matrix(config, args.allow_gpu, args.output, stages, args.rounds, args.warmup_rounds)
    for st, s in doc["stages"].items():
        failed = [c for c in s["cells"] if c["status"] == "failed"]
        print(f"{st}: {len(s['cells'])} configs ({len(failed)} failed), FLA's choice per routing {s['fla_choice']}")
    print(f"wrote {args.output}")
    return 0
