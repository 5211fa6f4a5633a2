"""The measurement the engine hands every arm: the round plan, the rounds that ran, their observations, the
stop rule's record; and the one place a document's ``timing`` block is built (:meth:`Measurement.timing`).

The engine owns the protocol (issue 29): an arm says *which* cells it times and, where it differs from its
config, how many rounds or which flush; :class:`RoundPlan` turns that into the round orders
(:func:`nsa_exp.core.protocol.round_orders`), the engine times them (``gpu/engine.time_cells``) and returns a
:class:`Measurement`, from which every GPU kind builds its record. The command line's overrides
(``--repetitions``, ``--stop-rule``) are folded into the config once, at the entry point
(:meth:`nsa_exp.core.config.Config.overridden`), so the plan reads one set of values.

>>> from nsa_exp.core.config import StopRule
>>> plan = RoundPlan(("local", "zipf"), warmup=1, repetitions=2, order_mode="fixed-rounds", order_seed=0,
...                  flush_policy="write", l2_flush_bytes=1 << 20)
>>> plan.orders()
[['local', 'zipf'], ['local', 'zipf'], ['local', 'zipf']]
>>> m = Measurement(plan, plan.orders()[:2], records=[])   # a stop rule ended it after one timed round
>>> m.repetitions, m.timing(["dq"]).round_orders == plan.orders()[:2]
(1, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from .config import Config, StopRule
from .protocol import LAUNCH_GUARD_CYCLES, PERCENTILE_METHOD, STOP_SOURCES, TIMING_METHOD, round_orders
from .records import StageStats, Timing, stage_records

#: The phases of a GPU run, in the order they run (a bench result's ``phases``, host seconds each): the gates
#: (environment, FLA sources, routings, equal edges), the inputs and launchers, tuning (or pinning) FLA's
#: autotuners, the timed rounds (warm-up included), the CUPTI cross-check pass, the full-shape reproduction and
#: memory accounting, and building the record (statistics, metadata). Writing the file comes after the record
#: and is not in it.
PHASES = ("gates", "inputs", "tune", "rounds", "cupti", "reproduction", "record")


class PhaseClock:
    """Host seconds spent in each named phase of one run, read from ``clock`` (e.g. ``time.monotonic``).

    ``with phases("tune"): ...`` adds the block's time to ``tune``; a phase entered inside another pauses the
    outer one (bench's CUPTI pass and reproduction run inside its record hook), so no second is counted twice
    and the phases sum to at most the run's wall time. :meth:`seconds` is every phase of :data:`PHASES`
    (0.0 for one that did not run), the open ones counted up to now.

    >>> t = iter([0.0, 2.0, 3.0, 7.0]).__next__   # enter record, enter cupti, leave it, leave record
    >>> phases = PhaseClock(t)
    >>> with phases("record"):
    ...     with phases("cupti"):
    ...         pass
    >>> {k: v for k, v in phases.seconds().items() if v}
    {'cupti': 1.0, 'record': 6.0}
    """

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.spent: dict[str, float] = {}
        self.open: list[list[Any]] = []  # [name, host seconds when it last (re)started], innermost last

    def _pause(self, now: float) -> None:
        if self.open:
            name, since = self.open[-1]
            self.spent[name] = self.spent.get(name, 0.0) + now - since

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if name not in PHASES:
            raise ValueError(f"phase {name!r} is not one of {PHASES}")
        now = self.clock()
        self._pause(now)
        self.open.append([name, now])
        try:
            yield
        finally:
            now = self.clock()
            self._pause(now)
            self.open.pop()
            if self.open:
                self.open[-1][1] = now

    def seconds(self) -> dict[str, float]:
        """``{phase: host seconds}`` for every phase of :data:`PHASES`, in that order."""
        spent = dict(self.spent)
        if self.open:
            name, since = self.open[-1]
            spent[name] = spent.get(name, 0.0) + self.clock() - since
        return {p: spent.get(p, 0.0) for p in PHASES}


#: One record of the round loop: ``{"round", "pattern", "warmup", "ms": {stage: ms}}`` (+ ``telemetry``,
#: ``rewarm`` for the warm-up a resumed run re-ran).
Observation = dict[str, Any]


@dataclass(frozen=True)
class RoundPlan:
    """Which cells are timed, in how many rounds, in which order, with which L2 flush, under which stop rule.

    ``cells``: the names the rounds interleave (routings; an arm's own keys for the autotune matrix and the
    what-if arms); ``warmup`` rounds come first (kept, flagged), then ``repetitions`` timed ones;
    ``order_mode`` / ``order_seed`` make the orders (:func:`nsa_exp.core.protocol.round_orders`);
    ``flush_policy`` (:data:`nsa_exp.core.protocol.FLUSH_POLICIES`) and ``l2_flush_bytes`` the sweep before each
    stage; ``stop`` (None: every round) and where it came from (:data:`nsa_exp.core.protocol.STOP_SOURCES`).
    """

    cells: tuple[str, ...]
    warmup: int
    repetitions: int
    order_mode: str
    order_seed: int
    flush_policy: str
    l2_flush_bytes: int
    stop: StopRule | None = None
    stop_source: str = STOP_SOURCES[0]

    @classmethod
    def of(cls, cells: Sequence[str], config: Config, *, repetitions: int | None = None, flush: str | None = None,
           stop: bool = True) -> RoundPlan:
        """The plan of ``config``'s timing for ``cells``; ``repetitions`` / ``flush``: an arm whose protocol
        differs from its config's (the what-if arms and sweep points have always flushed with ``write``; the
        autotune matrix and the what-if arms time their own round count); ``stop=False``: an arm that times
        every round whatever the config asks (the release arm, the autotune matrix, the what-if arms)."""
        t = config.timing
        return cls(tuple(cells), t.warmup_rounds, t.repetitions if repetitions is None else repetitions, t.order,
                   config.seeds.order, t.flush if flush is None else flush, t.l2_flush_bytes,
                   t.stop if stop else None, t.stop_source)

    @property
    def rounds(self) -> int:
        """Warm-up and timed rounds planned."""
        return self.warmup + self.repetitions

    def orders(self) -> list[list[str]]:
        """Every planned round's cells in call order."""
        return round_orders(list(self.cells), self.rounds, self.order_mode, self.order_seed)


