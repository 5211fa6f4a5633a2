"""Staged launcher: FLA's NSA backward, one callable per work unit, as ``parallel_nsa_bwd`` launches it.

At FLA commit 0a9b9f2, ``fla.ops.nsa.parallel.parallel_nsa_bwd`` does, for dense inputs
(``cu_seqlens=None``)::

    BK = max(next_pow2(K), 16); BV = max(next_pow2(V), 16); NV = cdiv(V, BV); M = cdiv(T, BS)
    delta = parallel_attn_bwd_preprocess(o, do)                                  # stage delta_preprocess
    dq = empty(NV, *q.shape); parallel_nsa_bwd_kernel_dq[(T, NV, B*H)](...)      # stage dq_core
    dq = dq.sum(0)
    dk = empty(NV, *k.shape); dv = empty(v.shape)
    csr_indices, csr_offsets = prepare_block_csr(block_indices, block_counts, None, None, M, BS)  # csr
    parallel_nsa_bwd_kernel_dkv[(NV, B*H*M)](...)                                # stage dkv_core
    dk = dk.sum(0)

With ``cu_seqlens`` (packed documents, B = 1) the wrapper is reached from ``ParallelNSAFunction``, whose
forward prepares ``token_indices = prepare_token_indices(cu_seqlens)`` and whose backward passes it on;
``parallel_nsa_bwd`` then prepares ``chunk_indices = prepare_chunk_indices(cu_seqlens, BS)``, takes
``M = cdiv(prepare_lens(cu_seqlens).max().item(), BS)`` and launches dK/dV on ``(NV, len(chunk_indices)*H)``:
program ``(global_block)*H + h``, chunk-major. We prepare the same three once, at construction (untimed;
``full_bwd`` still pays them per call, as the wrapper does), with FLA's own ``prepare_*`` functions.

:class:`StagedBackward` makes exactly those calls with exactly those arguments, but with ``dq``, ``dk`` and ``dv``
allocated once, outside any timed region, so each call can be timed alone. We call FLA's functions and its
``@triton.jit`` kernels, resolved through ``fla.ops.nsa.parallel`` exactly as the wrapper resolves them (so
``parallel_attn_bwd_preprocess`` and ``prepare_block_csr`` are the very objects it calls); we never copy or change
a kernel. ``full_bwd`` is the official wrapper itself. ``tests/gpu/test_launcher_matches_official.py`` records every
kernel launch of both paths through the Triton interpreter and asserts the grids and arguments are identical.
Each stage is a method marked :func:`stage_method` with its Stage-table name, bound by
:meth:`StagedBackward.stage_callables`: the one stage -> callable binding every arm uses. Example (on a GPU,
or on a CPU under ``TRITON_INTERPRET=1`` with float16)::

    staged = StagedBackward(make_problem(shape, block_indices, make_inputs(shape, 1, "cuda")))
    for call in staged.stage_callables().values():   # selection_fwd, ..., wrapper_extra, full_bwd: one round
        call()
    dq, dk, dv = staged.gradients()                   # == parallel_nsa_bwd(...) (dq bit-exact)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import triton
from fla.ops.nsa import parallel as fla_nsa

from ..core import stages
from ..core.config import Shape
from .inputs import Prefetch, random_inputs, to_device
from .numerics import DTYPES

#: The stages one staged pass runs (:meth:`StagedBackward.run_staged`): every backward stage and what it
#: consumes, in table order (the forward, then the backward's own calls; not the wrapper).
STAGED_PASS: tuple[str, ...] = tuple(n for n in stages.STAGE_NAMES if n in stages.BACKWARD_STAGES
                                     or any(n in stages.prerequisites(b) for b in stages.BACKWARD_STAGES))


def stage_method(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a :class:`StagedBackward` method as the launch of the Stage-table row of its name: its parameters
    (after ``self``) must be the row's ``consumes`` in order (``dq_core(self, lse, delta)``; TypeError at
    import otherwise), and :meth:`StagedBackward.stage_callables` stores its return value under the row's
    ``produces`` (one name: the value; several: the tuple, unpacked) or, for a row that hands nothing on,
    under the stage's own name (kept until the next round's call replaces it, as the wrapper's caller keeps its
    gradients). Adding a stage is one Stage row and one marked method. UserError for a name not in the table."""
    row = stages.stage(fn.__name__)
    params = tuple(inspect.signature(fn).parameters)[1:]
    if params != row.consumes:
        raise TypeError(f"StagedBackward.{fn.__name__}{params}: the Stage row consumes {row.consumes}")
    fn.stage_row = row  # type: ignore[attr-defined]  # a function attribute, read back by stage_callables
    return fn


