"""The bench result document and its tidy summary, built from measurements (pure: no torch).

:func:`build_result` turns what :func:`nsa_exp.gpu.bench.run_bench` measured into the ``result``
document; :func:`summary_rows` / :func:`summary_frame` give the tidy summary CSV (one row per
pattern x stage, columns from ``schemas/summary_row.schema.json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from tabulate import tabulate

from ..core.config import Config
from ..core.kinds import schema_version
from ..core.protocol import PERCENTILE_METHOD, TIMING_METHOD, summarize
from ..core.stages import BACKWARD_STAGES, STAGE_NAMES
from ..io.schemas import SUMMARY_COLUMNS


def stage_summaries(records: Sequence[Mapping[str, Any]], patterns: Sequence[str],
                    stages: Sequence[str] = STAGE_NAMES) -> dict[str, dict[str, Any]]:
    """Per pattern and stage: the timed observations (``raw_ms``), the warm-up ones, and their summary."""
    out: dict[str, dict[str, Any]] = {p: {} for p in patterns}
    for p in patterns:
        for stage in stages:
            raw = [r["ms"][stage] for r in records if r["pattern"] == p and not r["warmup"]]
            warm = [r["ms"][stage] for r in records if r["pattern"] == p and r["warmup"]]
            out[p][stage] = {"raw_ms": raw, "warmup_ms": warm, **summarize(raw)}
    return out


def recorded_stages(records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The stages the records timed, in Stage-table order (results recorded before an optional stage
    existed lack it; every record of one run times the same stages).

    >>> recorded_stages([{"ms": {"full_bwd": 1.0, "csr": 0.1}}])
    ('csr', 'full_bwd')
    """
    return tuple(s for s in STAGE_NAMES if records and s in records[0]["ms"])


def build_result(*, name: str, config: Config, gates: list[dict[str, Any]], gate_detail: Any,
                 records: Sequence[Mapping[str, Any]], per_pattern: Mapping[str, Mapping[str, Any]],
                 autotune: Mapping[str, Any], orders: list[list[str]], repetitions: int, resumed: bool,
                 launch_guard_cycles: int, telemetry: Mapping[str, Any], metadata: Mapping[str, Any],
                 wall_seconds: float, throttled: Any,
                 routing_files: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The ``result`` document (schema ``result``) from the measured records and per-pattern extras.

    ``per_pattern[p]`` holds what was measured besides timing: ``edges``, the routing statistics
    (``fanin`` ...), ``reproduces_official`` and ``memory``. ``gate_detail(gates, name)`` reads a gate.
    ``routing_files``: the reports of the routing files timed after the config's patterns (``file:<stem>``).
    """
    files = dict(routing_files or {})
    names = [p.name for p in config.patterns] + list(files)
    timed = recorded_stages(records)
    stats = stage_summaries(records, names, timed)
    patterns: dict[str, Any] = {}
    for n in names:
        extra = dict(per_pattern[n])
        med = {k: v["median_ms"] for k, v in stats[n].items()}
        stage_sum = sum(med[k] for k in BACKWARD_STAGES)
        repro, mem = extra.pop("reproduces_official"), extra.pop("memory")
        vs_full = {"stage_sum_median_ms": stage_sum, "full_bwd_median_ms": med["full_bwd"],
                   "ratio": stage_sum / med["full_bwd"]}
        if "wrapper_extra" in med:
            vs_full.update(wrapper_extra_median_ms=med["wrapper_extra"],
                           itemised_ratio=(stage_sum + med["wrapper_extra"]) / med["full_bwd"])
        patterns[n] = {
            "params": {"name": n} if n in files else config.pattern(n).to_dict(), **extra, "stages": stats[n],
            "stage_sum_vs_full_bwd": vs_full,
            "reproduces_official": repro, "memory": mem,
        }
    samples = [{"round": r["round"], "pattern": r["pattern"], "warmup": r["warmup"],
                **({"rewarm": True} if r.get("rewarm") else {}), **(r.get("telemetry") or {})} for r in records]
    return {
        "schema_version": schema_version("bench_result"),
        "kind": "bench_result",
        "name": name,
        "config": config.raw,
        "config_path": config.source,
        "shape": config.shape.to_dict(),
        "gates": gates,
        "fla": gate_detail(gates, "fla_sources"),
        "edges": gate_detail(gates, "equal_edges"),
        "autotune": dict(autotune),
        "timing": {
            "method": TIMING_METHOD,
            "warmup_rounds": config.timing.warmup_rounds,
            "repetitions": repetitions,
            "order_mode": config.timing.order,
            "order_seed": config.seeds.order,
            "round_orders": orders,
            "l2_flush_bytes": config.timing.l2_flush_bytes,
            "flush_policy": config.timing.flush,
            "launch_guard_cycles": launch_guard_cycles,
            "percentile_method": PERCENTILE_METHOD,
            "stages": list(timed),
            "resumed": resumed,
        },
        "patterns": patterns,
        "telemetry": {**telemetry, "samples": samples, "throttled_samples": sum(1 for s in samples if throttled(s))},
        "wall_seconds": wall_seconds,
        "metadata": dict(metadata),
        **({"routing_files": files} if files else {}),
    }


def summary_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per pattern x stage: latency summary plus the pattern's fan-in statistics."""
    rows = []
    for name, p in result["patterns"].items():
        f = p["fanin"]
        for stage, s in p["stages"].items():
            rows.append({
                "config_name": result["config"]["name"], "pattern": name, "stage": stage,
                **{k: s[k] for k in ("median_ms", "p10_ms", "p90_ms", "p95_ms", "min_ms", "mean_ms", "n_obs")},
                "edges": p["edges"], "fanin_mean": f["mean"], "fanin_max": f["max"], "fanin_p95": f["p95"],
                "fanin_p99": f["p99"], "fanin_cv": f["cv"], "fanin_gini": f["gini"],
            })
    return rows


def summary_frame(result: Mapping[str, Any]) -> pd.DataFrame:
    """:func:`summary_rows` as a DataFrame with the schema's column order."""
    return pd.DataFrame(summary_rows(result), columns=list(SUMMARY_COLUMNS))


def format_summary(result: Mapping[str, Any]) -> str:
    """The medians table printed at the end of a bench."""
    stages = result["timing"]["stages"]
    rows = [[name, *[p["stages"][s]["median_ms"] for s in stages], p["stage_sum_vs_full_bwd"]["ratio"]]
            for name, p in result["patterns"].items()]
    table = tabulate(rows, headers=["pattern", *[f"{s} ms" for s in stages], "sum/full"], floatfmt=".3f")
    a = result["autotune"]["kernels"]
    return "\n".join([table, "autotune: " + "; ".join(f"{k} {v['best_config']}" for k, v in a.items()),
                      f"wall {result['wall_seconds']:.1f}s; throttled samples "
                      f"{result['telemetry']['throttled_samples']}"])
