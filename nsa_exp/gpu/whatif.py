"""WHAT-IF ARM (not the experiment's measurement): a split / heaviest-first dK/dV schedule run by
FLA's unmodified kernels, timed beside the original launch.

:func:`nsa_exp.model.split.split_routing` turns one routing into B' batches whose CSR rows are the
chunks of the original rows (rows longer than ``max_fanin`` queries cut). :class:`SplitArm`
replicates q, k, v, dO, lse and delta B' times along the batch dimension, builds the CSR with
FLA's ``prepare_block_csr`` and launches ``parallel_nsa_bwd_kernel_dkv`` exactly as
``parallel_nsa_bwd`` would for batch size B' (the staged launcher's ``csr`` / ``dkv_core`` on a
``B = B'`` problem), then reduces ``dK = sum_b dK_b``, ``dV = sum_b dV_b``. It changes the schedule
FLA's kernel sees, never the kernel.

Tolerance: the kernel accumulates each program's dK/dV in fp32 and stores it in the input dtype;
the official path stores each row's full sum once, the arm stores up to B' partial sums of one row
(each rounded to bf16, 2^-8 relative) and adds them in bf16, so each element carries up to B'
extra roundings: the arm must meet the config's ``full_shape_dkv_rel_l2`` (0.01 for e1_h100), the
gate the staged path meets at full shape, and is never bit-exact by construction.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch

from ..core.protocol import WHATIF_BASELINE_STAGES
from ..errors import GateFailure
from ..model.split import split_routing
from .launcher import Problem, StagedBackward
from .numerics import compare


class SplitArm:
    """The B'-batch emulation of one routing's dK/dV under a split schedule (a what-if arm).

    Args:
        base: the original problem's staged launcher (batch size 1).
        lse: fp32 ``[1, T, HQ]`` from the forward; delta: fp32 ``[1, T, HQ]`` from the preprocess.
        max_fanin: F, the longest CSR row kept whole; layout: ``"split"`` or ``"split-heavy-first"``.
    """

    def __init__(self, base: StagedBackward, lse: torch.Tensor, delta: torch.Tensor, max_fanin: int, layout: str):
        p = base.p
        split = split_routing(p.block_indices.cpu().numpy(), p.shape.block_size, max_fanin, layout)
        self.batches, self.layout, self.max_fanin = int(split.shape[0]), layout, max_fanin

        def tile(x: torch.Tensor) -> torch.Tensor:
            return x.expand(self.batches, *x.shape[1:]).contiguous()

        problem = Problem(shape=replace(p.shape, B=self.batches), q=tile(p.q), k=tile(p.k), v=tile(p.v),
                          do=tile(p.do), block_indices=torch.from_numpy(split).to(p.q.device), scale=p.scale)
        self.staged = StagedBackward(problem)
        self.lse, self.delta = tile(lse), tile(delta)
        self.dk: torch.Tensor | None = None
        self.dv: torch.Tensor | None = None

    def reduce(self) -> None:
        """``dK = dk.sum(0).sum(0)`` (NV, then the B' batches), ``dV = dv.sum(0)``, kept ``[1, T, H, *]``."""
        self.dk = self.staged.dk.sum(0).sum(0, keepdim=True)
        self.dv = self.staged.dv.sum(0, keepdim=True)

    def stage_callables(self) -> dict[str, Any]:
        """``csr`` (prepare_block_csr on B'), ``dkv_core`` (the B' launch), ``reduce``: called in that order
        (the two stages bound by :meth:`StagedBackward.stage_callables` over the tiled lse and delta)."""
        return {**self.staged.stage_callables({"lse": self.lse, "delta": self.delta}, WHATIF_BASELINE_STAGES),
                "reduce": self.reduce}

    def compare_to_official(self, official_dk: torch.Tensor, official_dv: torch.Tensor) -> dict[str, Any]:
        """One pass of the arm; ``{"dk": compare(...), "dv": compare(...)}`` against the official gradients."""
        for fn in self.stage_callables().values():
            fn()
        if self.dk is None or self.dv is None:  # set by reduce, the last of them
            raise RuntimeError("the what-if arm's reduce did not run")
        return {"dk": compare(self.dk, official_dk), "dv": compare(self.dv, official_dv)}


def equivalence_gate(label: str, result: dict[str, Any], rel_l2: float) -> None:
    """Raise :class:`GateFailure` unless the arm's dK and dV are within ``rel_l2`` of the official ones."""
    for grad in ("dk", "dv"):
        if not result[grad]["rel_l2"] <= rel_l2:
            raise GateFailure(f"what-if arm {label}: {grad} rel_l2 {result[grad]['rel_l2']:.2e} > {rel_l2} against "
                              "the official wrapper; the emulation does not compute FLA's gradients")


def emulated_edges(block_indices: np.ndarray) -> int:
    """Valid (non -1) entries of a routing: the split must keep the original's."""
    return int((block_indices >= 0).sum())
