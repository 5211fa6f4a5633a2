"""``compare A.json B.json``: is B faster, slower or the same as A, per pattern x stage?

For every pattern x stage both results timed: the ratio of medians ``median(B) / median(A)`` of the
timed (non-warm-up) observations, its 95% CI from ``scipy.stats.bootstrap`` (percentile method,
fixed seed; A and B are independent runs, so their rounds are resampled separately: ``paired=False``),
and a verdict under this rule, with ``f`` the stage's noise floor::

    CI low  > 1 + f                  -> slower
    CI high < 1 - f                  -> faster
    1 - f <= CI low, CI high <= 1 + f -> same
    otherwise                         -> unclear

The floor ``f`` of each stage comes, by default, from the committed noise table
(:mod:`nsa_exp.analysis.noise_table`, ``results/noise/floors.json``): the larger of the two runs' GPUs' floors of
the stage, the same floor ``report`` and ``validate`` use; a stage whose GPU the table lacks gets
``DEFAULT_FLOOR`` (the document names the lacking pairs). ``--floor X`` sets one floor for every stage;
``--noise-from X Y`` takes it from one repeat pair: per stage, the largest ``|median(Y)/median(X) - 1|`` over
the patterns, never below ``MIN_FLOOR``. Which source was used, and the floor of each stage, is recorded in
the document's ``noise_floor`` (``kind`` table | default | repeat).

``cycles=True`` compares in SM-cycle space: each observation (ms) is multiplied by the SM clock (MHz)
NVML sampled right after that pattern's calls in that round (``telemetry.samples``), giving kcycles;
a result without recorded clocks is refused.

Results are refused (:class:`UserError`, one line, exit 2) when their shape or routings differ
(patterns, their parameters, the routing seed, the inputs seed), naming every difference.

A or B may be a release result (the release arm, NOT the pinned experiment): the rows are then the public
calls both timed and the pinned stages whose kernels correspond (:mod:`.release_compare` says what pairs with
what), judged by the same rule; ``--cycles`` and a host-clock result against a GPU one are refused. A or B may be a
peer result (``peer-bench``): against a bench result its FLA backward pairs with bench's ``full_bwd``, against
another peer result every cell both timed (:mod:`.peer_compare`).

>>> verdict((1.05, 1.08), 0.02), verdict((0.90, 0.95), 0.02), verdict((0.99, 1.01), 0.02)
('slower', 'faster', 'same')
>>> verdict((0.99, 1.05), 0.02)
'unclear'
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from ..core.records import BenchLike, BenchResult
from ..errors import UserError
from ..io.reader import same_file
from ..io.store import load_record
from .bootstrap import RESAMPLES, SEED, percentile_ci
from .noise import MIN_FLOOR, SHARED_LIMIT, shared_observations, shared_share, verdict
from .noise_table import FALLBACK_FLOOR, NOISE_TABLE, compare_floors, read_floors
from .peer_compare import format_peer_table, gpu_of, peer_block, peer_cells, peer_same_experiment
from .release_compare import Side, format_release_table, release_block, release_cells, same_experiment, timer

#: Noise floor of a stage whose GPU the noise table lacks (and of the stages a ``--noise-from`` pair did not time):
#: 2% (the H100 formal run and its repeat differ by <= 1.4% on every stage but the tiny CSR one).
DEFAULT_FLOOR = FALLBACK_FLOOR
#: Most bootstrap resamples: scipy resamples all at once (``resamples x rounds`` float64 per sample, ~0.5 GB
#: at 150 rounds); the CI's Monte-Carlo error at the default 10^4 is already well below :data:`MIN_FLOOR`.
MAX_RESAMPLES = 100_000
#: Fewest bootstrap resamples a verdict may rest on: a percentile interval needs on the order of a thousand
#: (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, section 13.3 and chapter 19); at 1 every
#: "95 % CI" has zero width and an unclear verdict reads same (an attacker, 2026-12-06).
MIN_RESAMPLES = 1000
VERDICTS = ("same", "faster", "slower", "unclear")
#: ``--fail-on`` choices and the verdicts each one fails on (exit 1).
FAIL_ON = {"slower": {"slower"}, "faster": {"faster"}, "unclear": {"unclear"},
           "any-change": {"slower", "faster", "unclear"}}
#: The verdict rule a comparison document records (its ``rule``); the floors' own rule is noise_table.FLOOR_RULE.
VERDICT_RULE = ("CI of median(B)/median(A) entirely above 1+floor: slower; entirely below 1-floor: faster; "
                "inside [1-floor, 1+floor]: same; otherwise unclear")


def ratio_ci(a: Any, b: Any, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """95% CI of ``median(b) / median(a)`` for two independent samples (``scipy.stats.bootstrap``,
    percentile method, ``paired=False``: each sample is resampled on its own)."""
    return percentile_ci("median_ratio", b, a, paired=False, resamples=resamples, seed=seed)


def routing_differences(a: BenchLike, b: BenchLike) -> list[str]:
    """What makes two bench results not the same experiment: shape, pattern set, a pattern's parameters,
    the routing or input seed. Each entry reads ``<field>: A <value> vs B <value>``."""
    a, b = BenchResult.coerce(a), BenchResult.coerce(b)
    out = [f"shape.{k}: A {a.shape.get(k)} vs B {b.shape.get(k)}"
           for k in sorted(set(a.shape) | set(b.shape)) if a.shape.get(k) != b.shape.get(k)]
    pa, pb = list(a.patterns), list(b.patterns)
    if sorted(pa) != sorted(pb):
        out.append(f"patterns: A {pa} vs B {pb}")
    for name in sorted(set(pa) & set(pb)):
        if a.patterns[name].params != b.patterns[name].params:
            out.append(f"patterns.{name}.params: A {a.patterns[name].params} vs B {b.patterns[name].params}")
    for seed in ("routing", "inputs"):
        sa, sb = a.config["seeds"].get(seed), b.config["seeds"].get(seed)
        if sa != sb:
            out.append(f"config.seeds.{seed}: A {sa} vs B {sb}")
    return out


def clock_series(result: BenchLike, pattern: str, label: str) -> np.ndarray:
    """The SM clock (MHz) sampled after each timed round of ``pattern``, in round order: a stage's ``raw_ms``
    are the first of them (all of them, unless the stop rule stopped timing that stage before the routing).

    Raises UserError when the result recorded no clocks for those rounds (telemetry unavailable)."""
    result = BenchResult.coerce(result)
    mhz = [s.get("sm_clock_mhz") for s in result.telemetry["samples"]
           if s["pattern"] == pattern and not s["warmup"] and not s.get("rewarm")]
    n = max(s.n_obs for s in result.patterns[pattern].stages.values())
    if len(mhz) != n or any(m is None for m in mhz):
        raise UserError(f"--cycles: {label} has no recorded SM clock for every timed round of {pattern} "
                        f"(telemetry.available {result.telemetry['available']}); compare it in time")
    if any(not m > 0 for m in mhz):  # a clock of 0 MHz would make every cycle count 0 and every ratio NaN
        raise UserError(f"--cycles: {label} records an SM clock of {min(mhz)} MHz for a timed round of {pattern} "
                        "(no clock was read); compare it in time")
    return np.asarray(mhz, dtype=np.float64)


def samples(result: BenchLike, pattern: str, stage: str, cycles: bool, label: str) -> np.ndarray:
    """A stage's timed observations: ms, or kcycles (ms x MHz) when ``cycles``."""
    result = BenchResult.coerce(result)
    raw = np.asarray(result.patterns[pattern].stages[stage].raw_ms, dtype=np.float64)
    return raw * clock_series(result, pattern, label)[:raw.size] if cycles else raw


