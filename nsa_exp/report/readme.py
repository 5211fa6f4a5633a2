"""README's results block: the formal run's date, hardware and stage ratios vs ``local`` with their CIs,
written between the ``<!-- results:start -->`` and ``<!-- results:end -->`` markers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.families import BASELINE_PATTERN
from ..core.records import BenchResult
from ..core.stages import PANEL_ORDER, TITLES
from ..errors import UserError
from ..io.store import write_text_atomic
from .markdown import md_table

README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


def headline(result: dict[str, Any], analysis: dict[str, Any], results_md: str, formal: bool = False) -> str:
    """README's results block: date, hardware, and the stage ratios vs local with their CIs."""
    by = {(r["pattern"], r["stage"]): r for r in analysis["rows"]}
    run = BenchResult.coerce(result)
    gpu = run.metadata["gpu"]
    others = [p for p in run.patterns if p != BASELINE_PATTERN]

    def cell(p: str, st: str) -> str:
        r = by[(p, st)]
        lo, hi = r["ratio_vs_local_ci95"]
        return f"{r['ratio_vs_local']:.2f}× ({lo:.2f}–{hi:.2f})"

    rows = [[TITLES[st], f"{by[(BASELINE_PATTERN, st)]['median_ms']:.3f}", *[cell(p, st) for p in others]]
            for st in PANEL_ORDER]
    return "\n".join([
        f"{'Formal run' if formal else 'Run'} of {run.metadata['created_utc'][:10]} on one **{gpu['name']}** "
        f"(driver {gpu['driver']}), "
        f"{run.timing.repetitions} interleaved rounds, FLA `{run.fla['commit'][:12]}`; every routing "
        f"has {run.edges['closed_form']:,} edges. Median latency of `local` and each routing's ratio to it "
        "(bootstrap 95% CI):", "",
        md_table(["stage", "local (ms)", *[f"{p} × local" for p in others]], rows), "",
        f"Full tables, repeatability, memory, Nsight evidence and limits: [{results_md}]({results_md}).",
    ])


def update_readme(readme: Path, block: str) -> None:
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        raise UserError(f"{readme}: no {README_START} ... {README_END} markers for the results block")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    write_text_atomic(readme, f"{head}{README_START}\n{block}\n{README_END}{tail}")
