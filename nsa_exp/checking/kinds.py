"""The document-kind table: one row per kind, the checks that run once its schema has passed.

``validate`` (:mod:`.validate`) detects a document's kind (a JSON document's ``kind`` field, one of
:data:`nsa_exp.core.kinds.KINDS`; a CSV table by its header, :data:`nsa_exp.core.kinds.CSV_KINDS`), checks its
schema, then runs the row of :data:`KIND_CHECKS` (or :data:`CSV_CHECKS`). Every kind the bundle writes has a
row: each derived number is recomputed from its source or listed under ``unverified`` (never passed), and
what cannot be recomputed is held to what physics and the record allow (:mod:`.record_checks`). What each
row recomputes, and what it cannot, is listed per kind in docs/SCHEMAS.md.

Rows (check modules in brackets):

- ``bench_result``: shape, edges, statistics, stage sum, autotune arm and configs, CUPTI, the config and
  its routings regenerated, reproduction, timing, telemetry, packing, memory, ratios, routing files
  [stats, run, routing, autotune checks] + the run record [record checks].
- ``sweep_point``: statistics, shape, edges, config, routings, packing, timing, memory, the point's own
  record [sweep checks] + the run record.
- ``autotune_matrix``: every cell recomputed [autotune checks] + config and the run record.
- ``smoke_report``, ``check_report``, ``whatif_result``, ``method_study`` [report checks] + the run record.
- ``compare``, ``noise_table``, ``analysis``, ``flush_study``, ``routing_report``, ``validation_report``
  [derived checks].
- ``model_calibration``, ``model_calibration_set``, ``model_validation`` [model checks].
- ``ncu_summary`` [ncu checks]; ``sweep_autotune`` [autotune checks].
- CSVs: ``summary_csv`` [csv checks], ``sweep_csv`` [sweep checks], ``ncu_raw_csv`` [ncu checks].
- ``release_result``: the statistics checks, then :func:`.release_checks.release_recompute` (and
  ``routing_file_recompute``; ``release_files`` given the release folders) + the run record.
- ``stop_rule`` for a bench result or sweep point run under the stop rule.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..analysis.cupti import cupti_problems
from ..errors import UserError
from ..routing.config import config_from_dict
from . import derived_checks, model_checks, ncu_checks, record_checks, report_checks, sweep_checks
from .autotune_checks import autotune_arm_problems, autotune_configs, matrix_checks
from .checks import Add, Context, guarded
from .release_checks import release_recompute
from .routing_checks import (
    edge_problems,
    packing_recompute,
    pattern_set,
    routing_file_recompute,
    routing_files_consistent,
    routing_recompute,
)
from .run_checks import (
    environment_problems,
    memory_recompute,
    reproduction_flags,
    shape_problems,
    telemetry_recompute,
)
from .stats_checks import ratio_recompute, stage_sum_problems, stats_checks, stop_rule_problems, timing_recompute

#: ``checks(doc, add, ctx)``: records its checks through ``add``, unverified figures and warnings on ``ctx``.
KindChecks = Callable[[dict[str, Any], Add, Context], None]


def config_semantics(doc: dict[str, Any], add: Add) -> Any:
    """``config_semantics``: the embedded config passes every config rule; returns it as a Config (or None)."""
    try:
        config = config_from_dict(doc["config"], source="$.config")
    except UserError as exc:
        where = str(exc).split(":", 1)[0]
        path = "$." + where if where.startswith("config.") or where == "config" else "$.config"
        add("config_semantics", [(path, str(exc))])
        return None
    except (TypeError, KeyError, ValueError) as exc:
        add("config_semantics", [("$.config", f"cannot be read as a config: {exc}")])
        return None
    add("config_semantics", [])
    return config


def run_record(doc: dict[str, Any], add: Add, ctx: Context, telemetry: list | None = None) -> None:
    """The run-record checks every GPU document gets (:mod:`.record_checks`)."""
    guarded("environment_gate", add, record_checks.environment_gate, doc, add)
    guarded("gates_consistent", add, record_checks.gates_consistent, doc, add)
    guarded("fla_commit", add, record_checks.fla_commit, doc, add)
    guarded("metadata_plausible", add, record_checks.metadata_plausible, doc, add, ctx)
    if telemetry is not None:
        guarded("telemetry_plausible", add, record_checks.telemetry_plausible, telemetry, doc, add, ctx)
    if isinstance(doc.get("config"), dict):
        record_checks.tolerances_pinned(doc["config"].get("tolerances"), "$.config.tolerances", add)


def _raw_ms(doc: dict[str, Any]) -> float:
    """Every observation and warm-up a bench-shaped document timed, in ms."""
    return sum(sum(s["raw_ms"]) + sum(s.get("warmup_ms", [])) for p in doc["patterns"].values()
               for s in p["stages"].values())


def bench_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """Every check of a schema-valid bench result, in the order the report lists them."""
    add("shape_matches_config", shape_problems(doc))
    add("edges_equal", edge_problems(doc))
    stats_checks(doc, add)
    add("environment_recorded", environment_problems(doc))
    add("stage_sum_plausible", stage_sum_problems(doc))
    add("autotune_arm", autotune_arm_problems(doc))
    autotune_configs(doc, add)
    if "cupti" in doc:  # issue 14: CUDA-event vs kernel-time medians (nsa_exp.analysis.cupti states the rule)
        add("cupti_agreement", cupti_problems(doc))
    config = config_semantics(doc, add)
    if config is not None:
        guarded("pattern_set", add, pattern_set, doc, config, add)
        guarded("routing_recompute", add, routing_recompute, doc, config, add, ctx.unverified)
        guarded("timing_recompute", add, timing_recompute, doc, config, add)
        guarded("packing_recompute", add, packing_recompute, doc, config, add)
    guarded("reproduction_flags", add, reproduction_flags, doc, add)
    guarded("telemetry_recompute", add, telemetry_recompute, doc, add, ctx.warnings, ctx.unverified)
    guarded("memory_recompute", add, memory_recompute, doc, add)
    guarded("ratio_recompute", add, ratio_recompute, doc, add)
    guarded("routing_files_consistent", add, routing_files_consistent, doc, add)
    samples = [(f"$.telemetry.samples[{i}]", s) for i, s in enumerate(doc["telemetry"]["samples"])]
    run_record(doc, add, ctx, samples)
    guarded("config_provenance", add, record_checks.config_provenance, doc, add, ctx, True)
    record_checks.wall_plausible(doc["wall_seconds"], _raw_ms(doc), "$.wall_seconds",
                                 "its own raw and warm-up latencies", add)
    ctx.unverified += _always_unverified(doc)
    ctx.unverified += routing_file_recompute(doc, ctx.routing_files, add)
    guarded("stop_rule", add, stop_rule_check, doc, add)


def stop_rule_check(doc: dict[str, Any], add: Add) -> None:
    """``stop_rule``, only for a run under the stop rule or whose config asks for one."""
    problems = stop_rule_problems(doc)
    if problems is not None:
        add("stop_rule", problems)


def sweep_point_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """A sweep point: a bench-shaped document with a stage subset, no reproduction or telemetry."""
    stats_checks(doc, add)
    add("shape_matches_config", shape_problems(doc))
    add("edges_equal", edge_problems(doc))
    autotune_configs(doc, add)
    config = config_semantics(doc, add)
    if config is not None:
        guarded("pattern_set", add, pattern_set, doc, config, add)
        guarded("routing_recompute", add, routing_recompute, doc, config, add, ctx.unverified)
        guarded("packing_recompute", add, packing_recompute, doc, config, add)
    guarded("point_consistent", add, sweep_checks.point_consistent, doc, add, ctx)
    guarded("timing_recompute", add, sweep_checks.point_timing_recompute, doc, add)
    guarded("memory_recompute", add, sweep_checks.point_memory_recompute, doc, add)
    guarded("routing_files_consistent", add, routing_files_consistent, doc, add)
    run_record(doc, add, ctx)
    record_checks.wall_plausible(doc["wall_seconds"], _raw_ms(doc), "$.wall_seconds", "its own latencies", add)
    ctx.unverifiable("$.patterns.*.stages.*.raw_ms, $.memory.free_bytes_before, $.autotune, $.placement, "
                     "$.wall_seconds, $.metadata", "measured on the GPU host; statistics recomputed from the "
                     "observations, the rest bounded only")
    ctx.unverified += routing_file_recompute(doc, ctx.routing_files, add)
    guarded("stop_rule", add, stop_rule_check, doc, add)


def release_result_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """A release result (another FLA release through its public API, NOT the pinned experiment): bench-shaped
    statistics, what its own record allows (:mod:`.release_checks`), and the run record every GPU document
    gets (environment gate, GPU against the GPU table, clocks, pinned tolerances, wall time)."""
    stats_checks(doc, add)
    extra = release_recompute(doc, add, ctx.release_dirs)
    ctx.unverified += extra["unverified"]
    ctx.warnings += extra["warnings"]
    if ctx.path != "<bytes>" and Path(ctx.path).stem != doc["name"]:  # release-bench writes <name>.json
        ctx.warnings.append({"check": "file_name", "path": "$.name", "message": f"the file is named "
                             f"{Path(ctx.path).name}, but the result is {doc['name']}.json (renamed or copied: read "
                             "its release, T and shape from the document, not the file name)"})
    ctx.unverified += routing_file_recompute(doc, ctx.routing_files, add)
    gpu_run = doc["timing"]["timer"] == "cuda-events"
    samples = [(f"$.telemetry.samples[{i}]", s) for i, s in enumerate(doc["telemetry"]["samples"])]
    guarded("environment_gate", add, record_checks.environment_gate, doc, add)
    if gpu_run:
        guarded("metadata_plausible", add, record_checks.metadata_plausible, doc, add, ctx)
        guarded("telemetry_plausible", add, record_checks.telemetry_plausible, samples, doc, add, ctx)
    record_checks.tolerances_pinned(doc["config"].get("tolerances"), "$.config.tolerances", add)
    record_checks.wall_plausible(doc["wall_seconds"], _raw_ms(doc), "$.wall_seconds",
                                 "its own raw and warm-up latencies", add)


def autotune_matrix_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    matrix_checks(doc, add)
    autotune_configs(doc, add)
    config_semantics(doc, add)
    add("shape_matches_config", shape_problems(doc))
    run_record(doc, add, ctx)
    guarded("config_provenance", add, record_checks.config_provenance, doc, add, ctx)
    work = sum(sum(o["raw_ms"]) for s in doc["stages"].values() for c in s["cells"] if c["status"] == "ok"
               for o in c["patterns"].values())
    record_checks.wall_plausible(doc["wall_seconds"], work, "$.wall_seconds", "its cells' timed observations", add)
    ctx.unverifiable("$.stages.*.cells[*].patterns.*.raw_ms, $.wall_seconds, $.metadata",
                     "measured on the GPU host; every statistic is recomputed from the observations")


def smoke_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    guarded("smoke_recompute", add, report_checks.smoke_recompute, doc, add, ctx)
    record_checks.tolerances_pinned(doc["tolerances"], "$.tolerances", add)
    run_record(doc, add, ctx)
    guarded("config_provenance", add, record_checks.config_provenance, doc, add, ctx)
    ctx.unverifiable("$.naive, $.oracle, $.staged_vs_official (rel_l2, max_abs, max_ulp, n_different)",
                     "need the GPU tensors; held to their own consistency and the pinned tolerances")


def check_report_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    guarded("check_report_recompute", add, report_checks.check_report_recompute, doc, add, ctx)
    run_record(doc, add, ctx)
    guarded("config_provenance", add, record_checks.config_provenance, doc, add, ctx)


def whatif_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    guarded("whatif_recompute", add, report_checks.whatif_recompute, doc, add, ctx)
    autotune_configs(doc, add)
    config_semantics(doc, add)
    run_record(doc, add, ctx)
    guarded("config_provenance", add, record_checks.config_provenance, doc, add, ctx)
    work = sum(sum(r["ms"].values()) for p in doc["patterns"].values() for r in p["records"])
    record_checks.wall_plausible(doc["wall_seconds"], work, "$.wall_seconds", "its own per-round records", add)
    ctx.unverifiable("$.patterns.*.records[*].ms, $.patterns.*.arms.*.equivalence", "measured on the GPU host "
                     "(statistics recomputed from them; equivalence held to the pinned tolerance)")


def method_study_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    guarded("method_study_recompute", add, report_checks.method_study_recompute, doc, add, ctx)
    config_semantics(doc, add)
    records = (doc.get("flush") or {}).get("records", [])
    samples = [(f"$.flush.records[{i}].telemetry", r["telemetry"]) for i, r in enumerate(records) if "telemetry" in r]
    run_record(doc, add, ctx, samples)
    if records:
        work = sum(sum(r["ms"].values()) for r in records)
        record_checks.wall_plausible(doc["seconds"].get("flush"), work, "$.seconds.flush",
                                     "the flush part's records", add)
    ctx.unverifiable("$.flush.records[*].ms, $.oracle, $.grid, $.kernels.*.compiled", "measured or compiled on "
                     "the GPU host; summaries recomputed, the rest held to consistency and the pinned tolerances")


def _row(name: str, check: KindChecks, host: bool = False) -> KindChecks:
    """A kind whose checks are one function recording check ``name`` (guarded: a document the schema let
    through but the check cannot read fails that check); ``host``: plus ``metadata_plausible`` of its
    host facts (:func:`.record_checks.host_problems`)."""
    def run(doc: dict[str, Any], add: Add, ctx: Context) -> None:
        guarded(name, add, check, doc, add, ctx)
        if host and "metadata" in doc:
            add("metadata_plausible", record_checks.host_problems(doc["metadata"]))
    run.__doc__ = check.__doc__
    return run


def sweep_autotune_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    autotune_configs(doc, add, "sweep_autotune_configs")


#: kind -> the checks run once its schema passed.
KIND_CHECKS: dict[str, KindChecks] = {
    "analysis": _row("analysis_recompute", derived_checks.analysis_checks, host=True),
    "autotune_matrix": autotune_matrix_checks,
    "bench_result": bench_checks,
    "check_report": check_report_checks,
    "compare": _row("compare_recompute", derived_checks.compare_checks),
    "flush_study": _row("flush_study_recompute", derived_checks.flush_study_checks, host=True),
    "method_study": method_study_checks,
    "model_calibration": _row("calibration_recompute", model_checks.calibration_checks),
    "model_calibration_set": _row("calibration_set_semantics", model_checks.calibration_set_checks),
    "model_validation": _row("model_validation_recompute", model_checks.validation_checks),
    "ncu_summary": _row("ncu_recompute", ncu_checks.ncu_summary_checks),
    "noise_table": _row("noise_table_recompute", derived_checks.noise_table_checks),
    "release_result": release_result_checks,
    "routing_report": _row("routing_report_recompute", derived_checks.routing_report_checks, host=True),
    "smoke_report": smoke_checks,
    "sweep_autotune": sweep_autotune_checks,
    "sweep_point": sweep_point_checks,
    "validation_report": _row("validation_report_consistent", derived_checks.validation_report_checks),
    "whatif_result": whatif_checks,
}


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
         "why": "needs the GPU tensors; only mutual consistency and the pinned tolerances are checked"},
        {"path": "$.autotune", "why": "autotune choices and tune_seconds come from the GPU run (each config is "
                                      "checked to be one of FLA's)"},
        {"path": "$.telemetry.samples[*] clocks/temperature/power",
         "why": "NVML readings (bounded: clocks by the GPU's maximum, temperature by 5-120 °C, power by 1.25x the "
                f"recorded limit, or {record_checks.POWER_CEILING_W:g} W where none is recorded; throttle count "
                "recomputed)"},
        *([{"path": "$.cupti.kernel_ms, $.cupti.event_ms",
            "why": "the profiled calls' kernel and CUDA-event times come from the GPU run: their medians, counts, "
                   "cells, sizing, method and rule are recomputed and the agreement rule is held on them; the "
                   "readings themselves (and how far the profiler slowed each call) are not"}] if "cupti" in doc
          else []),
        {"path": "$.wall_seconds", "why": "host wall clock (bounded below by the latencies it timed)"},
        {"path": "$.fla.files_verified", "why": "counted on the GPU host's FLA install"},
        {"path": "$.metadata (hostname, platform, packages, driver, power)",
         "why": "facts about the host; the GPU is checked against the GPU table, versions and dates for plausibility"},
    ]
    if doc["timing"].get("resumed"):
        out.append({"path": "$.timing.resumed", "why": "a resumed run re-ran its warm-up; which rounds ran in which "
                                                       "process is not recorded"})
    return out
