"""The committed inputs of the report, loaded once for the report's tests (every file validated: ~20 s).

The report is a CPU command a user runs without the Triton interpreter: validating the skew sweep's fla-topk
points then lists their routing statistics as unverifiable (FLA's top-k needs a GPU). Under the test harness's
``TRITON_INTERPRET=1`` the validator would instead run FLA's top-k at the full shape in the interpreter, so
the report's tests load their inputs as a user's shell would (:func:`as_a_user`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from nsa_exp.report.data import ReportData, load_report_data
from nsa_exp.report.manifest import committed_inputs


@contextmanager
def as_a_user() -> Iterator[None]:
    """``TRITON_INTERPRET`` off for the block (restored after)."""
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old


@pytest.fixture(scope="session")
def report_data() -> ReportData:
    """:func:`load_report_data` of the committed inputs (the CLI's defaults); a test that tampers copies first."""
    with as_a_user():
        return load_report_data(committed_inputs())
