"""``bench``: time every FLA stage for every routing at the primary shape, interleaved.

Steps: gates (env, H100, triton, FLA sources, equal edges) -> shared random inputs (q, k, v, dO are
the same tensors for every pattern; only the routing differs) -> autotune once on ``local`` (the
autotune key of FLA's kernels, ``BS, BK, BV, G``, does not include the routing, so that one config
serves every pattern; we assert it never changed) -> staged-vs-official reproduction at the full
shape -> warm-up + timed rounds, patterns interleaved in a seeded shuffled order -> memory
accounting -> result JSON (schema ``result``) and the tidy summary CSV (schema ``summary_row``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from .. import REPO_ROOT
from ..errors import GateFailure
from ..results.metadata import base_metadata, gpu_identity
from ..results.store import write_csv, write_json
from ..routing.config import Config
from ..routing.fanin import routing_statistics
from ..routing.patterns import TUNE_PATTERN
from ..routing.stages import BACKWARD_STAGES, STAGE_NAMES
from .journal import Journal, check_resumable
from .timing import LAUNCH_GUARD_CYCLES, PERCENTILE_METHOD, round_orders, run_rounds, summarize

SCHEMA_VERSION = "1.0"
SUMMARY_COLUMNS = ("config_name", "pattern", "stage", "median_ms", "p10_ms", "p90_ms", "p95_ms", "min_ms",
                   "mean_ms", "n_obs", "edges", "fanin_mean", "fanin_max", "fanin_p95", "fanin_p99", "fanin_cv",
                   "fanin_gini")


class Progress:
    """A one-line progress display on stderr (rounds done, phase, elapsed, ETA)."""

    def __init__(self, label: str, warmup: int):
        self.label, self.warmup, self.t0 = label, warmup, time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        elapsed = time.monotonic() - self.t0
        eta = elapsed / done * (total - done)
        phase = "warm-up" if done <= self.warmup else "timed"
        end = "\n" if done == total else ""
        print(f"\r[{self.label}] round {done}/{total} ({phase}) elapsed {elapsed:6.1f}s eta {eta:6.1f}s",
              end=end, file=sys.stderr, flush=True)


def memory_accounting(staged: Any, state_o: Any, state_lse: Any) -> dict[str, int]:
    """Auxiliary and gradient bytes of the staged path; the official wrapper's peak after a reset."""
    import torch

    delta = staged.delta_preprocess(state_o)
    csr_indices, csr_offsets = staged.csr()
    grads = staged.dq.nbytes + staged.dk.nbytes + staged.dv.nbytes
    torch.cuda.synchronize()
    del delta
    torch.cuda.reset_peak_memory_stats()
    base_alloc, base_reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    outputs = staged.full_bwd(state_o, state_lse)
    torch.cuda.synchronize()
    peak_alloc, peak_reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    shape = staged.p.shape
    return {
        "delta_bytes": shape.B * shape.T * shape.HQ * 4,
        "csr_indices_bytes": int(csr_indices.nbytes),
        "csr_offsets_bytes": int(csr_offsets.nbytes),
        "csr_transient_cursor_bytes": int((csr_offsets.numel() - 1) * 4),
        "aux_persistent_bytes": shape.B * shape.T * shape.HQ * 4 + int(csr_indices.nbytes + csr_offsets.nbytes),
        "preallocated_gradient_bytes": int(grads),
        "official_outputs_bytes": int(sum(t.nbytes for t in outputs)),
        "official_baseline_allocated_bytes": int(base_alloc),
        "official_peak_allocated_bytes": int(peak_alloc),
        "official_peak_minus_baseline_bytes": int(peak_alloc - base_alloc),
        "official_baseline_reserved_bytes": int(base_reserved),
        "official_peak_reserved_bytes": int(peak_reserved),
    }