def noise_floors(x: BenchLike, y: BenchLike, stages: list[str]) -> dict[str, float]:
    """Per stage of ``stages`` that both X and Y timed: the largest ``|median(Y)/median(X) - 1|`` over the
    patterns both results timed, at least :data:`MIN_FLOOR` (a stage the pair did not time has no floor here)."""
    x, y = BenchResult.coerce(x), BenchResult.coerce(y)
    stages = [s for s in stages if s in x.timing.stages and s in y.timing.stages]
    pats = [p for p in x.patterns if p in y.patterns]
    med = {(d, p, s): r.patterns[p].median(s) for d, r in (("x", x), ("y", y)) for p in pats for s in stages}
    return {s: max([MIN_FLOOR] + [abs(med["y", p, s] / med["x", p, s] - 1) for p in pats]) for s in stages}


def tally(rows: Sequence[dict[str, Any]], fail_on: str | None) -> tuple[dict[str, int], bool]:
    """The verdict counts of ``rows`` (every verdict of :data:`VERDICTS`) and whether a verdict is one
    ``fail_on`` fails on (:data:`FAIL_ON`; never without ``fail_on``).

    >>> tally([{"verdict": "same"}, {"verdict": "slower"}], "slower")
    ({'same': 1, 'faster': 0, 'slower': 1, 'unclear': 0}, True)
    """
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    return counts, fail_on is not None and any(r["verdict"] in FAIL_ON[fail_on] for r in rows)


