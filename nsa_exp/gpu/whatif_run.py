"""``python -m nsa_exp whatif``: WHAT-IF ARMS (not the experiment's measurement) timed beside the original
dK/dV launch with the project's protocol, FLA's kernels unmodified (:mod:`.whatif`).

Per pattern: gates; one forward + preprocess (lse, delta); the official wrapper's dK/dV; each arm
(max fan-in F x layout) checked against it within the rel-L2 gate, not bitwise (:func:`.whatif.equivalence_gate`,
which records n_different and max_ulp); then
the engine's one loop (:mod:`.engine`; this module is its what-if arm) interleaves ``baseline`` (csr +
dkv_core of the original launch) and every arm (csr + dkv_core of the B' launch + the reduction) in
shuffled rounds, every raw ms kept. The
patterns run one after another so only one pattern's B' copies are resident (B' x 1.3 GB of q/dO at
T=32768). Autotune configs are pinned to the benchmark result's, so the arms run the calibrated config.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..checking import whatif_result
from ..checking.whatif_result import arm_name
from ..core.measurement import RoundPlan
from ..core.protocol import WHATIF_BASELINE_STAGES, summarize
from ..core.requests import WhatIfRequest
from ..errors import UserError
from ..io.store import load_document
from ..model.split import check_whatif_memory
from .engine import Arm, Cells, Run, measure


class WhatIfArm(Arm[dict[str, Any]]):
    """The what-if hooks: the bench's configs pinned, then one group of cells per pattern (its baseline and
    every proven-equal arm), built when reached and freed after it is timed."""

    schema = "whatif_result"

    def __init__(self, patterns: list[str], max_fanins: list[int], layouts: list[str], rounds: int,
                 benchmark_result: str):
        self.patterns, self.max_fanins, self.layouts, self.rounds = patterns, max_fanins, layouts, rounds
        self.benchmark_result = benchmark_result
        self.out_patterns: dict[str, Any] = {}

    def gates(self, run: Run) -> None:
        self.bench = load_document(self.benchmark_result, ("bench_result",),
                                   f"--benchmark-result {self.benchmark_result}")
        super().gates(run)  # env first, before FLA is imported
        missing = [p for p in self.patterns if p not in run.routings]
        if missing:
            raise UserError(f"--patterns: {missing} not in {run.config.source}'s patterns {sorted(run.routings)}")

    def inputs(self, run: Run) -> None:
        # Deferred on purpose: FLA/triton may only be imported once the env gate has passed.
        from .launcher import make_inputs, pin_autotune_configs  # noqa: PLC0415

        free = run.device.mem_get_info()[0]  # the arms' B' copies estimated before anything is allocated
        check_whatif_memory(run.config.shape, {p: run.routings[p] for p in self.patterns}, self.max_fanins,
                            self.layouts, free, f"the {free / 2**30:.1f} GiB free on this GPU")
        pin_autotune_configs({k: v["best_config"] for k, v in self.bench["autotune"]["kernels"].items()})
        run.inputs = make_inputs(run.config.shape, run.config.seeds.inputs, run.device.tensor_device)

    def cells(self, run: Run) -> Iterator[Cells]:
        from .launcher import StagedBackward, make_problem  # noqa: PLC0415 - FLA after the env gate
        from .whatif import SplitArm, emulated_edges, equivalence_gate  # noqa: PLC0415

        config = run.config
        for pattern in self.patterns:
            staged = StagedBackward(make_problem(config.shape, run.routings[pattern], run.inputs))
            o, lse = staged.selection_fwd()
            delta = staged.delta_preprocess(o)
            _, dk_off, dv_off = staged.full_bwd(o, lse)
            fns = {"baseline": staged.stage_callables({"lse": lse, "delta": delta}, WHATIF_BASELINE_STAGES)}
            arms: dict[str, Any] = {}
            for F in self.max_fanins:
                for layout in self.layouts:
                    name = arm_name(layout, F)
                    arm = SplitArm(staged, lse, delta, F, layout)
                    kept = emulated_edges(arm.staged.p.block_indices.cpu().numpy())
                    if kept != emulated_edges(run.routings[pattern]):  # pragma: no cover - pinned by tests
                        raise UserError(f"what-if arm {name}: the split lost edges")
                    equiv = arm.compare_to_official(dk_off, dv_off)
                    equivalence_gate(f"{pattern} {name}", equiv, config.tolerances.full_shape_dkv_rel_l2)
                    fns[name] = arm.stage_callables()
                    arms[name] = {"label": "what-if arm (not the experiment's measurement)", "layout": layout,
                                  "max_fanin": F, "batches": arm.batches, "equivalence": equiv}
            run.device.synchronize()
            # What-if rounds have always swept with the write flush (the loop's default), whatever timing.flush says;
            # --rounds of them, every one timed.
            plan = RoundPlan.of(list(fns), config, repetitions=self.rounds, flush="write", stop=False)
            yield Cells(fns, plan, tag=(pattern, arms))
            del fns, staged, arm, o, lse, delta, dk_off, dv_off
            run.device.empty_cache()

    def timed(self, run: Run, cells: Cells) -> None:
        pattern, arms = cells.tag
        records = cells.measured.records
        timed = [r for r in records if not r["warmup"]]
        for name, stage_fns in cells.fns.items():
            stages = {s: [r["ms"][s] for r in timed if r["pattern"] == name] for s in stage_fns}
            total = [sum(r["ms"].values()) for r in timed if r["pattern"] == name]
            entry = arms.setdefault(name, {"label": "baseline: FLA's original launch", "batches": 1})
            entry["stages"] = {s: {"raw_ms": v, **summarize(v)} for s, v in stages.items()}
            entry["total"] = {"raw_ms": total, **summarize(total)}
        base = arms["baseline"]["total"]["median_ms"]
        for entry in arms.values():
            entry["saved_ms"] = base - entry["total"]["median_ms"]
        self.out_patterns[pattern] = {"arms": arms, "records": records}
        cells.fns = {}  # the B' copies go with the group (the generator frees its own references)

    def record(self, run: Run) -> dict[str, Any]:
        from .launcher import autotune_record  # noqa: PLC0415 - FLA after the env gate

        return whatif_result.build(config=run.config, benchmark_result=self.benchmark_result, gates=run.gates,
                                   autotune=autotune_record(), rounds=self.rounds, patterns=self.out_patterns,
                                   wall_seconds=run.elapsed(), metadata=run.metadata())


def run_whatif(request: WhatIfRequest, device: Any = None) -> dict[str, Any]:
    """Measure the arms of ``request`` (:class:`~nsa_exp.core.requests.WhatIfRequest`); write the ``whatif_result``
    document to ``request.output`` and return it. ``device`` (default CUDA) is injectable (:mod:`.engine`)."""
    arm = WhatIfArm(list(request.patterns), list(request.max_fanins), list(request.layouts), request.rounds,
                    request.benchmark_result)
    return measure(arm, Run(request.config, request.allow_gpu, request.output, device=device))
