"""The stop rule, pure: when a bench or a sweep point may stop timing rounds (the engine's round loop asks
:class:`StopTracker` after every round), and where it would have stopped a committed run (:func:`replay`).

Modelled on nvbench's stopping criterion (at least ``--min-samples`` and ``--min-time``, stop when the noise is
under ``--max-noise``, give up at ``--timeout``, and say which one stopped it), with each median's confidence
interval in place of nvbench's relative standard deviation. Off unless a config's ``timing.stop`` block or
``bench --stop-rule`` asks for it; the formal configs have no block, so the formal protocol times every round.

After each timed round ``n`` (every cell, i.e. pattern, timed once at every stage) the run stops, criteria
taken in this order, by

1. ``ci``: ``n >= min_rounds``, the accumulated timed GPU time ``fsum(every raw_ms) / 1000 >= min_seconds``,
   and every timed median's CI half-width ``<= max(ci_rel * median, ci_abs_ms)``;
2. ``timeout``: the round loop's host wall time (warm-up included) ``>= timeout_seconds``;
3. ``max_rounds``: ``n`` equals the run's repetitions (the configured rounds, or ``--repetitions``).

CI of a median: distribution-free, from order statistics (J.-Y. Le Boudec, *Performance Evaluation of
Computer and Communication Systems*, EPFL Press 2010, Theorem 2.1; W. J. Conover, *Practical Nonparametric
Statistics*, 3rd ed., Wiley 1999, section 3.2). For ``n`` sorted observations ``x_(1) <= ... <= x_(n)`` and
``B ~ Binomial(n, 1/2)``, ``[x_(j), x_(n-j+1)]`` holds the median with probability ``1 - 2 P(B <= j - 1)``;
``j`` is the largest with ``P(B <= j - 1) <= (1 - confidence) / 2``, found exactly in integer arithmetic.
The half-width is ``(x_(n-j+1) - x_(j)) / 2`` ms; with ``j = 0`` (``n <= 5`` at 95%) there is no interval and
the cell counts as not converged.

Everything the criterion reads except the wall clock is in the result's raw observations, so ``validate``
recomputes every round's trace entry and every decision (``stop_rule``,
:func:`nsa_exp.checking.stats_checks.stop_rule_problems`); the wall times are recorded and only checked for
order.

>>> median_ci_ranks(20)  # 0-based: [x_(6), x_(15)]
(5, 14)
>>> median_ci_ranks(5) is None
True
>>> half_width([3.0, 1.0, 2.0, 5.0, 4.0, 6.0, 7.0])  # n = 7: j = 1, [x_(1), x_(7)]
3.0
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ..core.config import StopRule
from ..core.protocol import STOP_REASONS
from ..errors import UserError

CI, TIMEOUT, MAX_ROUNDS = STOP_REASONS
#: ``bench --stop-rule`` (and a sweep's ``--stop-rule``) when the config names no ``timing.stop``. Chosen on the
#: committed H200 formal run's observations (``results/raw/e1_h200.json``): the CSR stage's round-to-round
#: spread (~10%) makes its 0.35 ms median the slowest to settle, hence the absolute floor of 20 us, the event
#: resolution order the CUPTI agreement rule uses too.
DEFAULT_RULE = StopRule(min_rounds=20, min_seconds=0.5, ci_rel=0.01, ci_abs_ms=0.02, timeout_seconds=300.0,
                        confidence=0.95)


#: the most rounds ``sweep --stop-rule`` lets a point time when the sweep's own ``timing.repetitions`` is below the
#: default rule's ``min_rounds`` (the shipped sweeps time 10): the formal protocol's 150 rounds, the rule stopping
#: each point as soon as its medians are known (or at ``timeout_seconds``)
SWEEP_ROUND_CEILING = 150


def default_rule(repetitions: int, where: str) -> StopRule:
    """:data:`DEFAULT_RULE` for a run of at most ``repetitions`` timed rounds (``--stop-rule`` without a
    ``timing.stop`` block); UserError naming ``where`` when the run is too short for the rule to stop it early."""
    if repetitions < DEFAULT_RULE.min_rounds:
        raise UserError(f"{where}: the run times {repetitions} rounds, fewer than the default rule's min_rounds "
                        f"{DEFAULT_RULE.min_rounds}; raise timing.repetitions (the most rounds the rule may time) "
                        "or give a timing.stop block")
    return DEFAULT_RULE


METHOD = ("after each timed round: stop on ci (rounds >= min_rounds, accumulated timed GPU seconds >= "
          "min_seconds, every timed median's distribution-free order-statistic CI half-width <= max(ci_rel x "
          "median, ci_abs_ms)), else on timeout (round-loop wall seconds >= timeout_seconds), else at max_rounds")


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """0-based indices ``(j - 1, n - j)`` into the sorted sample of the median's CI bounds, or None when
    ``n`` observations give no interval at ``confidence`` (module docstring)."""
    alpha_half = (1 - Fraction(confidence)) / 2
    total, below, j, comb = 2 ** n, 0, 0, 1  # comb = C(n, j); below = sum_{i < j} C(n, i)
    while j <= n and (below + comb) <= alpha_half * total:
        below += comb
        comb = comb * (n - j) // (j + 1)
        j += 1
    return None if j == 0 else (j - 1, n - j)


def half_width(samples_ms: Sequence[float], confidence: float = 0.95) -> float | None:
    """The CI half-width (ms) of the median of ``samples_ms``, None without an interval."""
    ranks = median_ci_ranks(len(samples_ms), confidence)
    if ranks is None:
        return None
    x = np.sort(np.asarray(samples_ms, dtype=np.float64))
    return float((x[ranks[1]] - x[ranks[0]]) / 2)


def round_entry(rounds: int, elapsed_seconds: float, samples: Mapping[str, Sequence[float]],
                rule: StopRule) -> dict[str, Any]:
    """The trace entry after ``rounds`` timed rounds: ``samples`` = ``{"pattern/stage": timed ms so far}``.

    ``unconverged`` counts the cells whose half-width is above target (or who have no interval yet);
    ``worst``/``worst_ratio`` name the largest ``half-width / target`` among cells with an interval (None
    when none has one)."""
    worst, worst_ratio, unconverged = None, None, 0
    for key, x in samples.items():
        hw = half_width(x, rule.confidence)
        if hw is None:
            unconverged += 1
            continue
        ratio = hw / max(rule.ci_rel * float(np.median(np.asarray(x, dtype=np.float64))), rule.ci_abs_ms)
        unconverged += ratio > 1
        if worst_ratio is None or ratio > worst_ratio:
            worst, worst_ratio = key, ratio
    timed = math.fsum(v for x in samples.values() for v in x) / 1000.0
    return {"rounds": rounds, "elapsed_seconds": elapsed_seconds, "timed_seconds": timed,
            "unconverged": int(unconverged), "worst": worst, "worst_ratio": worst_ratio}


def decision(entry: Mapping[str, Any], rule: StopRule, max_rounds: int) -> str | None:
    """Which criterion stops the run at this trace entry (:data:`nsa_exp.core.protocol.STOP_REASONS`, asked in
    that order), or None to go on."""
    if entry["rounds"] >= rule.min_rounds and entry["timed_seconds"] >= rule.min_seconds \
            and entry["unconverged"] == 0:
        return CI
    if entry["elapsed_seconds"] >= rule.timeout_seconds:
        return TIMEOUT
    return MAX_ROUNDS if entry["rounds"] >= max_rounds else None


class StopTracker:
    """Feeds the round loop's records to the rule: ``update(round_records)`` after each round returns True when
    the run must stop; :meth:`record` is the result's ``timing.stop`` block. ``clock`` (host seconds, e.g.
    ``time.monotonic``) is read when the tracker is made (the loop's start) and after each round."""

    def __init__(self, rule: StopRule, max_rounds: int, source: str, clock: Callable[[], float]):
        self.rule, self.max_rounds, self.source, self.clock = rule, max_rounds, source, clock
        self.t0 = clock()
        self.samples: dict[str, list[float]] = {}
        self.trace: list[dict[str, Any]] = []
        self.stopped_by: str | None = None

    def update(self, round_records: Sequence[Mapping[str, Any]]) -> bool:
        timed = [r for r in round_records if not r["warmup"]]
        if not timed:
            return False
        for rec in timed:
            for stage, ms in rec["ms"].items():
                self.samples.setdefault(f"{rec['pattern']}/{stage}", []).append(ms)
        entry = round_entry(len(self.trace) + 1, self.clock() - self.t0, self.samples, self.rule)
        self.trace.append(entry)
        self.stopped_by = decision(entry, self.rule, self.max_rounds)
        return self.stopped_by is not None

    def record(self) -> dict[str, Any]:
        last = self.trace[-1] if self.trace else {"rounds": 0, "elapsed_seconds": self.clock() - self.t0}
        return {"rule": self.rule.to_dict(), "source": self.source, "method": METHOD, "max_rounds": self.max_rounds,
                "stopped_by": self.stopped_by or MAX_ROUNDS, "rounds": last["rounds"],
                "elapsed_seconds": last["elapsed_seconds"], "trace": self.trace}


def observations(doc: Mapping[str, Any]) -> dict[str, list[float]]:
    """``{"pattern/stage": raw_ms}`` of a bench result or sweep point (each list in round order)."""
    return {f"{p}/{s}": st["raw_ms"] for p, v in doc["patterns"].items() for s, st in v["stages"].items()}


def replay(doc: Mapping[str, Any], rule: StopRule) -> dict[str, Any]:
    """Where ``rule`` would have stopped a run that timed every round (a committed result): its criterion on the
    first ``n`` rounds' observations for n = 1, 2, ... (the wall clock is not replayed: no timeout). Returns
    ``{"stopped_by", "rounds", "of", "last_to_settle"}`` (the worst cell one round before the stop)."""
    raw, reps = observations(doc), doc["timing"]["repetitions"]
    before = None
    for n in range(1, reps + 1):
        entry = round_entry(n, 0.0, {k: x[:n] for k, x in raw.items()}, rule)
        reason = decision(entry, rule, reps)
        if reason is not None:
            return {"stopped_by": reason, "rounds": n, "of": reps, "last_to_settle": before}
        before = entry["worst"]
    return {"stopped_by": None, "rounds": 0, "of": reps, "last_to_settle": None}  # a run of no timed round
