"""``autotune-matrix``: every autotune config x every routing of FLA's autotuned NSA kernels, timed.

For each stage (default ``dq_core`` and ``dkv_core``): the kernel's autotune space after FLA's own
``early_config_prune`` (:func:`nsa_exp.gpu.tuning.pruned_space`), each config pinned in turn by
restricting the ``triton.Autotuner`` to it (FLA's code untouched). Every config is first launched
once per routing (this compiles it); one that fails to compile or launch (e.g. ``OutOfResources``:
BQ=8 with num_stages=2 needs ~247 KB of shared memory on the H200, above the 227 KB a block may use)
is recorded with its reason and left out of the timing. The rest are timed with the project's own
loop (:func:`nsa_exp.gpu.timing.run_rounds`: CUDA events, L2 flush, spin, every raw observation
kept) where one "pattern" of the loop is one (config, routing) cell, so all cells are interleaved in
a seeded shuffled order each round and the cell's config is pinned before its call, outside the
timed region. FLA's own choice (its autotuner run on each routing, caches reset in between) is
recorded too, so the report can compare the seed's protocol (tuned on ``local``), the config tuned
on each routing, and each routing's best config. Output: schema ``autotune_matrix``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..core.config import Config
from ..core.protocol import LAUNCH_GUARD_CYCLES, round_orders, summarize
from ..core.stages import stage as stage_row
from ..errors import GateFailure, UserError
from ..io.metadata import base_metadata
from ..io.store import OutputPolicy, write_json
from ..routing.config import load_config
from .bench import Progress
from .gates import gate_detail, run_gates
from .telemetry import Telemetry, gpu_identity
from .timing import run_rounds

MATRIX_STAGES = ("selection_fwd", "dq_core", "dkv_core")


def parse_stages(text: str) -> list[str]:
    """``"dq_core,dkv_core"`` -> the list; refuses a stage FLA does not autotune (UserError)."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in MATRIX_STAGES]
    if not names or bad:
        raise UserError(f"--stages: {', '.join(bad) or 'empty'}; choose among {', '.join(MATRIX_STAGES)}")
    return names


def cell_key(index: int, pattern: str) -> str:
    """The loop's "pattern" name of one (config index, routing) cell.

    >>> cell_key(3, "sink-heavy")
    '3|sink-heavy'
    """
    return f"{index}|{pattern}"


