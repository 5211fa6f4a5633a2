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
from dataclasses import replace
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.config import StopRule
from ..core.protocol import STOP_REASONS, round_orders
from .noise_table import FALLBACK_FLOOR, compare_floors, read_floors

CI, TIMEOUT, MAX_ROUNDS = STOP_REASONS
#: ``bench --stop-rule`` (and ``reproduce``) when the config names no ``timing.stop``: the verdict rule (issue 30).
#: A cell's target is half the noise floor ``compare`` judges it by (``floor_fraction`` 0.5): with the formal
#: run's half-width near a third of the floor, the CI of a ratio of the two medians is then about 0.6 of the
#: floor wide on each side, which leaves room for a "same" verdict when the medians agree. The absolute floor of
#: 20 us keeps the sub-ms CSR stage (~0.35 ms, ~10% round-to-round on the H200) from holding the run; a routing
#: whose every stage has converged stops being timed. Replayed on the committed H200 formal run
#: (``results/raw/e1_h200.json``, :func:`replay`), ``local`` and ``uniform`` converge by rounds 42 and 30; the
#: skewed routings' dK/dV (round-to-round spread a few times the floor) run to the 150-round ceiling alone.
DEFAULT_RULE = StopRule(min_rounds=20, min_seconds=0.5, ci_rel=0.01, ci_abs_ms=0.02, timeout_seconds=300.0,
                        confidence=0.95, floor_fraction=0.5)
#: ``bench --stop-rule``, ``sweep --stop-rule`` and ``reproduce`` on 2026-12-05 (issue 30) until :data:`STAGE_RULE`:
#: the verdict rule of
#: :data:`DEFAULT_RULE`, each converged stage of a routing leaving later rounds on its own (``drop`` ``stage``; the
#: routing once all have), so the skewed routings' late rounds time only their dK/dV. Replayed on the seven committed
#: 150-round H200 formal runs (``python -m nsa_exp stop-replay``, docs/METHOD.md), it keeps 22 s of each run's ~88 s
#: of timed GPU time where dropping whole routings keeps 32 s (the noise table since 2026-12-05 11:22 UTC; 34 and 58 s
#: under the floors before it); ``peer-bench --stop-rule`` keeps :data:`DEFAULT_RULE`
#: (a peer cell's stages are not yet followed one by one).
STAGE_RULE_20US = replace(DEFAULT_RULE, drop="stage")
#: ``bench --stop-rule``, ``sweep --stop-rule`` and ``reproduce`` since the evening of 2026-12-05:
#: :data:`STAGE_RULE_20US` with an absolute CI target of 2 us, about the CUDA event timer's resolution, instead of 20
#: us. The 20 us target let the H100's CSR (0.26-0.56 ms, noise floor 1.2%) stop at a CI of 4-8% that its floor
#: cannot resolve (a stop run against its formal run: CSR ``unclear`` on all four routings, docs/METHOD.md); replayed
#: on the committed formal runs (``stop-replay --ci-abs-ms 0.002``) it keeps the same GPU time on the H100 pair (43.0
#: s against 42.9 s per run) and the seven H200 runs (21.9 s) and loses fewer verdicts (2 of 48 against 5; 34 of
#: 1,176 against 38).
STAGE_RULE = replace(STAGE_RULE_20US, ci_abs_ms=0.002)
#: the ``ci_rel`` rule (every routing in every round): ``sweep --stop-rule``'s default before 2026-12-05 and
#: ``bench --stop-rule``'s before issue 30, chosen on the committed H200 formal run's observations; a config may
#: still name it in its ``timing.stop`` block.
CI_REL_RULE = StopRule(min_rounds=20, min_seconds=0.5, ci_rel=0.01, ci_abs_ms=0.02, timeout_seconds=300.0,
                       confidence=0.95)


#: the most rounds ``sweep --stop-rule`` lets a point time when the sweep's own ``timing.repetitions`` is below the
#: default rule's ``min_rounds`` (the shipped sweeps time 10): the formal protocol's 150 rounds, the rule stopping
#: each point as soon as its medians are known (or at ``timeout_seconds``)
SWEEP_ROUND_CEILING = 150


