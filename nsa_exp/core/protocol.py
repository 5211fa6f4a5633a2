"""The measurement protocol's named choices and the statistics every record carries.

Round orders (how the patterns interleave within a round), L2 flush policies, the stop rule's reasons and
sources, autotune modes, the gates in the order they run, the model's dispatch orders, the sweep executors
and the what-if layouts: each a tuple read by the config check, the CLI's choices, the GPU tier and the
schemas' enums (``python -m nsa_exp schemas``). The statistics: the first ``warmup_rounds`` rounds are
kept but flagged and excluded; the rest are summarised by :func:`summarize` (the validator recomputes every
summary with it). The GPU round loop that produces the observations is :mod:`nsa_exp.gpu.timing`
(docs/METHOD.md).

>>> summarize([1.0, 2.0, 3.0, 4.0])["median_ms"]
2.5
>>> round_orders(["a", "b"], 2, "fixed-rounds", 0)
[['a', 'b'], ['a', 'b']]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

#: Round orders: each round runs every pattern once, in a seeded shuffle or in the config's order.
ORDER_MODES = ("shuffled-rounds", "fixed-rounds")
#: The L2 sweep before each timed stage (gpu/timing.py): write (fill_), read (a reduction), none (warm L2).
FLUSH_POLICIES = ("write", "read", "none")
#: bench ``--tune``: tune once on one routing, or each routing on itself.
TUNE_CHOICES = ("once", "per-pattern")
#: How a result's autotune configs came to be (``autotune.mode``).
AUTOTUNE_MODES = ("tune-on", "per-pattern", "replay")
#: The gates every GPU task passes, in the order they run (gpu/gates.py).
GATE_NAMES = ("environment", "gpu", "versions", "fla_sources", "equal_edges")
#: The release arm's gates (gpu/release.py): the pinned ones in its parent process (``interpreter`` in place of
#: ``gpu`` on a CPU under TRITON_INTERPRET=1), then ``release_fla``: the child imported the target's FLA, alone.
RELEASE_GATE_NAMES = ("environment", "gpu", "interpreter", "versions", "fla_sources", "equal_edges", "release_fla")
#: The makespan model's dispatch orders of the dK/dV programs (model/makespan.py).
DISPATCH_ORDERS = ("program-id", "heaviest-first")
#: The sweep executors (nsa_exp.sweeps.run runs them; the CLI offers them as choices).
SWEEP_EXECUTORS = ("inline", "debug", "local", "slurm")
#: The what-if layouts of a split dK/dV schedule (model/split.py).
WHATIF_LAYOUTS = ("split", "split-heavy-first")
#: The Stage rows a what-if times each round: the original launch's dK/dV and the CSR it consumes (its ``baseline``;
#: the schedule changes the CSR), over the forward's lse and the preprocess's delta computed once, and each split
#: arm's, on its B' batches, with the reduction of the partial dK and dV after them (gpu/whatif.py)
WHATIF_BASELINE_STAGES: tuple[str, ...] = ("csr", "dkv_core")
WHATIF_ARM_STAGES: tuple[str, ...] = (*WHATIF_BASELINE_STAGES, "reduce")
#: ``whatif``'s defaults (its command row; ``validate`` reads a recorded argv against them): the routings, the F
#: values (rows longer than F are split) and the timed rounds it runs unless told otherwise.
WHATIF_PATTERNS = ("sink-heavy", "zipf")
WHATIF_MAX_FANINS = (4096, 8192)
WHATIF_ROUNDS = 20
#: The bench result whose autotune configs ``whatif`` pins unless ``--benchmark-result`` names another.
WHATIF_BENCHMARK_RESULT = "results/raw/e1_h200_pre.json"
#: What stopped a run under the stop rule (nsa_exp.analysis.stop_rule), criteria in the order they are asked.
STOP_REASONS = ("ci", "timeout", "max_rounds")
#: Where a run's stop rule came from: its config's ``timing.stop`` block, or ``bench/sweep --stop-rule``.
STOP_SOURCES = ("config", "--stop-rule")
#: what the verdict stop rule takes out of later rounds once it has converged (``timing.stop.drop``): a
#: ``routing`` once every stage of it has (every run recorded before 2026-12-05), or each ``stage`` of a routing on
#: its own (the routing once all have)
STOP_DROPS = ("routing", "stage")
#: NVML clocks-event reasons counted as throttling (gpu/telemetry.py flags samples with this mask).
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80

#: The GPU spin queued before each timed call (gpu/timing.py); results record it and validate checks it.
LAUNCH_GUARD_CYCLES = 2_000_000  # ~1 ms at 1.98 GHz: longer than any stage's host-side launch work
TIMING_METHOD = "CUDA events around each stage call; L2 flushed and a GPU spin queued before each"
PERCENTILES = {"p10_ms": 10, "p90_ms": 90, "p95_ms": 95}
#: numpy.percentile's method for every percentile the package computes: latencies (:func:`summarize`) and
#: fan-in statistics (:mod:`nsa_exp.routing.fanin`).
PERCENTILE_METHOD: Final = "linear"  # Final: a Literal, the type numpy.percentile's method takes


def summarize(samples_ms: Sequence[float]) -> dict[str, float]:
    """median, p10, p90, p95 (numpy 'linear' percentiles), min, mean and n of the observations."""
    x = np.asarray(samples_ms, dtype=np.float64)
    out = {"median_ms": float(np.median(x))}
    out.update({k: float(np.percentile(x, q, method=PERCENTILE_METHOD)) for k, q in PERCENTILES.items()})
    out.update({"min_ms": float(x.min()), "mean_ms": float(x.mean()), "n_obs": int(x.size)})
    return out


def round_orders(patterns: Sequence[str], rounds: int, mode: str, seed: int) -> list[list[str]]:
    """The pattern order of every round: shuffled per round (seeded) or fixed (A B C D each round)."""
    if mode == "fixed-rounds":
        return [list(patterns) for _ in range(rounds)]
    rng = np.random.default_rng(seed)
    return [[patterns[i] for i in rng.permutation(len(patterns))] for _ in range(rounds)]
