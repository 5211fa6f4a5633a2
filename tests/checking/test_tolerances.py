"""Each recomputation is held to a tolerance that fits it (docs/SCHEMAS.md, Tolerances): integers and copies
exactly, float reductions at REL_TOL (n * eps of their length), the calibration's refit at its solver's
tolerance (objective and predictions), so a refit that lands 1.4e-8 away on another CPU passes and an
edited parameter does not."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from nsa_exp.checking import model_calibration
from nsa_exp.checking.checks import EPS, REL_TOL, close, reduction_tol, same
from nsa_exp.checking.validate import validate_path
from nsa_exp.model.calibration import fit_calibration
from nsa_exp.model.fit import FIT_COST_RTOL, FTOL, Params, predict_ms, refit_problems
from nsa_exp.model.points import pattern_fanin
from tests.helpers import REPO

CALIBRATION = REPO / "results" / "model" / "h200_BQ1_w4_s2.json"


def test_integers_compare_exactly():
    assert not close(4, 5) and not same(4, 5)
    assert not close(10**15, 10**15 + 1)  # within 1e-12 relative, but a count off by one is wrong
    assert close(7, 7) and same(7, 7)


def test_float_reductions_get_room_from_their_length():
    assert reduction_tol(150) == 150 * EPS < REL_TOL  # the longest recorded reduction fits the default
    assert close(1.0, 1.0 + 100 * EPS)
    assert not close(1.0, 1.0 + 1e-10)  # a one-observation change of a median is seen
    assert not same(True, 1.0)  # a recorded bool is never a number


def test_the_fit_tolerance_comes_from_the_solver():
    assert FIT_COST_RTOL == 10 * FTOL


def _fitted(doc: dict, params: Params) -> list[float]:
    occ = doc["occupancy"]
    return [predict_ms(pattern_fanin(r["pattern"], doc["shape"], r["T"], doc["seed"]), params, occ["sm_count"],
                       occ["slots_per_sm"], doc["model"]["bq"]) for r in doc["points"]]


def _with_params(doc: dict, scale: dict[str, float]) -> dict:
    """The calibration with parameters scaled and every number derived from them (fitted ms, errors,
    residuals) recomputed: only the refit can tell."""
    doc = copy.deepcopy(doc)
    pars = doc["model"]["parameters"]
    pars.update({k: pars[k] * f for k, f in scale.items()})
    for rec, fitted in zip(doc["points"], _fitted(doc, Params(**pars)), strict=True):
        rec["fitted_ms"] = fitted
        rec["error_pct"] = 100.0 * (fitted / rec["measured_ms"] - 1.0)
    errs = [abs(r["error_pct"]) for r in doc["points"]]
    doc["residuals"].update(mean_abs_pct=sum(errs) / len(errs), max_abs_pct=max(errs))
    return doc


def _recompute_passed(doc: dict, tmp_path: Path, monkeypatch) -> bool:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(doc, indent=1))
    monkeypatch.chdir(REPO)  # the sources it names are found from the working directory
    report = validate_path(path)
    return next(c for c in report["checks"] if c["name"] == "calibration_recompute")["passed"]


@pytest.fixture(scope="module")
def calibration() -> dict:
    return json.loads(CALIBRATION.read_text())


def test_a_refit_landing_1p4e_8_away_passes(calibration, tmp_path, monkeypatch):
    # the fresh-user trial's CPU: least_squares stopped 1.4e-8 relative away on a_ms
    def other_cpu(points, fanins, sm_count, slots, bq):
        params, rows = fit_calibration(points, fanins, sm_count, slots, bq)
        moved = Params(params.a_ms * (1 + 1.4e-8), params.c_ms, params.gamma)
        for row, fanin in zip(rows, fanins, strict=True):
            row["fitted_ms"] = predict_ms(fanin, moved, sm_count, slots, bq)
        return moved, rows

    monkeypatch.setattr(model_calibration, "fit_calibration", other_cpu)
    assert _recompute_passed(calibration, tmp_path, monkeypatch)


@pytest.mark.parametrize("key", ["a_ms", "c_ms", "gamma"])
def test_an_edited_parameter_1e_4_away_fails(calibration, tmp_path, monkeypatch, key):
    assert _recompute_passed(_with_params(calibration, {key: 1.0}), tmp_path, monkeypatch)  # the edit is all
    assert not _recompute_passed(_with_params(calibration, {key: 1 + 1e-4}), tmp_path, monkeypatch)


def test_refit_problems_name_the_objective_and_the_point():
    measured = [1.0, 2.0, 3.0]
    recorded = [1.001, 1.998, 3.002]
    assert refit_problems(measured, recorded, [x * (1 + 1e-11) for x in recorded]) == []
    problems = refit_problems(measured, recorded, [1.001, 1.998 * (1 + 1e-4), 3.002])
    assert problems and any("objective" in p for p in problems) and any("point 1" in p for p in problems)
