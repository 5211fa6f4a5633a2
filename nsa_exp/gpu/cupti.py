"""The CUPTI cross-check pass of ``bench`` (issue 14): each stage's kernels timed by the profiler.

After the timed rounds, :func:`profile_kernel_times` runs ``rounds`` more rounds under
``torch.profiler.profile(activities=[CPU, CUDA])``, through the same round loop as the timed rounds
(:func:`nsa_exp.gpu.timing.run_rounds`, every pattern in order each round): each stage call sits in a
``record_function`` range (:func:`nsa_exp.analysis.cupti.range_label`, the loop's ``around`` hook); the L2
flush and the GPU spin that precede it run outside the range, so their kernels are not attributed to the
stage. Since issue 28 the loop keeps its CUDA-event pair around each range, as in the timed rounds, so every
profiled call has its event time beside its kernel time (``event_ms``) and the cross-check compares the same
calls (:data:`nsa_exp.analysis.cupti.METHOD_PAIRED`). The aggregation of the profiler's events into per-stage
kernel times is pure (:mod:`nsa_exp.analysis.cupti`, tested on the CPU with fake events): since issue 27 each
call's summed device activity (:func:`nsa_exp.analysis.cupti.kernel_busy_ms`) over a pass sized by need
(:func:`nsa_exp.analysis.cupti.sizing`), bench's per stage since issue 30 (round ``r`` calls only the stages
that need more than ``r`` calls, :func:`_segments`); another arm may pass its own ``aggregate`` (e.g. each launched
kernel by name; that pass records no events, as before).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from torch.profiler import ProfilerActivity, profile, record_function

from ..analysis.cupti import (
    METHOD_MARKED,
    METHOD_PAIRED,
    ROUNDS,
    cupti_block,
    event_ms_of,
    kernel_busy_ms,
    range_label,
    sizing,
)
from ..core.protocol import round_orders
from .timing import CudaDevice, run_rounds


class _NoEvent:
    def record(self) -> None:
        pass

    def elapsed_time(self, end: Any) -> float:
        return 0.0


class Unevented:
    """A device that forwards everything to ``device`` except events, which it does not record."""

    def __init__(self, device: Any):
        self.device = device

    def event(self) -> _NoEvent:
        return _NoEvent()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.device, name)


def _in_range(pattern: str, stage: str, r: int) -> Any:
    return record_function(range_label(pattern, stage, r))


def _in_marked_range(dev: Any) -> Callable[[str, str, int], Any]:
    """The range of :func:`_in_range` opened and closed by an empty GPU spin (``dev.spin(0)``) launched from the
    calling thread: the range's GPU-side span is that of the kernels its own thread launched, so a call whose
    kernels another thread launches (autograd's backward on its device thread) would have none inside it; the two
    spins, queued on the same stream before and after the call, bound them."""
    @contextmanager
    def around(pattern: str, stage: str, r: int) -> Iterator[None]:
        with record_function(range_label(pattern, stage, r)):
            dev.spin(0)
            yield
            dev.spin(0)
    return around


def _segments(stage_fns: Mapping[str, Mapping[str, Callable[[], Any]]], rounds: int,
              calls: Mapping[str, Mapping[str, int]] | None) -> list[tuple[int, int, dict[str, dict[str, Any]]]]:
    """The pass's rounds as ``(first, end, {pattern: {stage: call}})`` runs of rounds calling the same stages:
    round ``r`` calls the stages with ``calls[pattern][stage] > r`` (in their order; a pattern with none is left
    out), or every stage when ``calls`` is None (:func:`nsa_exp.analysis.cupti.stage_calls`).

    >>> [(a, b, {p: list(st) for p, st in f.items()}) for a, b, f in
    ...  _segments({"x": {"csr": 0, "dkv": 0}}, 4, {"x": {"csr": 4, "dkv": 2}})]
    [(0, 2, {'x': ['csr', 'dkv']}), (2, 4, {'x': ['csr']})]
    """
    if calls is None:
        return [(0, rounds, {p: dict(st) for p, st in stage_fns.items()})]
    ends = sorted({min(rounds, calls[p][s]) for p, st in stage_fns.items() for s in st} | {rounds})
    out, first = [], 0
    for end in ends:
        if end > first:
            fns = {p: {s: fn for s, fn in st.items() if calls[p][s] > first} for p, st in stage_fns.items()}
            out.append((first, end, {p: st for p, st in fns.items() if st}))
            first = end
    return out


def profile_kernel_times(stage_fns: Mapping[str, Mapping[str, Callable[[], Any]]], l2_flush_bytes: int,
                         flush_policy: str, rounds: int = ROUNDS,
                         before_pattern: Callable[[str], None] | None = None, device: Any = None,
                         aggregate: Callable[[Iterable[Any], int], Any] | None = None,
                         sized: dict[str, Any] | None = None, marked: bool = False) -> Any:
    """``rounds`` profiled rounds over every pattern x stage; returns the result's ``cupti`` block
    (``aggregate(profiler events, rounds)``, default :func:`nsa_exp.analysis.cupti.cupti_block` of
    :func:`~nsa_exp.analysis.cupti.kernel_busy_ms`, each call's summed device activity, with the same calls'
    CUDA-event times, ms, as ``event_ms``; ``sized``, the
    :func:`~nsa_exp.analysis.cupti.sizing` record of a pass sized by need, is recorded in it). ``marked``: each
    range opened and closed by an empty spin (:func:`_in_marked_range`, recorded as
    :data:`~nsa_exp.analysis.cupti.METHOD_MARKED`), for calls whose kernels autograd's device thread launches.

    ``stage_fns[pattern][stage]`` as for :func:`nsa_exp.gpu.timing.run_rounds` (called in mapping
    order, so each stage consumes this round's intermediates); ``device`` defaults to CUDA. Raises what
    torch.profiler raises when CUPTI is unavailable (bench records the block as absent then).
    """
    base = CudaDevice() if device is None else device
    dev = base if aggregate is None else Unevented(base)  # bench's pass pairs each call's events with its kernels
    flush = dev.flush_buffer(l2_flush_bytes)
    orders = round_orders(list(stage_fns), rounds, "fixed-rounds", 0)
    dev.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        records = []
        for first, last, fns in _segments(stage_fns, rounds, (sized or {}).get("calls")):
            records += run_rounds(fns, [[p for p in o if p in fns] for o in orders], 0, l2_flush_bytes,
                                  device=dev, before_pattern=before_pattern, flush_policy=flush_policy,
                                  around=_in_marked_range(dev) if marked else _in_range,
                                  flush_buffer=flush, rounds=range(first, last))
    del flush
    events = prof.events()
    if aggregate is not None:
        return aggregate(events, rounds)
    return cupti_block(kernel_busy_ms(events), rounds, sized, METHOD_MARKED if marked else METHOD_PAIRED,
                       event_ms=event_ms_of(records))


def cupti_pass(run: Any, stage_fns: Mapping[str, Mapping[str, Callable[[], Any]]], measured: Any,
               stages: Iterable[str], rounds: int | None, before_pattern: Callable[[str], None] | None = None,
               marked: bool = False, device: Any = None, per_stage: bool = False) -> Any:
    """An arm's CUPTI pass after its timed rounds, as bench and peer-bench run it: ``rounds`` profiled rounds over
    ``stage_fns`` (None: sized by need from ``measured``'s medians of ``stages``, ms,
    :func:`nsa_exp.analysis.cupti.sizing`, recorded; ``per_stage``: each stage called only as often as it needs,
    bench's since issue 30; 0: no pass) of :func:`profile_kernel_times` on ``device`` (None: CUDA), timed as the
    run's ``cupti`` phase. Returns the result's ``cupti`` block, or None where the host has no CUPTI (a
    cross-check only: the run keeps its timed rounds and says so on stderr)."""
    sized = None
    if rounds is None:
        sized = sizing({c: {s: st.median_ms for s, st in by.items()}
                        for c, by in measured.stage_stats(list(stage_fns), list(stages)).items()},
                       per_stage=per_stage)
    n = sized["rounds"] if sized is not None else rounds
    try:
        if n:
            with run.phases("cupti"):
                return profile_kernel_times(stage_fns, run.config.timing.l2_flush_bytes, run.config.timing.flush, n,
                                            before_pattern=before_pattern, device=device, sized=sized,
                                            marked=marked)
    except (RuntimeError, OSError) as exc:
        print(f"warning: CUPTI pass skipped ({type(exc).__name__}: {exc}); the result has no cupti block",
              file=sys.stderr)
    return None