@dataclass
class Problem:
    """Inputs of one NSA selection-attention problem (``block_counts = S``); ``cu_seqlens``: int32
    ``[N+1]`` document boundaries of a packed row (B = 1), None for dense."""

    shape: Shape
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    do: torch.Tensor
    block_indices: torch.Tensor
    scale: float
    cu_seqlens: torch.Tensor | None = None

    @property
    def block_counts(self) -> int:
        return self.shape.S


def make_inputs(shape: Shape, seed: int, device: str | torch.device,
                prefetch: Prefetch | None = None) -> dict[str, torch.Tensor]:
    """Random-normal q, k, v, dO (never zeros; :func:`.inputs.random_inputs`, a seeded CPU generator) on ``device``
    in the shape's dtype; ``prefetch``: the same values already being drawn in the background (the engine starts
    one during the gates), used when it holds this shape and seed."""
    cpu = prefetch.result(shape, seed) if prefetch is not None else None
    return to_device(random_inputs(shape, seed) if cpu is None else cpu, DTYPES[shape.dtype], device)


def make_problem(shape: Shape, block_indices: np.ndarray, inputs: dict[str, torch.Tensor],
                 cu_seqlens: np.ndarray | None = None) -> Problem:
    """Bundle shared random inputs with one routing (moved to the inputs' device as int32) and, when
    packed, its int32 ``cu_seqlens`` (the dtype FLA's ``prepare_cu_seqlens_from_lens`` gives)."""
    device = inputs["q"].device
    bi = torch.from_numpy(np.ascontiguousarray(block_indices, dtype=np.int32)).to(device)
    cu = None if cu_seqlens is None else torch.from_numpy(np.ascontiguousarray(cu_seqlens, dtype=np.int32)).to(device)
    return Problem(shape=shape, block_indices=bi, scale=shape.K ** -0.5, cu_seqlens=cu, **inputs)


@dataclass(frozen=True)
class LaunchParams:
    """Block sizes and grids exactly as ``parallel_nsa_bwd`` derives them."""

    BS: int
    BK: int
    BV: int
    NV: int
    M: int
    G: int
    dq_grid: tuple[int, int, int]
    dkv_grid: tuple[int, int]

    @classmethod
    def for_shape(cls, shape: Shape, varlen: tuple[int, int] | None = None) -> LaunchParams:
        """``varlen``: ``(M, number of chunks)`` of a packed row (``M`` from the longest document)."""
        BK = max(triton.next_power_of_2(shape.K), 16)
        BV = max(triton.next_power_of_2(shape.V), 16)
        NV = triton.cdiv(shape.V, BV)
        M = triton.cdiv(shape.T, shape.block_size) if varlen is None else varlen[0]
        NB = shape.B * shape.H * M if varlen is None else varlen[1] * shape.H
        return cls(BS=shape.block_size, BK=BK, BV=BV, NV=NV, M=M, G=shape.group_size,
                   dq_grid=(shape.T, NV, shape.B * shape.H), dkv_grid=(NV, NB))


