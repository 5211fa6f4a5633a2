"""Timing with CUDA events, one event pair around each stage call, every observation kept.

Method (see docs/METHOD.md): before each timed call we (1) overwrite an L2-flush buffer of
``l2_flush_bytes`` (>= 2x the H100's 50 MB L2) so every stage starts from a cold L2, and (2) enqueue
a GPU spin of ``LAUNCH_GUARD_CYCLES`` so the Python launch overhead of the stage is hidden behind
queued GPU work: the events then measure GPU time only, not host launch gaps. Patterns are
interleaved round by round (order shuffled per round with a recorded seed); the first
``warmup_rounds`` rounds (module load, autotune, allocator) are kept but flagged and excluded from
the statistics.

>>> summarize([1.0, 2.0, 3.0, 4.0])["median_ms"]
2.5
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

PERCENTILES = {"p10_ms": 10, "p90_ms": 90, "p95_ms": 95}
PERCENTILE_METHOD = "linear"
LAUNCH_GUARD_CYCLES = 2_000_000  # ~1 ms at 1.98 GHz: longer than any stage's host-side launch work


def summarize(samples_ms: Sequence[float]) -> dict[str, float]:
    """median, p10, p90, p95 (numpy 'linear' percentiles), min, mean and n of the observations."""
    x = np.asarray(samples_ms, dtype=np.float64)
    out = {"median_ms": float(np.median(x))}
    out.update({k: float(np.percentile(x, q, method=PERCENTILE_METHOD)) for k, q in PERCENTILES.items()})
    out.update({"min_ms": float(x.min()), "mean_ms": float(x.mean()), "n_obs": int(x.size)})
    return out


def round_orders(patterns: Sequence[str], rounds: int, mode: str, seed: int) -> list[list[str]]:
    """The pattern order of every round: shuffled per round (seeded) or fixed (A B C D each round).

    >>> round_orders(["a", "b"], 2, "fixed-rounds", 0)
    [['a', 'b'], ['a', 'b']]
    """
    if mode == "fixed-rounds":
        return [list(patterns) for _ in range(rounds)]
    rng = np.random.default_rng(seed)
    return [[patterns[i] for i in rng.permutation(len(patterns))] for _ in range(rounds)]


def run_rounds(
    stage_fns: Mapping[str, Mapping[str, Callable[[], Any]]],
    orders: Sequence[Sequence[str]],
    warmup_rounds: int,
    l2_flush_bytes: int,
    on_pattern_done: Callable[[int, str], dict[str, Any]] | None = None,
    progress: Callable[[int, int], None] | None = None,
    rounds: Sequence[int] | None = None,
    on_round_done: Callable[[int, list[dict[str, Any]]], None] | None = None,
    rewarm: bool = False,
) -> list[dict[str, Any]]:
    """Run the rounds ``rounds`` (default: all); return one record per (round, pattern) with each
    stage's elapsed ms.

    ``stage_fns[pattern][stage]`` are zero-argument callables, called in their mapping order.
    ``on_pattern_done(round, pattern)`` (telemetry) is called after each pattern's synchronise;
    ``on_round_done(round, records)`` (the journal) after each round. ``rewarm`` marks every record
    as a warm-up re-run (a resumed bench re-runs its warm-up rounds before continuing).
    """
    import torch

    flush = torch.empty(max(l2_flush_bytes // 4, 1), dtype=torch.int32, device="cuda")
    records = []
    todo = list(range(len(orders))) if rounds is None else list(rounds)
    for done, r in enumerate(todo, start=1):
        round_records = []
        for pattern in orders[r]:
            events = []
            for stage, fn in stage_fns[pattern].items():
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                if l2_flush_bytes:
                    flush.fill_(r)
                torch.cuda._sleep(LAUNCH_GUARD_CYCLES)
                start.record()
                fn()
                end.record()
                events.append((stage, start, end))
            torch.cuda.synchronize()
            rec = {"round": r, "pattern": pattern, "warmup": rewarm or r < warmup_rounds,
                   "ms": {stage: float(s.elapsed_time(e)) for stage, s, e in events}}
            if rewarm:
                rec["rewarm"] = True
            if on_pattern_done is not None:
                rec["telemetry"] = on_pattern_done(r, pattern)
            round_records.append(rec)
        records.extend(round_records)
        if on_round_done is not None:
            on_round_done(r, round_records)
        if progress is not None:
            progress(done, len(todo))
    return records
