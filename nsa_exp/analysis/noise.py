"""The one rule for "differs measurably", and the noise floor it needs: the spread of repeated measurements.

A **quantity** is one stage's median of one routing under one protocol on one GPU: the same shape (T
included), the same routing parameters, the same packing, the same L2 flush policy (``write`` when a run
predates the field: it moves the small stages, docs/METHOD.md) and the same autotune configs of every kernel
the stage launches (:func:`nsa_exp.core.stages.stage_kernels`). Several committed files measure the same
quantity: a formal run and its repeat, and every later session that timed it again (bench results, sweep
points). Their **spread** is ``max / min - 1`` of their medians, and, for its ratio to ``local`` in the
same file (same rounds, the local baseline under its own configs), ``max / min - 1`` of those ratios.

The **noise floor** ``f(GPU, stage)`` is the largest spread (medians or ratios) of any quantity of that
stage measured more than once on that GPU, at least :data:`MIN_FLOOR`; a comparison across two GPUs
uses the larger of the two floors. Only a file that timed the quantity over at least :data:`MIN_ROUNDS` rounds
is a member (one with fewer is kept in :attr:`Quantity.short`, out of every spread): the median of 10 or 20
rounds carries its own round-to-round noise, which the bootstrap CI of any comparison already holds. On the
committed H200 data the dK/dV ``sink-heavy`` median of the 20-round ``e1_h200_engine20`` run has a 95% CI of
63.5–66.7 ms, 5% wide, against the two 150-round runs' 63.57 and 63.66 ms (0.14% apart); letting it set the
floor made that floor 5.6%, the width of one short run's CI rather than a run-to-run difference.

**The rule** (:func:`judge`, the verdict of :func:`nsa_exp.analysis.compare.verdict`): a ratio with a
bootstrap 95% CI ``[lo, hi]`` *differs measurably* from 1 when the whole CI lies outside
``[1 - f, 1 + f]`` (``lo > 1 + f``: slower / larger; ``hi < 1 - f``: faster / smaller); it is *the same
within noise* when the whole CI lies inside that band; otherwise it is *unresolved*. The bootstrap CI
holds the round-to-round noise of one run, the floor the run-to-run and session-to-session noise no
single run can show.

>>> judge((1.08, 1.09), 0.005), judge((0.999, 1.002), 0.005), judge((1.003, 1.02), 0.005)
('differs', 'same', 'unresolved')
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.families import BASELINE_PATTERN
from ..core.records import RunRecord
from ..core.stages import stage_kernels

#: Lowest floor of any stage (a stage whose repeat medians agree to the last digit would otherwise get a floor
#: of 0 and no CI could ever read ``same``): 0.5%.
MIN_FLOOR = 0.005

#: Fewest timed rounds of a file whose median may set a floor (module doc): the formal runs and their repeats
#: time 150, the H100 development run 30; bench sessions of 10-20 rounds and sweep points of 10 fall below it.
MIN_ROUNDS = 30

def verdict(ci: tuple[float, float], floor: float) -> str:
    """``compare``'s verdict for a ratio CI ``(low, high)`` and noise floor ``floor`` (a fraction): ``slower``
    (whole CI above ``1 + floor``), ``faster`` (below ``1 - floor``), ``same`` (inside), else ``unclear``.

    >>> [verdict(ci, 0.02) for ci in ((1.05, 1.08), (0.90, 0.95), (0.99, 1.01), (0.99, 1.05))]
    ['slower', 'faster', 'same', 'unclear']
    """
    low, high = ci
    if low > 1 + floor:
        return "slower"
    if high < 1 - floor:
        return "faster"
    if low >= 1 - floor and high <= 1 + floor:
        return "same"
    return "unclear"


#: A verdict of :func:`verdict` as the rule reads it.
JUDGEMENT = {"slower": "differs", "faster": "differs", "same": "same", "unclear": "unresolved"}


def judge(ci: Sequence[float], floor: float) -> str:
    """``differs`` | ``same`` | ``unresolved`` for a ratio's 95% CI and noise floor ``floor`` (module rule)."""
    return JUDGEMENT[verdict((float(ci[0]), float(ci[1])), floor)]


@dataclass(frozen=True)
class Member:
    """One file's measurement of a quantity: its median, and its ratio to ``local`` in the same rounds."""

    path: str
    median_ms: float
    ratio: float | None
    n_obs: int


@dataclass
class Quantity:
    """One quantity (module doc) and every committed file that measured it."""

    gpu: str
    stage: str
    pattern: str
    T: int
    key: str
    label: str = ""
    #: the files with at least :data:`MIN_ROUNDS` timed rounds: the spread is theirs
    members: list[Member] = field(default_factory=list)
    #: the files that timed it over fewer rounds (listed, never counted)
    short: list[Member] = field(default_factory=list)

    @property
    def median_spread(self) -> float:
        m = [x.median_ms for x in self.members]
        return max(m) / min(m) - 1

    @property
    def ratio_spread(self) -> float:
        r = [x.ratio for x in self.members if x.ratio is not None]
        return max(r) / min(r) - 1 if len(r) > 1 else 0.0

    @property
    def spread(self) -> float:
        return max(self.median_spread, self.ratio_spread)


