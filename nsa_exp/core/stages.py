"""The one Stage table: every timed work unit of FLA's NSA backward, in data-flow order, with all its facts.

One declarative row per stage (the idea of FLA's ``benchmarks/ops/registry.py``): what it launches, the
intermediates it consumes and hands on, its launch grid and CUDA's limit on it, the matmul FLOPs of one
edge, what it wraps, its titles, whether it is autotuned, optional or sweepable, and the CUPTI agreement
class it is held to. Everything that names a stage (bench, sweep, profiler, ncu, validate, report,
figures, schemas/) reads this table. The FLA objects are named by string (attributes of
:data:`FLA_MODULE`) and resolved in the gpu tier (:mod:`nsa_exp.gpu.launcher`), so this module stays
importable without torch.

Launch grids, as fla-core 0.5.2 (commit 0a9b9f2) builds them for dense inputs (``cu_seqlens=None``):

* ``selection_fwd``: ``parallel_nsa_fwd`` (``fla/ops/nsa/parallel.py`` l.625):
  ``(TQ, NV_fwd, B*H)`` with ``NV_fwd = cdiv(V, min(C, next_pow2(V)))``, ``C`` = 256 on Hopper and 128
  elsewhere (l.615-620); we take ``C`` = 128, the larger NV.
* ``delta_preprocess``: ``parallel_attn_bwd_preprocess`` (``fla/ops/attn/parallel.py`` l.591):
  ``(B*T*HQ,)``.
* ``csr``: ``prepare_block_csr`` (``fla/ops/utils/csr.py`` l.146-169) launches
  ``prepare_block_csr_kernel`` twice on ``(cdiv(T, BT), B*H)`` with
  ``BT = max(1, min(128, next_pow2(max(1, 2048 // S))))``; its fills and ``cumsum_`` are torch ops.
* ``dq_core``: ``parallel_nsa_bwd_kernel_dq`` (``fla/ops/nsa/parallel.py`` l.685): ``(T, NV, B*H)``.
* ``dkv_core``: ``parallel_nsa_bwd_kernel_dkv`` (``fla/ops/nsa/parallel.py`` l.730-731):
  ``(NV, B*H*M)``, ``M = cdiv(T, block_size)``.

Backward ``NV = cdiv(V, BV)``, ``BV = max(next_pow2(V), 16)`` (``parallel_nsa_bwd``), as in
:class:`nsa_exp.gpu.launcher.LaunchParams`. CUDA limits a launch grid to x <= 2**31 - 1 and y, z <=
65535 (CUDA C Programming Guide, "Features and Technical Specifications"); Triton passes its grid tuple
straight through as (x, y, z). A shape whose grid exceeds a limit fails on the GPU at launch with
"invalid argument" (H200: dK/dV grid (1, 65536) fails, (1, 65472) launches and matches the wrapper;
``results/studies/h200_method_study_flush.raw.json`` key ``grid``), so :func:`check_launch_limits`
refuses it at config load instead.

FLOPs per edge (one (query, KV head, selected block) triple, :mod:`nsa_exp.routing.edges`): the kernels
do these matmuls over the ``G = HQ / H`` query heads sharing the KV head and the ``BS`` keys of the block
(2 FLOPs per multiply-add): ``selection_fwd`` ``S = q k^T``, ``O += P v`` -> ``2 G BS (K + V)``;
``dq_core`` ``S = q k^T``, ``dP = dO v^T``, ``dQ += dS k`` -> ``2 G BS (2K + V)``; ``dkv_core`` ``S = k q^T``,
``dV += P^T dO``, ``dP = v dO^T``, ``dK += dS^T q`` -> ``2 G BS (2K + 2V)``; ``full_bwd`` (the wrapper) =
what it wraps (delta, CSR and the reductions do no matmul). Useful FLOPs with the true head dims: the
kernels pad ``K`` to ``BK = next_pow2(K)`` and dK/dV's gathered query tiles to ``BQ``.

>>> STAGE_NAMES
('selection_fwd', 'delta_preprocess', 'csr', 'dq_core', 'dkv_core', 'wrapper_extra', 'full_bwd')
>>> LEGACY_STAGE_NAMES[-1], OPTIONAL_STAGES
('full_bwd', ('wrapper_extra',))
>>> BACKWARD_STAGES, AUTOTUNED_STAGES
(('delta_preprocess', 'csr', 'dq_core', 'dkv_core'), ('selection_fwd', 'dq_core', 'dkv_core'))
>>> stage("dkv_core").autotuned_kernel, prerequisites("dkv_core")
('parallel_nsa_bwd_kernel_dkv', ('selection_fwd', 'delta_preprocess', 'csr'))
>>> stage_kernels("full_bwd"), stage_kernels("csr")
(('dq_core', 'dkv_core'), ())
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from .config import Shape

FLA_MODULE = "fla.ops.nsa.parallel"
#: CUDA's per-dimension grid limits (x, y, z), in thread blocks (programs).
GRID_LIMITS = (2**31 - 1, 65535, 65535)
AXES = "xyz"


def next_pow2(n: int) -> int:
    """``triton.next_power_of_2`` for ``n >= 1``: ``1 << (n - 1).bit_length()``."""
    return 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _nv_bwd(s: Shape) -> int:
    return cdiv(s.V, max(next_pow2(s.V), 16))


@dataclass(frozen=True)
class Grid:
    """One kernel's launch grid: its label in messages, programs per axis for a shape, each axis' product."""

    label: str
    size: Callable[[Shape], tuple[int, ...]]
    products: tuple[str, ...]


@dataclass(frozen=True)
class Stage:
    """One timed stage; ``fla_callable`` / ``autotuned_kernel`` are attributes of :data:`FLA_MODULE`."""

    name: str
    title: str                    # table row title (RESULTS.md)
    panel_title: str | None       # figure panel title; None: not plotted
    backward: bool                # part of the stage-sum that ``full_bwd`` runs in one call
    fla_callable: str             # the FLA function or @triton.jit kernel the stage launches
    autotuned_kernel: str | None  # the autotuned kernel whose config bench records/pins, if any
    consumes: tuple[str, ...] = ()  # intermediates of this round it reads (o, lse, delta, csr)
    produces: tuple[str, ...] = ()  # intermediates it hands on to later stages
    grid: Grid | None = None      # its own launch grid (None: no kernel of its own, or torch ops only)
    flops: Callable[[Shape], int] | None = None  # matmul FLOPs of one edge (None: no matmul of its own)
    wraps: tuple[str, ...] = ()   # stages whose kernels it launches itself (the official wrapper)
    optional: bool = False        # added after results were recorded: a result without it stays valid
    sweepable: bool = True        # a sweep point may time it
    cupti: str = "tight"          # CUPTI agreement class (nsa_exp.analysis.cupti): "tight" or "loose"
    kernel: str | None = None     # the @triton.jit kernel it launches, by the name CUPTI records (the release arm
    #                               finds this stage's time among the kernels of a parallel_nsa_bwd call by it)
    kernel_span: bool = False     # its time is the span of its kernel's launches (torch ops between them included),
    #                               not the sum of their durations; its range also holds torch ops besides them
    #: the autotuned kernel's configs at the pinned commit ({kwargs, num_warps, num_stages}, FLA's order;
    #: tests/gpu/test_autotune_space.py holds them to FLA's ``@triton.autotune(configs=...)``)
    autotune_space: tuple[dict[str, Any], ...] = ()


def _space(kwargs: dict[str, list[int]], warps: list[int], stages: list[int]) -> tuple[dict[str, Any], ...]:
    """FLA's config list comprehension: every kwarg value x num_warps x num_stages, in that nesting order."""
    combos = [{}] if not kwargs else [{k: v} for k, vs in kwargs.items() for v in vs]
    return tuple({"kwargs": kw, "num_warps": w, "num_stages": n} for kw in combos for w in warps for n in stages)


