"""The CUPTI cross-check pass of ``bench`` (issue 14): each stage's kernels timed by the profiler.

After the timed rounds, :func:`profile_kernel_times` runs ``rounds`` more rounds under
``torch.profiler.profile(activities=[CPU, CUDA])``. Each stage call sits in a ``record_function``
range (:func:`nsa_exp.results.cupti.range_label`); the L2 flush and the GPU spin that precede it (as
in the timed rounds, :mod:`nsa_exp.gpu.timing`) run outside the range, so their kernels are not
attributed to the stage. The aggregation of the profiler's events into per-stage kernel times is the
pure :func:`nsa_exp.results.cupti.kernel_ms` (tested on the CPU with fake events).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from ..results.cupti import ROUNDS, cupti_block, kernel_ms, range_label
from ..results.latency import LAUNCH_GUARD_CYCLES
from .timing import CudaDevice


def profile_kernel_times(stage_fns: Mapping[str, Mapping[str, Callable[[], Any]]], l2_flush_bytes: int,
                         flush_policy: str, rounds: int = ROUNDS,
                         before_pattern: Callable[[str], None] | None = None,
                         on_events: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """``rounds`` profiled rounds over every pattern x stage; returns the result's ``cupti`` block.

    ``on_events`` (the release arm, issue 22) receives the profiler's raw events (kernels included), for
    a per-kernel view of multi-kernel calls (:func:`nsa_exp.results.release_kernels.kernel_calls`).

    ``stage_fns[pattern][stage]`` as for :func:`nsa_exp.gpu.timing.run_rounds` (called in mapping
    order, so each stage consumes this round's intermediates). Raises what torch.profiler raises when
    CUPTI is unavailable (bench records the block as absent then).
    """
    dev = CudaDevice()
    flush = dev.flush_buffer(l2_flush_bytes)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for r in range(rounds):
            for pattern, fns in stage_fns.items():
                if before_pattern is not None:
                    before_pattern(pattern)
                for stage, fn in fns.items():
                    if l2_flush_bytes and flush_policy == "write":
                        dev.flush(flush, r)
                    elif l2_flush_bytes and flush_policy == "read":
                        dev.read_flush(flush)
                    dev.spin(LAUNCH_GUARD_CYCLES)
                    with record_function(range_label(pattern, stage, r)):
                        fn()
                torch.cuda.synchronize()
    del flush
    if on_events is not None:  # issue 22: the release arm's per-kernel records
        on_events(prof.events())
    return cupti_block(kernel_ms(prof.events()), rounds)