def _failure(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def _stage_call(staged: Any, inter: dict[str, Any], stage: str) -> Any:
    calls = {"selection_fwd": lambda: staged.selection_fwd(),
             "dq_core": lambda: staged.dq_core(inter["lse"], inter["delta"]),
             "dkv_core": lambda: staged.dkv_core(inter["lse"], inter["delta"], inter["csr"])}
    return calls[stage]


def stage_matrix(stage: str, calls: dict[str, Callable[[], Any]], params: Any, rounds: int, warmup: int,
                 config: Config, synchronize: Callable[[], None], device: Any = None,
                 on_cell_done: Callable[[], Any] | None = None) -> dict[str, Any]:
    """One stage's matrix: every config of its pruned autotune space pinned in turn and launched once
    per routing (``calls[routing]``; a config that raises is recorded ``failed`` with its reason), then
    every ok (config, routing) cell timed by :func:`run_rounds` over ``device`` (default CUDA), cells
    interleaved per round, each cell's config pinned before its call and checked after it
    (:class:`GateFailure` if the kernel launched another). Returns the stage's document part."""
    from .tuning import launched_configs, pin_stage, pruned_space  # noqa: PLC0415 - FLA after the env gate

    names = list(calls)
    kept, pruned = pruned_space(stage, params)
    cells: list[dict[str, Any]] = []
    for cfg in kept:
        pin_stage(stage, cfg)
        t0 = time.monotonic()
        try:
            for n in names:
                calls[n]()
            synchronize()
            cells.append({"config": cfg, "status": "ok", "compile_seconds": time.monotonic() - t0})
        except Exception as exc:  # noqa: BLE001 - a config that does not compile/launch is a result, not a crash
            cells.append({"config": cfg, "status": "failed", "reason": _failure(exc),
                          "compile_seconds": time.monotonic() - t0})
    ok = [i for i, c in enumerate(cells) if c["status"] == "ok"]
    fns = {cell_key(i, n): {stage: calls[n]} for i in ok for n in names}
    orders = round_orders(list(fns), warmup + rounds, config.timing.order, config.seeds.order)

    def before(key: str) -> None:
        pin_stage(stage, cells[int(key.split("|")[0])]["config"])

    def after(r: int, key: str) -> Any:
        want = cells[int(key.split("|")[0])]["config"]
        if launched_configs()[stage] != want:
            raise GateFailure(f"autotune-matrix: {stage} cell {key} launched {launched_configs()[stage]}, not {want}")
        return on_cell_done() if on_cell_done else None

    records = run_rounds(fns, orders, warmup, config.timing.l2_flush_bytes, flush_policy=config.timing.flush,
                         before_pattern=before,
                         on_pattern_done=after, progress=Progress(f"matrix {stage}", warmup), device=device)
    for i in ok:
        cells[i]["patterns"] = {}
        for n in names:
            mine = [r for r in records if r["pattern"] == cell_key(i, n)]
            raw = [r["ms"][stage] for r in mine if not r["warmup"]]
            cells[i]["patterns"][n] = {"raw_ms": raw, "warmup_ms": [r["ms"][stage] for r in mine if r["warmup"]],
                                       "rounds": [r["round"] for r in mine if not r["warmup"]], **summarize(raw)}
    return {"kernel": stage_row(stage).autotuned_kernel, "autotune_key": ["BS", "BK", "BV", "G"],
            "space_size": len(kept) + len(pruned), "pruned_by_fla": pruned, "cells": cells, "round_orders": orders}


def run_matrix(config: Config, allow_gpu: bool, output: str | Path, stages: list[str], rounds: int,
               warmup: int) -> dict[str, Any]:
    """The whole matrix; returns the document (schema ``autotune_matrix``, already written)."""
    t_start = time.monotonic()
    gates, routings = run_gates(config, allow_gpu=allow_gpu, strict=True)  # env first, before FLA is imported
    from .launcher import StagedBackward, make_inputs, make_problem  # noqa: PLC0415 - FLA after the env gate
    from .tuning import launched_configs, reset_autotuners  # noqa: PLC0415

    names = [p.name for p in config.patterns]
    inputs = make_inputs(config.shape, config.seeds.inputs, "cuda")
    staged = {n: StagedBackward(make_problem(config.shape, routings[n], inputs)) for n in names}
    inter = {n: staged[n].run_staged() for n in names}
    calls = {st: {n: _stage_call(staged[n], inter[n], st) for n in names} for st in stages}
    torch.cuda.synchronize()

    fla_choice: dict[str, dict[str, Any]] = {st: {} for st in stages}  # FLA's autotuner on each routing
    for n in names:
        reset_autotuners()
        for st in stages:
            calls[st][n]()
        torch.cuda.synchronize()
        for st, cfg in launched_configs().items():
            if st in stages:
                fla_choice[st][n] = cfg

    telemetry = Telemetry()
    params = next(iter(staged.values())).params
    out_stages = {st: {**stage_matrix(st, calls[st], params, rounds, warmup, config, torch.cuda.synchronize,
                                      on_cell_done=telemetry.sample), "fla_choice": fla_choice[st]}
                  for st in stages}

    metadata = base_metadata()
    metadata["gpu"] = gpu_identity(telemetry.device_info())
    doc = {"schema_version": "1.0", "kind": "autotune_matrix", "name": Path(output).stem, "config": config.raw,
           "shape": config.shape.to_dict(), "patterns": names, "tuned_on_seed": "local",
           "timing": {"warmup_rounds": warmup, "rounds": rounds, "l2_flush_bytes": config.timing.l2_flush_bytes,
                      "launch_guard_cycles": LAUNCH_GUARD_CYCLES, "order_mode": config.timing.order,
                      "order_seed": config.seeds.order},
           "fla_commit": gate_detail(gates, "fla_sources")["commit"], "gates": gates, "stages": out_stages,
           "metadata": metadata, "wall_seconds": time.monotonic() - t_start}
    write_json(output, doc, "autotune_matrix")
    return doc


def command(args: argparse.Namespace) -> int:
    """``python -m nsa_exp autotune-matrix``: validate the options, run, print the best config per routing."""
    config = load_config(args.config)
    stages = parse_stages(args.stages)
    if args.rounds < 1:
        raise UserError("--rounds: must be a positive integer")
    if args.warmup_rounds < 0:
        raise UserError("--warmup-rounds: must be 0 or more")
    OutputPolicy((("--config", args.config),)).claim(args.output, named=True)
    doc = run_matrix(config, args.allow_gpu, args.output, stages, args.rounds, args.warmup_rounds)
    for st, s in doc["stages"].items():
        failed = [c for c in s["cells"] if c["status"] == "failed"]
        print(f"{st}: {len(s['cells'])} configs ({len(failed)} failed), FLA's choice per routing {s['fla_choice']}")
    print(f"wrote {args.output}")
    return 0
