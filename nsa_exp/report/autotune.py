"""RESULTS.md's "Does the answer depend on the autotune config?" section (issue 11), from a committed
``autotune_matrix`` result (and the bench results of the extra tuning arms).

Each routing's penalty vs ``local`` is the ratio of medians, with a paired bootstrap 95% CI over the
rounds (every round ran every (config, routing) cell, so the cells of one round are resampled
together; :func:`nsa_exp.analysis.bootstrap.bootstrap_ratio_ci`, ``scipy.stats.bootstrap``), under
(a) the seed's protocol: every routing under the config FLA's autotuner picks on ``local``;
(b) each routing under the config FLA's autotuner picks on that routing (``local`` under its own);
(c) each routing under its own fastest config in the matrix (``local`` under its own).
The gain of a routing-aware autotune key is (a) − (c) for the routing: its median under local's
config minus its median under its fastest config (paired bootstrap CI of that difference); whether it buys
anything is the one rule (:mod:`nsa_exp.analysis.noise`) on the ratio of those two medians. Every verdict
uses the noise floor of the matrix's GPU and stage.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from ..analysis.autotune_matrix import StageMatrix, config_text, diff_ci, paired_cells, ratio_text
from ..analysis.bootstrap import analysis_rows, bootstrap_ratio_ci
from ..analysis.noise import judge
from ..core.families import BASELINE_PATTERN
from ..core.stages import TITLES
from .claims import Claims
from .markdown import pct


def config_verdicts(m: StageMatrix, floor: float) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per routing and judgement (differs / same / unresolved): the configs, each routing against ``local`` on
    the same config."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for p in (p for p in m.patterns if p != BASELINE_PATTERN):
        for c in m.ok:
            r = m.ratio(p, c["config"], c["config"])
            out.setdefault(p, {}).setdefault(judge(r[1:], floor), []).append(c["config"])
    return out


class Gain(TypedDict):
    """:func:`gain`: the difference of medians (ms, with its CI ``lo``–``hi``), in % of the first, and their ratio
    with its CI."""

    ms: float
    lo: float
    hi: float
    pct: float
    ratio: float
    ratio_ci: tuple[float, float]


def gain(m: StageMatrix, p: str) -> Gain:
    """What a routing-aware key buys routing ``p``: median under local's config − under its fastest, with CIs."""
    seed = m.fla_choice[BASELINE_PATTERN]
    a, c = paired_cells(m.cell(seed, p), m.cell(m.best(p), p))
    lo, hi = diff_ci(a, c)
    rlo, rhi = bootstrap_ratio_ci(a, c)
    ma, mc = float(np.median(a)), float(np.median(c))
    return {"ms": ma - mc, "lo": lo, "hi": hi, "pct": 100 * (ma - mc) / ma, "ratio": ma / mc, "ratio_ci": (rlo, rhi)}