class StagedBackward:
    """FLA's NSA forward and backward as separately callable stages over one :class:`Problem`."""

    def __init__(self, problem: Problem):
        self.p = problem
        cu, BS = problem.cu_seqlens, problem.shape.block_size
        self.token_indices = self.chunk_indices = None
        varlen = None
        if cu is not None:  # prepared as ParallelNSAFunction.forward / parallel_nsa_bwd prepare them
            self.token_indices = fla_nsa.prepare_token_indices(cu)
            self.chunk_indices = fla_nsa.prepare_chunk_indices(cu, BS)
            varlen = (triton.cdiv(fla_nsa.prepare_lens(cu).max().item(), BS), self.chunk_indices.shape[0])
        self.params = LaunchParams.for_shape(problem.shape, varlen)
        q, k, v = problem.q, problem.k, problem.v
        NV = self.params.NV
        # Pre-allocated outside any timed region, with the wrapper's shapes and dtypes.
        self.dq = torch.empty(NV, *q.shape, dtype=q.dtype if NV == 1 else torch.float, device=q.device)
        self.dk = torch.empty(NV, *k.shape, dtype=k.dtype if NV == 1 else torch.float, device=q.device)
        self.dv = torch.empty(v.shape, dtype=v.dtype, device=q.device)

    @stage_method
    def selection_fwd(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``parallel_nsa_fwd`` as ``ParallelNSAFunction.forward`` calls it: ``(o, lse)``."""
        p = self.p
        return fla_nsa.parallel_nsa_fwd(q=p.q, k=p.k, v=p.v, block_indices=p.block_indices,
                                        block_counts=p.block_counts, block_size=p.shape.block_size,
                                        scale=p.scale, cu_seqlens_q=p.cu_seqlens, cu_seqlens_k=p.cu_seqlens,
                                        token_indices_q=self.token_indices)

    @stage_method
    def delta_preprocess(self, o: torch.Tensor) -> torch.Tensor:
        """``delta = parallel_attn_bwd_preprocess(o, do)``: fp32 ``[B, T, HQ]``."""
        return fla_nsa.parallel_attn_bwd_preprocess(o, self.p.do)

    @stage_method
    def csr(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``prepare_block_csr`` with the wrapper's arguments: ``(csr_indices, csr_offsets)``."""
        p = self.p
        return fla_nsa.prepare_block_csr(block_indices=p.block_indices, block_counts=p.block_counts,
                                         cu_seqlens=p.cu_seqlens, chunk_indices=self.chunk_indices,
                                         num_blocks=self.params.M, block_size=p.shape.block_size)

    @stage_method
    def dq_core(self, lse: torch.Tensor, delta: torch.Tensor) -> None:
        """``parallel_nsa_bwd_kernel_dq`` on grid ``(T, NV, B*H)`` into the pre-allocated ``dq``."""
        p, s, lp = self.p, self.p.shape, self.params
        fla_nsa.parallel_nsa_bwd_kernel_dq[lp.dq_grid](
            q=p.q, k=p.k, v=p.v, lse=lse, delta=delta, do=p.do, dq=self.dq,
            block_indices=p.block_indices, block_counts=p.block_counts, cu_seqlens=p.cu_seqlens,
            token_indices=self.token_indices,
            scale=p.scale, T=s.T, B=s.B, H=s.H, HQ=s.HQ, G=lp.G, K=s.K, V=s.V, S=s.S,
            BS=lp.BS, BK=lp.BK, BV=lp.BV,
        )

    @stage_method
    def dkv_core(self, lse: torch.Tensor, delta: torch.Tensor, csr: tuple[torch.Tensor, torch.Tensor]) -> None:
        """``parallel_nsa_bwd_kernel_dkv`` on grid ``(NV, B*H*M)`` into the pre-allocated ``dk``/``dv``."""
        p, s, lp = self.p, self.p.shape, self.params
        csr_indices, csr_offsets = csr
        fla_nsa.parallel_nsa_bwd_kernel_dkv[lp.dkv_grid](
            q=p.q, k=p.k, v=p.v, lse=lse, delta=delta, do=p.do, dk=self.dk, dv=self.dv, scale=p.scale,
            csr_indices=csr_indices, csr_offsets=csr_offsets, cu_seqlens=p.cu_seqlens,
            chunk_indices=self.chunk_indices,
            T=s.T, B=s.B, H=s.H, HQ=s.HQ, G=lp.G, K=s.K, V=s.V, TC=lp.M, BS=lp.BS, BK=lp.BK, BV=lp.BV,
        )

    @stage_method
    def full_bwd(self, o: torch.Tensor, lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The official ``parallel_nsa_bwd`` as ``ParallelNSAFunction.backward`` calls it."""
        p = self.p
        return fla_nsa.parallel_nsa_bwd(q=p.q, k=p.k, v=p.v, o=o, lse=lse, do=p.do,
                                        block_indices=p.block_indices, block_counts=p.block_counts,
                                        block_size=p.shape.block_size, scale=p.scale,
                                        cu_seqlens=p.cu_seqlens, token_indices=self.token_indices)

    @stage_method
    def wrapper_extra(self) -> tuple[torch.Tensor, torch.Tensor]:
        """What ``parallel_nsa_bwd`` does beyond the staged calls: allocate its ``dq``/``dk``/``dv`` buffers
        (``torch.empty``, the wrapper's shapes and dtypes) and reduce ``dq.sum(0)``, ``dk.sum(0)`` over the
        NV dim. The sums read the staged buffers (same shapes and dtypes, filled by this round's
        dq_core/dkv_core); returns the reduced ``(dq, dk)``."""
        q, k, v, NV = self.p.q, self.p.k, self.p.v, self.params.NV
        torch.empty(NV, *q.shape, dtype=q.dtype if NV == 1 else torch.float, device=q.device)
        torch.empty(NV, *k.shape, dtype=k.dtype if NV == 1 else torch.float, device=q.device)
        torch.empty(v.shape, dtype=v.dtype, device=q.device)
        return self.dq.sum(0), self.dk.sum(0)

    def gradients(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(dq.sum(0), dk.sum(0), dv)``: the wrapper's post-processing of the staged buffers."""
        return self.dq.sum(0), self.dk.sum(0), self.dv

    def run_staged(self) -> dict[str, Any]:
        """Every stage of :data:`STAGED_PASS` once, in data-flow order; returns the intermediates they hand on
        (``{o, lse, delta, csr}``: every ``produces`` of those rows)."""
        state: dict[str, Any] = {}
        for call in self.stage_callables(state, STAGED_PASS).values():
            call()
        return {k: state[k] for n in STAGED_PASS for k in stages.stage(n).produces}

    def stage_callables(self, state: dict[str, Any] | None = None,
                        names: Iterable[str] | None = None) -> dict[str, Callable[[], Any]]:
        """Zero-argument callables, one per stage of :data:`nsa_exp.core.stages.STAGES` named in ``names``
        (default every row), in Stage-table order, to be called in that order: each is the method of the row's name
        (:func:`stage_method`), reading the row's ``consumes`` from ``state`` (default: a new dict) and storing
        its ``produces`` there, so the next stage consumes this round's fresh intermediates exactly as the
        wrapper does; a ``state`` pre-filled by :meth:`run_staged` (or with ``lse``/``delta``) lets a caller
        time a subset. UserError for a name that is not a stage."""
        state = {} if state is None else state
        wanted = set(stages.STAGE_NAMES) if names is None else {stages.stage(n).name for n in names}
        return {name: self._bind(name, state) for name in stages.STAGE_NAMES if name in wanted}

    def _bind(self, name: str, state: dict[str, Any]) -> Callable[[], Any]:
        method = getattr(self, name)
        row = method.stage_row
        reads, writes = row.consumes, row.produces or (name,)

        def call() -> None:
            out = method(*[state[k] for k in reads])
            if len(writes) == 1:
                state[writes[0]] = out
            else:
                state.update(zip(writes, out, strict=True))

        call.__name__ = name
        return call


def autotuned_kernels() -> dict[str, Any]:
    """The autotuned FLA kernels this experiment launches, by stage name."""
    return {s.name: getattr(fla_nsa, s.autotuned_kernel) for s in stages.STAGES if s.autotuned_kernel}


def fla_callable(stage_name: str) -> Any:
    """The FLA function or kernel the Stage table names for ``stage_name`` (resolved in this tier)."""
    return getattr(fla_nsa, stages.stage(stage_name).fla_callable)


def _autotuner(kernel: Any) -> Any:
    """The ``Autotuner`` under FLA's ``@triton.heuristics`` wrapper."""
    return kernel.fn if hasattr(kernel, "fn") and hasattr(kernel.fn, "configs") else kernel


def config_record(config: Any) -> dict[str, Any]:
    """A triton.Config as ``{"kwargs": {...}, "num_warps": n, "num_stages": n}``."""
    return {"kwargs": dict(config.kwargs), "num_warps": config.num_warps, "num_stages": config.num_stages}


def pin_autotune_configs(configs: dict[str, dict[str, Any]]) -> None:
    """Restrict each autotuned kernel to one recorded config (``config_record`` form), so nothing is
    tuned: used to replay a bench's configs under the profiler and when resuming a bench."""
    for stage, kernel in autotuned_kernels().items():
        record = configs.get(stage)
        if record is None:
            raise ValueError(f"no autotune config recorded for {stage}")
        tuner = _autotuner(kernel)
        tuner.configs = [triton.Config(dict(record["kwargs"]), num_warps=record["num_warps"],
                                       num_stages=record["num_stages"])]
        tuner.cache.clear()


def autotune_record() -> dict[str, Any]:
    """The config each autotuned kernel chose (``best_config``) and its cache keys."""
    out = {}
    for stage, kernel in autotuned_kernels().items():
        tuner = _autotuner(kernel)
        best = getattr(tuner, "best_config", None)
        out[stage] = {
            "kernel": tuner.base_fn.__name__ if hasattr(tuner, "base_fn") else str(tuner),
            "best_config": config_record(best) if best is not None else None,
            "cache": {str(key): config_record(cfg) for key, cfg in tuner.cache.items()},
        }
    return out