def reproduction_gate(pattern: str, repro: dict[str, Any], dkv_rel_l2: float) -> None:
    """At the primary shape the staged path must give the wrapper's dQ bit for bit and its dK/dV within
    ``dkv_rel_l2`` (see smoke.py for why dK/dV may differ); otherwise the stage timings are void."""
    if not repro["dq"]["bit_exact"]:
        raise GateFailure(f"reproduction {pattern}: staged dq differs from parallel_nsa_bwd in "
                          f"{repro['dq']['n_different']} elements; the staged launch is wrong, timings void")
    for g in ("dk", "dv"):
        if repro[g]["rel_l2"] > dkv_rel_l2:
            raise GateFailure(f"reproduction {pattern}: staged {g} rel_l2 {repro[g]['rel_l2']:.3g} > "
                              f"{dkv_rel_l2} vs parallel_nsa_bwd; the staged launch is wrong, timings void")


def _stage_summaries(records: list[dict[str, Any]], patterns: list[str], stages: tuple[str, ...]) -> dict:
    out: dict[str, dict[str, Any]] = {p: {} for p in patterns}
    for p in patterns:
        for stage in stages:
            raw = [r["ms"][stage] for r in records if r["pattern"] == p and not r["warmup"]]
            warm = [r["ms"][stage] for r in records if r["pattern"] == p and r["warmup"]]
            out[p][stage] = {"raw_ms": raw, "warmup_ms": warm, **summarize(raw)}
    return out


