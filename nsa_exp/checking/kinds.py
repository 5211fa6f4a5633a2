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
check (:func:`_row`): ``compare``, ``noise_table``, ``analysis``, ``flush_study``, ``validation_report``,
``model_calibration``, ``model_calibration_set``, ``model_validation``, ``ncu_summary``. CSVs: ``summary_csv``
[:mod:`.csv_checks`], ``sweep_csv`` [:mod:`.sweep_checks`], ``ncu_raw_csv`` [:mod:`.ncu_summary`].
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from .checks import Add, Context, guarded

#: ``checks(doc, add, ctx)``: records its checks through ``add``, unverified figures and warnings on ``ctx``.
KindChecks = Callable[[dict[str, Any], Add, Context], None]


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


#: kind -> the checks run once its schema passed.
KIND_CHECKS: dict[str, KindChecks] = {
    "analysis": _row("analysis_recompute", analysis.recompute, host=True),
    "autotune_matrix": autotune_matrix.checks,
    "bench_result": bench_result.checks,
    "check_report": check_report.checks,
    "compare": _row("compare_recompute", compare.recompute),
    "flush_study": _row("flush_study_recompute", flush_study.recompute, host=True),
    "method_study": method_study.checks,
    "model_calibration": _row("calibration_recompute", model_calibration.calibration_recompute),
    "model_calibration_set": _row("calibration_set_semantics", model_calibration_set.calibration_set_semantics),
    "model_validation": _row("model_validation_recompute", model_validation.model_validation_recompute),
    "ncu_summary": _row("ncu_recompute", ncu_summary.ncu_recompute),
    "noise_table": _row("noise_table_recompute", noise_table.recompute),
    "peer_result": peer_result.checks,
    "release_result": release_result.checks,
    "routing_report": routing_report.checks,
    "smoke_report": smoke_report.checks,
    "sweep_autotune": sweep_autotune.checks,
    "sweep_point": sweep_point.checks,
    "validation_report": _row("validation_report_consistent", validation_report.recompute),
    "whatif_result": whatif_result.checks,
}


