"""Derived statistics of bench results: bootstrap CIs of medians, paired ratios vs the baseline, repeatability.

Everything here is recomputed from the raw observations in committed result JSONs, with a fixed
resampling seed, so every number in docs/RESULTS.md traces back to them.

>>> lo, hi = bootstrap_median_ci([1.0, 2.0, 3.0, 4.0, 5.0], resamples=2000, seed=0)
>>> lo <= 3.0 <= hi
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.families import BASELINE_PATTERN
from ..core.records import BenchLike, BenchResult
from ..io.memo import memoised

if TYPE_CHECKING:
    import pandas as pd

RESAMPLES = 10_000
SEED = 20260726
CI_LEVEL = 0.95
METHOD = "percentile"
# Recorded in the analysis and stated in RESULTS.md.
METHOD_NOTE = ("scipy.stats.bootstrap, percentile method; ratios resample rounds as pairs (paired=True), "
               "since every round ran every pattern")


def sorted_median(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``np.median(x, axis=axis)``, bit for bit, by sorting instead of partitioning.

    The bootstrap takes the median of every resample at once: ``x`` float64 ``[resamples, n]`` (10,000 rows of the
    30-150 rounds of a run). ``np.median`` partitions each row around the one or two middle ranks; a row sort is
    vectorised (numpy's SIMD sort) and 3-4x faster there (numpy 2.2.6, this project's 2-CPU VM, 10,000 x 150: 26.6
    -> 8.0 ms; docs/METHOD.md, CI's own time, eleventh session). Both take the same order statistics: the middle
    one for odd ``n``, else the mean of the two middle ones computed as ``np.mean`` does (their sum, divided by 2),
    so the value is ``np.median``'s exactly. Anything else goes to ``np.median``: an input that is not a plain
    ndarray of native-order floats (a list, a masked array, a matrix, ints, big-endian), an axis that is not one
    in-range integer, an empty axis, NaN (which the sort would move last), and a zero median (whose sign the two
    orders may differ on).

    >>> x = np.array([[3.0, 1.0, 2.0, 10.0], [5.0, 5.0, 1.0, 2.0]])
    >>> sorted_median(x).tolist(), np.median(x, axis=-1).tolist()
    ([2.5, 3.5], [2.5, 3.5])
    """
    if (type(x) is not np.ndarray or not isinstance(axis, (int, np.integer)) or not -x.ndim <= axis < x.ndim
            or x.dtype.kind != "f" or not x.dtype.isnative or x.shape[axis] == 0 or np.isnan(x).any()):
        return np.median(x, axis=axis)  # a subclass (masked, matrix), a list, another axis, dtype or byte order
    s = np.sort(x, axis=axis)
    n, k = x.shape[axis], x.shape[axis] // 2
    median = np.take(s, k, axis=axis) if n % 2 else np.mean(np.take(s, [k - 1, k], axis=axis), axis=axis)
    # -0.0 and +0.0 compare equal, so the sort and the partition may leave either in the middle: a zero median is
    # np.median's own (never the case for timings; this keeps "bit for bit" true for every input)
    return np.median(x, axis=axis) if np.any(median == 0) else median


def _median_ratio(num: np.ndarray, den: np.ndarray, axis: int = -1) -> np.ndarray:
    return sorted_median(num, axis=axis) / sorted_median(den, axis=axis)


def _median_difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return sorted_median(a, axis=axis) - sorted_median(b, axis=axis)


#: The statistics the percentile bootstrap is taken of, by name (a name, not a function, is what the memo keys):
#: each vectorised along ``axis`` as ``scipy.stats.bootstrap`` calls it.
STATISTICS = {"median": sorted_median, "median_ratio": _median_ratio, "median_difference": _median_difference}


