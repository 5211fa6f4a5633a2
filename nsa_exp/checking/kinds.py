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
- ``release_result``: the statistics checks, then :func:`.release_result.release_recompute` (and
  ``routing_file_recompute``; ``release_files`` given the release folders) + the run record.
- ``stop_rule`` for a bench result or sweep point run under the stop rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import (
    bench_result,
    derived_checks,
    model_checks,
    ncu_checks,
    record_checks,
    release_result,
    report_checks,
    sweep_point,
)
from .autotune_checks import autotune_configs, matrix_checks
from .checks import Add, Context, guarded
from .record_checks import config_semantics, run_record
from .run_checks import shape_problems

#: ``checks(doc, add, ctx)``: records its checks through ``add``, unverified figures and warnings on ``ctx``.
KindChecks = Callable[[dict[str, Any], Add, Context], None]


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
    "bench_result": bench_result.checks,
    "check_report": check_report_checks,
    "compare": _row("compare_recompute", derived_checks.compare_checks),
    "flush_study": _row("flush_study_recompute", derived_checks.flush_study_checks, host=True),
    "method_study": method_study_checks,
    "model_calibration": _row("calibration_recompute", model_checks.calibration_checks),
    "model_calibration_set": _row("calibration_set_semantics", model_checks.calibration_set_checks),
    "model_validation": _row("model_validation_recompute", model_checks.validation_checks),
    "ncu_summary": _row("ncu_recompute", ncu_checks.ncu_summary_checks),
    "noise_table": _row("noise_table_recompute", derived_checks.noise_table_checks),
    "release_result": release_result.checks,
    "routing_report": _row("routing_report_recompute", derived_checks.routing_report_checks, host=True),
    "smoke_report": smoke_checks,
    "sweep_autotune": sweep_autotune_checks,
    "sweep_point": sweep_point.checks,
    "validation_report": _row("validation_report_consistent", derived_checks.validation_report_checks),
    "whatif_result": whatif_checks,
}


