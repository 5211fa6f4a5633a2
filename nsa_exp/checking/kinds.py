"""The document-kind table: one row per kind, the checks that run once its schema has passed.

``validate`` (:mod:`.validate`) detects a document's kind (a JSON document's ``kind`` field, one of
:data:`nsa_exp.core.kinds.KINDS`; a CSV table by its header, :data:`nsa_exp.core.kinds.CSV_KINDS`), checks its
schema, then runs the row of :data:`KIND_CHECKS` (or :data:`CSV_CHECKS`). Every kind the bundle writes has a
row: each derived number is recomputed from its source or listed under ``unverified`` (never passed), and
what cannot be recomputed is held to what physics and the record allow (:mod:`.record_checks`). What each
row recomputes, and what it cannot, is listed per kind in docs/SCHEMAS.md.

Rows: a kind that has its own module (``checking/<kind>.py``: its builder and its checks, issue 29) names that
module's ``checks`` (``bench_result``, ``sweep_point``, ``release_result``, ``smoke_report``, ``check_report``,
``whatif_result``, ``autotune_matrix``, ``sweep_autotune``, ``method_study``, ``routing_report``,
``peer_result``: each composes
the shared checks, :mod:`.stats_checks`, :mod:`.run_checks`, :mod:`.routing_checks`, :mod:`.autotune_checks`,
:mod:`.record_checks`, :mod:`.sources`, with its own) or, for a kind rebuilt from its sources, its one recompute
check (:func:`.checks.one_check`): ``compare``, ``noise_table``, ``analysis``, ``flush_study``, ``validation_report``,
``model_calibration``, ``model_calibration_set``, ``model_validation``, ``ncu_summary``. CSVs: ``summary_csv``
[:mod:`.csv_checks`], ``sweep_csv`` [:mod:`.sweep_checks`], ``ncu_raw_csv`` [:mod:`.ncu_summary`].
"""

from __future__ import annotations

from . import (
    analysis,
    autotune_matrix,
    bench_result,
    check_report,
    compare,
    flush_study,
    method_study,
    model_calibration,
    model_calibration_set,
    model_validation,
    ncu_summary,
    noise_table,
    peer_result,
    record_checks,
    release_result,
    routing_report,
    smoke_report,
    sweep_autotune,
    sweep_point,
    validation_report,
    whatif_result,
)
from .checks import KindChecks, one_check

#: kind -> the checks run once its schema passed.
KIND_CHECKS: dict[str, KindChecks] = {
    "analysis": one_check("analysis_recompute", analysis.recompute, host=record_checks.host_problems),
    "autotune_matrix": autotune_matrix.checks,
    "bench_result": bench_result.checks,
    "check_report": check_report.checks,
    "compare": one_check("compare_recompute", compare.recompute),
    "flush_study": one_check("flush_study_recompute", flush_study.recompute, host=record_checks.host_problems),
    "method_study": method_study.checks,
    "model_calibration": one_check("calibration_recompute", model_calibration.calibration_recompute),
    "model_calibration_set": one_check("calibration_set_semantics", model_calibration_set.calibration_set_semantics),
    "model_validation": one_check("model_validation_recompute", model_validation.model_validation_recompute),
    "ncu_summary": one_check("ncu_recompute", ncu_summary.ncu_recompute),
    "noise_table": one_check("noise_table_recompute", noise_table.recompute),
    "peer_result": peer_result.checks,
    "release_result": release_result.checks,
    "routing_report": routing_report.checks,
    "smoke_report": smoke_report.checks,
    "sweep_autotune": sweep_autotune.checks,
    "sweep_point": sweep_point.checks,
    "validation_report": one_check("validation_report_consistent", validation_report.recompute),
    "whatif_result": whatif_result.checks,
}