def check_resamples(resamples: int) -> None:
    """Refuse (one :class:`UserError` line naming ``--resamples``) a count outside
    :data:`MIN_RESAMPLES`..:data:`MAX_RESAMPLES`."""
    if not MIN_RESAMPLES <= resamples <= MAX_RESAMPLES:
        raise UserError(f"--resamples: {resamples} is not in {MIN_RESAMPLES}..{MAX_RESAMPLES} (a percentile interval "
                        "needs about a thousand resamples; the bootstrap holds every one in memory; the default 10000 "
                        "is plenty)")


def table_source(table: str | Path | None, stages: list[str], gpus: list[str | None]) -> tuple[dict[str, float],
                                                                                              dict[str, Any]]:
    """The floors of ``stages`` from the noise table at ``table`` (default :data:`NOISE_TABLE`) for a comparison
    on ``gpus``, and the ``noise_floor`` source recording it (``lacking``: the GPU x stage pairs the table has not,
    which got :data:`DEFAULT_FLOOR`)."""
    floors, lacking = compare_floors(read_floors(table), stages, gpus, DEFAULT_FLOOR)
    rule = "per stage, the larger of the two GPUs' floors in the noise table"
    source = {"kind": "table", "paths": [str(table) if table is not None else NOISE_TABLE],
              "rule": rule + (f"; {', '.join(lacking)}: not in the table, the documented fallback {DEFAULT_FLOOR:g}"
                              if lacking else "")}
    return floors, {**source, **({"lacking": lacking} if lacking else {})}


def check_compare_arguments(noise_from: list[str] | None, floor: float | None, fail_on: str | None,
                            resamples: int) -> None:
    """Refuse (one :class:`UserError` line naming the option) a floor outside [0, 1), an unknown ``fail_on``,
    a resample count outside 1..:data:`MAX_RESAMPLES`, a ``noise_from`` pair that is one file twice."""
    if floor is not None and not 0 <= floor < 1:
        raise UserError(f"--floor: {floor} is not a fraction in [0, 1)")
    if fail_on is not None and fail_on not in FAIL_ON:
        raise UserError(f"--fail-on: {fail_on!r}; choose one of {', '.join(FAIL_ON)}")
    check_resamples(resamples)
    if noise_from and len(noise_from) == 2 and same_file(*noise_from):
        raise UserError(f"--noise-from {noise_from[0]} {noise_from[1]}: one file twice; a noise floor needs a result "
                        "and its independent repeat")