def routing_label(params: Mapping[str, Any], packing: Mapping[str, Any] | None = None) -> str:
    """``sink-heavy(sinks=4)``, ``zipf(exponent=1.0)``, ``local`` (and ``, packed {...}``).

    >>> routing_label({"name": "sink-heavy", "sinks": 4, "heads": [3]}), routing_label({"name": "local"})
    ('sink-heavy(heads=[3],sinks=4)', 'local')
    """
    rest = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(params.items()) if k != "name")
    label = f"{params['name']}({rest})" if rest else str(params["name"])
    return label + (f", packed {json.dumps(packing, sort_keys=True)}" if packing else "")


def _configs(run: RunRecord, pattern: str, stage: str) -> dict[str, Any]:
    """The autotune configs of the kernels ``stage`` launches for ``pattern`` (a per-pattern arm's own)."""
    per = (run.autotune.get("per_pattern") or {}).get(pattern)
    kernels = run.autotune.get("kernels") or {}
    return {k: (per or {}).get(k, (kernels.get(k) or {}).get("best_config")) for k in stage_kernels(stage)}


def quantities(runs: Iterable[tuple[str, RunRecord]]) -> list[Quantity]:
    """Every quantity the runs measured (``(path, record)`` pairs: bench results and sweep points), with
    its members (and its files of fewer than :data:`MIN_ROUNDS` rounds, :attr:`Quantity.short`), in first-seen
    order; a run without a GPU name is skipped."""
    out: dict[str, Quantity] = {}
    for path, run in runs:
        gpu = run.gpu_name
        if gpu is None:
            continue
        shape = dict(run.shape)
        packing = run.config.get("packing")
        flush = run.timing.flush_policy or (run.config.get("timing") or {}).get("flush") or "write"
        for name, p in run.patterns.items():
            base = run.patterns.get(BASELINE_PATTERN)
            for stage, s in p.stages.items():
                key = json.dumps([gpu, stage, p.params, shape, packing, flush, _configs(run, name, stage),
                                  _configs(run, BASELINE_PATTERN, stage) if base is not None else None],
                                 sort_keys=True)
                label = routing_label(p.params, packing)
                q = out.setdefault(key, Quantity(gpu, stage, name, int(shape["T"]), key, label))
                ratio = (None if base is None or name == BASELINE_PATTERN or stage not in base.stages
                         else s.median_ms / base.stages[stage].median_ms)
                (q.members if s.n_obs >= MIN_ROUNDS else q.short).append(Member(path, s.median_ms, ratio, s.n_obs))
    return list(out.values())


def repeated(qs: Iterable[Quantity]) -> list[Quantity]:
    """The quantities more than one file measured over at least :data:`MIN_ROUNDS` rounds."""
    return [q for q in qs if len({m.path for m in q.members}) > 1]


def floors(qs: Iterable[Quantity]) -> dict[tuple[str, str], float]:
    """``f(GPU, stage)``: the largest spread of a repeated quantity, at least :data:`MIN_FLOOR` (module doc).
    A stage that GPU measured but no two files measured under the same protocol (e.g. a repeat that re-tuned
    other configs) borrows the largest floor of that GPU's other stages (:func:`borrowed`)."""
    qs = list(qs)
    out: dict[tuple[str, str], float] = {}
    for q in repeated(qs):
        out[q.gpu, q.stage] = max(out.get((q.gpu, q.stage), MIN_FLOOR), q.spread)
    for key in borrowed(qs):
        out[key] = max([MIN_FLOOR] + [v for (g, _), v in out.items() if g == key[0]])
    return out


def borrowed(qs: Iterable[Quantity]) -> list[tuple[str, str]]:
    """The (GPU, stage) pairs measured, but never twice under one protocol (their floor is borrowed)."""
    qs = list(qs)
    own = {(q.gpu, q.stage) for q in repeated(qs)}
    return sorted({(q.gpu, q.stage) for q in qs} - own)


def floor_of(table: Mapping[tuple[str, str], float], stage: str, *gpus: str) -> float:
    """The floor of a comparison on ``gpus`` (one, or the two of a cross-GPU ratio): the larger floor."""
    return max([MIN_FLOOR] + [table.get((g, stage), MIN_FLOOR) for g in gpus])


#: The most of one pattern x stage's timed observations a repeat may share with its run (:func:`shared_observations`):
#: the committed H100 pair shares at most 3 of 150 in any stage (2 %), the rest 0.3 % overall (CUDA events resolve
#: 0.5 us).
SHARED_LIMIT = 0.2
#: Two observations within this relative distance are one (CUDA events resolve 0.5 us, ~1e-5 of a stage's latency):
#: a copy with every observation moved by one ulp shared none bit for bit (a re-attacker, 2026-12-06).
SAME_REL = 1e-9


