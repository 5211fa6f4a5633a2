"""``flush-study``: which L2 flush to put before each timed stage, decided from measured data (CPU only).

Input: a method-study raw JSON (``scripts/gpu_method_study.py``, kind ``method_study``) whose key
``flush`` holds every observation of the policies ``write`` (``fill_`` of the 256 MiB flush buffer,
the original method), ``read`` (a reduction over the same buffer), ``none`` and ``write+spin4x``
(write flush, 4x the launch-guard spin), interleaved within each round, for every pattern x stage.

For each policy other than ``none``, pattern and stage: the ratio of medians ``median(policy) /
median(none)`` over the timed rounds (warm-up rounds dropped), with its 95% CI from
``scipy.stats.bootstrap`` (percentile method, ``paired=True``: round i of both policies ran in the
same round, so rounds are resampled as pairs; :func:`nsa_exp.analysis.bootstrap.bootstrap_ratio_ci`).
A cell *differs* when its CI excludes 1.

Choice (:func:`choose_policy`): among the policies a config may name that still flush (``write``,
``read``), the one with the fewest cells whose CI lies wholly above 1 (the flush adds time to the
stage it precedes), ties broken by the smaller largest ratio. ``none`` is never chosen: it measures
a warm L2, which the method excludes (docs/METHOD.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabulate import tabulate

from ..errors import UserError
from ..io.store import read_strict
from .bootstrap import CI_LEVEL, bootstrap_ratio_ci

if TYPE_CHECKING:
    import pandas as pd

REFERENCE = "none"
CONFIG_POLICIES = ("write", "read", "none")


def load_flush_records(path: str | Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """The study's ``flush`` section and its timed observations as a tidy frame
    (columns round, policy, pattern, stage, ms; warm-up rounds dropped). Errors: one-line UserError."""
    _, doc = read_strict(path, missing_hint="pass results/studies/h200_method_study_flush.raw.json")
    if not isinstance(doc, dict) or doc.get("kind") != "method_study" or not isinstance(doc.get("flush"), dict):
        raise UserError(f"{path}: not a method study with a 'flush' section (scripts/gpu_method_study.py writes one)")
    flush = doc["flush"]
    try:
        rows = [{"round": r["round"], "policy": r["policy"], "pattern": r["pattern"], "stage": stage, "ms": ms}
                for r in flush["records"] if not r["warmup"] for stage, ms in r["ms"].items()]
    except (KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{path}: flush.records: each record needs round, policy, pattern, warmup, ms "
                        f"({exc})") from None
    import pandas as pd  # noqa: PLC0415 - pandas (0.2 s) for a flush study only, not in validate's every start

    frame = pd.DataFrame(rows, columns=["round", "policy", "pattern", "stage", "ms"])
    if REFERENCE not in set(frame["policy"]):
        raise UserError(f"{path}: flush.records: no timed record of the reference policy {REFERENCE!r}")
    return doc, frame


def ratio_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per (policy != none, pattern, stage): medians, ratio to none, its paired 95% CI."""
    wide = frame.pivot_table(index=["pattern", "stage", "round"], columns="policy", values="ms", aggfunc="first")
    rows = []
    for (pattern, stage), cell in wide.groupby(level=["pattern", "stage"], sort=False):
        for policy in [p for p in wide.columns if p != REFERENCE]:
            pair = cell[[policy, REFERENCE]].dropna()
            num, den = pair[policy].to_numpy(), pair[REFERENCE].to_numpy()
            lo, hi = bootstrap_ratio_ci(num, den)
            median, none_median = pair[policy].median(), pair[REFERENCE].median()
            rows.append({"policy": policy, "pattern": pattern, "stage": stage, "n_rounds": int(len(pair)),
                         "median_ms": float(median), "none_median_ms": float(none_median),
                         "ratio": float(median / none_median), "ci_low": lo, "ci_high": hi,
                         "differs": bool(lo > 1.0 or hi < 1.0)})
    return rows


def choose_policy(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """The flushing policy a config may name that adds least time: (policy, one-line reason)."""
    def cost(policy: str) -> tuple[int, float]:
        mine = [r for r in rows if r["policy"] == policy]
        return sum(r["ci_low"] > 1.0 for r in mine), max(r["ratio"] for r in mine)

    candidates = [p for p in CONFIG_POLICIES if p != REFERENCE and any(r["policy"] == p for r in rows)]
    if not candidates:
        raise UserError("flush study: neither 'write' nor 'read' was measured; nothing to choose from")
    best = min(candidates, key=cost)
    above, worst = cost(best)
    others = ", ".join(f"{p}: {cost(p)[0]} cell(s) above 1, largest ratio {cost(p)[1]:.4f}"
                       for p in candidates if p != best)
    cells = sum(r["policy"] == best for r in rows)
    return best, (f"{best}: {above} of {cells} pattern x stage cells whose 95% CI lies above 1 (about "
                  f"{(1 - CI_LEVEL) / 2 * cells:.1f} expected by chance), largest ratio {worst:.4f}"
                  + (f" (vs {others})" if others else ""))


def format_table(study: dict[str, Any]) -> str:
    """tabulate table: one line per policy x pattern x stage, ratio to ``none`` and its 95% CI (percent)."""
    lines = [[r["policy"], r["pattern"], r["stage"], f"{r['median_ms']:.4f}", f"{r['none_median_ms']:.4f}",
              f"{100 * (r['ratio'] - 1):+.2f}%", f"[{100 * (r['ci_low'] - 1):+.2f}%, {100 * (r['ci_high'] - 1):+.2f}%]",
              "yes" if r["differs"] else ""] for r in study["rows"]]
    table = tabulate(lines, headers=["policy", "pattern", "stage", "median ms", "none ms", "vs none",
                                     "95% CI", "differs"], tablefmt="github")
    return f"{table}\n\nchosen: {study['reason']}"
