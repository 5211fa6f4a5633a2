"""The tidy summary of a bench result (one row per pattern x stage, columns from
``schemas/summary_row.schema.json``) and the medians table bench prints; the result itself is built by
:func:`nsa_exp.checking.bench_result.build`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tabulate import tabulate

from ..core.records import STAT_FIELDS, BenchLike, BenchResult
from ..io.schemas import SUMMARY_COLUMNS
from .run_cost import cost

if TYPE_CHECKING:
    import pandas as pd


def summary_rows(result: BenchLike) -> list[dict[str, Any]]:
    """One row per pattern x stage: latency summary plus the pattern's fan-in statistics."""
    run = BenchResult.coerce(result)
    rows = []
    for name, p in run.patterns.items():
        f = p.fanin
        for stage, s in p.stages.items():
            rows.append({
                "config_name": run.config["name"], "pattern": name, "stage": stage,
                **{k: getattr(s, k) for k in STAT_FIELDS},
                "edges": p.edges, "fanin_mean": f["mean"], "fanin_max": f["max"], "fanin_p95": f["p95"],
                "fanin_p99": f["p99"], "fanin_cv": f["cv"], "fanin_gini": f["gini"],
            })
    return rows


def summary_frame(result: BenchLike) -> pd.DataFrame:
    """:func:`summary_rows` as a DataFrame with the schema's column order."""
    import pandas as pd  # noqa: PLC0415 - pandas (0.2 s) when a frame is built, not in every command that imports this module

    return pd.DataFrame(summary_rows(result), columns=list(SUMMARY_COLUMNS))


def format_summary(result: BenchLike) -> str:
    """The medians table printed at the end of a bench."""
    run = BenchResult.coerce(result)
    stages = run.timing.stages
    rows = [[name, *[p.median(s) for s in stages], p.stage_sum().ratio] for name, p in run.patterns.items()]
    table = tabulate(rows, headers=["pattern", *[f"{s} ms" for s in stages], "sum/full"], floatfmt=".3f")
    spent = cost(run.to_json())
    phases = "" if spent["phases"] is None else " (" + ", ".join(
        f"{p} {v:.1f}s" for p, v in spent["phases"].items() if v >= 0.05) + ")"
    return "\n".join([table, "autotune: " + "; ".join(f"{k} {v}" for k, v in run.best_configs().items()),
                      f"wall {run.wall_seconds:.1f}s = {spent['wall_over_timed']:.2f}x the "
                      f"{spent['timed_seconds']:.1f}s of timed latencies{phases}; "
                      f"throttled samples {run.telemetry['throttled_samples']}"])
