"""RESULTS.md's noise-floor section: the rule, the floor of every GPU x stage as the committed noise table
(``results/noise/floors.json``, :mod:`nsa_exp.analysis.noise_table`) records it with the files that set it, and
the repeated measurements (every committed file that measured the same quantity, :mod:`nsa_exp.analysis.noise`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..analysis.noise import MIN_FLOOR, MIN_ROUNDS, Quantity, repeated
from ..analysis.noise_table import NOISE_TABLE
from ..core.stages import STAGE_NAMES, TITLES
from .data import ReportData, short_gpu
from .markdown import md_table, pct

RULE_TITLE = "The rule: differs measurably"


def rule_text(data: ReportData) -> str:
    """The one rule, as RESULTS.md states it (docs/METHOD.md says the same)."""
    return data.claims.define(
        "A ratio (a routing over `local` in the same rounds, or one GPU over another) **differs measurably** from 1 "
        "when its whole bootstrap 95% CI lies outside [1 − f, 1 + f]; it is the **same within noise** when the whole "
        "CI lies inside; otherwise it is **unresolved**. f = f(GPU, stage), the noise floor: the largest relative "
        "spread (max / min − 1, of the medians or of their ratios to `local`) of any quantity that several "
        "committed files measured on that GPU under one protocol (same shape, routing, packing, flush policy and "
        f"autotune configs), each file timing it over at least {MIN_ROUNDS} rounds (a shorter run's median carries "
        "its own round noise, which the CI already holds), "
        f"at least {MIN_FLOOR:.1%}; a stage never measured twice under one protocol borrows the "
        "largest floor of that GPU; a comparison across GPUs uses the larger floor. The CI holds a run's "
        "round-to-round noise, the floor the run-to-run noise no single run shows, and the session-to-session "
        "drift only where that GPU's repeats span sessions (docs/METHOD.md: the H200's do, the H100's are of one "
        "session).")


def _files(q: Quantity, most: int | None = None) -> str:
    if most is not None and len(q.members) > most:
        return f"{len(q.members)} files (listed in the repeated-measurement appendix)"
    names = []
    for m in q.members:
        p = Path(m.path)
        names.append(p.stem if p.parent.name == "raw" else f"{p.parent.name}/{p.stem}")
    short = f" (+{len(q.short)} of fewer than {MIN_ROUNDS} rounds, not counted)" if q.short else ""
    return ", ".join(f"`{n}`" for n in names) + short


def _range(values: list[float], unit: str, digits: int) -> str:
    return f"{min(values):.{digits}f}–{max(values):.{digits}f}{unit}"


def quantity_row(q: Quantity, most: int | None = None) -> list[str]:
    ratios = [m.ratio for m in q.members if m.ratio is not None]
    return [short_gpu(q.gpu), TITLES.get(q.stage, q.stage), q.label, str(q.T), str(len(q.members)),
            _range([m.median_ms for m in q.members], " ms", 3 if q.stage != "csr" else 4),
            _range(ratios, "×", 3) if ratios else "—", pct(q.spread), _files(q, most)]


def headline_quantity(data: ReportData, gpu: str, pattern: str, stage: str = "dkv_core") -> Quantity | None:
    """The repeated quantity of ``pattern``'s ``stage`` under the GPU's formal protocol (the formal run is a member)."""
    formal = next((f for f in data.formal if f.gpu == gpu), None)
    if formal is None:
        return None
    return next((q for q in repeated(data.quantities) if q.gpu == gpu and q.stage == stage and q.pattern == pattern
                 and any(m.path == formal.path for m in q.members)), None)


def spread_section(data: ReportData) -> list[str]:
    order = {s: i for i, s in enumerate(STAGE_NAMES)}
    rows = []
    for r in sorted(data.noise_table["floors"], key=lambda r: (r["gpu"], order.get(r["stage"], 99))):
        q, stage = r["set_by"], r["stage"]
        borrowed: dict[str, Any] = r["borrowed_from"] or {}
        lender = TITLES.get(borrowed.get("stage", ""), "—")
        how = (f"borrowed from {lender}: no two files measured {TITLES.get(stage, stage)} under one protocol"
               if r["rule"] == "borrowed" else
               f"{q['routing']} at T={q['T']}, {len(q['members'])} files" if r["rule"] == "spread" else
               f"the minimum ({pct(MIN_FLOOR)}); largest spread {pct(q['spread'], 2) if q else '—'}")
        rows.append([short_gpu(r["gpu"]), TITLES.get(stage, stage), pct(r["floor"]), how])
    heads = [q for f in data.formal for p in f.run.patterns
             for q in [headline_quantity(data, f.gpu, p, st) for st in ("dkv_core", "full_bwd")] if q is not None]
    table = [quantity_row(q, most=10) for q in heads]
    return [data.claims.define(f"### {RULE_TITLE}"), "", rule_text(data), "",
            f"The floors, as the committed noise table `{NOISE_TABLE}` records them (`python -m nsa_exp noise-table` "
            "writes it; `compare`, this report and `validate` read it):", "",
            md_table(["GPU", "stage", "floor f", "set by"], rows), "",
            "Repeated measurements of the seed routings under each GPU's formal protocol (dK/dV and the wrapper; "
            "every quantity and file: the noise-floor appendix). The spread, not the CI of one run, is the honest "
            "uncertainty of a number measured once:", "",
            md_table(["GPU", "stage", "routing", "T", "files", "medians", "× local", "spread", "files"], table), ""]


def spread_appendix(data: ReportData) -> list[str]:
    """Every repeated quantity (a row each) with its files."""
    rows = [quantity_row(q) for q in sorted(repeated(data.quantities), key=lambda q: (q.gpu, q.stage, -q.spread))]
    return ["## Appendix: every repeated measurement", "",
            f"{len(rows)} quantities measured by more than one committed file (the floors above come from these).", "",
            md_table(["GPU", "stage", "routing", "T", "files", "medians", "× local", "spread", "files"], rows), ""]
