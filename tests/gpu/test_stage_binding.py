"""The one stage -> callable binding (``gpu/launcher``): every Stage row is one ``@stage_method`` of its name whose
parameters are the row's ``consumes``, bound in table order; and adding a stage is one row, one method and the
schemas' regeneration, shown here by adding one (a second dQ launch) over FLA's real kernels under the
interpreter."""

from __future__ import annotations

import inspect
import json

import pytest
import torch

from nsa_exp.core import stages
from nsa_exp.core.config import Pattern
from nsa_exp.errors import UserError
from nsa_exp.io.schema_sync import drifted, render
from nsa_exp.io.schemas import load_schema
from nsa_exp.routing.patterns import generate_routing
from tests.conftest import TINY

pytestmark = pytest.mark.interpreter


def test_every_stage_row_is_one_marked_method_reading_what_it_consumes(fla_interpreter):
    for row in stages.STAGES:
        method = getattr(fla_interpreter.StagedBackward, row.name)
        assert method.stage_row is row
        assert tuple(inspect.signature(method).parameters)[1:] == row.consumes


def test_a_method_that_is_not_its_rows_launch_is_refused_when_it_is_defined(fla_interpreter):
    with pytest.raises(TypeError, match=r"consumes \('lse', 'delta'\)"):
        @fla_interpreter.stage_method
        def dq_core(self, lse): ...
    with pytest.raises(UserError, match="unknown stage 'not_a_stage'"):
        @fla_interpreter.stage_method
        def not_a_stage(self): ...


def test_adding_a_stage_is_one_row_one_method_and_schema_regeneration(fla_interpreter, monkeypatch):
    launcher = fla_interpreter
    row = stages.Stage("dq_again", "dQ again", None, False, "parallel_nsa_bwd_kernel_dq", None,
                       consumes=("lse", "delta"), optional=True, sweepable=False)
    table = (*stages.STAGES[:-1], row, stages.STAGES[-1])  # the row, before the wrapper
    monkeypatch.setattr(stages, "STAGES", table)
    monkeypatch.setattr(stages, "STAGE_NAMES", tuple(s.name for s in table))
    monkeypatch.setattr(stages, "OPTIONAL_STAGES", tuple(s.name for s in table if s.optional))

    class WithDqAgain(launcher.StagedBackward):
        @launcher.stage_method
        def dq_again(self, lse: torch.Tensor, delta: torch.Tensor) -> None:
            self.dq_core(lse, delta)

    routing = generate_routing(Pattern("local"), TINY, 0)
    staged = WithDqAgain(launcher.make_problem(TINY, routing, launcher.make_inputs(TINY, 1, "cpu")))
    calls = staged.stage_callables()
    assert list(calls) == [*(s.name for s in table)]
    for name, call in calls.items():
        call()
        if name == "dq_core":
            dq = staged.dq.clone()
    assert torch.equal(staged.dq, dq)  # the added stage launched FLA's dQ kernel again, on this round's lse/delta

    stale = {p.name for p in drifted()}  # the schemas enumerate the stages: stale until regenerated
    assert {"result.schema.json", "summary_row.schema.json"} <= stale
    assert "dq_again" in json.dumps(render(load_schema("summary_row"), "summary_row"))
    assert "dq_again" not in json.dumps(load_schema("summary_row"))


def xdist_group(item: pytest.Item) -> str:
    """On the launcher tests' worker (tests/conftest.py), after them: its problem (TINY, ``local`` seed 0, inputs
    seed 1) is test_fla_matches_the_naive_oracle's, so FLA's forward and backward launches replay there
    (tests/interpreter.py LaunchReplay) instead of running again under the interpreter on another worker."""
    return "tests/gpu/test_launcher_matches_official.py"
