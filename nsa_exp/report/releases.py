"""``release-table``: per release result, the wrapper and the dK/dV kernel of every routing with 95% CIs and
the skew penalty (each routing over ``local``), as a Markdown table (CPU only; the release arm's RESULTS section).

- wrapper: ``full_bwd`` (the official ``parallel_nsa_bwd``, CUDA events over the timed rounds); dK/dV: the
  ``parallel_nsa_bwd_kernel_dkv`` launches of each profiled ``parallel_nsa_bwd`` call (CUPTI; the
  ``dkv_core`` group of :mod:`nsa_exp.analysis.release_kernels`);
- CIs: :func:`nsa_exp.analysis.bootstrap.bootstrap_median_ci` of the median; the skew penalty
  ``median(routing) / median(local)`` with :func:`~nsa_exp.analysis.bootstrap.bootstrap_ratio_ci`, rounds
  resampled as pairs (every round, and every profiled round, ran every routing).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tabulate import tabulate

from ..analysis.bootstrap import bootstrap_median_ci, bootstrap_ratio_ci
from ..core.families import BASELINE_PATTERN
from ..core.records import ReleaseResult
from ..errors import UserError
from ..io.store import load_record


def _cells(x: list[float], base: list[float] | None, resamples: int) -> list[str]:
    lo, hi = bootstrap_median_ci(x, resamples=resamples)
    out = [f"{np.median(x):.3f} ({lo:.3f}–{hi:.3f})"]
    if base is None:
        return [*out, "—"]
    rlo, rhi = bootstrap_ratio_ci(x, base, resamples=resamples)
    return [*out, f"{np.median(x) / np.median(base):.2f}× ({rlo:.2f}–{rhi:.2f})"]


def release_rows(run: ReleaseResult, resamples: int) -> list[list[str]]:
    """One row per routing of one release result (module doc)."""
    groups = (run.kernels or {}).get("groups", {})
    base = run.patterns.get(BASELINE_PATTERN)
    rows = []
    for name, p in run.patterns.items():
        wrap = list(p.stages["full_bwd"].raw_ms)
        wrap_base = None if base is None or name == BASELINE_PATTERN else list(base.stages["full_bwd"].raw_ms)
        dkv = groups.get(name, {}).get("full_bwd", {}).get("dkv_core")
        dkv_base = groups.get(BASELINE_PATTERN, {}).get("full_bwd", {}).get("dkv_core")
        kernel = _cells(dkv, None if name == BASELINE_PATTERN else dkv_base, resamples) if dkv and len(dkv) > 1 \
            else ["—", "—"]
        rows.append([run.release["label"], str(run.shape["T"]), name, *_cells(wrap, wrap_base, resamples), *kernel])
    return rows


def release_table(paths: Sequence[str], resamples: int = 10_000) -> str:
    """The Markdown table of every release result in ``paths`` (UserError for any other document)."""
    rows, notes = [], []
    for path in paths:
        run = load_record(path, ReleaseResult, str(path))
        if run.timing.timer != "cuda-events":
            raise UserError(f"{path}: a {run.timing.timer} run (CPU interpreter), not a GPU measurement")
        rows += release_rows(run, resamples)
        notes.append(f"{run.name}: {run.timing.repetitions} rounds, {(run.kernels or {}).get('rounds', 0)} profiled; "
                     f"{path}")
    table = tabulate(rows, headers=["release", "T", "routing", "wrapper ms (95% CI)", "wrapper × local",
                                    "dK/dV kernel ms (95% CI)", "dK/dV × local"], tablefmt="github")
    return "\n".join([table, "", *[f"- {n}" for n in notes]])