@dataclass(frozen=True)
class Measurement:
    """What one group of cells measured: its ``plan``, the ``orders`` of the rounds that ran (the plan's, cut
    where the stop rule ended the loop), every ``records`` entry of the round loop (one per round x cell) and,
    under the stop rule, its ``stop`` record (a result's ``timing.stop``: rule, source, reason, trace)."""

    plan: RoundPlan
    orders: list[list[str]]
    records: list[Observation] = field(default_factory=list)
    stop: dict[str, Any] | None = None

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], config: Config) -> Measurement:
        """The measurement a bench result (its JSON, ``config`` read from its ``config``) was built from: one record
        per (round, pattern) in the order they were taken (its telemetry samples name each one's round, pattern,
        warm-up and re-warm flags; the observations are its stages' ``warmup_ms`` / ``raw_ms`` in that order), its
        round orders and stop record. A stop rule that drops converged stages (``drop: "stage"``) times a stage in a
        pattern's first ``len(raw_ms)`` timed rounds only (dropping is for good), so a later record holds the stages
        still timed. ``checking/bench_result.build`` of it gives the document back, byte for byte
        (``tests/gpu/test_measurement_path.py``, ``tests/core/test_measurement.py``)."""
        patterns = doc["patterns"]
        cursor = {(p, w): 0 for p in patterns for w in (True, False)}
        records = []
        for s in doc["telemetry"]["samples"]:
            p, w = s["pattern"], s["warmup"]
            key, i = "warmup_ms" if w else "raw_ms", cursor[(p, w)]
            cursor[(p, w)] += 1
            telemetry = {k: v for k, v in s.items() if k not in ("round", "pattern", "warmup", "rewarm")}
            record = {"round": s["round"], "pattern": p, "warmup": w,
                      "ms": {st: v[key][i] for st, v in patterns[p]["stages"].items() if i < len(v[key])},
                      "telemetry": telemetry or None}
            if s.get("rewarm"):
                record["rewarm"] = True
            records.append(record)
        t = doc["timing"]
        stop = t.get("stop")
        planned = t["repetitions"] if stop is None else stop["max_rounds"]
        plan = replace(RoundPlan.of(list(patterns), config, repetitions=planned),
                       **({} if stop is None else {"stop": StopRule(**stop["rule"]), "stop_source": stop["source"]}))
        return cls(plan, [list(o) for o in t["round_orders"]], records, None if stop is None else dict(stop))

    @property
    def repetitions(self) -> int:
        """Timed rounds that ran."""
        return len(self.orders) - self.plan.warmup

    def with_records(self, records: Sequence[Observation]) -> Measurement:
        """This measurement holding ``records`` (a resumed bench: the journal's rounds, then this process's)."""
        return replace(self, records=list(records))

    def stage_stats(self, names: Sequence[str], stages: Sequence[str]) -> dict[str, dict[str, StageStats]]:
        """Per cell and stage, the :class:`~nsa_exp.core.records.StageStats` of the records."""
        return stage_records(self.records, names, stages)

    def timing(self, stages: Sequence[str], *, method: str = TIMING_METHOD, timer: str | None = None,
               flush_recorded: bool = True, resumed: bool | None = None,
               untimed_prerequisites: Sequence[str] | None = None) -> Timing:
        """The document's ``timing`` block: method, rounds, orders, flush, spin, ``stages`` timed, the stop record.

        ``flush_recorded=False``: a sweep point (its flush is always ``write``, never recorded); ``timer``: a
        release result's (``cuda-events`` or ``host-clock``); ``resumed``: a bench result's;
        ``untimed_prerequisites``: a sweep point's stages run but not timed."""
        plan = self.plan
        return Timing(method=method, timer=timer, warmup_rounds=plan.warmup, repetitions=self.repetitions,
                      order_mode=plan.order_mode, order_seed=plan.order_seed, round_orders=self.orders,
                      l2_flush_bytes=plan.l2_flush_bytes, flush_policy=plan.flush_policy if flush_recorded else None,
                      launch_guard_cycles=LAUNCH_GUARD_CYCLES, percentile_method=PERCENTILE_METHOD,
                      stages=list(stages), resumed=resumed,
                      untimed_prerequisites=None if untimed_prerequisites is None else list(untimed_prerequisites),
                      stop=None if self.stop is None else dict(self.stop))
