"""The document kinds' checks: one row per kind saying which checks run once its schema has passed.

``validate`` (:mod:`.validate`) detects a document's kind (a JSON document's ``kind`` field, one of
:data:`nsa_exp.core.kinds.KINDS`; a ``.csv`` file is a summary table), checks its schema, then runs the
row of :data:`KIND_CHECKS` for its kind; a kind without a row is checked against its schema only.

- ``bench_result``: ``shape_matches_config``, ``edges_equal``, ``stats_recompute``, ``min_observations``,
  ``latencies_positive_finite``, ``fla_commit``, ``environment_recorded``, ``stage_sum_plausible``,
  ``autotune_arm``, ``cupti_agreement`` (with a ``cupti`` block), then every other derived number
  recomputed from its source or listed under ``unverified``: ``config_semantics``, ``pattern_set``,
  ``routing_recompute``, ``reproduction_flags``, ``timing_recompute``, ``telemetry_recompute``,
  ``packing_recompute``, ``memory_recompute``, ``gates_consistent``, ``ratio_recompute``,
  ``metadata_plausible``, and ``routing_file_recompute`` given the files; ``stop_rule`` for a run under the
  stop rule.
- ``sweep_point``: the statistics checks, ``config_semantics``, ``pattern_set``, ``routing_recompute``,
  ``packing_recompute`` (and ``routing_file_recompute``; ``stop_rule`` under the stop rule).
- ``autotune_matrix``: ``matrix_stats_recompute``, ``matrix_observations``, ``matrix_cells``.
- ``release_result``: the statistics checks, then :func:`.release_checks.release_recompute` (and
  ``routing_file_recompute``; ``release_files`` given the release folders).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..analysis.cupti import cupti_problems
from ..errors import UserError
from ..routing.config import config_from_dict
from .autotune_checks import autotune_arm_problems, matrix_checks
from .checks import Add, guarded
from .release_checks import release_recompute
from .routing_checks import (
    edge_problems,
    packing_recompute,
    pattern_set,
    routing_file_recompute,
    routing_recompute,
)
from .run_checks import (
    environment_problems,
    fla_problems,
    gates_consistent,
    memory_recompute,
    metadata_plausible,
    reproduction_flags,
    shape_problems,
    telemetry_recompute,
)
from .stats_checks import ratio_recompute, stage_sum_problems, stats_checks, stop_rule_problems, timing_recompute

#: ``checks(doc, add, routing_files, release_dirs) -> {"unverified": [...], "warnings": [...]}`` (extra report
#: fields); ``routing_files`` and ``release_dirs`` are the files the command line supplied to re-check against.
KindChecks = Callable[[dict[str, Any], Add, Sequence[str], Sequence[str]], dict[str, Any]]


def bench_checks(doc: dict[str, Any], add: Add, routing_files: Sequence[str] = (),
                 release_dirs: Sequence[str] = ()) -> dict[str, Any]:
    """Every check of a schema-valid bench result, in the order the report lists them."""
    add("shape_matches_config", shape_problems(doc))
    add("edges_equal", edge_problems(doc))
    stats_checks(doc, add)
    add("fla_commit", fla_problems(doc))
    add("environment_recorded", environment_problems(doc))
    add("stage_sum_plausible", stage_sum_problems(doc))
    add("autotune_arm", autotune_arm_problems(doc))
    if "cupti" in doc:  # issue 14: CUDA-event vs kernel-time medians (nsa_exp.analysis.cupti states the rule)
        add("cupti_agreement", cupti_problems(doc))
    extra = _bench_recompute(doc, add)
    extra["unverified"] += routing_file_recompute(doc, routing_files, add)
    guarded("stop_rule", add, stop_rule_check, doc, add)
    return extra


def stop_rule_check(doc: dict[str, Any], add: Add) -> None:
    """``stop_rule``, only for a run under the stop rule or whose config asks for one."""
    problems = stop_rule_problems(doc)
    if problems is not None:
        add("stop_rule", problems)


def sweep_point_checks(doc: dict[str, Any], add: Add, routing_files: Sequence[str] = (),
                       release_dirs: Sequence[str] = ()) -> dict[str, Any]:
    """A sweep point: a bench-shaped document with a stage subset and no reproduction, memory or telemetry."""
    stats_checks(doc, add)
    extra = _sweep_point_recompute(doc, add)
    extra["unverified"] += routing_file_recompute(doc, routing_files, add)
    guarded("stop_rule", add, stop_rule_check, doc, add)
    return extra


def autotune_matrix_checks(doc: dict[str, Any], add: Add, routing_files: Sequence[str] = (),
                           release_dirs: Sequence[str] = ()) -> dict[str, Any]:
    matrix_checks(doc, add)
    return {}


def release_result_checks(doc: dict[str, Any], add: Add, routing_files: Sequence[str] = (),
                          release_dirs: Sequence[str] = ()) -> dict[str, Any]:
    """A release result: bench-shaped statistics, then what its own record allows (:mod:`.release_checks`)."""
    stats_checks(doc, add)
    extra = release_recompute(doc, add, release_dirs)
    extra["unverified"] += routing_file_recompute(doc, routing_files, add)
    return extra


#: kind -> the checks run once its schema passed (kinds absent here: schema only).
KIND_CHECKS: dict[str, KindChecks] = {
    "bench_result": bench_checks,
    "autotune_matrix": autotune_matrix_checks,
    "sweep_point": sweep_point_checks,
    "release_result": release_result_checks,
}


def _bench_recompute(doc: dict[str, Any], add: Add) -> dict[str, list]:
    """Every recompute check of a schema-valid bench result; returns ``{"unverified", "warnings"}``."""
    unverified: list[dict[str, str]] = []
    warnings: list[dict[str, str]] = []
    try:
        config = config_from_dict(doc["config"], source="$.config")
    except UserError as exc:
        where = str(exc).split(":", 1)[0]
        path = "$." + where if where.startswith("config.") or where == "config" else "$.config"
        add("config_semantics", [(path, str(exc))])
        config = None
    except (TypeError, KeyError, ValueError) as exc:
        add("config_semantics", [("$.config", f"cannot be read as a config: {exc}")])
        config = None
    else:
        add("config_semantics", [])
    if config is not None:
        guarded("pattern_set", add, pattern_set, doc, config, add)
        guarded("routing_recompute", add, routing_recompute, doc, config, add, unverified)
        guarded("reproduction_flags", add, reproduction_flags, doc, config, add)
        guarded("timing_recompute", add, timing_recompute, doc, config, add)
        guarded("telemetry_recompute", add, telemetry_recompute, doc, add, warnings, unverified)
        guarded("packing_recompute", add, packing_recompute, doc, config, add)
    guarded("memory_recompute", add, memory_recompute, doc, add)
    guarded("gates_consistent", add, gates_consistent, doc, add)
    guarded("ratio_recompute", add, ratio_recompute, doc, add)
    guarded("metadata_plausible", add, metadata_plausible, doc, add)
    unverified += _always_unverified(doc)
    return {"unverified": unverified, "warnings": warnings}


def _sweep_point_recompute(doc: dict[str, Any], add: Add) -> dict[str, list]:
    """The checks of a sweep point (a bench-shaped document with a stage subset and no reproduction,
    memory or telemetry sections): ``config_semantics``, ``pattern_set``, ``routing_recompute``."""
    unverified: list[dict[str, str]] = []
    try:
        config = config_from_dict(doc["config"], source="$.config")
    except UserError as exc:
        add("config_semantics", [("$.config", str(exc))])
        return {"unverified": unverified, "warnings": []}
    add("config_semantics", [])
    guarded("pattern_set", add, pattern_set, doc, config, add)
    guarded("routing_recompute", add, routing_recompute, doc, config, add, unverified)
    guarded("packing_recompute", add, packing_recompute, doc, config, add)
    return {"unverified": unverified, "warnings": []}


def _always_unverified(doc: dict[str, Any]) -> list[dict[str, str]]:
    """What no CPU can recompute: measured on the GPU host, only bounded or cross-checked above."""
    out = [
        {"path": "$.patterns.*.stages.*.raw_ms", "why": "measured CUDA-event latencies (statistics are recomputed "
                                                       "from them; the observations themselves cannot be)"},
        {"path": "$.patterns.*.stages.*.warmup_ms", "why": "measured warm-up latencies; count checked, feed no "
                                                          "statistic"},
        {"path": "$.patterns.*.memory.official_*_allocated|reserved_bytes",
         "why": "allocator readings on the GPU; only ordering (peak >= baseline, allocated <= reserved) is checked"},
        {"path": "$.patterns.*.reproduces_official.*.{rel_l2,max_abs,ref_max_abs,max_ulp,n_different}",
         "why": "needs the GPU tensors; only mutual consistency and the tolerances are checked"},
        {"path": "$.autotune", "why": "autotune choices and tune_seconds come from the GPU run"},
        {"path": "$.telemetry.samples[*] clocks/temperature/power", "why": "NVML readings (throttle count is "
                                                                           "recomputed from them)"},
        {"path": "$.wall_seconds", "why": "host wall clock"},
        {"path": "$.fla.files_verified", "why": "counted on the GPU host's FLA install"},
        {"path": "$.metadata (created_utc, git, hostname, platform, env, packages, gpu clocks/power)",
         "why": "facts about the host; versions, driver, GPU family and SM count are checked for plausibility only"},
    ]
    if doc["timing"].get("resumed"):
        out.append({"path": "$.timing.resumed", "why": "a resumed run re-ran its warm-up; which rounds ran in which "
                                                       "process is not recorded"})
    return out
