"""Measure one sweep point on the GPU: its routing and the baseline ``local``, only the asked stages timed.

Steps per point: gates (env, GPU, triton, FLA sources, routing invariants and equal edges at the
point's T) -> memory check against ``torch.cuda.mem_get_info`` (one-line refusal before allocating)
-> shared seeded inputs (cached per shape within a process) -> autotune configs pinned (from the
sweep's ``autotune_from`` bench result, else from the first point this sweep tuned, stored as
``results/sweeps/<sweep>/_autotune.json``) -> the prerequisites of the asked stages once, untimed
(``selection_fwd`` for ``lse``, ``delta_preprocess`` for ``delta``, ``csr``) -> warm-up + timed
rounds through :func:`nsa_exp.gpu.timing.run_rounds`, the point's routing and ``local`` interleaved
in seeded shuffled order -> the ``sweep_point`` document.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .. import RESULTS_DIR
from ..core.config import Shape, bytes_needed
from ..core.protocol import PERCENTILE_METHOD, TIMING_METHOD, round_orders
from ..core.records import stage_summaries
from ..core.stages import STAGE_NAMES
from ..errors import GateFailure, UserError
from ..io.metadata import base_metadata
from ..io.placement import placement_record
from ..io.store import write_json
from ..routing.config import config_from_dict
from ..routing.fanin import routing_statistics
from ..routing.files import file_routings
from ..routing.packing import packing_record
from ..sweeps.plan import AUTOTUNE_FILE, Point
from .gates import gate_detail, run_gates
from .telemetry import Telemetry, gpu_identity
from .timing import LAUNCH_GUARD_CYCLES, run_rounds

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
    prerequisites that are not timed."""
    state = staged.run_staged()
    untimed = [s for s in ("selection_fwd", "delta_preprocess", "csr") if s not in stages]
    fns = staged.stage_callables(state)
    return {s: fns[s] for s in STAGE_NAMES if s in stages}, untimed


def _pins(point: Point, out_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """The autotune configs to pin, and where they came from (None: tune at this point)."""
    if point.autotune_from:
        doc = json.loads((RESULTS_DIR.parent / point.autotune_from).read_text(encoding="utf-8"))
        return {k: v["best_config"] for k, v in doc["autotune"]["kernels"].items()}, point.autotune_from
    stored = out_dir / AUTOTUNE_FILE
    if stored.is_file():
        return json.loads(stored.read_text(encoding="utf-8"))["best_config"], str(stored)
    return None, "tuned"


def measure_point(point: Point, allow_gpu: bool, out_dir: Path) -> dict[str, Any]:
    """The ``sweep_point`` document of ``point`` (not written; :func:`nsa_exp.sweeps.run.run_point` writes it)."""
    t0 = time.monotonic()
    config = config_from_dict(point.config, source=f"sweep {point.sweep}")
    files, reports = file_routings([point.routing_file] if point.routing_file else [], config.shape)
    if point.routing_file and reports[point.routing_name]["sha256"] != point.routing_sha256:
        raise UserError(f"routing file {point.routing_file} changed since the sweep was loaded (sha256 differs)")
    gates, routings = run_gates(config, allow_gpu=allow_gpu, strict=True, files=files)
    # Deferred on purpose: FLA/triton may only be imported once the env gate above has passed.
    from .launcher import StagedBackward, autotune_record, make_inputs, make_problem, pin_autotune_configs  # noqa: PLC0415

    names = [p.name for p in config.patterns] + list(files)
    key = (config.shape, config.seeds.inputs)
    if key not in _INPUTS:
        _INPUTS.clear()
        torch.cuda.empty_cache()
    memory = check_memory(config.shape, len(names), config.timing.l2_flush_bytes, f"sweep point {point.point_id}",
                          shared_allocated=key in _INPUTS)
    if key not in _INPUTS:
        _INPUTS[key] = make_inputs(config.shape, config.seeds.inputs, "cuda")
    pins, source = _pins(point, out_dir)
    if pins is not None:
        pin_autotune_configs(pins)
    staged = {n: StagedBackward(make_problem(config.shape, routings[n], _INPUTS[key], config.cu_seqlens))
              for n in names}
    t_tune = time.monotonic()
    if pins is None:
        staged[names[0]].run_staged()  # autotune on local, every kernel once
        torch.cuda.synchronize()
        best = {k: v["best_config"] for k, v in autotune_record().items()}
        write_json(out_dir / AUTOTUNE_FILE,
                   {"schema_version": "1.0", "kind": "sweep_autotune", "best_config": best}, "sweep_autotune")
    tune_seconds = time.monotonic() - t_tune
    fns, untimed = {}, []
    for n in names:
        fns[n], untimed = focused_callables(staged[n], point.stages)
    torch.cuda.synchronize()
    warmup, reps = config.timing.warmup_rounds, config.timing.repetitions
    orders = round_orders(names, warmup + reps, config.timing.order, config.seeds.order)
    records = run_rounds(fns, orders, warmup, config.timing.l2_flush_bytes)
    kernels = autotune_record()
    if any(len(k["cache"]) > 1 for k in kernels.values()):
        raise GateFailure("autotune: a kernel holds more than one tuned config; the point would mix configs")
    stats = stage_summaries(records, names, point.stages)
    edges = gate_detail(gates, "equal_edges")
    params = {n: {"name": n} if n in files else config.pattern(n).to_dict() for n in names}
    patterns = {n: {"params": params[n], "edges": int(edges["per_pattern"][n]),
                    **routing_statistics(routings[n], config.shape.block_size, config.cu_seqlens),
                    "stages": stats[n]} for n in names}
    metadata = base_metadata()
    metadata["gpu"] = gpu_identity(Telemetry().device_info())
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    pci = [getattr(props, a, None) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    placement = {**placement_record(), "device_index": torch.cuda.current_device(),
                 **({"pci_bus_id": "{:04x}:{:02x}:{:02x}".format(*pci)} if None not in pci else {})}
    del staged, fns
    point_record = {"T": point.T, "pattern": point.pattern, "baseline": names[0]}
    packed = {} if config.cu_seqlens is None else {"packing": packing_record(config.cu_seqlens, edges["closed_form"])}
    if point.packing_label is not None:
        point_record["packing"] = point.packing_label
    return {**packed,
        "schema_version": "1.0", "kind": "sweep_point", "name": config.name, "sweep": point.sweep,
        "point_id": point.point_id, "point": point_record,
        "config": config.raw, "shape": config.shape.to_dict(), "gates": gates, "edges": edges,
        "autotune": {"source": source, "tune_seconds": tune_seconds, "kernels": kernels},
        "timing": {"method": TIMING_METHOD, "warmup_rounds": warmup, "repetitions": reps,
                   "order_mode": config.timing.order, "order_seed": config.seeds.order, "round_orders": orders,
                   "l2_flush_bytes": config.timing.l2_flush_bytes, "launch_guard_cycles": LAUNCH_GUARD_CYCLES,
                   "percentile_method": PERCENTILE_METHOD, "stages": list(point.stages),
                   "untimed_prerequisites": untimed},
        "patterns": patterns, "memory": memory, "placement": placement, "wall_seconds": time.monotonic() - t0,
        "metadata": metadata, **({"routing_files": reports} if reports else {}),
    }
