"""The committed inputs of the report, loaded once for the report's tests (every file validated: ~20 s).

The report is a CPU command a user runs without the Triton interpreter: validating the skew sweep's fla-topk
points then lists their routing statistics as unverifiable (FLA's top-k needs a GPU). Under the test harness's
``TRITON_INTERPRET=1`` the validator would instead run FLA's top-k at the full shape in the interpreter, so
the report's tests load their inputs as a user's shell would (:func:`as_a_user`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from nsa_exp.report import build as build_module
from nsa_exp.report.claims import Claims
from nsa_exp.report.data import ReportData, load_report_data
from nsa_exp.report.manifest import Inputs, committed_inputs


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


@contextmanager
def from_loaded(data: ReportData) -> Iterator[None]:
    """Within the block, :func:`nsa_exp.report.build.build_report` of the committed inputs starts from ``data`` (the
    session's one load of them, :func:`report_data`) with fresh claims instead of loading and validating every file
    again (~40 s on 2 cores): everything after the load (render, the claims audit, the writes) runs as the CLI runs
    it. Other inputs are loaded as usual."""
    real = build_module.load_report_data

    def load(inputs: Inputs) -> ReportData:
        return dataclasses.replace(data, claims=Claims()) if inputs == data.inputs else real(inputs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build_module, "load_report_data", load)
        yield
