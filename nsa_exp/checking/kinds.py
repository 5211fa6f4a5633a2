"""The document kinds' checks: each kind's module declares its row, this module collects them.

``validate`` (:mod:`.validate`) detects a document's kind (a JSON document's ``kind`` field, one of
:data:`nsa_exp.core.kinds.KINDS`; a CSV table by its header, :data:`nsa_exp.core.kinds.CSV_KINDS`), checks its
schema, then runs the kind's checks, :data:`KIND_CHECKS` (a CSV's: :func:`.validate.csv_kind` picks
:mod:`.csv_checks`, :mod:`.sweep_checks` or :func:`.ncu_summary.ncu_raw_csv_checks`). Every kind the bundle
writes has its checks: each derived number is recomputed from its source or listed under ``unverified`` (never
passed), and what cannot be recomputed is held to what physics and the record allow (:mod:`.record_checks`).
What each kind's checks recompute, and what they cannot, is listed per kind in docs/SCHEMAS.md.

A kind's row lives in its own module, ``checking/<kind>.py`` (its builder and its checks, issue 29), which
declares ``KIND`` (its name in :data:`nsa_exp.core.kinds.DOCUMENT_KINDS`) and ``checks(doc, add, ctx)``: a
function composing the shared checks (:mod:`.stats_checks`, :mod:`.run_checks`, :mod:`.routing_checks`,
:mod:`.autotune_checks`, :mod:`.record_checks`, :mod:`.sources`) with its own, or, for a kind rebuilt from its
sources, its one recompute check, ``checks = one_check("<check>", recompute)`` (:func:`.checks.one_check`).
:data:`KIND_MODULES` lists the modules (imported here, so the tier and loop tests see the edges);
tests/checking/test_kind_table.py holds it, the modules declaring ``KIND`` and the core table to one another.

>>> from nsa_exp.core.kinds import KINDS
>>> sorted(KIND_CHECKS) == sorted(KINDS)
True
"""

from __future__ import annotations

from types import ModuleType

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
    release_result,
    routing_report,
    smoke_report,
    sweep_autotune,
    sweep_point,
    validation_report,
    whatif_result,
)
from .checks import KindChecks

#: The module of each document kind, by kind name.
KIND_MODULES: tuple[ModuleType, ...] = (
    analysis, autotune_matrix, bench_result, check_report, compare, flush_study, method_study, model_calibration,
    model_calibration_set, model_validation, ncu_summary, noise_table, peer_result, release_result, routing_report,
    smoke_report, sweep_autotune, sweep_point, validation_report, whatif_result,
)
#: kind -> the checks run once its schema passed (each module's ``checks``).
KIND_CHECKS: dict[str, KindChecks] = {m.KIND: m.checks for m in KIND_MODULES}
