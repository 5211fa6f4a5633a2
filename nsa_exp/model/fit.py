"""Fit the makespan model's parameters ``(a, c, gamma)`` to measured dK/dV medians.

The fit minimises the relative error ``predicted / measured - 1`` over the calibration points with
``scipy.optimize.least_squares`` (trust-region reflective, bounds ``a, c >= 0``,
``1 <= gamma <= slots``), started from two ``gamma`` values (1.0 and 1.5) so a local minimum is not taken for
the answer. The solver's termination tolerances are :data:`FTOL`, :data:`XTOL`, :data:`GTOL`; a refit on
another CPU (BLAS, thread count, scipy) lands within them, not bit for bit, so a refit is judged by
:func:`refit_problems` (the objective and the predictions), never by the parameters' last digits.
Calibration points are *designed routings* named in the calibration file; a routing used to calibrate
is never reported as a prediction (docs/MODEL.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..io.memo import memoised
from .makespan import program_work, simulate

#: ``least_squares``' termination tolerances (scipy's defaults, passed explicitly so the checks can derive
#: their room from them): it stops once the objective's relative decrease is below FTOL, the step below XTOL
#: (relative to the parameters) or the scaled gradient below GTOL.
FTOL = XTOL = GTOL = 1e-8
#: relative room between the objective (half the sum of squared relative errors) of two runs of the same fit:
#: each stops within ~FTOL of the minimum, times 10 for two runs and the last step's overshoot.
FIT_COST_RTOL = 10 * FTOL


@dataclass(frozen=True)
class Params:
    """Model parameters: fixed ms per program ``a``, ms per BQ-iteration ``c``, solo speed-up ``gamma``."""

    a_ms: float
    c_ms: float
    gamma: float

    def as_dict(self) -> dict[str, float]:
        return {"a_ms": self.a_ms, "c_ms": self.c_ms, "gamma": self.gamma}


def predict_ms(fanin: np.ndarray, params: Params, n_sm: int, slots: int, bq: int = 1,
               order: np.ndarray | None = None) -> float:
    """Predicted dK/dV makespan (ms) for per-row fan-in in program-id order (optionally reordered)."""
    work = program_work(fanin, params.a_ms, params.c_ms, bq)
    if order is not None:
        work = work[order]
    return simulate(work, n_sm, slots, params.gamma).makespan


def fit_params(points: Sequence[tuple[np.ndarray, float]], n_sm: int, slots: int, bq: int = 1,
               gammas: Sequence[float] = (1.0, 1.5)) -> tuple[Params, np.ndarray]:
    """Least-squares ``(a, c, gamma)`` over ``points`` = ``[(fanin per row, measured ms), ...]``.

    Returns the best parameters and the fitted ms per point. Needs at least 3 points whose fan-in
    distributions differ (else the parameters are not identifiable: ``ValueError``). Kept in the opt-in memo
    (nsa_exp/io/memo.py) under its inputs and this process's BLAS thread settings (:func:`blas_threads`): a
    least-squares solve may round differently at another thread count, so each count refits for itself.
    """
    if len(points) < 3:
        raise ValueError(f"calibration needs at least 3 routings (got {len(points)})")
    measured = np.array([m for _, m in points], dtype=np.float64)
    if (measured <= 0).any():
        raise ValueError("calibration medians must be > 0 ms")
    fit = _fit([np.asarray(f).tolist() for f, _ in points], measured.tolist(), n_sm, slots, bq,
               [float(g) for g in gammas], blas_threads())
    return Params(**fit["params"]), np.array(fit["fitted_ms"], dtype=np.float64)


def blas_threads() -> list[str | int | None]:
    """What sets this process's BLAS/OpenMP thread count: the three variables (None when unset) and the CPU count."""
    return [*(os.environ.get(v) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")),
            os.cpu_count()]


@memoised
def _fit(fanins: list[list[float]], measured_ms: list[float], n_sm: int, slots: int, bq: int,
         gammas: list[float], threads: list[str | int | None]) -> dict[str, Any]:
    """:func:`fit_params`' solve: ``{"params": {a_ms, c_ms, gamma}, "fitted_ms": [...]}`` (JSON, for the memo;
    ``threads`` only keys it)."""
    measured = np.asarray(measured_ms, dtype=np.float64)
    points = [np.asarray(f) for f in fanins]

    def clipped(x: np.ndarray) -> Params:
        # the optimiser's bound leaves 1e-9 of room; gamma is meaningless (and refused) past slots (1 slot: 1)
        return Params(float(x[0]), float(x[1]), min(max(float(x[2]), 1.0), float(slots)))

    def residual(x: np.ndarray) -> np.ndarray:
        p = clipped(x)
        return np.array([predict_ms(f, p, n_sm, slots, bq) for f in points]) / measured - 1.0

    mean_f = float(np.mean([np.mean(f) for f in points]))
    c0 = float(np.min(measured)) * n_sm * slots / max(1.0, sum(np.sum(f) for f in points) / len(points))
    from scipy.optimize import least_squares  # noqa: PLC0415 - 0.16 s, imported by a refit, not by every checker

    best = None
    for g0 in gammas:
        g0 = min(max(g0, 1.0), float(slots))
        x0 = [0.1 * c0 * mean_f, c0, g0]
        fit = least_squares(residual, x0, bounds=([0.0, 0.0, 1.0], [np.inf, np.inf, float(max(slots, 1)) + 1e-9]),
                            x_scale="jac", method="trf", ftol=FTOL, xtol=XTOL, gtol=GTOL)
        if best is None or fit.cost < best.cost:
            best = fit
    if best is None:
        raise ValueError("calibration needs at least one starting gamma")
    fitted = measured * (1.0 + residual(best.x))
    return {"params": clipped(best.x).as_dict(), "fitted_ms": [float(v) for v in fitted]}


def objective(measured: Sequence[float] | np.ndarray, predicted: Sequence[float] | np.ndarray) -> float:
    """The fit's objective: ``0.5 * sum((predicted / measured - 1) ** 2)`` (float, unitless; ms in, both)."""
    r = np.asarray(predicted, dtype=np.float64) / np.asarray(measured, dtype=np.float64) - 1.0
    return float(0.5 * np.sum(r * r))


def refit_problems(measured: Sequence[float], recorded: Sequence[float], refit: Sequence[float]) -> list[str]:
    """Why the recorded fit (``recorded`` ms per point, from the recorded parameters) is not the fit that
    ``refit`` (ms per point, from fitting the same points again) reproduces; empty when it is.

    Held to the solver's tolerance, not to bits: the objectives agree within :data:`FIT_COST_RTOL` (relative),
    and each point's relative prediction within ``sqrt(2 * FIT_COST_RTOL * objective)`` (near the minimum the
    objective grows as half the squared change of the relative predictions). The parameters themselves are not
    compared: one the points barely determine (an ``a_ms`` at its bound 0) moves far within the tolerance
    without changing a prediction. All three sequences in ms, one entry per point, same order.
    """
    m = np.asarray(measured, dtype=np.float64)
    f_rec, f_fit = objective(m, recorded), objective(m, refit)
    out = []
    if abs(f_rec - f_fit) > FIT_COST_RTOL * max(f_rec, f_fit, 1e-300):
        out.append(f"objective {f_rec!r}, the refit's is {f_fit!r} (relative room {FIT_COST_RTOL:g}, from ftol)")
    room = float(np.sqrt(2.0 * FIT_COST_RTOL * max(f_rec, f_fit)))
    moved = np.abs(np.asarray(recorded, dtype=np.float64) / np.asarray(refit, dtype=np.float64) - 1.0)
    if moved.max(initial=0.0) > room:
        i = int(np.argmax(moved))
        out.append(f"point {i} predicted {recorded[i]!r} ms, the refit predicts {refit[i]!r} ms (relative room "
                   f"{room:.3g} from the objective and ftol)")
    return out


def error_table(names: Sequence[str], measured: Sequence[float] | np.ndarray,
                predicted: Sequence[float] | np.ndarray) -> list[dict[str, Any]]:
    """Rows ``{name, measured_ms, predicted_ms, error_pct}`` (error = predicted / measured - 1, in %)."""
    return [{"name": n, "measured_ms": float(m), "predicted_ms": float(p), "error_pct": 100.0 * (p / m - 1.0)}
            for n, m, p in zip(names, measured, predicted, strict=True)]