@memoised  # the suite's report/validate children repeat the same CIs of the committed raw data (io/memo.py)
def _percentile_ci(statistic: str, samples: list[list[float]], paired: bool, resamples: int,
                   seed: int) -> list[float]:
    from scipy.stats import bootstrap  # noqa: PLC0415 - 0.25 s: imported by the first CI, not by a refusal

    res = bootstrap(tuple(np.asarray(x, dtype=np.float64) for x in samples), STATISTICS[statistic], paired=paired,
                    n_resamples=resamples, confidence_level=CI_LEVEL, method=METHOD,
                    random_state=np.random.default_rng(seed))
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def percentile_ci(statistic: str, *samples: Any, paired: bool = False, resamples: int = RESAMPLES,
                  seed: int = SEED) -> tuple[float, float]:
    """The 95% CI of ``STATISTICS[statistic](*samples)``: ``scipy.stats.bootstrap``, percentile method, seeded
    with ``seed`` (``paired``: observation i of every sample resampled together). The one bootstrap of this
    package; each sample is read as float64. Its result is kept in the opt-in memo (``NSA_EXP_MEMO_DIR``).

    >>> lo, hi = percentile_ci("median_difference", [3.0, 4.0, 5.0], [1.0, 2.0, 3.0], paired=True, resamples=999)
    >>> lo <= 2.0 <= hi
    True
    """
    data = [np.asarray(x, dtype=np.float64).tolist() for x in samples]
    lo, hi = _percentile_ci(statistic, data, paired, int(resamples), int(seed))
    return lo, hi


def bootstrap_median_ci(samples, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """95% CI of the median: ``scipy.stats.bootstrap``, percentile method, fixed seed."""
    return percentile_ci("median", samples, resamples=resamples, seed=seed)


def bootstrap_ratio_ci(num, den, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """95% CI of median(num) / median(den), resampling the *rounds*: observation i of both comes from
    round i (each round runs every pattern), so the pairs are resampled together (``paired=True``).

    A stop-rule run (the verdict rule) stops timing a routing, or a stage of it, once it has converged, so its two
    samples may differ in length: observation i of both is still from round i, but the longer one's later rounds
    have no partner, and each sample is then resampled on its own (``paired=False``, as ``compare`` does for two
    runs) rather than dropping those rounds. ValueError for samples that are not 1-D."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    if num.ndim != 1 or den.ndim != 1:
        raise ValueError(f"a ratio CI takes two 1-D samples: shapes {num.shape} and {den.shape}")
    return percentile_ci("median_ratio", num, den, paired=num.size == den.size, resamples=resamples, seed=seed)


def stage_frame(result: BenchLike) -> pd.DataFrame:
    """The tidy table analysis reads: one row per pattern x stage, recorded summary + raw observations."""
    run = BenchResult.coerce(result)
    import pandas as pd  # noqa: PLC0415 - pandas (0.2 s) when a frame is built, not in every command that imports this module

    return pd.DataFrame([{"pattern": name, "stage": stage, "median_ms": s.median_ms, "p10_ms": s.p10_ms,
                          "p90_ms": s.p90_ms, "n_obs": s.n_obs, "raw_ms": list(s.raw_ms)}
                         for name, p in run.patterns.items() for stage, s in p.stages.items()])


def analysis_rows(result: BenchLike, repeat: BenchLike | None = None) -> list[dict[str, Any]]:
    """The analysis document's rows (:mod:`nsa_exp.checking.analysis` builds the document): per pattern x stage,
    median, p10/p90, bootstrap 95% CI (and its half-width in % of the median), ratio vs the baseline with its
    paired CI; with ``repeat``, each median's difference between the runs."""
    result = BenchResult.coerce(result)
    repeat = None if repeat is None else BenchResult.coerce(repeat)
    frame = stage_frame(result)
    ref = frame[frame["pattern"] == BASELINE_PATTERN].set_index("stage")
    other = stage_frame(repeat).set_index(["pattern", "stage"]) if repeat is not None else None
    rows = []
    for s in frame.to_dict(orient="records"):
        lo, hi = bootstrap_median_ci(s["raw_ms"])
        row = {"pattern": s["pattern"], "stage": s["stage"], "median_ms": s["median_ms"], "p10_ms": s["p10_ms"],
               "p90_ms": s["p90_ms"], "n_obs": s["n_obs"], "ci95_ms": [lo, hi],
               "ci95_halfwidth_pct": 100 * max(s["median_ms"] - lo, hi - s["median_ms"]) / s["median_ms"]}
        if not ref.empty:
            r = ref.loc[s["stage"]]
            row["ratio_vs_local"] = s["median_ms"] / float(r["median_ms"])
            row["ratio_vs_local_ci95"] = list(bootstrap_ratio_ci(s["raw_ms"], r["raw_ms"]))
        if other is not None:
            rep = float(other.loc[(s["pattern"], s["stage"]), "median_ms"])
            row["repeat_median_ms"] = rep
            row["repeat_diff_pct"] = 100 * (rep - s["median_ms"]) / s["median_ms"]
        rows.append(row)
    return rows
