"""``smoke``: correctness at small shapes on the GPU before any timing.

1. ``naive``: T=256 (``config.smoke.naive``), routing ``local``: FLA's forward and official backward vs
   ``naive_nsa_selection`` (fp32 autograd on the same inputs) on O, dQ, dK, dV.
2. ``oracle``: T=1024, S=8 (``config.smoke.oracle``, default ``core.config.DEFAULT_ORACLE``), every
   routing of the config: the same comparison at a shape where M = T/block_size > S, so the routings
   select different blocks (at ``naive``'s M = S = 4 all four routings are identical). A gate: any
   routing outside ``naive_rel_l2`` / ``naive_max_abs_rel`` fails smoke. H200 evidence at exactly this
   shape: rel-L2 <= 3.4e-3 for all four routings (``results/studies/h200_method_study_oracle.raw.json``).
3. ``staged``: T=2048 (``config.smoke.staged``), all patterns: our staged launcher vs the official
   ``parallel_nsa_bwd``: dQ bit-exact; dK/dV within ``dkv_rel_l2`` and ``dkv_max_ulp``.

Why dK/dV get a tolerance: ``prepare_block_csr`` places queries within a CSR row by ``tl.atomic_add``,
so their order, and hence the fp32 summation order of the dK/dV accumulators over BQ-query chunks,
can change from run to run. Each output element is the same fp32 sum in another order, rounded once
to bf16: the difference is fp32 reassociation error (~1e-6 relative) that can flip the final bf16
rounding, i.e. at most a few bf16 ULPs on a small fraction of elements, and a relative L2 far below
1e-3. A real launch error (wrong grid, argument, block size) gives O(1) errors.

``smoke`` is the engine's arm that times nothing (:class:`SmokeArm`: gates, then the comparisons as its record).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..analysis.reproduction import judge_naive, judge_staged
from ..checking import smoke_report
from ..core.config import Config, Pattern, Shape
from ..core.families import BASELINE_PATTERN
from ..errors import GateFailure
from ..io.store import write_json
from ..routing.patterns import generate_routing
from .engine import Arm, Run, measure
from .numerics import compare

if TYPE_CHECKING:
    import torch



def naive_comparison(shape: Shape, block_indices: np.ndarray, seed: int, device: str) -> dict[str, Any]:
    """FLA forward + official backward vs ``naive_nsa_selection`` in fp32 autograd."""
    from fla.ops.nsa.naive import naive_nsa_selection  # noqa: PLC0415 - FLA/triton only after the env gate

    from .launcher import StagedBackward, make_inputs, make_problem  # noqa: PLC0415 - FLA/triton only after the env gate

    problem = make_problem(shape, block_indices, make_inputs(shape, seed, device))
    staged = StagedBackward(problem)
    o, lse = staged.selection_fwd()
    dq, dk, dv = staged.full_bwd(o, lse)
    q32, k32, v32 = (t.detach().float().requires_grad_(True) for t in (problem.q, problem.k, problem.v))
    o_ref = naive_nsa_selection(q32, k32, v32, problem.block_indices.long(), block_size=shape.block_size,
                                scale=problem.scale)
    o_ref.backward(problem.do.float())
    return {name: compare(ours.float(), ref.float()) for name, ours, ref in
            (("o", o, o_ref.detach()), ("dq", dq, _grad(q32)), ("dk", dk, _grad(k32)), ("dv", dv, _grad(v32)))}


def _grad(t: torch.Tensor) -> torch.Tensor:
    """The gradient the oracle's backward left on ``t`` (a leaf that requires grad)."""
    if t.grad is None:
        raise RuntimeError("naive_nsa_selection's backward left no gradient")
    return t.grad


