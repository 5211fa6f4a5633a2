"""The autotune-matrix document (issue 11) as cells: every config x routing's timed observations of one
stage, their ratios to ``local`` with a paired bootstrap 95% CI over the rounds (every round ran every
(config, routing) cell, so the cells of one round are resampled together;
:func:`nsa_exp.analysis.bootstrap.bootstrap_ratio_ci`), and the CI of a difference of medians.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..core.families import BASELINE_PATTERN
from .bootstrap import bootstrap_ratio_ci, percentile_ci


def config_text(cfg: dict[str, Any]) -> str:
    kw = ",".join(f"{k}={v}" for k, v in cfg["kwargs"].items())
    return (kw + "," if kw else "") + f"w{cfg['num_warps']},s{cfg['num_stages']}"


def _key(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, sort_keys=True)


def paired_cells(a: dict[str, Any], b: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The observations of two cells, aligned by round (the pairs a paired bootstrap resamples)."""
    ra, rb = dict(zip(a["rounds"], a["raw_ms"], strict=True)), dict(zip(b["rounds"], b["raw_ms"], strict=True))
    common = sorted(set(ra) & set(rb))
    return np.array([ra[r] for r in common]), np.array([rb[r] for r in common])


def diff_ci(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """95% CI of median(a) − median(b), rounds resampled as pairs (scipy.stats.bootstrap, paired)."""
    return percentile_ci("median_difference", a, b, paired=True)


class StageMatrix:
    """One stage of an ``autotune_matrix`` document: its timed cells by config and routing."""

    def __init__(self, doc: dict[str, Any], stage: str):
        s = doc["stages"][stage]
        self.stage, self.patterns, self.fla_choice = stage, doc["patterns"], s["fla_choice"]
        self.ok = [c for c in s["cells"] if c["status"] == "ok"]
        self.failed = [c for c in s["cells"] if c["status"] == "failed"]
        self.by = {_key(c["config"]): c for c in self.ok}

    def cell(self, cfg: dict[str, Any], pattern: str) -> dict[str, Any]:
        return self.by[_key(cfg)]["patterns"][pattern]

    def best(self, pattern: str) -> dict[str, Any]:
        return min(self.ok, key=lambda c: c["patterns"][pattern]["median_ms"])["config"]

    def ratio(self, p: str, cfg_p: dict[str, Any], cfg_local: dict[str, Any]) -> tuple[float, float, float]:
        """median(p under cfg_p) / median(local under cfg_local) and its paired 95% CI."""
        a, b = paired_cells(self.cell(cfg_p, p), self.cell(cfg_local, BASELINE_PATTERN))
        lo, hi = bootstrap_ratio_ci(a, b)
        return float(np.median(a) / np.median(b)), lo, hi


def ratio_text(t: tuple[float, float, float]) -> str:
    return f"{t[0]:.3f}× ({t[1]:.3f}–{t[2]:.3f})"