METHOD = ("after each timed round: stop on ci (rounds >= min_rounds, accumulated timed GPU seconds >= "
          "min_seconds, every timed median's distribution-free order-statistic CI half-width <= max(ci_rel x "
          "median, ci_abs_ms)), else on timeout (round-loop wall seconds >= timeout_seconds), else at max_rounds")
METHOD_VERDICT = ("after each timed round: a routing whose every stage's distribution-free order-statistic CI "
                  "half-width of the median is <= max(floor_fraction x floor(GPU, stage) x median, ci_abs_ms), once "
                  "rounds >= min_rounds and accumulated timed GPU seconds >= min_seconds, is not timed in later "
                  "rounds (dropped); stop on ci when every routing has converged, else on timeout (round-loop wall "
                  "seconds >= timeout_seconds), else at max_rounds; floors from the noise table at the run's start")
METHOD_STAGES = ("after each timed round: each stage of a routing whose distribution-free order-statistic CI "
                 "half-width of the median is <= max(floor_fraction x floor(GPU, stage) x median, ci_abs_ms), once "
                 "rounds >= min_rounds and accumulated timed GPU seconds >= min_seconds, is not timed in later "
                 "rounds (dropped), and a routing once none of its stages is left; stop on ci when every routing "
                 "has converged, else on timeout (round-loop wall seconds >= timeout_seconds), else at max_rounds; "
                 "floors from the noise table at the run's start")


def method_of(rule: StopRule) -> str:
    """The ``timing.stop.method`` a run under ``rule`` records."""
    return METHOD if rule.floor_fraction is None else METHOD_STAGES if rule.drop == "stage" else METHOD_VERDICT


def run_floors(gpu_name: str | None, stages: Sequence[str], table: str | Path | None = None) -> dict[str, float]:
    """The verdict rule's floors: per stage, the noise table's floor of this GPU x stage (``compare``'s, at
    ``table``, default the committed ``results/noise/floors.json``), or ``compare``'s fallback 2% where the
    table lacks the pair (another GPU, a stage no two runs repeated). UserError when the table is unreadable."""
    floors, _ = compare_floors(read_floors(table), stages, [gpu_name], FALLBACK_FLOOR)
    return floors


def target_ms(rule: StopRule, floors: Mapping[str, float] | None, stage: str, median_ms: float) -> float:
    """A cell's CI half-width target (ms): ``max(ci_rel x median, ci_abs_ms)``, or under the verdict rule
    ``max(floor_fraction x floors[stage] x median, ci_abs_ms)`` (a stage the floors lack: ``compare``'s 2%)."""
    rel = (rule.ci_rel if rule.floor_fraction is None or floors is None else
        rule.floor_fraction * floors.get(stage, FALLBACK_FLOOR))
    return max(rel * median_ms, rule.ci_abs_ms)


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