def staged_comparison(shape: Shape, block_indices: np.ndarray, seed: int, device: str) -> dict[str, Any]:
    """Staged launcher vs official ``parallel_nsa_bwd`` on the same forward outputs."""
    from .launcher import StagedBackward, make_inputs, make_problem  # noqa: PLC0415 - FLA/triton only after the env gate

    staged = StagedBackward(make_problem(shape, block_indices, make_inputs(shape, seed, device)))
    inter = staged.run_staged()
    official = staged.full_bwd(inter["o"], inter["lse"])
    ours = staged.gradients()
    return {name: compare(a, b) for name, a, b in zip(("dq", "dk", "dv"), ours, official, strict=True)}


def run_smoke_checks(config: Config, device: str) -> dict[str, Any]:
    """Both comparisons; returns the ``checks`` part of the report with ``failures`` listed."""
    tol = config.tolerances
    oracle_shape = config.smoke_oracle
    if oracle_shape is None:  # a loaded config always has one (DEFAULT_ORACLE when it names none)
        raise ValueError(f"config {config.name!r}: no smoke oracle shape")
    local = (config.pattern(BASELINE_PATTERN) if any(p.name == BASELINE_PATTERN for p in config.patterns)
        else Pattern(BASELINE_PATTERN))
    naive_bi = generate_routing(local, config.smoke_naive, config.seeds.routing)
    naive = naive_comparison(config.smoke_naive, naive_bi, config.seeds.inputs, device)
    failures = judge_naive(naive, tol.naive_rel_l2, tol.naive_max_abs_rel)
    oracle = {}
    for pattern in config.patterns:
        bi = generate_routing(pattern, oracle_shape, config.seeds.routing)
        oracle[pattern.name] = naive_comparison(oracle_shape, bi, config.seeds.inputs, device)
        failures += judge_naive(oracle[pattern.name], tol.naive_rel_l2, tol.naive_max_abs_rel,
                                label=f"oracle {pattern.name}")
    staged = {}
    for pattern in config.patterns:
        bi = generate_routing(pattern, config.smoke_staged, config.seeds.routing)
        staged[pattern.name] = staged_comparison(config.smoke_staged, bi, config.seeds.inputs, device)
        failures += judge_staged(pattern.name, staged[pattern.name], tol.dkv_rel_l2, tol.dkv_max_ulp)
    return {
        "naive": {"shape": config.smoke_naive.to_dict(), "pattern": BASELINE_PATTERN, "metrics": naive},
        "oracle": {"shape": oracle_shape.to_dict(), "patterns": oracle},
        "staged_vs_official": {"shape": config.smoke_staged.to_dict(), "patterns": staged},
        "tolerances": {"naive_rel_l2": tol.naive_rel_l2, "naive_max_abs_rel": tol.naive_max_abs_rel,
                       "dkv_rel_l2": tol.dkv_rel_l2, "dkv_max_ulp": tol.dkv_max_ulp},
        "failures": failures,
    }


class SmokeArm(Arm[dict[str, Any]]):
    """smoke's hooks: the gates, no shared inputs, no cells; the record is the comparisons' report, and a
    failing one raises once written."""

    schema = "smoke_report"

    def inputs(self, run: Run) -> None:
        """Each comparison makes its own inputs, at its own shape."""

    def record(self, run: Run) -> dict[str, Any]:
        checks = run_smoke_checks(run.config, run.device.tensor_device)
        return smoke_report.build(config_name=run.config.name, gates=run.gates, checks=checks,
                                  metadata=run.metadata())

    def write(self, run: Run, doc: dict[str, Any]) -> None:
        write_json(run.output_path(), doc, "smoke_report")
        if doc["failures"]:
            raise GateFailure(f"smoke failed (report {run.output}): " + " | ".join(doc["failures"]))


def run_smoke(config: Config, allow_gpu: bool, output: str | Path, device: Any = None) -> dict[str, Any]:
    """Gates, then both comparisons on the GPU; write the report; raise if any comparison failed."""
    return measure(SmokeArm(), Run(config, allow_gpu, Path(output), device=device))
