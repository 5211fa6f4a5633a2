"""The smoke test's pass rules: which comparison records (``gpu/numerics.compare``) pass which tolerance.

``smoke`` applies them on the GPU (:mod:`nsa_exp.gpu.smoke`) and ``validate`` re-applies them to a
recorded report with the pinned tolerances (:mod:`nsa_exp.checking.smoke_report`): one rule, two callers.

>>> judge_naive({"dq": {"rel_l2": 0.5, "max_abs_rel": 0.0}}, 0.02, 0.05)
['naive dq: rel_l2 0.5 (tol 0.02), max_abs/max|ref| 0 (tol 0.05)']
"""

from __future__ import annotations

from typing import Any


def judge_naive(result: dict[str, Any], tol_rel_l2: float, tol_max_abs_rel: float, label: str = "naive") -> list[str]:
    """One failure line per output (o, dq, dk, dv) whose rel-L2 or max-abs/max|ref| exceeds its tolerance."""
    return [f"{label} {name}: rel_l2 {m['rel_l2']:.3g} (tol {tol_rel_l2}), max_abs/max|ref| "
            f"{m['max_abs_rel']:.3g} (tol {tol_max_abs_rel})"
            for name, m in result.items() if m["rel_l2"] > tol_rel_l2 or m["max_abs_rel"] > tol_max_abs_rel]


def judge_staged(pattern: str, result: dict[str, Any], tol_rel_l2: float, tol_ulp: float) -> list[str]:
    failures = []
    if not result["dq"]["bit_exact"]:
        failures.append(f"staged {pattern} dq: not bit-exact vs the official wrapper "
                        f"({result['dq']['n_different']} elements differ)")
    for name in ("dk", "dv"):
        m = result[name]
        if m["rel_l2"] > tol_rel_l2 or m["max_ulp"] > tol_ulp:
            failures.append(f"staged {pattern} {name}: rel_l2 {m['rel_l2']:.3g} (tol {tol_rel_l2}), "
                            f"max_ulp {m['max_ulp']} (tol {tol_ulp})")
    return failures