def half_width_and_median(samples_ms: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """``(CI half-width, median)`` (ms) of ``samples_ms`` from one sort, None without an interval. The median has
    ``np.median``'s arithmetic (the middle value, or the mean ``(a + b) / 2`` of the two middle ones): the same bits."""
    ranks = median_ci_ranks(len(samples_ms), confidence)
    if ranks is None:
        return None
    xs = sorted(float(v) for v in samples_ms)
    n = len(xs)
    median = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return (xs[ranks[1]] - xs[ranks[0]]) / 2, median


def half_width(samples_ms: Sequence[float], confidence: float = 0.95) -> float | None:
    """The CI half-width (ms) of the median of ``samples_ms``, None without an interval."""
    stats = half_width_and_median(samples_ms, confidence)
    return None if stats is None else stats[0]


def cell_ratios(samples: Mapping[str, Sequence[float]], rule: StopRule,
                floors: Mapping[str, float] | None = None) -> dict[str, float | None]:
    """``{"pattern/stage": half-width / target}`` (None: no interval yet) of every cell's samples so far (one sort
    per cell: :func:`half_width_and_median`; ``validate`` replays this after every round of a run)."""
    out: dict[str, float | None] = {}
    for key, x in samples.items():
        stats = half_width_and_median(x, rule.confidence)
        out[key] = (None if stats is None else
            stats[0] / target_ms(rule, floors, key.rsplit("/", 1)[1], stats[1]))
    return out


def round_entry(rounds: int, elapsed_seconds: float, samples: Mapping[str, Sequence[float]],
                rule: StopRule, floors: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The trace entry after ``rounds`` timed rounds: ``samples`` = ``{"pattern/stage": timed ms so far}``.

    ``unconverged`` counts the cells whose half-width is above target (or who have no interval yet);
    ``worst``/``worst_ratio`` name the largest ``half-width / target`` among cells with an interval (None
    when none has one). ``floors``: the verdict rule's (:func:`target_ms`)."""
    worst, worst_ratio, unconverged = None, None, 0
    for key, ratio in cell_ratios(samples, rule, floors).items():
        if ratio is None:
            unconverged += 1
            continue
        unconverged += ratio > 1
        if worst_ratio is None or ratio > worst_ratio:
            worst, worst_ratio = key, ratio
    timed = math.fsum(v for x in samples.values() for v in x) / 1000.0
    return {"rounds": rounds, "elapsed_seconds": elapsed_seconds, "timed_seconds": timed,
            "unconverged": int(unconverged), "worst": worst, "worst_ratio": worst_ratio}


def decision(entry: Mapping[str, Any], rule: StopRule, max_rounds: int) -> str | None:
    """Which criterion stops the run at this trace entry (:data:`nsa_exp.core.protocol.STOP_REASONS`, asked in
    that order), or None to go on. Under the verdict rule ``unconverged == 0`` is every routing dropped."""
    if (entry["rounds"] >= rule.min_rounds and entry["timed_seconds"] >= rule.min_seconds
            and entry["unconverged"] == 0):
        return CI
    if entry["elapsed_seconds"] >= rule.timeout_seconds:
        return TIMEOUT
    return MAX_ROUNDS if entry["rounds"] >= max_rounds else None


class StopTracker:
    """Feeds the round loop's records to the rule: ``update(round_records)`` after each round returns True when
    the run must stop; :meth:`record` is the result's ``timing.stop`` block. ``clock`` (host seconds, e.g.
    ``time.monotonic``) is read when the tracker is made (the loop's start) and after each round.

    Under the verdict rule (``rule.floor_fraction``; ``floors`` per stage, :func:`run_floors`) ``active`` is the
    routings of ``cells`` still timed: once ``min_rounds`` and ``min_seconds`` are reached, a routing whose every
    stage has converged leaves it after the round, named in that trace entry's ``dropped``; the round loop times
    only ``active`` in later rounds (:meth:`later_order`). With ``rule.drop == "stage"`` each converged stage of a
    routing leaves on its own (the entry's ``dropped_stages``, ``"routing/stage"``), the loop times only
    :meth:`stages_of` the routing, and the routing leaves once it has none left."""

    def __init__(self, rule: StopRule, max_rounds: int, source: str, clock: Callable[[], float],
                 cells: Sequence[str] = (), floors: Mapping[str, float] | None = None):
        self.rule, self.max_rounds, self.source, self.clock = rule, max_rounds, source, clock
        self.verdict = rule.floor_fraction is not None
        if self.verdict and floors is None:
            raise ValueError("the verdict rule (floor_fraction) needs the floors of the run's GPU")
        self.by_stage = self.verdict and rule.drop == "stage"
        self.floors = None if floors is None else dict(floors)
        self.cells = list(cells)
        self.active = list(cells)
        self.cell_rounds = dict.fromkeys(cells, 0)
        self.stages: dict[str, list[str]] = {}              # drop "stage": routing -> its stages still timed
        self.stage_rounds: dict[str, dict[str, int]] = {}   # drop "stage": routing -> stage -> rounds timed
        self.last: list[str] = []
        self.t0 = clock()
        self.samples: dict[str, list[float]] = {}
        self.trace: list[dict[str, Any]] = []
        self.stopped_by: str | None = None

    def stages_of(self, cell: str) -> list[str] | None:
        """The stages of ``cell`` the next round times (drop ``stage``), None for every stage it has."""
        return list(self.stages[cell]) if self.by_stage and cell in self.stages else None

    def update(self, round_records: Sequence[Mapping[str, Any]]) -> bool:
        timed = [r for r in round_records if not r["warmup"]]
        if not timed:
            return False
        for rec in timed:
            cell = rec["pattern"]
            self.cell_rounds[cell] = self.cell_rounds.get(cell, 0) + 1
            ms = rec["ms"]
            if self.by_stage:  # the stages this round was to time (a rerun's missing one counts, and shows later)
                wanted = self.stages.setdefault(cell, list(ms))
                counts = self.stage_rounds.setdefault(cell, {})
                for stage in wanted:
                    counts[stage] = counts.get(stage, 0) + 1
                ms = {s: ms[s] for s in wanted if s in ms}
            for stage, x in ms.items():
                self.samples.setdefault(f"{cell}/{stage}", []).append(x)
        self.last = [rec["pattern"] for rec in timed]
        floors = self.floors if self.verdict else None
        entry = round_entry(len(self.trace) + 1, self.clock() - self.t0, self.samples, self.rule, floors)
        if self.verdict:
            rule, ratios = self.rule, cell_ratios(self.samples, self.rule, floors)
            ready = entry["rounds"] >= rule.min_rounds and entry["timed_seconds"] >= rule.min_seconds

            def converged(key: str) -> bool:
                r = ratios.get(key)
                return ready and r is not None and r <= 1

            if self.by_stage:
                done = [f"{c}/{s}" for c in self.active for s in self.stages.get(c, []) if converged(f"{c}/{s}")]
                for key in done:
                    cell, stage = key.rsplit("/", 1)
                    self.stages[cell].remove(stage)
                entry["dropped_stages"] = done
                dropped = [c for c in self.active if c in self.stages and not self.stages[c]]
            else:
                dropped = [c for c in self.active if ready and all(
                    converged(k) for k in ratios if k.rsplit("/", 1)[0] == c)]
            self.active = [c for c in self.active if c not in dropped]
            entry["dropped"] = dropped
        self.trace.append(entry)
        self.stopped_by = decision(entry, self.rule, self.max_rounds)
        return self.stopped_by is not None

    def later_order(self, order: Sequence[str]) -> list[str]:
        """A later round's planned ``order`` cut to the routings still timed."""
        return [c for c in order if c in self.active] if self.verdict else list(order)

    def record(self) -> dict[str, Any]:
        last = self.trace[-1] if self.trace else {"rounds": 0, "elapsed_seconds": self.clock() - self.t0}
        out = {"rule": self.rule.to_dict(), "source": self.source,
               "method": method_of(self.rule), "max_rounds": self.max_rounds,
               "stopped_by": self.stopped_by or MAX_ROUNDS, "rounds": last["rounds"],
               "elapsed_seconds": last["elapsed_seconds"], "trace": self.trace}
        if self.verdict:
            out |= {"floors": self.floors, "cell_rounds": self.cell_rounds, "held_by": self.last,
                    "saved_cell_rounds": len(self.cells) * self.max_rounds - sum(self.cell_rounds.values())}
        if self.by_stage:
            n_stages = sum(len(by) for by in self.stage_rounds.values())
            out |= {"stage_rounds": self.stage_rounds,
                    "saved_stage_rounds": n_stages * self.max_rounds - sum(
                        n for by in self.stage_rounds.values() for n in by.values())}
        return out


def rerun(doc: Mapping[str, Any]) -> tuple[StopTracker, list[list[str]]]:
    """The verdict rule run again over a result's own observations (``validate``'s recompute): the tracker fed
    the document's timed rounds in its recorded orders (each routing's observations in round order, the recorded
    wall clock), and the timed round orders the rule makes of the planned seeded ones (``timing.order_mode``,
    ``order_seed``, the cells of ``patterns``). Diffing its trace, record and orders with the recorded ones is the
    check; the run's decisions and drops are the tracker's, not a second implementation of them."""
    t, stop = doc["timing"], doc["timing"]["stop"]
    names, warm = list(doc["patterns"]), t["warmup_rounds"]
    elapsed = iter([0.0, *[e["elapsed_seconds"] for e in stop["trace"]]])
    tracker = StopTracker(StopRule(**stop["rule"]), stop["max_rounds"], stop["source"], lambda: next(elapsed, 0.0),
                          names, stop["floors"])
    planned = round_orders(names, warm + stop["max_rounds"], t["order_mode"], t["order_seed"])[warm:]
    cursor = dict.fromkeys(names, 0)
    orders: list[list[str]] = []
    for recorded in t["round_orders"][warm:]:
        if len(orders) >= len(planned):
            break
        order = tracker.later_order(planned[len(orders)])
        orders.append(order)
        records = []
        for p in recorded if sorted(recorded) == sorted(order) else order:
            i = cursor[p]
            cursor[p] += 1
            wanted = tracker.stages_of(p)
            records.append({"pattern": p, "warmup": False,
                            "ms": {s: st["raw_ms"][i] for s, st in doc["patterns"][p]["stages"].items()
                                   if i < len(st["raw_ms"]) and (wanted is None or s in wanted)}})
        if tracker.update(records):
            break
    return tracker, orders


def observations(doc: Mapping[str, Any]) -> dict[str, list[float]]:
    """``{"pattern/stage": raw_ms}`` of a bench result or sweep point (each list in round order)."""
    return {f"{p}/{s}": st["raw_ms"] for p, v in doc["patterns"].items() for s, st in v["stages"].items()}


def replay(doc: Mapping[str, Any], rule: StopRule, floors: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Where ``rule`` would have stopped a run that timed every round (a committed result): the tracker fed its
    rounds in order (only the routings, and under drop ``stage`` the stages, still timed, under the verdict rule
    with ``floors``; the wall clock is not replayed: no timeout). Returns ``{"stopped_by", "rounds", "of",
    "last_to_settle", "cell_rounds", "stage_rounds", "timed_seconds"}`` (``last_to_settle``: the worst cell one
    round before the stop; ``cell_rounds``: rounds each routing was timed; ``stage_rounds``: each stage of it,
    ``{routing: {stage: rounds}}``; ``timed_seconds``: the GPU seconds of the observations the rule kept)."""
    reps = doc["timing"]["repetitions"]
    raw = {p: {s: st["raw_ms"] for s, st in v["stages"].items()} for p, v in doc["patterns"].items()}
    names = list(raw)
    tracker = StopTracker(rule, reps, "config", lambda: 0.0, names, floors)
    stopped, rounds = None, 0
    for n in range(reps):
        records = []
        for p in tracker.later_order(names):
            wanted = tracker.stages_of(p)
            records.append({"pattern": p, "warmup": False,
                            "ms": {s: x[n] for s, x in raw[p].items() if wanted is None or s in wanted}})
        if tracker.update(records):
            stopped, rounds = tracker.stopped_by, n + 1
            break
    before = tracker.trace[-2]["worst"] if stopped is not None and len(tracker.trace) > 1 else None
    stage_rounds = (tracker.stage_rounds if tracker.by_stage else
        {p: dict.fromkeys(raw[p], tracker.cell_rounds[p]) for p in names})
    return {"stopped_by": stopped, "rounds": rounds, "of": reps, "last_to_settle": before,
            "cell_rounds": tracker.cell_rounds, "stage_rounds": stage_rounds,
            "timed_seconds": tracker.trace[-1]["timed_seconds"] if tracker.trace else 0.0}
