"""Latency statistics of the recorded observations, and the interleaving order of the rounds.

These are pure (numpy only): the GPU round loop that produces the observations is
:mod:`nsa_exp.gpu.timing`; the validator recomputes every summary with :func:`summarize`.

The method the observations come from is in :mod:`nsa_exp.gpu.timing` and docs/METHOD.md: the first
``warmup_rounds`` rounds are kept but flagged and excluded from the statistics.

>>> summarize([1.0, 2.0, 3.0, 4.0])["median_ms"]
2.5
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# The GPU spin queued before each timed call (gpu/timing.py); results record it and validate checks it.
LAUNCH_GUARD_CYCLES = 2_000_000  # ~1 ms at 1.98 GHz: longer than any stage's host-side launch work
PERCENTILES = {"p10_ms": 10, "p90_ms": 90, "p95_ms": 95}
PERCENTILE_METHOD = "linear"


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
