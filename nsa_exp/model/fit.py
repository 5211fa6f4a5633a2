"""Fit the makespan model's parameters ``(a, c, gamma)`` to measured dK/dV medians.

The fit minimises the relative error ``predicted / measured - 1`` over the calibration points with
``scipy.optimize.least_squares`` (trust-region reflective, bounds ``a, c >= 0``,
``1 <= gamma <= slots``), started from two ``gamma`` values (1.0 and 1.5) so a local minimum is not taken for
the answer. Calibration points are *designed routings* named in the calibration file; a routing
used to calibrate is never reported as a prediction (docs/MODEL.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from .makespan import program_work, simulate


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
    distributions differ (else the parameters are not identifiable: ``ValueError``).
    """
    if len(points) < 3:
        raise ValueError(f"calibration needs at least 3 routings (got {len(points)})")
    measured = np.array([m for _, m in points], dtype=np.float64)
    if (measured <= 0).any():
        raise ValueError("calibration medians must be > 0 ms")

    def clipped(x: np.ndarray) -> Params:
        # the optimiser's bound leaves 1e-9 of room; gamma is meaningless (and refused) past slots (1 slot: 1)
        return Params(float(x[0]), float(x[1]), min(max(float(x[2]), 1.0), float(slots)))

    def residual(x: np.ndarray) -> np.ndarray:
        p = clipped(x)
        return np.array([predict_ms(f, p, n_sm, slots, bq) for f, _ in points]) / measured - 1.0

    mean_f = float(np.mean([np.mean(f) for f, _ in points]))
    c0 = float(np.min(measured)) * n_sm * slots / max(1.0, sum(np.sum(f) for f, _ in points) / len(points))
    best = None
    for g0 in gammas:
        g0 = min(max(g0, 1.0), float(slots))
        x0 = [0.1 * c0 * mean_f, c0, g0]
        fit = least_squares(residual, x0, bounds=([0.0, 0.0, 1.0], [np.inf, np.inf, float(max(slots, 1)) + 1e-9]),
                            x_scale="jac", method="trf")
        if best is None or fit.cost < best.cost:
            best = fit
    params = clipped(best.x)
    return params, measured * (1.0 + residual(best.x))


def error_table(names: Sequence[str], measured: Sequence[float], predicted: Sequence[float]) -> list[Mapping]:
    """Rows ``{name, measured_ms, predicted_ms, error_pct}`` (error = predicted / measured - 1, in %)."""
    return [{"name": n, "measured_ms": float(m), "predicted_ms": float(p), "error_pct": 100.0 * (p / m - 1.0)}
            for n, m, p in zip(names, measured, predicted, strict=True)]
