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

from ..core.records import BenchLike, BenchResult
from ..core.stages import stage_kernels


def drift_of(result: BenchLike, repeat: BenchLike) -> dict[str, Any]:
    """How the repeat's configs relate to the first run's: ``replayed`` (it replayed this result's
    configs), ``differing_kernels`` (autotuned stages whose configs differ) and ``affected_stages``
    (every timed stage launching one of them)."""
    result, repeat = BenchResult.coerce(result), BenchResult.coerce(repeat)
    a, b = result.best_configs(), repeat.best_configs()
    differing = [k for k in a if json.dumps(a[k], sort_keys=True) != json.dumps(b.get(k), sort_keys=True)]
    source = repeat.autotune.get("replayed_from") or {}
    affected = [st for st in result.timing.stages if set(stage_kernels(st)) & set(differing)]
    return {"replayed": repeat.autotune.get("mode") == "replay" and source.get("name") == result.name,
            "repeat_mode": repeat.autotune.get("mode", "tune-on"), "differing_kernels": differing,
            "affected_stages": affected, "first": a, "repeat": b}


def noise_spread(by: dict[tuple[str, str], dict[str, Any]], names: list[str], stages: list[str],
                 d: dict[str, Any] | None) -> dict[str, float]:
    """Per stage, the run-to-run |median difference| in % that counts as noise: the stage's own largest
    one when both runs launched the same configs; for a stage whose configs differ, the largest one
    among the stages whose configs matched (the process-to-process noise the repeat did measure)."""
    affected = set(d["affected_stages"]) if d else set()
    own = {st: max(abs(by[(p, st)].get("repeat_diff_pct", 0.0)) for p in names) for st in stages}
    clean = max((own[st] for st in stages if st not in affected), default=0.0)
    return {st: clean if st in affected else own[st] for st in stages}
