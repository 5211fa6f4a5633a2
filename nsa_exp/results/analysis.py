"""Derived statistics of bench results: bootstrap CIs of medians, ratios vs ``local``, repeatability.

Everything here is recomputed from the raw observations in committed result JSONs, with a fixed
resampling seed, so every number in docs/RESULTS.md traces back to them.

>>> lo, hi = bootstrap_median_ci([1.0, 2.0, 3.0, 4.0, 5.0], resamples=2000, seed=0)
>>> lo <= 3.0 <= hi
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..routing.patterns import BASELINE_PATTERN
from .schema import schema_version

RESAMPLES = 10_000
SEED = 20260726
CI_LEVEL = 0.95
SCHEMA_VERSION = schema_version("analysis")


def _bootstrap_medians(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    return np.median(x[idx], axis=1)


def bootstrap_median_ci(samples, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap 95% CI of the median."""
    x = np.asarray(samples, dtype=np.float64)
    meds = _bootstrap_medians(x, resamples, np.random.default_rng(seed))
    a = (1 - CI_LEVEL) / 2
    return float(np.quantile(meds, a)), float(np.quantile(meds, 1 - a))


def bootstrap_ratio_ci(num, den, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap 95% CI of median(num) / median(den), both resampled independently."""
    rng = np.random.default_rng(seed)
    a = (1 - CI_LEVEL) / 2
    ratios = _bootstrap_medians(np.asarray(num, float), resamples, rng) / _bootstrap_medians(
        np.asarray(den, float), resamples, rng)
    return float(np.quantile(ratios, a)), float(np.quantile(ratios, 1 - a))


def analyse(result: dict[str, Any], repeat: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per pattern x stage: median, p10/p90, bootstrap 95% CI (and its half-width in % of the median),
    ratio vs local with CI; with ``repeat``, each median's difference between the two runs."""
    patterns = result["patterns"]
    ref = patterns.get(BASELINE_PATTERN)
    rows = []
    for name, p in patterns.items():
        for stage, s in p["stages"].items():
            lo, hi = bootstrap_median_ci(s["raw_ms"])
            row = {"pattern": name, "stage": stage, "median_ms": s["median_ms"], "p10_ms": s["p10_ms"],
                   "p90_ms": s["p90_ms"], "n_obs": s["n_obs"], "ci95_ms": [lo, hi],
                   "ci95_halfwidth_pct": 100 * max(s["median_ms"] - lo, hi - s["median_ms"]) / s["median_ms"]}
            if ref is not None:
                r = ref["stages"][stage]
                row["ratio_vs_local"] = s["median_ms"] / r["median_ms"]
                row["ratio_vs_local_ci95"] = list(bootstrap_ratio_ci(s["raw_ms"], r["raw_ms"]))
            if repeat is not None:
                other = repeat["patterns"][name]["stages"][stage]["median_ms"]
                row["repeat_median_ms"] = other
                row["repeat_diff_pct"] = 100 * (other - s["median_ms"]) / s["median_ms"]
            rows.append(row)
    dkv = [r for r in rows if r["stage"] == "dkv_core"]
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "analysis",
        "source": result["name"],
        "repeat_source": repeat["name"] if repeat else None,
        "bootstrap": {"resamples": RESAMPLES, "seed": SEED, "level": CI_LEVEL, "method": "percentile"},
        "rows": rows,
        "dkv_ci_within_1pct": all(r["ci95_halfwidth_pct"] <= 1.0 for r in dkv),
        "fanin": {name: p["fanin"] for name, p in patterns.items()},
        "memory": {name: p["memory"] for name, p in patterns.items()},
        "stage_sum_vs_full_bwd": {name: p["stage_sum_vs_full_bwd"] for name, p in patterns.items()},
        "autotune": {k: v["best_config"] for k, v in result["autotune"]["kernels"].items()},
    }