#: A cell's observations are another cell's reordered, or scaled by one factor, when the ratios of the two sorted
#: lists spread less than this (relative). Two runs' do not: over every pair of different committed runs the
#: smallest spread is 5e-5 (a 20-round cell of the 0.01 ms delta preprocess, on the 0.5 us tick).
SCALED_REL = 1e-6
#: A cell is judged only with at least this many observations, nearly all distinct: a short stage's few 0.5 us ticks
#: repeat, and a 5-round cell of two different runs shared 4 of 5 at their places (an H100 verify run and an H200
#: stop run); in the cells judged, two different committed runs agree at 2e-4 of the places (294 of 1,381,292) and
#: at most 2 of 20 in one cell.
SCALED_MIN_N = 20


def _judged(mine: Sequence[float]) -> bool:
    """Whether a cell of ``mine`` is judged by :func:`cell_share` (:data:`SCALED_MIN_N`, 90% distinct)."""
    return len(mine) >= SCALED_MIN_N and len(set(mine)) >= 0.9 * len(mine)


def _reordered_or_scaled(mine: list[float], other: list[float]) -> bool:
    """``other`` is ``mine`` shuffled, or times one factor (:data:`SCALED_REL`): a shuffled or rescaled copy of a
    run passed as another run, sharing no observation at the same place (a re-attacker, 2026-12-07).

    >>> _reordered_or_scaled([float(i) for i in range(1, 21)], [1.00000001 * i for i in range(20, 0, -1)])
    True
    """
    if len(mine) != len(other) or not _judged(mine):
        return False
    ratios = [x / y for x, y in zip(sorted(mine), sorted(other), strict=True) if x > 0 and y > 0]
    return len(ratios) == len(mine) and max(ratios) / min(ratios) - 1 < SCALED_REL


def shared_observations(a: dict[str, Any], b: dict[str, Any]) -> float:
    """:func:`shared_share` of the pattern x stage cells of two runs: ``a``'s timed observations (``raw_ms``) beside
    ``b``'s of the same pattern and stage.

    >>> run = {"patterns": {"local": {"stages": {"csr": {"raw_ms": [float(i) for i in range(1, 21)]}}}}}
    >>> shared_observations(run, run), shared_observations(run, {"patterns": {}})
    (1.0, 0.0)
    """
    return shared_share((s.get("raw_ms") or [],
                         ((((b.get("patterns") or {}).get(name) or {}).get("stages") or {}).get(stage) or {}).get(
                             "raw_ms") or [])
                        for name, cell in (a.get("patterns") or {}).items()
                        for stage, s in (cell.get("stages") or {}).items())


def shared_share(cells: Iterable[tuple[Sequence[float], Sequence[float]]]) -> float:
    """How much of one run's observations another holds, over cells ``(mine, other)``: the largest
    :func:`cell_share` of a cell, or the share of every observation held at its place over all cells together,
    whichever is larger. Two runs' CUDA-event latencies do not agree so (a copy of a run with one warm-up latency
    nudged by 1e-6 ms passed as its own repeat: an attacker, 2026-12-06; a copy shuffled or scaled by one factor, a
    copy whose every cell is cut below the cells judged: a re-attacker, 2026-12-07); over every pair of different
    committed runs the whole-run share is at most 0.036 (quantised short stages included) and a judged cell's 0.1.

    >>> shared_share([([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]), ([4.0], [5.0])])
    0.75
    """
    most, hits, total = 0.0, 0, 0
    for mine, other in cells:
        most = max(most, cell_share(mine, other))
        hits, total = hits + _hits(mine, other), total + len(mine)
    return max(most, hits / total if total else 0.0)


def _hits(mine: Sequence[float], other: Sequence[float]) -> int:
    """How many of ``mine`` ``other`` holds at the same place, bit for bit or within :data:`SAME_REL`."""
    return sum(x == y or math.isclose(x, y, rel_tol=SAME_REL) for x, y in zip(mine, other, strict=False))


def cell_share(mine: Sequence[float], other: Sequence[float]) -> float:
    """The share of one cell's observations ``mine`` that ``other`` holds at the same place (bit for bit or within
    :data:`SAME_REL`), or 1.0 when ``other`` is ``mine`` reordered or scaled (:func:`_reordered_or_scaled`); 0.0 for
    a cell not judged (:func:`_judged`: too few observations, or few distinct). :func:`shared_share` takes the
    largest over a run's cells, a bench result's or a peer result's (a copy of a peer result compared with it read
    'same': a re-attacker, 2026-12-07).

    >>> cell_share([float(i) for i in range(20)], [float(i) if i % 2 else -1.0 for i in range(20)])
    0.5
    >>> cell_share([1.0, 2.0], [1.0, 2.0])  # too few to judge
    0.0
    """
    if not _judged(mine):
        return 0.0
    if _reordered_or_scaled(list(mine), list(other)):
        return 1.0
    return _hits(mine, other) / len(mine)
