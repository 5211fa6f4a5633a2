"""RESULTS.md's "Does the answer depend on the autotune config?" section (issue 11), from a committed
``autotune_matrix`` result (and, when given, bench results of the extra tuning arms).

Each routing's penalty vs ``local`` is the ratio of medians, with a paired bootstrap 95% CI over the
rounds (every round ran every (config, routing) cell, so the cells of one round are resampled
together; :func:`nsa_exp.analysis.bootstrap.bootstrap_ratio_ci`, ``scipy.stats.bootstrap``), under
(a) the seed's protocol: every routing under the config FLA's autotuner picks on ``local``;
(b) each routing under the config FLA's autotuner picks on that routing (``local`` under its own);
(c) each routing under its own fastest config in the matrix (``local`` under its own).
The gain of a routing-aware autotune key is (a) − (c) for the routing: its median under local's
config minus its median under its best config (paired bootstrap CI of that difference).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.autotune_matrix import (
    MIN_EFFECT_PCT,
    StageMatrix,
    config_text,
    diff_ci,
    measurable,
    paired_cells,
    ratio_text,
)
from ..analysis.bootstrap import analyse
from ..core.families import BASELINE_PATTERN
from ..core.stages import TITLES


def stage_lines(m: StageMatrix) -> list[str]:
    """Best configs, penalties (a)/(b)/(c), the every-config verdict and the routing-aware-key gain."""
    title, others = TITLES[m.stage], [p for p in m.patterns if p != BASELINE_PATTERN]
    seed = m.fla_choice[BASELINE_PATTERN]
    best = {p: m.best(p) for p in m.patterns}
    rows = [f"| {p} | {config_text(m.fla_choice[p])} | {m.cell(m.fla_choice[p], p)['median_ms']:.3f} | "
            f"{config_text(best[p])} | {m.cell(best[p], p)['median_ms']:.3f} |" for p in m.patterns]
    out = [f"### {title}", "", f"{len(m.ok)} configs timed, {len(m.failed)} failed to compile or launch"
           + (": " + "; ".join(f"{config_text(c['config'])} ({c['reason']})" for c in m.failed)
              if m.failed else "") + ".",
           "", "| routing | FLA's autotuner, tuned on it | ms | fastest config in the matrix | ms |",
           "|---|---|---|---|---|", *rows, "",
           "Penalty vs `local` (ratio of medians, paired bootstrap 95% CI):", "",
           "| routing | (a) seed protocol: all on local's config | (b) each on the config tuned on it | "
           "(c) each on its own best config |", "|---|---|---|---|"]
    for p in others:
        out.append(f"| {p} | {ratio_text(m.ratio(p, seed, seed))} | {ratio_text(m.ratio(p, m.fla_choice[p], seed))} | "
                   f"{ratio_text(m.ratio(p, best[p], best[BASELINE_PATTERN]))} |")
    every = {p: [c["config"] for c in m.ok if not measurable(m.ratio(p, c["config"], c["config"]))] for p in others}
    holds = [p for p in others if not every[p]]
    out += ["", f"Does \"{title} differs measurably from local\" (CI excludes 1 and the difference exceeds "
            f"{MIN_EFFECT_PCT:g}%) hold under every config, each routing against `local` on the same config? "
            + (f"Yes for {', '.join(holds)}" if holds else "For no routing")
            + "".join(f"; not for {p} under {', '.join(map(config_text, c))}" for p, c in every.items() if c) + ".", "",
            "What a routing-aware autotune key would buy (routing under local's config − under its own best):", "",
            "| routing | gain ms (95% CI) | gain % of (a) |", "|---|---|---|"]
    gains = {}
    for p in m.patterns:
        a, c = paired_cells(m.cell(seed, p), m.cell(best[p], p))
        lo, hi = diff_ci(a, c)
        gains[p] = (float(np.median(a) - np.median(c)), lo, hi, 100 * (np.median(a) - np.median(c)) / np.median(a))
        out.append(f"| {p} | {gains[p][0]:.3f} ({lo:.3f}–{hi:.3f}) | {gains[p][3]:.1f}% |")
    top = max(gains, key=lambda p: gains[p][3])
    worth = gains[top][1] > 0 and gains[top][3] > MIN_EFFECT_PCT
    out += ["", f"For FLA: the {title} kernel is keyed on `['BS','BK','BV','G']`, so the first routing to "
            f"reach it fixes the config. At this shape the largest cost of that is {gains[top][0]:.3f} ms "
            f"({gains[top][3]:.1f}%) for `{top}` — "
            + ("worth a routing-aware key (e.g. add a fan-in statistic of the CSR rows, or re-tune when it changes)."
               if worth else f"below {MIN_EFFECT_PCT:g}% or not distinguishable from zero: the routing-blind key "
               "costs little here."), ""]
    return out


def autotune_section(matrix_path: str, arm_paths: list[str], load: Callable[[str], dict[str, Any]],
                     figures: str | Path = "docs/figures") -> list[str]:
    """The section's lines, or ``[]`` when ``matrix_path`` does not exist (not yet run)."""
    if not Path(matrix_path).is_file():
        return []
    doc = load(matrix_path)
    gpu = doc["metadata"].get("gpu", {}).get("name", "?")
    out = ["## Does the answer depend on the autotune config?", "",
           f"From `{matrix_path}` ({gpu}, {doc['timing']['rounds']} interleaved rounds of every config × routing, "
           "L2 flushed, CUDA events; configs pinned one by one, FLA's code untouched). The primary numbers above "
           "are the seed's protocol (tuned on `local`) and are not changed by this section.", ""]
    figure = Path(figures) / f"{doc['name']}_autotune_heatmap.png"
    if figure.is_file():
        out += [f"![{figure.stem}](figures/{figure.name})", "", "Median ms per config × routing, and × `local` under "
                "the same config (failed configs blank).", ""]
    for stage in ("dkv_core", "dq_core", "selection_fwd"):
        if stage in doc["stages"]:
            out += stage_lines(StageMatrix(doc, stage))
    for path in arm_paths:
        arm = load(path)
        rows = [r for r in analyse(arm)["rows"] if r["stage"] == "dkv_core" and r["pattern"] != BASELINE_PATTERN]
        a = arm["autotune"]
        out += [f"Bench arm `{path}` (mode `{a.get('mode', 'tune-on')}`, tuned on `{a['tuned_on']}`): dK/dV × local "
                + ", ".join(f"{r['pattern']} {r['ratio_vs_local']:.3f}× ({r['ratio_vs_local_ci95'][0]:.3f}–"
                            f"{r['ratio_vs_local_ci95'][1]:.3f})" for r in rows) + ".", ""]
    return out