def run_bench(config: Config, allow_gpu: bool, output: str | Path, summary: str | Path | None,
              repetitions: int | None = None, resume: bool = False, discard_journal: bool = False) -> dict[str, Any]:
    """The whole benchmark; returns the result document (already written)."""
    import torch

    from .gates import gate_detail, run_gates

    t_start = time.monotonic()
    journal = Journal(REPO_ROOT, Path(output).stem)
    journal.refuse_unless_told(resume, discard_journal)
    gates, routings = run_gates(config, allow_gpu=allow_gpu, strict=True)  # env first, before FLA is imported
    from .launcher import StagedBackward, autotune_record, make_inputs, make_problem, pin_autotune_configs
    from .numerics import compare
    from .telemetry import Telemetry, throttled

    telemetry = Telemetry()
    reps = repetitions or config.timing.repetitions
    names = [p.name for p in config.patterns]
    if TUNE_PATTERN not in names:
        raise GateFailure(f"config.patterns: bench autotunes on {TUNE_PATTERN!r}; add it to the patterns")

    inputs = make_inputs(config.shape, config.seeds.inputs, "cuda")
    staged = {n: StagedBackward(make_problem(config.shape, routings[n], inputs)) for n in names}
    fns = {n: staged[n].stage_callables() for n in names}

    # Autotune once, on local: one staged pass + the wrapper; every kernel's cache then holds one key.
    # A resumed run pins the interrupted run's configs instead (tuning is not repeatable across processes).
    old_meta, records = journal.load() if resume else ({}, [])
    if resume:
        pin_autotune_configs(old_meta["autotune_best"])
    t_tune = time.monotonic()
    for fn in fns[TUNE_PATTERN].values():
        fn()
    torch.cuda.synchronize()
    tuned = autotune_record()
    tune_seconds = time.monotonic() - t_tune

    warmup = config.timing.warmup_rounds
    orders = round_orders(names, warmup + reps, config.timing.order, config.seeds.order)
    meta = {"config": config.raw, "gpu_name": torch.cuda.get_device_name(0), "repetitions": reps,
            "fla_commit": gate_detail(gates, "fla_sources")["commit"], "warmup_rounds": warmup,
            "autotune_best": {k: v["best_config"] for k, v in tuned.items()}, "round_orders": orders}
    if resume:
        check_resumable(old_meta, meta)
        records += run_rounds(fns, orders, warmup, config.timing.l2_flush_bytes, rounds=range(warmup),
                              on_pattern_done=lambda r, p: telemetry.sample(), rewarm=True)
    else:
        journal.start(meta)
    first = 1 + max((r["round"] for r in records if not r.get("rewarm")), default=-1)
    records += run_rounds(fns, orders, warmup, config.timing.l2_flush_bytes, rounds=range(first, len(orders)),
                          on_pattern_done=lambda r, p: telemetry.sample(), on_round_done=journal.append,
                          progress=Progress(f"bench {config.name}", warmup - first))

    after = autotune_record()
    same_config = all(after[k]["cache"] == tuned[k]["cache"] and len(after[k]["cache"]) <= 1 for k in tuned)
    if not same_config:
        raise GateFailure("autotune: a kernel re-tuned during timing (cache changed); results would mix "
                          "configs. Check FLA_CACHE_RESULTS=0 and that all patterns share one shape")

    stats = _stage_summaries(records, names, STAGE_NAMES)
    patterns: dict[str, Any] = {}
    for n in names:
        s = staged[n]
        # Reproduction at the full shape: one staged pass vs the official wrapper on the same o/lse.
        inter = s.run_staged()
        official = s.full_bwd(inter["o"], inter["lse"])
        repro = {g: compare(a, b) for g, a, b in zip(("dq", "dk", "dv"), s.gradients(), official, strict=True)}
        reproduction_gate(n, repro, config.tolerances.full_shape_dkv_rel_l2)
        del official
        mem = memory_accounting(s, inter["o"], inter["lse"])
        del inter
        med = {k: v["median_ms"] for k, v in stats[n].items()}
        stage_sum = sum(med[k] for k in BACKWARD_STAGES)
        patterns[n] = {
            "params": config.pattern(n).to_dict(),
            "edges": int(gate_detail(gates, "equal_edges")["per_pattern"][n]),
            **routing_statistics(routings[n], config.shape.block_size),
            "stages": stats[n],
            "stage_sum_vs_full_bwd": {"stage_sum_median_ms": stage_sum, "full_bwd_median_ms": med["full_bwd"],
                                      "ratio": stage_sum / med["full_bwd"]},
            "reproduces_official": repro,
            "memory": mem,
        }
        torch.cuda.empty_cache()

    samples = [{"round": r["round"], "pattern": r["pattern"], "warmup": r["warmup"],
                **({"rewarm": True} if r.get("rewarm") else {}), **(r.get("telemetry") or {})} for r in records]
    metadata = base_metadata()
    metadata["gpu"] = gpu_identity(telemetry.device_info())
    result = {
        "schema_version": SCHEMA_VERSION,
        "kind": "bench_result",
        "name": Path(output).stem,
        "config": config.raw,
        "config_path": config.source,
        "shape": config.shape.to_dict(),
        "gates": gates,
        "fla": gate_detail(gates, "fla_sources"),
        "edges": gate_detail(gates, "equal_edges"),
        "autotune": {"tuned_on": TUNE_PATTERN, "tune_seconds": tune_seconds, "kernels": tuned,
                     "same_config_all_patterns": same_config},
        "timing": {
            "method": "CUDA events around each stage call; L2 flushed and a GPU spin queued before each",
            "warmup_rounds": config.timing.warmup_rounds,
            "repetitions": reps,
            "order_mode": config.timing.order,
            "order_seed": config.seeds.order,
            "round_orders": orders,
            "l2_flush_bytes": config.timing.l2_flush_bytes,
            "launch_guard_cycles": LAUNCH_GUARD_CYCLES,
            "percentile_method": PERCENTILE_METHOD,
            "stages": list(STAGE_NAMES),
            "resumed": resume,
        },
        "patterns": patterns,
        "telemetry": {"available": telemetry.handle is not None, "samples": samples,
                      "throttled_samples": sum(1 for s in samples if throttled(s))},
        "wall_seconds": time.monotonic() - t_start,
        "metadata": metadata,
    }
    write_json(output, result, "result")
    if summary is not None:
        write_csv(summary, summary_rows(result), SUMMARY_COLUMNS, "summary_row")
    journal.discard()
    return result


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
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


def format_summary(result: dict[str, Any]) -> str:
    """The medians table printed at the end of a bench."""
    stages = result["timing"]["stages"]
    lines = [f"{'pattern':<11}" + "".join(f"{s:>17}" for s in stages) + f"{'sum/full':>10}"]
    for name, p in result["patterns"].items():
        cells = "".join(f"{p['stages'][s]['median_ms']:>10.3f} ms   " for s in stages)
        lines.append(f"{name:<11}{cells}{p['stage_sum_vs_full_bwd']['ratio']:>9.3f}")
    a = result["autotune"]["kernels"]
    lines.append("autotune: " + "; ".join(f"{k} {v['best_config']}" for k, v in a.items()))
    lines.append(f"wall {result['wall_seconds']:.1f}s; throttled samples {result['telemetry']['throttled_samples']}")
    return "\n".join(lines)