def bench_comparison(path_a: str | Path, a: BenchResult, path_b: str | Path, b: BenchResult,
                     noise_from: list[str] | None, floor: float | None, cycles: bool, resamples: int,
                     noise_table: str | Path | None) -> tuple[dict[str, Any], dict[str, float], list[dict[str, Any]]]:
    """B against A, two bench results: (the ``noise_floor`` source, the floor per stage, one row per pattern x
    stage both timed). The floors (module doc): ``noise_from`` (a repeat pair), else ``floor`` (one fraction for
    every stage), else the noise table at ``noise_table`` (default :data:`NOISE_TABLE`).

    Raises UserError (exit 2) for a shape or routing difference (every difference named), a repeat pair that is
    not the same experiment as A or ran on another GPU than A and B, a ``floor`` beside a pair that times every
    stage (it would go unused), a missing or invalid noise table, or ``cycles`` on a result without recorded SM
    clocks."""
    diff = routing_differences(a, b)
    if diff:
        raise UserError(f"{path_a} and {path_b} are not the same experiment: " + "; ".join(diff))
    if (share := shared_observations(a.to_json(), b.to_json())) >= SHARED_LIMIT:
        raise UserError(same_run_message(path_a, path_b, share))
    stages = [s for s in a.timing.stages if s in b.timing.stages]
    if noise_from:
        x, y = noise_pair(noise_from, path_a, a)
        floors = noise_floors(x, y, stages)
        untimed = [s for s in stages if s not in floors]  # e.g. wrapper_extra: a pair recorded before the stage
        pair_checks(noise_from, path_a, path_b, [a.gpu_name, b.gpu_name], x, floor, untimed)
        rest = DEFAULT_FLOOR if floor is None else floor
        floors = {s: floors.get(s, rest) for s in stages}
        floor_source = {"kind": "repeat", "paths": [str(p) for p in noise_from],
                        "rule": f"per stage, max over patterns of |median(Y)/median(X) - 1|, at least {MIN_FLOOR:g}"
                        + (f"; {', '.join(untimed)} (not timed by the pair): the stated default {rest:g}"
                           if untimed else "")}
    elif floor is not None:
        floors = dict.fromkeys(stages, floor)
        floor_source = {"kind": "default", "paths": [], "rule": f"stated default {floor:g} for every stage"}
    else:
        floors, floor_source = table_source(noise_table, stages, [a.gpu_name, b.gpu_name])
    rows = []
    for p in a.patterns:
        for s in stages:
            sa, sb = samples(a, p, s, cycles, "A"), samples(b, p, s, cycles, "B")
            ci = ratio_ci(sa, sb, resamples)
            rows.append({"pattern": p, "stage": s, "a_median": float(np.median(sa)),
                         "b_median": float(np.median(sb)), "a_n": int(sa.size), "b_n": int(sb.size),
                         "ratio": float(np.median(sb) / np.median(sa)), "ci95": list(ci), "floor": floors[s],
                         "verdict": verdict(ci, floors[s])})
    return floor_source, floors, rows


def same_run_message(path_a: str | Path, path_b: str | Path, share: float) -> str:
    """Why B is no second run of A: it holds ``share`` of a pattern x stage's observations of A's, where two runs'
    CUDA-event latencies share almost none (:data:`~.noise.SHARED_LIMIT`). A copy of the published run compared with
    it read 'same' in every cell and PASSed validate (an attacker, 2026-12-07)."""
    return (f"{path_a} and {path_b} hold the same run ({share:.0%} of a pattern x stage's observations alike, in "
            "place or reordered or scaled by one factor): compare two runs, e.g. a result and its independent repeat")


def pair_checks(noise_from: list[str], path_a: str | Path, path_b: str | Path, gpus: Sequence[str | None],
                 x: BenchResult, floor: float | None, untimed: Sequence[str]) -> None:
    """What every ``--noise-from`` pair must hold, on both compare paths (bench and release): it is not A and B
    themselves (a floor measured on the very difference it judges), it ran on the GPU of the comparison (one
    GPU's repeat pair bounds that GPU's noise alone), and a ``--floor`` beside it serves a stage it did not time
    (else it would go unused). One :class:`UserError` line each."""
    if {str(Path(p).resolve()) for p in noise_from} == {str(Path(p).resolve()) for p in (path_a, path_b)}:
        raise UserError(f"--noise-from {noise_from[0]} {noise_from[1]}: A and B themselves; a noise floor measured on "
                        "the difference being judged makes every verdict 'same' (give an independent repeat pair, "
                        "or leave --noise-from out: the noise table)")
    if {x.gpu_name} != set(gpus):
        compared = " and ".join(dict.fromkeys(str(g) for g in gpus))
        raise UserError(f"--noise-from: the pair ran on {x.gpu_name}, the comparison is of {compared}; a floor "
                        "measured on one GPU does not bound another's noise (leave --noise-from out: the noise "
                        "table takes each GPU's floor and the larger of two)")
    if floor is not None and not untimed:
        raise UserError(f"--floor {floor:g}: unused, the --noise-from pair times every stage compared; give one "
                        "of the two (--floor serves only the stages a pair did not time)")


