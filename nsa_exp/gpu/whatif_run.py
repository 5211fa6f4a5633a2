"""``python -m nsa_exp whatif``: WHAT-IF ARMS (not the experiment's measurement) timed beside the original
dK/dV launch with the project's protocol, FLA's kernels unmodified (:mod:`.whatif`).

Per pattern: gates; one forward + preprocess (lse, delta); the official wrapper's dK/dV; each arm
(max fan-in F x layout) proven equal to it (:func:`.whatif.equivalence_gate`); then
:func:`.timing.run_rounds` interleaves ``baseline`` (csr + dkv_core of the original launch) and every
arm (csr + dkv_core of the B' launch + the reduction) in shuffled rounds, every raw ms kept. The
patterns run one after another so only one pattern's B' copies are resident (B' x 1.3 GB of q/dO at
T=32768). Autotune configs are pinned to the benchmark result's, so the arms run the calibrated config.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..core.config import Config
from ..core.kinds import schema_version
from ..core.protocol import round_orders, summarize
from ..errors import UserError
from ..io.metadata import base_metadata
from ..io.store import load_document, write_json
from ..model.split import check_whatif_memory
from .gates import run_gates
from .telemetry import Telemetry, gpu_identity


def arm_name(layout: str, max_fanin: int) -> str:
    """``what-if:split-heavy-first:F=4096``"""
    return f"what-if:{layout}:F={max_fanin}"


def run_whatif(config: Config, allow_gpu: bool, patterns: list[str], max_fanins: list[int], layouts: list[str],
               rounds: int, benchmark_result: str, output: str | Path) -> dict[str, Any]:
    """Measure the arms; write and return the ``whatif_result`` document."""
    t0 = time.monotonic()
    bench = load_document(benchmark_result, ("bench_result",), f"--benchmark-result {benchmark_result}")
    gates, routings = run_gates(config, allow_gpu=allow_gpu, strict=True)  # env first, before FLA is imported
    missing = [p for p in patterns if p not in routings]
    if missing:
        raise UserError(f"--patterns: {missing} not in {config.source}'s patterns {sorted(routings)}")
    # Deferred on purpose: FLA/triton may only be imported once the env gate above has passed.
    import torch  # noqa: PLC0415

    from .launcher import StagedBackward, autotune_record, make_inputs, make_problem, pin_autotune_configs  # noqa: PLC0415
    from .timing import run_rounds  # noqa: PLC0415
    from .whatif import SplitArm, baseline_callables, emulated_edges, equivalence_gate  # noqa: PLC0415

    free = torch.cuda.mem_get_info()[0]  # the arms' B' copies estimated before anything is allocated
    check_whatif_memory(config.shape, {p: routings[p] for p in patterns}, max_fanins, layouts, free,
                        f"the {free / 2**30:.1f} GiB free on this GPU")
    pin_autotune_configs({k: v["best_config"] for k, v in bench["autotune"]["kernels"].items()})
    inputs = make_inputs(config.shape, config.seeds.inputs, "cuda")
    warmup, out_patterns = config.timing.warmup_rounds, {}
    for pattern in patterns:
        staged = StagedBackward(make_problem(config.shape, routings[pattern], inputs))
        o, lse = staged.selection_fwd()
        delta = staged.delta_preprocess(o)
        _, dk_off, dv_off = staged.full_bwd(o, lse)
        fns = {"baseline": baseline_callables(staged, lse, delta)}
        arms: dict[str, Any] = {}
        for F in max_fanins:
            for layout in layouts:
                name = arm_name(layout, F)
                arm = SplitArm(staged, lse, delta, F, layout)
                if emulated_edges(arm.staged.p.block_indices.cpu().numpy()) != emulated_edges(routings[pattern]):
                    raise UserError(f"what-if arm {name}: the split lost edges")  # pragma: no cover - pinned by tests
                equiv = arm.compare_to_official(dk_off, dv_off)
                equivalence_gate(f"{pattern} {name}", equiv, config.tolerances.full_shape_dkv_rel_l2)
                fns[name] = arm.stage_callables()
                arms[name] = {"label": "what-if arm (not the experiment's measurement)", "layout": layout,
                              "max_fanin": F, "batches": arm.batches, "equivalence": equiv}
        torch.cuda.synchronize()
        orders = round_orders(list(fns), warmup + rounds, config.timing.order, config.seeds.order)
        records = run_rounds(fns, orders, warmup, config.timing.l2_flush_bytes)
        timed = [r for r in records if not r["warmup"]]
        for name in fns:
            stages = {s: [r["ms"][s] for r in timed if r["pattern"] == name] for s in fns[name]}
            total = [sum(r["ms"].values()) for r in timed if r["pattern"] == name]
            entry = arms.setdefault(name, {"label": "baseline: FLA's original launch", "batches": 1})
            entry["stages"] = {s: {"raw_ms": v, **summarize(v)} for s, v in stages.items()}
            entry["total"] = {"raw_ms": total, **summarize(total)}
        base = arms["baseline"]["total"]["median_ms"]
        for entry in arms.values():
            entry["saved_ms"] = base - entry["total"]["median_ms"]
        out_patterns[pattern] = {"arms": arms, "records": records}
        del fns, staged, arm, o, lse, delta, dk_off, dv_off
        torch.cuda.empty_cache()
    doc = {"schema_version": schema_version("whatif_result"), "kind": "whatif_result",
           "label": "WHAT-IF ARMS: FLA's unmodified kernels on an emulated split/heaviest-first schedule; "
                    "not the experiment's measurement",
           "config": config.raw, "config_path": str(config.source), "benchmark_result": benchmark_result,
           "shape": config.shape.to_dict(), "gates": gates, "autotune": autotune_record(),
           "timing": {"warmup_rounds": warmup, "rounds": rounds, "l2_flush_bytes": config.timing.l2_flush_bytes,
                      "order": config.timing.order},
           "patterns": out_patterns, "wall_seconds": time.monotonic() - t0,
           "metadata": {**base_metadata(), "gpu": gpu_identity(Telemetry().device_info())}}
    write_json(output, doc, "whatif_result")
    return doc
