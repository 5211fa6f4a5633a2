"""The one Stage table: every timed work unit of FLA's NSA backward, in data-flow order.

Everything that names a stage (bench, profiler, ncu, validate, report, figure) reads this table.
The FLA objects are named by string (attributes of ``fla.ops.nsa.parallel``) and resolved in the
gpu tier (:mod:`nsa_exp.gpu.launcher`), so this module stays importable without torch.

>>> STAGE_NAMES
('selection_fwd', 'delta_preprocess', 'csr', 'dq_core', 'dkv_core', 'wrapper_extra', 'full_bwd')
>>> LEGACY_STAGE_NAMES[-1], OPTIONAL_STAGES
('full_bwd', ('wrapper_extra',))
>>> BACKWARD_STAGES
('delta_preprocess', 'csr', 'dq_core', 'dkv_core')
>>> stage("dkv_core").autotuned_kernel
'parallel_nsa_bwd_kernel_dkv'
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError

FLA_MODULE = "fla.ops.nsa.parallel"


@dataclass(frozen=True)
class Stage:
    """One timed stage: ``fla_callable`` / ``autotuned_kernel`` are attributes of :data:`FLA_MODULE`."""

    name: str
    title: str                   # table row title (RESULTS.md)
    panel_title: str | None      # figure panel title; None: not plotted
    backward: bool               # part of the stage-sum that ``full_bwd`` runs in one call
    fla_callable: str            # the FLA function or @triton.jit kernel the stage launches
    autotuned_kernel: str | None  # the autotuned kernel whose config bench records/pins, if any


STAGES: tuple[Stage, ...] = (
    Stage("selection_fwd", "selection fwd", None, False, "parallel_nsa_fwd", "parallel_nsa_fwd_kernel"),
    Stage("delta_preprocess", "delta preprocess", None, True, "parallel_attn_bwd_preprocess", None),
    Stage("csr", "CSR", "CSR transpose", True, "prepare_block_csr", None),
    Stage("dq_core", "dQ core", "dQ core", True, "parallel_nsa_bwd_kernel_dq", "parallel_nsa_bwd_kernel_dq"),
    Stage("dkv_core", "dK/dV core", "fused dK/dV core", True, "parallel_nsa_bwd_kernel_dkv",
          "parallel_nsa_bwd_kernel_dkv"),
    # What parallel_nsa_bwd does beyond the staged kernels (issue 14): its three torch.empty gradient buffers
    # and its two reductions dq.sum(0), dk.sum(0) over the NV dim; fla_callable names the wrapper it comes from.
    Stage("wrapper_extra", "wrapper extra (allocs + sums)", None, False, "parallel_nsa_bwd", None),
    Stage("full_bwd", "full bwd (wrapper)", "full backward (official wrapper)", False, "parallel_nsa_bwd", None),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
#: Stages added after results were recorded: a result without them stays valid (and renders without them).
OPTIONAL_STAGES: tuple[str, ...] = ("wrapper_extra",)
#: The stage list of results recorded before :data:`OPTIONAL_STAGES` existed.
LEGACY_STAGE_NAMES: tuple[str, ...] = tuple(n for n in STAGE_NAMES if n not in OPTIONAL_STAGES)
BACKWARD_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.backward)
# Figure panels, in plotting order (dQ first: it is the stage whose work does not depend on fan-in).
PANEL_ORDER = ("dq_core", "csr", "dkv_core", "full_bwd")


def stage(name: str) -> Stage:
    """The :class:`Stage` called ``name`` (UserError naming the choices otherwise)."""
    for s in STAGES:
        if s.name == name:
            return s
    raise UserError(f"unknown stage {name!r}; choose one of {', '.join(STAGE_NAMES)}")