def noise_pair(noise_from: list[str], path_a: str | Path | None = None,
                a: Side | None = None) -> tuple[BenchResult, BenchResult]:
    """The ``--noise-from`` pair as bench records: exactly 2 paths, two different runs on one GPU and, given ``a``
    (a bench or a release result), each the same experiment as ``a`` (one :class:`UserError` line naming the
    option otherwise)."""
    if len(noise_from) != 2:
        raise UserError(f"--noise-from: give a result and its repeat (2 paths), not {len(noise_from)}")
    x, y = (load_record(p, BenchResult, f"--noise-from {p}") for p in noise_from)
    if a is not None:
        for other, p in ((x, noise_from[0]), (y, noise_from[1])):
            bad = routing_differences(a, other) if isinstance(a, BenchResult) else same_experiment(a, other)[1]
            if bad:
                raise UserError(f"--noise-from {p}: not the same experiment as {path_a}: " + "; ".join(bad))
    jx, jy = x.to_json(), y.to_json()
    if jx == jy or shared_observations(jx, jy) >= SHARED_LIMIT:
        raise UserError(f"--noise-from {noise_from[0]} {noise_from[1]}: the two files hold the same run; a noise "
                        "floor needs a result and its independent repeat")
    if x.gpu_name != y.gpu_name:
        raise UserError(f"--noise-from {noise_from[0]} {noise_from[1]}: one ran on {x.gpu_name}, the other on "
                        f"{y.gpu_name}; a noise floor needs a result and its repeat on one GPU")
    return x, y


def judged_row(pattern: str, stage: str, obs_a: Sequence[float], obs_b: Sequence[float], floor: float,
               resamples: int, metric: str, correspondence: str, note: str | None, hint: str = "") -> dict[str, Any]:
    """One row of a comparison with a release or peer result: medians, counts, ratio B/A, its bootstrap CI
    (:func:`ratio_ci`) and the verdict at ``floor``, with the row's ``metric``, ``correspondence`` and ``note``.
    UserError (one line, ``hint`` appended) for fewer than 2 observations on a side."""
    xa, xb = np.asarray(obs_a, dtype=np.float64), np.asarray(obs_b, dtype=np.float64)
    if min(xa.size, xb.size) < 2:
        raise UserError(f"{pattern} {stage}: {xa.size} vs {xb.size} observations; a bootstrap CI needs at least 2 "
                        f"on each side{hint}")
    ci = ratio_ci(xa, xb, resamples)
    return {"pattern": pattern, "stage": stage, "metric": metric, "correspondence": correspondence,
            **({"note": note} if note else {}), "a_median": float(np.median(xa)), "b_median": float(np.median(xb)),
            "a_n": int(xa.size), "b_n": int(xb.size), "ratio": float(np.median(xb) / np.median(xa)),
            "ci95": list(ci), "floor": floor, "verdict": verdict(ci, floor)}


def release_comparison(path_a: str | Path, a: Side, path_b: str | Path, b: Side, noise_from: list[str] | None,
                       floor: float | None, cycles: bool, resamples: int, noise_table: str | Path | None
                       ) -> tuple[dict[str, Any], dict[str, float], list[dict[str, Any]], dict[str, Any]]:
    """B against A when either is a release result: (the ``noise_floor`` source, the floor per stage, one row
    per call or pinned stage whose kernels correspond, the ``release`` block). Raises UserError (one line) for
    ``cycles``, a CPU interpreter run against a GPU measurement, two different experiments, a cell with fewer
    than 2 observations on a side, and every refusal of a ``noise_from`` pair."""
    if cycles:
        raise UserError("--cycles: not available with a release result (its kernel times have no per-call clock); "
                        "compare in time")
    if timer(a) != timer(b):
        raise UserError(f"{path_a} ({timer(a)}) and {path_b} ({timer(b)}): a CPU interpreter run cannot be compared "
                        "with a GPU measurement")
    common, diff = same_experiment(a, b)
    if diff:
        raise UserError(f"{path_a} and {path_b} are not the same experiment: " + "; ".join(diff))
    floors: dict[str, float] = {}
    cells, skipped = release_cells(a, b, common)
    rest = DEFAULT_FLOOR if floor is None else floor
    if noise_from:
        x, y = noise_pair(noise_from, path_a, a)
        floors = noise_floors(x, y, [s for s in x.timing.stages if s in y.timing.stages])
        pair_checks(noise_from, path_a, path_b, [a.gpu_name, b.gpu_name], x, floor,
                     [c[1] for c in cells if c[1] not in floors])
        source = {"kind": "repeat", "paths": [str(p) for p in noise_from], "rule": f"per pinned stage, max over "
                  f"patterns of |median(Y)/median(X) - 1|, at least {MIN_FLOOR:g}; {rest:g} for other stages"}
    elif floor is not None:
        source = {"kind": "default", "paths": [], "rule": f"stated default {floor:g} for every stage"}
    else:
        floors, source = table_source(noise_table, list(dict.fromkeys(c[1] for c in cells)),
                                      [a.gpu_name, b.gpu_name])
    rows: list[dict[str, Any]] = []
    for p, stage, metric, obs_a, obs_b, corr, note in cells:
        rows.append(judged_row(p, stage, obs_a, obs_b, floors.get(stage, rest), resamples, metric, corr, note,
                               " (rerun with more --repetitions / --cupti-rounds)"))
    per_stage: dict[str, float] = {r["stage"]: r["floor"] for r in rows}
    return source, per_stage, rows, release_block(a, b, common, skipped)


