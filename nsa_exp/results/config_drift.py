"""Autotune drift between a run and its repeat (issue 16 item 4): which configs each ran, whether the
repeat replayed the first run's configs (``bench --autotune-from``) or re-tuned, and which stages'
run-to-run differences may count as noise.

A stage's repeat difference is noise only when both runs launched the same autotune configs for
every autotuned kernel the stage runs (``full_bwd`` runs the dQ and dK/dV kernels). For a stage
whose configs differ, the difference mixes noise with a config change, so it is not used as the
noise floor of the "differs measurably" rule: that stage's verdict is re-derived with the largest
run-to-run difference among the stages whose configs matched, and labelled so in RESULTS.md.

"""

from __future__ import annotations

import json
from typing import Any

from ..core.stages import TITLES, stage_kernels


def configs(result: dict[str, Any]) -> dict[str, Any]:
    """``{stage: best_config}`` of a bench result's autotuned kernels."""
    return {k: v["best_config"] for k, v in result["autotune"]["kernels"].items()}


def drift_of(result: dict[str, Any], repeat: dict[str, Any]) -> dict[str, Any]:
    """How the repeat's configs relate to the first run's: ``replayed`` (it replayed this result's
    configs), ``differing_kernels`` (autotuned stages whose configs differ) and ``affected_stages``
    (every timed stage launching one of them)."""
    a, b = configs(result), configs(repeat)
    differing = [k for k in a if json.dumps(a[k], sort_keys=True) != json.dumps(b.get(k), sort_keys=True)]
    source = repeat["autotune"].get("replayed_from") or {}
    affected = [st for st in result["timing"]["stages"] if set(stage_kernels(st)) & set(differing)]
    return {"replayed": repeat["autotune"].get("mode") == "replay" and source.get("name") == result["name"],
            "repeat_mode": repeat["autotune"].get("mode", "tune-on"), "differing_kernels": differing,
            "affected_stages": affected, "first": a, "repeat": b}


def _cfg(cfg: Any) -> str:
    return f"`{json.dumps(cfg)}`"


def repeatability_lines(d: dict[str, Any], repeat_path: str) -> list[str]:
    """The config paragraph and table of RESULTS.md's repeatability section."""
    how = ("replayed the first run's autotune configs (`bench --autotune-from`)" if d["replayed"] else
           f"re-tuned its own autotune configs (mode `{d['repeat_mode']}`, not a replay of the first run)")
    rows = [[TITLES[k], _cfg(d["first"][k]), _cfg(d["repeat"].get(k)),
             "**differs**" if k in d["differing_kernels"] else "same"] for k in d["first"]]
    table = ["| kernel (stage) | first run | repeat | |", "|---|---|---|---|",
             *["| " + " | ".join(r) + " |" for r in rows]]
    if d["differing_kernels"]:
        kernels = ", ".join(TITLES[k] for k in d["differing_kernels"])
        note = (f"The repeat ran **different configs** for {kernels}: "
                f"its differences for {', '.join(TITLES[s] for s in d['affected_stages'])} are a config change "
                "plus noise, not noise. They are shown below but not used as those stages' noise floor; their verdicts "
                "in \"What the data shows\" are re-derived with the largest run-to-run difference of the stages whose "
                "configs matched as the noise floor (marked *re-derived*).")
    else:
        note = "Both runs launched the same configs for every autotuned kernel, so their differences are noise."
    return [f"`{repeat_path}` {how}. Autotune configs of both runs:", "", *table, "", note, ""]


def noise_spread(by: dict[tuple[str, str], dict[str, Any]], names: list[str], stages: list[str],
                 d: dict[str, Any] | None) -> dict[str, float]:
    """Per stage, the run-to-run |median difference| in % that counts as noise: the stage's own largest
    one when both runs launched the same configs; for a stage whose configs differ, the largest one
    among the stages whose configs matched (the process-to-process noise the repeat did measure)."""
    affected = set(d["affected_stages"]) if d else set()
    own = {st: max(abs(by[(p, st)].get("repeat_diff_pct", 0.0)) for p in names) for st in stages}
    clean = max((own[st] for st in stages if st not in affected), default=0.0)
    return {st: clean if st in affected else own[st] for st in stages}


def autotune_lines(result: dict[str, Any]) -> list[str]:
    """RESULTS.md's autotune-configs section for one run: the arm, and the configs launched."""
    a = result["autotune"]
    mode = a.get("mode", "tune-on")
    how = {"tune-on": f"tuned once on `{a['tuned_on']}` ({a['tune_seconds']:.1f} s), then used for every pattern",
           "per-pattern": "tuned on each pattern itself (autotuner caches reset between patterns)",
           "replay": f"replayed from `{(a.get('replayed_from') or {}).get('path')}` (nothing tuned)"}[mode]
    rows = [f"| {s} | {k['kernel']} | {_cfg(k['best_config'])} |" for s, k in a["kernels"].items()]
    return ["## Autotune configs", "", f"Configs {how}; one config set for all patterns: "
            f"{a['same_config_all_patterns']}.", "", "| stage | kernel | config |", "|---|---|---|", *rows, ""]
