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
:data:`KIND_MODULES` imports the module of each row of the core kind table by the row's name (its one dynamic
import, inside this tier); tests/checking/test_kind_table.py holds the rows, the modules and their ``KIND`` to one
another.

>>> from nsa_exp.core.kinds import KINDS
>>> sorted(KIND_CHECKS) == sorted(KINDS)
True
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..core.kinds import DOCUMENT_KINDS
from .checks import KindChecks

#: The module of each document kind, in the order of :data:`nsa_exp.core.kinds.DOCUMENT_KINDS`: the module of a
#: kind is ``checking/<kind>.py``, named after its row (a kind is its row and its module, nothing else to list).
KIND_MODULES: tuple[ModuleType, ...] = tuple(importlib.import_module(f"{__package__}.{k.name}") for k in DOCUMENT_KINDS)
#: kind -> the checks run once its schema passed (each module's ``checks``).
KIND_CHECKS: dict[str, KindChecks] = {m.KIND: m.checks for m in KIND_MODULES}
#: kind -> its frozen record, for the kinds whose module declares one (``RECORD``): their schema files are generated
#: from it (:func:`nsa_exp.io.schema_sync.generated_schema`, ``python -m nsa_exp schemas --write``).
KIND_RECORDS: dict[str, type] = {m.KIND: m.RECORD for m in KIND_MODULES if hasattr(m, "RECORD")}