def peer_comparison(path_a: str | Path, a: dict[str, Any], path_b: str | Path, b: dict[str, Any],
                    noise_from: list[str] | None, floor: float | None, cycles: bool, resamples: int,
                    noise_table: str | Path | None
                    ) -> tuple[dict[str, Any], dict[str, float], list[dict[str, Any]], dict[str, Any]]:
    """B against A when either is a peer result (:mod:`.peer_compare` says what pairs with what): (the
    ``noise_floor`` source, the floor per stage, one row per pair, the ``peers`` block). Floors: ``floor`` for every
    stage, else the noise table (bench's ``full_bwd`` row has the GPU's floor; a peer's own stages have none there and
    get :data:`DEFAULT_FLOOR`, named under ``lacking``). Raises UserError (one line) for ``cycles``, ``noise_from``,
    a release result beside it, two different experiments, a cell with fewer than 2 observations on a side."""
    if cycles:
        raise UserError("--cycles: not available with a peer result (its rounds record no SM clock); compare in time")
    if noise_from:
        raise UserError("--noise-from: not available with a peer result (a repeat pair is of bench results); give "
                        "--floor, or leave both out for the noise table")
    if "release_result" in (a["kind"], b["kind"]):
        raise UserError(f"{path_a} and {path_b}: a peer result compares with a bench result or another peer result, "
                        "not with a release result")
    common, diff = peer_same_experiment(a, b)
    if diff:
        raise UserError(f"{path_a} and {path_b} are not the same experiment: " + "; ".join(diff))
    cells, skipped = peer_cells(a, b)
    if not cells:
        raise UserError(f"{path_a} and {path_b}: nothing both timed to compare")
    if (share := shared_share((obs_a, obs_b) for _, _, obs_a, obs_b, _ in cells)) >= SHARED_LIMIT:
        raise UserError(same_run_message(path_a, path_b, share))
    stages = list(dict.fromkeys(c[1] for c in cells))
    if floor is not None:
        floors = dict.fromkeys(stages, floor)
        source = {"kind": "default", "paths": [], "rule": f"stated default {floor:g} for every stage"}
    else:
        floors, source = table_source(noise_table, stages, [gpu_of(a), gpu_of(b)])
    rows: list[dict[str, Any]] = []
    for p, stage, obs_a, obs_b, note in cells:
        rows.append(judged_row(p, stage, obs_a, obs_b, floors[stage], resamples, "events", "exact", note))
    return source, floors, rows, peer_block(a, b, common, skipped)


def format_table(doc: dict[str, Any]) -> str:
    """The comparison as a plain-text table (tabulate), with the rule and the verdict counts."""
    if "release" in doc:
        return format_release_table(doc)
    if "peers" in doc:
        return format_peer_table(doc)
    unit = doc["unit"]
    rows = [[r["pattern"], r["stage"], r["a_median"], r["b_median"], r["ratio"],
             f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]", f"{100 * r['floor']:.1f}%", r["verdict"]]
            for r in doc["rows"]]
    table = tabulate(rows, headers=["pattern", "stage", f"A {unit}", f"B {unit}", "B/A", "95% CI", "floor",
                                    "verdict"], floatfmt=".3f")
    a, b = doc["a"], doc["b"]
    counts = ", ".join(f"{v} {n}" for v, n in doc["counts"].items())
    return "\n".join([f"A = {a['name']} ({a['gpu']}), B = {b['name']} ({b['gpu']}); {doc['space']} space",
                      table, f"rule: {doc['rule']}", f"verdicts: {counts}"])
