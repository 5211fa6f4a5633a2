"""PEERS (issue 31): the same routings through FLA's ``parallel_nsa``, FlexAttention and dense causal attention,
timed on bench's inputs and protocol -- which selection backward to use, and when skew erases NSA's advantage.

One arm of the engine (:mod:`.engine`): bench's gates (GPU, versions, FLA sources, routings, equal edges), bench's
seeded q, k, v, dO (:func:`.launcher.make_inputs`) copied once into each peer's own layout as autograd leaves,
then one group of cells -- a cell per (routing, peer) the peer runs, and one routing-free cell for dense attention
(:func:`nsa_exp.core.peers.cell_name`) -- interleaved in the config's round order, the config's L2 flush before
each stage, CUDA events around each of ``fwd``, ``bwd``, ``fwd_bwd`` (:data:`nsa_exp.core.peers.PEER_STAGES`).

Every peer is called through its public API; no kernel is copied or modified:

- ``fla``: ``fla.ops.nsa.parallel.parallel_nsa`` (the pinned commit), ``[B, T, HQ, D]`` leaves.
- ``flex``: ``flex_attention`` compiled (``torch.compile(dynamic=False)``; eager on a CPU), ``[B, H, T, D]``
  leaves, ``enable_gqa=True``, a ``BlockMask.from_kv_blocks`` of :func:`nsa_exp.routing.block_mask.block_mask_layout`
  (every tile's union of selected blocks as partial blocks) and a ``mask_mod`` that looks up the routing's
  selection bitmap (:func:`nsa_exp.routing.block_mask.selection_bitmap`) and causality.
- ``flex-tile``: the same with the tile's blocks below the diagonal as full blocks (tile-shared routings only).
- ``sdpa-dense``: ``scaled_dot_product_attention(is_causal=True, enable_gqa=True)`` under the cuDNN backend on a
  GPU (torch's FLASH and EFFICIENT backends refuse the head dims 192 / 128), MATH on a CPU; the backend is recorded.

Correctness before timing: at the config's oracle shape (``smoke.oracle``), every peer's O, dQ, dK, dV on every
routing against ``naive_nsa_selection`` (fp32 autograd on the same inputs; dense attention against fp32 causal
attention by the MATH backend) within ``tolerances.naive_rel_l2`` / ``naive_max_abs_rel``; a peer that fails on a
routing is not timed on it (recorded with the failure). On a CPU (the tests) FlexAttention's forward alone is
checked: torch has no FlexAttention backward there.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import torch

from ..analysis.reproduction import judge_naive
from ..checking import peer_result
from ..core.config import Config, Shape
from ..core.families import TUNE_PATTERN
from ..core.measurement import RoundPlan
from ..core.peers import DENSE_CELL, PEER_STAGES, cell_name, peer, skip_reason
from ..core.requests import PeerRequest
from ..routing.block_mask import block_mask_layout, is_tile_shared, selection_bitmap
from ..routing.patterns import generate_routing
from .cupti import cupti_pass
from .engine import Arm, Cells, Run, measure
from .numerics import compare

Leaves = dict[str, torch.Tensor]
Forward = Callable[[Leaves], torch.Tensor]


def peer_leaves(inputs: dict[str, torch.Tensor], layout: str) -> tuple[Leaves, torch.Tensor]:
    """Copies of bench's q, k, v as autograd leaves and dO, in ``layout`` ``"bthd"`` (FLA's ``[B, T, H, D]``) or
    ``"bhtd"`` (FlexAttention's and SDPA's ``[B, H, T, D]``), contiguous: a peer is timed on its own layout."""
    def lay(t: torch.Tensor) -> torch.Tensor:
        return (t if layout == "bthd" else t.transpose(1, 2)).contiguous()

    leaves = {n: lay(inputs[n]).detach().requires_grad_() for n in ("q", "k", "v")}
    return leaves, lay(inputs["do"])


def fla_forward(shape: Shape, block_indices: torch.Tensor) -> Forward:
    """``parallel_nsa`` on ``[B, T, HQ, K]`` leaves: ``o [B, T, HQ, V]``."""
    from fla.ops.nsa.parallel import parallel_nsa  # noqa: PLC0415 - FLA only after the env gate

    def forward(x: Leaves) -> torch.Tensor:
        return parallel_nsa(x["q"], x["k"], x["v"], block_indices=block_indices, block_counts=shape.S,
                            block_size=shape.block_size, scale=shape.K ** -0.5)
    return forward


class FlexMask:
    """One ``mask_mod`` and one selection bitmap buffer per shape and device, shared by every FlexAttention cell:
    compiled FlexAttention recompiles for a new ``mask_mod`` function, so each cell copies its routing's bitmap
    into the buffer before it runs (:meth:`load`, the engine's ``before_cell``, untimed) instead of bringing its own
    closure. bool ``bitmap [B, H, T, M]`` (:func:`nsa_exp.routing.block_mask.selection_bitmap`)."""

    def __init__(self, shape: Shape, device: torch.device):
        BS, G = shape.block_size, shape.group_size
        bitmap = torch.zeros(shape.B, shape.H, shape.T, shape.num_blocks, dtype=torch.bool, device=device)
        self.bitmap = bitmap

        def mask_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return bitmap[b, h // G, q_idx, kv_idx // BS] & (q_idx >= kv_idx)
        self.mask_mod = mask_mod

    def load(self, bitmap: torch.Tensor) -> None:
        self.bitmap.copy_(bitmap)


def flex_forward(shape: Shape, block_indices: np.ndarray, full_blocks: bool, mask: FlexMask,
                 attend: Callable[..., torch.Tensor]) -> tuple[Forward, Callable[[], None]]:
    """``(forward, load)``: ``attend`` (``flex_attention``, compiled or not) on ``[B, H, T, D]`` leaves with the
    routing's block mask (module docstring), ``o [B, HQ, T, V]``; ``load`` puts the routing's bitmap into ``mask``
    (call it before the cell runs)."""
    from torch.nn.attention.flex_attention import BlockMask  # noqa: PLC0415 - torch's, on demand

    dev, BS, G = mask.bitmap.device, shape.block_size, shape.group_size
    layout = block_mask_layout(block_indices, BS, full_blocks)

    def heads(a: np.ndarray) -> torch.Tensor:   # [B, H, ...] per KV head -> [B, HQ, ...] per query head
        return torch.from_numpy(a).to(dev).repeat_interleave(G, dim=1).contiguous()

    block_mask = BlockMask.from_kv_blocks(
        heads(layout["kv_num_blocks"]), heads(layout["kv_indices"]),
        full_kv_num_blocks=heads(layout["full_kv_num_blocks"]) if full_blocks else None,
        full_kv_indices=heads(layout["full_kv_indices"]) if full_blocks else None,
        BLOCK_SIZE=(BS, BS), mask_mod=mask.mask_mod, seq_lengths=(shape.T, shape.T))
    bitmap = torch.from_numpy(selection_bitmap(block_indices, BS)).to(dev)

    def forward(x: Leaves) -> torch.Tensor:
        return attend(x["q"], x["k"], x["v"], block_mask=block_mask, scale=shape.K ** -0.5, enable_gqa=True)
    return forward, lambda: mask.load(bitmap)


def sdpa_backend(device: torch.device) -> tuple[str, Callable[[], AbstractContextManager[Any]]]:
    """``(name, context)``: the SDPA backend dense attention runs under -- cuDNN on a GPU, MATH on a CPU."""
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415 - torch's, on demand

    backend = SDPBackend.CUDNN_ATTENTION if device.type == "cuda" else SDPBackend.MATH
    return backend.name, lambda: sdpa_kernel([backend])


def dense_forward(shape: Shape, context: Callable[[], AbstractContextManager[Any]] = nullcontext) -> Forward:
    """Causal ``scaled_dot_product_attention`` with GQA on ``[B, H, T, D]`` leaves, under ``context`` (the backend):
    ``o [B, HQ, T, V]``."""
    def forward(x: Leaves) -> torch.Tensor:
        with context():
            return torch.nn.functional.scaled_dot_product_attention(
                x["q"], x["k"], x["v"], is_causal=True, scale=shape.K ** -0.5, enable_gqa=True)
    return forward


def peer_stage_callables(forward: Forward, leaves: Leaves, do: torch.Tensor,
                         context: Callable[[], AbstractContextManager[Any]] = nullcontext,
                         ) -> dict[str, Callable[[], None]]:
    """The three timed stages of one cell (:data:`nsa_exp.core.peers.PEER_STAGES`, in order): ``fwd`` keeps its
    output (and autograd graph) for ``bwd``, which takes ``torch.autograd.grad`` of it with ``do``; ``fwd_bwd`` does
    both. ``context`` wraps the backward too (SDPA's backend)."""
    state: dict[str, Any] = {}
    inputs = tuple(leaves.values())

    def fwd() -> None:
        state["o"] = forward(leaves)

    def bwd() -> None:
        with context():
            state["grads"] = torch.autograd.grad(state.pop("o"), inputs, do)

    def fwd_bwd() -> None:
        with context():
            state["grads"] = torch.autograd.grad(forward(leaves), inputs, do)

    calls = {"fwd": fwd, "bwd": bwd, "fwd_bwd": fwd_bwd}
    return {s: calls[s] for s in PEER_STAGES}


class Peers:
    """What the cells of one shape share: each layout's leaves (bench's inputs copied once), FlexAttention's
    compiled function and its :class:`FlexMask`."""

    def __init__(self, shape: Shape, inputs: dict[str, torch.Tensor], compiled: bool):
        from torch.nn.attention.flex_attention import flex_attention  # noqa: PLC0415 - torch's, on demand

        self.shape, self.device = shape, inputs["q"].device
        self.leaves = {layout: peer_leaves(inputs, layout) for layout in ("bthd", "bhtd")}
        self.attend = torch.compile(flex_attention, dynamic=False) if compiled else flex_attention
        self.mask = FlexMask(shape, self.device)

    def problem(self, peer_name: str, routing: np.ndarray | None) -> PeerProblem:
        return PeerProblem(self, peer_name, routing)


class PeerProblem:
    """One (routing, peer): its forward on its layout's leaves, what to do before it runs (``load``), its SDPA
    backend. ``routing``: int32 ``[B, T, H, S]`` (None for dense attention)."""

    def __init__(self, shared: Peers, peer_name: str, routing: np.ndarray | None):
        row, shape = peer(peer_name), shared.shape
        self.context: Callable[[], AbstractContextManager[Any]] = nullcontext
        self.backend: str | None = None
        self.load: Callable[[], None] = lambda: None
        if row.name == "fla":
            self.layout = "bthd"
            assert routing is not None
            self.forward = fla_forward(shape, torch.from_numpy(np.ascontiguousarray(routing)).to(shared.device))
        elif row.work == "block_mask":
            self.layout = "bhtd"
            assert routing is not None
            self.forward, self.load = flex_forward(shape, routing, row.tile_shared_only, shared.mask, shared.attend)
        else:
            self.layout = "bhtd"
            self.backend, self.context = sdpa_backend(shared.device)
            self.forward = dense_forward(shape, self.context)
        self.leaves, self.do = shared.leaves[self.layout]

    def calls(self) -> dict[str, Callable[[], None]]:
        return peer_stage_callables(self.forward, self.leaves, self.do, self.context)

    def outputs(self, gradients: bool = True) -> dict[str, torch.Tensor]:
        """O, dQ, dK, dV of one forward + backward, in ``[B, T, H, D]`` (``gradients=False``: O of a forward alone,
        FlexAttention on a CPU, which has no backward there)."""
        self.load()
        if not gradients:
            o = self.forward({n: t.detach() for n, t in self.leaves.items()})
            return {"o": o.transpose(1, 2) if self.layout == "bhtd" else o}
        o = self.forward(self.leaves)
        with self.context():
            grads = torch.autograd.grad(o, tuple(self.leaves.values()), self.do)
        back = (lambda t: t) if self.layout == "bthd" else (lambda t: t.transpose(1, 2))
        return {n: back(t.detach()) for n, t in zip(("o", "dq", "dk", "dv"), (o, *grads), strict=True)}


def peak_memory(problem: PeerProblem, cuda: Any) -> dict[str, int]:
    """Bytes one forward + backward of ``problem`` allocates above what was allocated before it (torch's caching
    allocator: ``reset_peak_memory_stats``, ``memory_allocated``, ``max_memory_allocated``; ``cuda`` injectable,
    e.g. ``torch.cuda``): ``{"baseline_allocated_bytes", "peak_allocated_bytes", "peak_minus_baseline_bytes"}``.
    O, dQ, dK and dV are alive together when ``autograd.grad`` returns, so on a GPU the peak above the baseline is
    at least their bytes (``validate`` holds it to that)."""
    problem.load()
    call = problem.calls()["fwd_bwd"]
    cuda.synchronize()
    cuda.reset_peak_memory_stats()
    base = int(cuda.memory_allocated())
    call()
    cuda.synchronize()
    peak = int(cuda.max_memory_allocated())
    del call
    return {"baseline_allocated_bytes": base, "peak_allocated_bytes": peak, "peak_minus_baseline_bytes": peak - base}


def reference_outputs(shape: Shape, routing: np.ndarray | None, inputs: dict[str, torch.Tensor]) -> dict[str, Any]:
    """fp32 autograd reference in ``[B, T, H, D]``: ``naive_nsa_selection`` for a routing, causal attention by the
    MATH backend for dense (``routing`` None)."""
    from fla.ops.nsa.naive import naive_nsa_selection  # noqa: PLC0415 - FLA only after the env gate
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

    q, k, v = (inputs[n].detach().float().requires_grad_() for n in ("q", "k", "v"))
    if routing is None:
        with sdpa_kernel([SDPBackend.MATH]):
            o = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, scale=shape.K ** -0.5,
                enable_gqa=True).transpose(1, 2)
    else:
        bi = torch.from_numpy(np.ascontiguousarray(routing)).to(q.device).long()
        o = naive_nsa_selection(q, k, v, bi, block_size=shape.block_size, scale=shape.K ** -0.5)
    grads = torch.autograd.grad(o, (q, k, v), inputs["do"].float())
    return {n: t.detach() for n, t in zip(("o", "dq", "dk", "dv"), (o, *grads), strict=True)}


def oracle_check(config: Config, peers: list[str], device: torch.device, compiled: bool) -> dict[str, Any]:
    """Every peer on every routing of ``config`` at its oracle shape against the fp32 reference (module docstring):
    ``{"shape", "tolerances", "results": {cell: {o, dq, dk, dv: metrics}}, "failures": {cell: [lines]}}``."""
    from .launcher import make_inputs  # noqa: PLC0415 - FLA only after the env gate

    shape = config.smoke_oracle
    assert shape is not None
    tol = config.tolerances
    inputs = make_inputs(shape, config.seeds.inputs, device)
    shared = Peers(shape, inputs, compiled)
    results: dict[str, Any] = {}
    failures: dict[str, list[str]] = {}
    routings = {p.name: generate_routing(p, shape, config.seeds.routing) for p in config.patterns}
    refs: dict[str, Any] = {}
    for name in peers:
        row = peer(name)
        for rname, routing in ({DENSE_CELL: None} if row.routing_free else routings).items():
            if row.tile_shared_only and routing is not None and not is_tile_shared(routing, shape.block_size):
                continue
            cell = cell_name(rname, name)
            if rname not in refs:
                refs[rname] = reference_outputs(shape, routing, inputs)
            # FlexAttention has no backward on a CPU (torch refuses it): there its forward alone is checked
            gradients = not (row.work == "block_mask" and device.type == "cpu")
            ref, ours = refs[rname], shared.problem(name, routing).outputs(gradients)
            results[cell] = {g: _metrics(compare(ours[g].float(), ref[g].float())) for g in ours}
            bad = judge_naive(results[cell], tol.naive_rel_l2, tol.naive_max_abs_rel, label=cell)
            if bad:
                failures[cell] = bad
    return {"shape": shape.to_dict(), "tolerances": {"rel_l2": tol.naive_rel_l2, "max_abs_rel": tol.naive_max_abs_rel},
            "results": results, "failures": failures}


def _metrics(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m[k] for k in ("rel_l2", "max_abs", "ref_max_abs", "max_abs_rel", "numel")}


class PeerArm(Arm[dict[str, Any]]):
    """The peer arm (module docstring): bench's gates, the oracle check, then every cell in one group."""

    schema = "peer_result"

    def __init__(self, peers: list[str], compiled: bool, cupti_rounds: int | None = None):
        self.peers, self.compiled, self.cupti_rounds = peers, compiled, cupti_rounds

    def inputs(self, run: Run) -> None:
        from .launcher import make_inputs  # noqa: PLC0415 - FLA only after the env gate

        config, device = run.config, run.device.tensor_device
        dev = torch.device(device)
        self.oracle = oracle_check(config, self.peers, dev, self.compiled)
        run.inputs = make_inputs(config.shape, config.seeds.inputs, dev)
        shared = Peers(config.shape, run.inputs, self.compiled)
        self.facts = {n: peer_result.routing_facts(run.routings[n], config.shape.block_size) for n in run.names}
        self.problems: dict[str, PeerProblem] = {}
        self.cells_of: dict[str, tuple[str | None, str]] = {}
        self.skipped: dict[str, dict[str, str]] = {p: {} for p in self.peers}
        self.backends: dict[str, str | None] = {}
        for name in self.peers:
            for rname in [None] if peer(name).routing_free else run.names:
                cell = cell_name(rname or DENSE_CELL, name)
                why = skip_reason(name, rname, rname is None or self.facts[rname]["tile_shared"],
                                  self.oracle["failures"])
                if why is not None:
                    self.skipped[name][rname or DENSE_CELL] = why
                    continue
                problem = shared.problem(name, None if rname is None else run.routings[rname])
                self.problems[cell], self.cells_of[cell] = problem, (rname, name)
                self.backends[name] = problem.backend

    def tune(self, run: Run) -> None:
        """One forward + backward of every cell, ``local`` first: FLA's autotuners tune from scratch at this shape
        on ``local`` as bench's do (:func:`.tuning.reset_autotuners`: their keys hold neither T nor the routing, so
        the oracle's calls at its small T would otherwise fix the configs), FlexAttention compiles; nothing here is
        timed. The configs FLA chose are recorded (``autotune``)."""
        from .launcher import autotune_record  # noqa: PLC0415 - FLA only after the env gate
        from .tuning import reset_autotuners  # noqa: PLC0415

        reset_autotuners()
        order = sorted(self.problems, key=lambda c: self.cells_of[c][0] != TUNE_PATTERN)
        for cell in order:
            self.problems[cell].load()
            for call in self.problems[cell].calls().values():
                call()
        run.device.synchronize()
        self.autotune = {"tuned_on": TUNE_PATTERN, "kernels": autotune_record()}

    def load(self, cell: str) -> None:
        self.problems[cell].load()

    def cells(self, run: Run) -> Iterator[Cells]:
        self.fns = {cell: p.calls() for cell, p in self.problems.items()}
        yield Cells(self.fns, RoundPlan.of(list(self.fns), run.config), label="peer-bench", before_cell=self.load)

    def timed(self, run: Run, cells: Cells) -> None:
        self.measurement = cells.measured

    def record(self, run: Run) -> dict[str, Any]:
        """The CUPTI pass over every cell (:func:`.cupti.cupti_pass`, marked ranges, sized by need as bench's; a host
        without CUPTI records none), then each cell's memory (:func:`peak_memory`), then the document."""
        config = run.config
        cupti = cupti_pass(run, self.fns, self.measurement, PEER_STAGES, self.cupti_rounds, before_pattern=self.load,
                           marked=True, device=run.device)
        self.fns.clear()   # the timed calls' last outputs and gradients are freed before memory is read
        run.device.empty_cache()
        memory = {cell: peak_memory(p, run.device.memory) for cell, p in self.problems.items()}  # phase "record"
        self.problems = {}
        run.device.empty_cache()
        return peer_result.build(
            config=config, gates=run.gates, routings=self.facts, peers=self.peers, cells=self.cells_of,
            backends=self.backends, skipped=self.skipped, oracle=self.oracle, autotune=self.autotune,
            measurement=self.measurement, metadata=run.metadata(), wall_seconds=run.elapsed(),
            phases=run.phases.seconds(), cupti=cupti, memory=memory)


def run_peers(request: PeerRequest, device: Any = None, clock: Any = None) -> dict[str, Any]:
    """Time ``request.peers`` on ``request.config``'s routings (module docstring) and write the peer result to
    ``request.output`` (:class:`~nsa_exp.core.requests.PeerRequest`: the config holds the command line's overrides,
    ``--repetitions`` and ``--stop-rule``'s rule as ``timing.stop`` when the config has none,
    :mod:`nsa_exp.analysis.stop_rule`, each cell a "routing" of the verdict rule, dropped once its three stages'
    CIs are tight; ``cupti_rounds``: profiled rounds after the timed ones, None: sized by need,
    :func:`nsa_exp.analysis.cupti.sizing`, 0: no pass). ``device``/``clock``: injectable (:mod:`.engine`).
    A config without routings never reaches it (the config schema requires one)."""
    config = request.config
    run = Run(config, request.allow_gpu, request.output, device=device, **({} if clock is None else {"clock": clock}))
    compiled = device is None
    doc = measure(PeerArm(list(request.peers), compiled, request.cupti_rounds), run)
    print(f"peer-bench: {len(doc['cells'])} cells, {doc['timing']['repetitions']} timed rounds, "
          f"{doc['wall_seconds']:.0f} s", file=sys.stderr)
    return doc