STAGES: tuple[Stage, ...] = (
    Stage("selection_fwd", "selection fwd", None, False, "parallel_nsa_fwd", "parallel_nsa_fwd_kernel",
          produces=("o", "lse"), kernel="parallel_nsa_fwd_kernel",
          grid=Grid("selection_fwd", lambda s: (s.T, cdiv(s.V, min(128, next_pow2(s.V))), s.B * s.H),
                    ("T", "NV", "B*H")),
          flops=lambda s: 2 * s.group_size * s.block_size * (s.K + s.V),
          autotune_space=_space({}, [1, 2, 4, 8], [1, 2, 3])),
    Stage("delta_preprocess", "delta preprocess", None, True, "parallel_attn_bwd_preprocess", None,
          consumes=("o",), produces=("delta",), kernel="parallel_attn_bwd_kernel_preprocess",
          grid=Grid("delta_preprocess", lambda s: (s.B * s.T * s.HQ,), ("B*T*HQ",))),
    Stage("csr", "CSR", "CSR transpose", True, "prepare_block_csr", None, produces=("csr",),
          grid=Grid("csr (prepare_block_csr_kernel)",
                    lambda s: (cdiv(s.T, max(1, min(128, next_pow2(max(1, 2048 // s.S))))), s.B * s.H),
                    ("cdiv(T, BT)", "B*H")),
          cupti="loose", kernel="prepare_block_csr_kernel", kernel_span=True),
    Stage("dq_core", "dQ core", "dQ core", True, "parallel_nsa_bwd_kernel_dq", "parallel_nsa_bwd_kernel_dq",
          consumes=("lse", "delta"), kernel="parallel_nsa_bwd_kernel_dq",
          grid=Grid("dq_core", lambda s: (s.T, _nv_bwd(s), s.B * s.H), ("T", "NV", "B*H")),
          flops=lambda s: 2 * s.group_size * s.block_size * (2 * s.K + s.V),
          autotune_space=_space({}, [1, 2, 4, 8], [1, 2, 3])),
    Stage("dkv_core", "dK/dV core", "fused dK/dV core", True, "parallel_nsa_bwd_kernel_dkv",
          "parallel_nsa_bwd_kernel_dkv", consumes=("lse", "delta", "csr"), kernel="parallel_nsa_bwd_kernel_dkv",
          grid=Grid("dkv_core", lambda s: (_nv_bwd(s), s.B * s.H * cdiv(s.T, s.block_size)), ("NV", "B*H*M")),
          flops=lambda s: 2 * s.group_size * s.block_size * (2 * s.K + 2 * s.V),
          # FLA prunes BQ * G > 256 (BQ = 1 always kept); at G = 16 every BQ here survives
          autotune_space=_space({"BQ": [1, 2, 4, 8]}, [4, 8], [1, 2])),
    # What parallel_nsa_bwd does beyond the staged kernels (issue 14): its three torch.empty gradient buffers
    # and its two reductions dq.sum(0), dk.sum(0) over the NV dim (of the buffers dq_core/dkv_core filled);
    # fla_callable names the wrapper it comes from.
    Stage("wrapper_extra", "wrapper extra (allocs + sums)", None, False, "parallel_nsa_bwd", None,
          optional=True, sweepable=False, cupti="loose"),
    Stage("full_bwd", "full bwd (wrapper)", "full backward (official wrapper)", False, "parallel_nsa_bwd", None,
          consumes=("o", "lse"), wraps=("dq_core", "dkv_core"), cupti="loose"),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
#: Stages added after results were recorded: a result without them stays valid (and renders without them).
OPTIONAL_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.optional)
#: The stage list of results recorded before :data:`OPTIONAL_STAGES` existed.
LEGACY_STAGE_NAMES: tuple[str, ...] = tuple(n for n in STAGE_NAMES if n not in OPTIONAL_STAGES)
BACKWARD_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.backward)
AUTOTUNED_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.autotuned_kernel)
#: The autotune key of the backward's autotuned kernels (dQ, dK/dV) at the pinned commit: ``@triton.autotune(key=
#: ['BS', 'BK', 'BV', 'G'])`` in fla/ops/nsa/parallel.py; an autotune matrix records it per stage.
BACKWARD_AUTOTUNE_KEY: tuple[str, ...] = ("BS", "BK", "BV", "G")
#: The stages ``autotune-matrix`` times unless ``--stages`` names others: the backward's autotuned kernels.
MATRIX_STAGES: tuple[str, ...] = ("dq_core", "dkv_core")
SWEEPABLE_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.sweepable)
#: Stages whose outputs later stages consume: a focused timing (a sweep point) runs them once, untimed.
PREPARING_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.produces)
LOOSE_CUPTI_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.cupti == "loose")
#: The release arm's calls (nsa_exp.gpu.release): FLA's public API of another release or source tree, as its
#: users call it: the forward, the official wrapper as a whole, ``parallel_nsa`` forward + backward as a
#: training step does. The first two are the Stage rows of the same names (the same public functions).
RELEASE_STAGES: tuple[str, ...] = ("selection_fwd", "full_bwd", "train_step")
#: The release call a release config adds with ``"layer": true`` (issue 32): ``parallel_nsa`` forward + backward
#: with the compression and selection branches and their gates (``g_cmp``, ``g_slc``), as an NSA layer without
#: its sliding-window branch (FLA delegates that branch to flash-attn) runs in a training step.
RELEASE_LAYER_STAGE = "nsa_layer"
#: Every stage list a release result may record: the three calls, or the three and the layer.
RELEASE_STAGE_LISTS: tuple[tuple[str, ...], ...] = (RELEASE_STAGES, (*RELEASE_STAGES, RELEASE_LAYER_STAGE))


def release_stages(raw: dict[str, Any]) -> tuple[str, ...]:
    """The release calls of a release config (its raw JSON, as a result embeds it): the three public calls, and
    :data:`RELEASE_LAYER_STAGE` after them when it says ``"layer": true``.

    >>> release_stages({}), release_stages({"layer": True})[-1]
    (('selection_fwd', 'full_bwd', 'train_step'), 'nsa_layer')
    """
    return RELEASE_STAGE_LISTS[1 if raw.get("layer") is True else 0]


#: The release calls whose profiled kernels are grouped into this table's stages (nsa_exp.analysis.release_kernels).
RELEASE_KERNEL_STAGES: tuple[str, ...] = ("full_bwd", "train_step")
#: Figure panels and README's results block, in that order (dQ first: its work does not depend on fan-in).
PANEL_ORDER = ("dq_core", "csr", "dkv_core", "full_bwd")
TITLES: dict[str, str] = {s.name: s.title for s in STAGES}


def stage(name: str) -> Stage:
    """The :class:`Stage` called ``name`` (UserError naming the choices otherwise)."""
    for s in STAGES:
        if s.name == name:
            return s
    raise UserError(f"unknown stage {name!r}; choose one of {', '.join(STAGE_NAMES)}")


def recorded_stage_lists() -> list[list[str]]:
    """Every stage list a result may record: the table's order, each optional stage present or not (the
    fewest first)."""
    return [[n for n in STAGE_NAMES if n not in OPTIONAL_STAGES or n in chosen]
            for k in range(len(OPTIONAL_STAGES) + 1) for chosen in itertools.combinations(OPTIONAL_STAGES, k)]


def prerequisites(name: str) -> tuple[str, ...]:
    """The stages whose intermediates ``name`` consumes, transitively, in table order."""
    need = set(stage(name).consumes)
    for s in reversed(STAGES):
        if need & set(s.produces):
            need |= set(s.consumes)
    return tuple(s.name for s in STAGES if s.name != name and need & set(s.produces))


def stage_kernels(name: str) -> tuple[str, ...]:
    """The autotuned kernels (by their stage name) a stage launches: its own, or those of what it wraps."""
    s = stage(name)
    if s.wraps:
        return tuple(w for w in s.wraps if stage(w).autotuned_kernel)
    return (name,) if s.autotuned_kernel else ()


def flops_per_edge(name: str, shape: Shape) -> int | None:
    """Matmul FLOPs one edge costs in stage ``name`` (None for a stage without matmuls); see the module doc."""
    s = next((s for s in STAGES if s.name == name), None)
    if s is None:
        return None
    if s.flops is not None:
        return s.flops(shape)
    parts = [flops_per_edge(w, shape) for w in s.wraps]
    return sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None


def launch_grids(shape: Shape) -> dict[str, tuple[int, ...]]:
    """Each kernel's launch grid (programs per axis) for ``shape``; keys name the kernel.

    >>> launch_grids(Shape(1, 16368, 1024, 64, 16, 16, 16, 16, "bfloat16"))["dkv_core"]
    (1, 65472)
    """
    return {s.grid.label: s.grid.size(shape) for s in STAGES if s.grid is not None}


def check_launch_limits(shape: Shape, where: str) -> None:
    """Raise :class:`UserError` (one line: kernel, grid, axis, product, limit) if any grid exceeds CUDA's limits.

    >>> check_launch_limits(Shape(1, 16384, 1024, 64, 16, 16, 16, 16, "bfloat16"), "config.shape")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: config.shape: the dkv_core launch grid (1, 65536) has y = B*H*M = 65536 programs, ...
    """
    for s in STAGES:
        if s.grid is None:
            continue
        grid = s.grid.size(shape)
        for axis, (n, limit) in enumerate(zip(grid, GRID_LIMITS, strict=False)):
            if n > limit:
                raise UserError(f"{where}: the {s.grid.label} launch grid {grid} has {AXES[axis]} = "
                                f"{s.grid.products[axis]} = {n} programs, over CUDA's grid-{AXES[axis]} "
                                f"limit {limit}; lower B, H or T/block_size")
