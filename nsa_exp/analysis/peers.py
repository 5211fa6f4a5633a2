"""The statistics of a peer result (issue 31): per routing and peer, the backward and fwd+bwd medians with their
bootstrap 95% CIs, each peer's own skew penalty (its backward on the routing over its backward on ``local``), its
backward over dense causal attention's backward, its extra work, and the fastest backward per routing.

Every ratio is a ratio of medians with a paired bootstrap CI (:func:`nsa_exp.analysis.bootstrap.bootstrap_ratio_ci`:
every round times every cell, so observation ``i`` of two cells comes from the same round), or an unpaired one when
the stop rule stopped timing one of the two cells earlier. One function,
:func:`peer_summary`, serves the builder and ``validate`` (which recomputes it from the recorded observations).
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import median
from typing import Any

from tabulate import tabulate

from ..core.families import BASELINE_PATTERN
from ..core.peers import DENSE_CELL, PEER_BACKWARD, peer
from .bootstrap import bootstrap_median_ci, bootstrap_ratio_ci
from .compare import ratio_ci

#: The stages summarised per cell: the backward (the question) and the training step's forward + backward.
SUMMARY_STAGES = (PEER_BACKWARD, "fwd_bwd")


def _ratio(num: list[float], den: list[float]) -> dict[str, Any]:
    """``median(num) / median(den)`` with its 95% CI: paired when every round timed both cells, else (the stop
    rule's verdict rule stopped timing one of them earlier) unpaired (:func:`nsa_exp.analysis.compare.ratio_ci`,
    as the report's bench ratios)."""
    lo, hi = bootstrap_ratio_ci(num, den) if len(num) == len(den) else ratio_ci(den, num)
    return {"ratio": median(num) / median(den), "ci": [lo, hi]}


def peer_summary(cells: Mapping[str, Mapping[str, Any]], routings: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``cells``: a peer result's ``cells`` (``{cell: {"routing", "peer", "stages": {stage: {"raw_ms", "median_ms",
    ...}}}}``); ``routings``: its ``routings`` (``{name: {"work": score pairs, ...}}``). Returns
    ``{"routings": {routing: {peer: {"bwd": {"median_ms", "ci_ms"}, "fwd_bwd": {...}, "extra_work",
    "skew_penalty": {"ratio", "ci"} | None, "vs_dense": {"ratio", "ci"} | None}}}, "dense": {...} | None,
    "fastest_bwd": {routing: peer}}``."""
    def stage(cell: str, name: str) -> dict[str, Any]:
        raw = list(cells[cell]["stages"][name]["raw_ms"])
        lo, hi = bootstrap_median_ci(raw)
        return {"median_ms": cells[cell]["stages"][name]["median_ms"], "ci_ms": [lo, hi]}

    def raw(cell: str) -> list[float]:
        return list(cells[cell]["stages"][PEER_BACKWARD]["raw_ms"])

    dense = {s: stage(DENSE_CELL, s) for s in SUMMARY_STAGES} if DENSE_CELL in cells else None
    out: dict[str, dict[str, Any]] = {}
    for cell, c in cells.items():
        if c["routing"] is None:
            continue
        routing, name = c["routing"], c["peer"]
        base = f"{BASELINE_PATTERN}|{name}"
        work = routings[routing]["work"]
        out.setdefault(routing, {})[name] = {
            **{s: stage(cell, s) for s in SUMMARY_STAGES},
            "extra_work": work[peer(name).work] / work["fla"],
            "skew_penalty": _ratio(raw(cell), raw(base)) if base in cells and routing != BASELINE_PATTERN else None,
            "vs_dense": _ratio(raw(cell), raw(DENSE_CELL)) if DENSE_CELL in cells else None,
        }
    fastest = {r: min(ps, key=lambda p: ps[p][PEER_BACKWARD]["median_ms"]) for r, ps in out.items()}
    return {"routings": out, "dense": dense, "fastest_bwd": fastest}


def _ci(x: Mapping[str, Any] | None, key: str = "ratio") -> str:
    if x is None:
        return "-"
    lo, hi = x["ci"] if key == "ratio" else x["ci_ms"]
    return f"{x[key]:.3g} [{lo:.3g}, {hi:.3g}]"


def format_peers(doc: Mapping[str, Any]) -> str:
    """A peer result's summary as a console table: per routing and peer, the backward and fwd+bwd medians (ms) with
    95% CIs, the skew penalty, the ratio to dense backward, the extra work; then the oracle failures and skips."""
    summary = doc["summary"]
    rows = [[r, p, _ci(s["bwd"], "median_ms"), _ci(s["fwd_bwd"], "median_ms"), _ci(s["skew_penalty"]),
             _ci(s["vs_dense"]), f"{s['extra_work']:.2f}", "*" if summary["fastest_bwd"][r] == p else ""]
            for r, ps in summary["routings"].items() for p, s in ps.items()]
    if summary["dense"] is not None:
        d = summary["dense"]
        rows.append(["(any)", "sdpa-dense", _ci(d["bwd"], "median_ms"), _ci(d["fwd_bwd"], "median_ms"), "-", "1",
                     "", ""])
    lines = [tabulate(rows, headers=["routing", "peer", "bwd ms [95% CI]", "fwd+bwd ms", "skew penalty (bwd)",
                                     "bwd / dense bwd", "work / FLA", "fastest bwd"])]
    lines += [f"oracle failed, not timed: {c}: {'; '.join(f)}" for c, f in doc["oracle"]["failures"].items()]
    lines += [f"{p} not timed on {r}: {why}" for p, rec in doc["peers"].items() for r, why in rec["skipped"].items()
              if r not in doc["oracle"]["failures"]]
    return "\n".join(lines)
