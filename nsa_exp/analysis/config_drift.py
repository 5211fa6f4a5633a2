"""Autotune drift between a run and its repeat (issue 16 item 4): which configs each ran, whether the
repeat replayed the first run's configs (``bench --autotune-from``) or re-tuned, and which stages'
run-to-run differences may count as noise.

A stage's repeat difference is noise only when both runs launched the same autotune configs for
every autotuned kernel the stage runs (``full_bwd`` runs the dQ and dK/dV kernels). For a stage
whose configs differ, the difference mixes noise with a config change: the pair is then not a repeated
measurement of that stage (:mod:`nsa_exp.analysis.noise` keys a quantity on its configs), and RESULTS.md
says which stages that is.

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