def stage_lines(m: StageMatrix, floor: float, claims: Claims | None = None) -> list[str]:
    """Fastest configs, penalties (a)/(b)/(c), the per-config verdicts and the routing-aware-key gain."""
    claims = claims or Claims()
    title, others = TITLES[m.stage], [p for p in m.patterns if p != BASELINE_PATTERN]
    seed = m.fla_choice[BASELINE_PATTERN]
    best = {p: m.best(p) for p in m.patterns}
    rows = [f"| {p} | {config_text(m.fla_choice[p])} | {m.cell(m.fla_choice[p], p)['median_ms']:.3f} | "
            f"{config_text(best[p])} | {m.cell(best[p], p)['median_ms']:.3f} |" for p in m.patterns]
    out = [f"### {title}", "", f"{len(m.ok)} configs timed, {len(m.failed)} failed to compile or launch"
           + (": " + "; ".join(f"{config_text(c['config'])} ({c['reason']})" for c in m.failed)
              if m.failed else "") + f". Noise floor f = {pct(floor)}.",
           "", "| routing | FLA's autotuner, tuned on it | ms | fastest config in the matrix | ms |",
           "|---|---|---|---|---|", *rows, "",
           "Penalty vs `local` (ratio of medians, paired bootstrap 95% CI, the rule's verdict):", "",
           "| routing | (a) seed protocol: all on local's config | (b) each on the config tuned on it | "
           "(c) each on its own fastest config |", "|---|---|---|---|"]
    for p in others:
        cells = [m.ratio(p, seed, seed), m.ratio(p, m.fla_choice[p], seed), m.ratio(p, best[p], best[BASELINE_PATTERN])]
        out.append(f"| {p} | " + " | ".join(f"{ratio_text(t)}: {claims.judged(t[1:], floor)}" for t in cells) + " |")
    verdicts = config_verdicts(m, floor)
    lines = []
    for p in others:
        v = verdicts[p]
        parts = []
        for key in ("differs", "same", "unresolved"):
            if v.get(key):
                cfgs = v[key]
                example = m.ratio(p, cfgs[0], cfgs[0])
                word = claims.judged(example[1:], floor)
                parts.append(f"{word} under {len(cfgs)} ({', '.join(map(config_text, cfgs))}"
                             + (f"; e.g. {ratio_text(example)}" if key == "differs" else "") + ")")
        lines.append(f"- `{p}`: " + "; ".join(parts) + ".")
    out += ["", f"Each routing against `local` on the same config, every config of the matrix ({title}):", "", *lines,
            "", "What a routing-aware autotune key would buy (routing under local's config − under its own "
            "fastest):", "",
            "| routing | gain ms (95% CI) | gain % of (a) | (a) / (c), the rule |", "|---|---|---|---|"]
    gains = {p: gain(m, p) for p in m.patterns}
    for p, g in gains.items():
        out.append(f"| {p} | {g['ms']:.3f} ({g['lo']:.3f}–{g['hi']:.3f}) | {g['pct']:.1f}% | "
                   f"{ratio_text((g['ratio'], *g['ratio_ci']))}: {claims.judged(g['ratio_ci'], floor)} |")
    top = max(gains, key=lambda p: gains[p]["pct"])
    worth = judge(gains[top]["ratio_ci"], floor) == "differs"
    out += ["", f"For FLA: the {title} kernel is keyed on `['BS','BK','BV','G']`, so the first routing to "
            f"reach it fixes the config. At this shape the largest cost of that is {gains[top]['ms']:.3f} ms "
            f"({gains[top]['pct']:.1f}%) for `{top}`: "
            + ("worth a routing-aware key (e.g. add a fan-in statistic of the CSR rows, or re-tune when it changes)."
               if worth else "within the floor: the routing-blind key costs little here."), ""]
    return out


def autotune_section(matrix_path: str | None, arm_paths: list[str], load: Callable[[str], dict[str, Any]],
                     figures: str | Path, floor_of: Callable[[str, str], float], claims: Claims) -> list[str]:
    """The section's lines, or ``[]`` without a matrix (``matrix_path`` None: not yet run); ``load`` reads a
    document by the path given, ``floor_of(stage, gpu)`` gives the noise floor."""
    if not matrix_path:
        return []
    doc = load(matrix_path)
    gpu = doc["metadata"].get("gpu", {}).get("name", "?")
    out = ["## Does the answer depend on the autotune config?", "",
           f"From `{matrix_path}` ({gpu}, {doc['timing']['rounds']} interleaved rounds of every config × routing, "
           "L2 flushed, CUDA events; configs pinned one by one, FLA's code untouched). The formal runs are the seed's "
           "protocol (tuned on `local`) and are not changed by this section.", ""]
    figure = Path(figures) / f"{doc['name']}_autotune_heatmap.png"
    if figure.is_file():
        out += [f"![{figure.stem}](figures/{figure.name})", "", "Median ms per config × routing, and × `local` under "
                "the same config (failed configs blank).", ""]
    for stage in ("dkv_core", "dq_core", "selection_fwd"):
        if stage in doc["stages"]:
            out += stage_lines(StageMatrix(doc, stage), floor_of(stage, gpu), claims)
    for path in arm_paths:
        arm = load(path)
        rows = [r for r in analysis_rows(arm) if r["stage"] == "dkv_core" and r["pattern"] != BASELINE_PATTERN]
        a = arm["autotune"]
        f = floor_of("dkv_core", arm["metadata"]["gpu"]["name"])
        out += [f"Bench arm `{path}` (mode `{a.get('mode', 'tune-on')}`, tuned on `{a['tuned_on']}`, "
                f"{arm['timing']['repetitions']} rounds): dK/dV × local "
                + ", ".join(f"{r['pattern']} {ratio_text((r['ratio_vs_local'], *r['ratio_vs_local_ci95']))} "
                            f"({claims.judged(r['ratio_vs_local_ci95'], f)})" for r in rows) + ".", ""]
    return out
