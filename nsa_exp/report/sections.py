"""The sections of RESULTS.md drawn from the formal result and its analysis: setup, latency, repeatability
(with the autotune configs both runs launched), figure, fan-in, stage sum, memory, autotune configs,
findings and the commands that reproduce them. Each returns its lines; nothing is read or written here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..analysis.config_drift import noise_spread
from ..core.families import BASELINE_PATTERN
from ..core.records import BenchLike, BenchResult
from ..core.stages import TITLES
from .markdown import md_table

MiB = 1024 * 1024



def config_json(cfg: Any) -> str:
    return f"`{json.dumps(cfg)}`"


def repeatability_lines(d: dict[str, Any], repeat_path: str) -> list[str]:
    """The config paragraph and table of RESULTS.md's repeatability section."""
    how = ("replayed the first run's autotune configs (`bench --autotune-from`)" if d["replayed"] else
           f"re-tuned its own autotune configs (mode `{d['repeat_mode']}`, not a replay of the first run)")
    rows = [[TITLES[k], config_json(d["first"][k]), config_json(d["repeat"].get(k)),
             "**differs**" if k in d["differing_kernels"] else "same"] for k in d["first"]]
    table = ["| kernel (stage) | first run | repeat | |", "|---|---|---|---|",
             *["| " + " | ".join(r) + " |" for r in rows]]
    if d["differing_kernels"]:
        kernels = ", ".join(TITLES[k] for k in d["differing_kernels"])
        note = (f"The repeat ran **different configs** for {kernels}: "
                f"its differences for {', '.join(TITLES[s] for s in d['affected_stages'])} are a config change "
                "plus noise, not noise. They are shown below but not used as those stages' noise floor; their verdicts "
                "in \"What the data shows\" are re-derived with the largest run-to-run difference of the stages whose "
                "configs matched as the noise floor (marked *re-derived*).")
    else:
        note = "Both runs launched the same configs for every autotuned kernel, so their differences are noise."
    return [f"`{repeat_path}` {how}. Autotune configs of both runs:", "", *table, "", note, ""]


def autotune_lines(result: BenchLike) -> list[str]:
    """RESULTS.md's autotune-configs section for one run: the arm, and the configs launched."""
    a = BenchResult.coerce(result).autotune
    mode = a.get("mode", "tune-on")
    how = {"tune-on": f"tuned once on `{a['tuned_on']}` ({a['tune_seconds']:.1f} s), then used for every pattern",
           "per-pattern": "tuned on each pattern itself (autotuner caches reset between patterns)",
           "replay": f"replayed from `{(a.get('replayed_from') or {}).get('path')}` (nothing tuned)"}[mode]
    rows = [f"| {s} | {k['kernel']} | {config_json(k['best_config'])} |" for s, k in a["kernels"].items()]
    return ["## Autotune configs", "", f"Configs {how}; one config set for all patterns: "
            f"{a['same_config_all_patterns']}.", "", "| stage | kernel | config |", "|---|---|---|", *rows, ""]


def _differs(row: dict[str, Any], repeat_spread: float) -> bool:
    """A pattern's stage differs measurably from local: the ratio's 95% CI excludes 1 and the
    difference exceeds twice the largest run-to-run median difference seen for that stage."""
    lo, hi = row["ratio_vs_local_ci95"]
    return (lo > 1 or hi < 1) and abs(row["ratio_vs_local"] - 1) * 100 > 2 * repeat_spread


def setup_section(result: BenchLike) -> list[str]:
    run = BenchResult.coerce(result)
    meta, gpu = run.metadata, run.metadata["gpu"]
    samples = [s for s in run.telemetry["samples"] if not s["warmup"]]
    clocks = sorted({s["sm_clock_mhz"] for s in samples if "sm_clock_mhz" in s})
    temps = [s["temperature_c"] for s in samples if "temperature_c" in s]
    powers = [s["power_w"] for s in samples if "power_w" in s]
    v, t = meta["versions"], run.timing
    shape = ", ".join(f"{k}={val}" for k, val in run.shape.items())
    return [
        "## Setup", "",
        f"- Run: {meta['created_utc']} on **{gpu['name']}** ({gpu['sm_count']} SMs, driver {gpu['driver']}, "
        f"max SM clock {gpu.get('max_sm_clock_mhz')} MHz, power limit {gpu.get('power_limit_w')} W).",
        f"- Telemetry over the timed rounds: SM clock {', '.join(map(str, clocks))} MHz; temperature "
        f"{min(temps)}–{max(temps)} °C; power {min(powers):.0f}–{max(powers):.0f} W; "
        f"{run.telemetry['throttled_samples']} of {len(run.telemetry['samples'])} samples flagged "
        "as throttled. Clocks were not locked (the GPU's own boost behaviour, as a user runs it).",
        f"- Software: torch {v.get('torch')}, triton {v.get('triton')}, CUDA {v.get('cuda')}, "
        f"python {v.get('python')}, fla-core {v.get('fla_core')}.",
        f"- FLA commit `{run.fla['commit']}`: {run.fla['files_verified']} imported files verified "
        f"({run.fla['method']}).",
        f"- Shape: {shape}; routing seed {run.config['seeds']['routing']}, input seed "
        f"{run.config['seeds']['inputs']}, order seed {t.order_seed}.",
        f"- Timing: {t.warmup_rounds} warm-up + {t.repetitions} timed rounds, patterns interleaved "
        f"({t.order_mode}); {t.method} (flush {t.l2_flush_bytes // MiB} MiB, spin "
        f"{t.launch_guard_cycles:,} cycles). Repo commit `{meta['git']['sha']}` as recorded by the run "
        "([PROVENANCE.md](PROVENANCE.md) maps recorded commits to this repository's history).", ""]


def latency_section(analysis: dict[str, Any]) -> list[str]:
    rows = analysis["rows"]
    table = []
    for r in rows:
        lo, hi = r["ci95_ms"]
        rlo, rhi = r["ratio_vs_local_ci95"]
        table.append([r["pattern"], TITLES[r["stage"]], f"{r['median_ms']:.3f}",
                      f"{r['p10_ms']:.3f}–{r['p90_ms']:.3f}", f"{lo:.3f}–{hi:.3f} (±{r['ci95_halfwidth_pct']:.2f}%)",
                      f"{r['ratio_vs_local']:.3f} ({rlo:.3f}–{rhi:.3f})", str(r["n_obs"])])
    widest = max(r["ci95_halfwidth_pct"] for r in rows if r["stage"] == "dkv_core")
    b = analysis["bootstrap"]
    return ["## Latency per pattern × stage", "",
            "Median over the timed rounds; p10–p90; 95% CI of the median by `scipy.stats.bootstrap` "
            f"({b['method']} method, {b['resamples']:,} resamples, seed {b['seed']}); ratio to `{BASELINE_PATTERN}` "
            "with its 95% CI from a paired bootstrap (`paired=True`: rounds are resampled, each with its "
            "observation of both patterns, since every round ran every pattern).", "",
            md_table(["pattern", "stage", "median ms", "p10–p90 ms", "95% CI ms", "× local (95% CI)", "n"], table), "",
            "Every dK/dV median's 95% CI is within ±1% of the median: "
            f"**{'yes' if analysis['dkv_ci_within_1pct'] else 'no'}** (widest ±{widest:.2f}%).", ""]


def repeatability_section(analysis: dict[str, Any], names: list[str], stages: list[str], repeat: str,
                   drift: dict[str, Any]) -> list[str]:
    by = {(r["pattern"], r["stage"]): r for r in analysis["rows"]}
    rows = [[TITLES[st] + (" (configs differ)" if st in drift["affected_stages"] else ""),
             *[f"{by[(p, st)]['repeat_diff_pct']:+.2f}%" for p in names]] for st in stages]
    return ["## Repeatability", "", *repeatability_lines(drift, repeat),
            f"A second, independent bench process on the same GPU (`{repeat}`): each median's difference, "
            "repeat − first, in % of the first.", "", md_table(["stage", *names], rows), ""]


def figure_section(result_stem: str, figures: Path) -> list[str]:
    figs = sorted(figures.glob(f"{result_stem}_*_latency.png"))
    if not figs:
        return []
    main = [f for f in figs if "fanin_cv" in f.name] or figs[:1]
    others = [f for f in figs if f not in main]
    return ["## Figure", "", *[f"![{f.stem}](figures/{f.name})" for f in main], "",
            "Median latency vs fan-in CV, one marker per pattern with p10–p90 bars; the other fan-in statistics: "
            + ", ".join(f"[{f.stem}](figures/{f.name})" for f in others) + ".", ""]


def fanin_section(result: BenchLike) -> list[str]:
    rows = []
    for name, p in BenchResult.coerce(result).patterns.items():
        f = p.fanin
        rows.append([name, f"{p.edges:,}", f"{f['mean']:.1f}", f"{f['max']:.0f}", f"{f['p95']:.1f}",
                     f"{f['p99']:.1f}", f"{f['cv']:.3f}", f"{f['gini']:.3f}", str(f["zero_rows"]),
                     f"{p.query_span['median']:.0f}", f"{p.adjacent_gap['mean']:.2f}"])
    return ["## Fan-in and CSR-row statistics", "",
            "Per (KV head, KV block) CSR row, zero rows included; span and gaps over non-empty rows.", "",
            md_table(["pattern", "edges", "fan-in mean", "max", "p95", "p99", "CV", "Gini", "zero rows",
                    "span median", "gap mean"], rows), ""]


def stage_sum_section(analysis: dict[str, Any]) -> list[str]:
    rows = [[n, f"{s['stage_sum_median_ms']:.3f}", f"{s['full_bwd_median_ms']:.3f}", f"{s['ratio']:.3f}"]
            for n, s in analysis["stage_sum_vs_full_bwd"].items()]
    return ["## Stage sum vs the official wrapper", "",
            "Sum of the medians of delta preprocess, CSR, dQ core and dK/dV core, against the median of "
            "`parallel_nsa_bwd` as a whole (which also sums `dq`/`dk` over NV and allocates its outputs).", "",
            md_table(["pattern", "stage sum ms", "full_bwd ms", "ratio"], rows), ""]


def memory_section(analysis: dict[str, Any]) -> list[str]:
    def mib(m: dict[str, int], *keys: str) -> str:
        return f"{sum(m[k] for k in keys) / MiB:.1f}"

    rows = [[n, mib(m, "delta_bytes"), mib(m, "csr_indices_bytes", "csr_offsets_bytes"),
             mib(m, "preallocated_gradient_bytes"), mib(m, "official_peak_minus_baseline_bytes"),
             mib(m, "official_peak_allocated_bytes")] for n, m in analysis["memory"].items()]
    return ["## Memory", "", "MiB. Peak = `torch.cuda.max_memory_allocated()` during one official "
            "`parallel_nsa_bwd` call after a reset, its outputs included; baseline = allocated before the call.", "",
            md_table(["pattern", "delta", "CSR indices + offsets", "pre-allocated dQ/dK/dV", "wrapper peak − baseline",
                    "wrapper peak (process)"], rows), ""]


def findings_section(analysis: dict[str, Any], names: list[str], stages: list[str],
                     drift: dict | None = None) -> list[str]:
    by = {(r["pattern"], r["stage"]): r for r in analysis["rows"]}
    spread = noise_spread(by, names, stages, drift)
    rederived = set(drift["affected_stages"]) if drift else set()
    out = ["## What the data shows", "",
           "Rule: a stage of a pattern *differs measurably* from `local` when the ratio's 95% CI excludes 1 and the "
           "difference exceeds twice the largest run-to-run difference of that stage's medians.", ""]
    for st in stages:
        others = [by[(p, st)] for p in names if p != BASELINE_PATTERN]
        diff = [f"{r['pattern']} {r['ratio_vs_local']:.2f}×" for r in others if _differs(r, spread[st])]
        same = [r["pattern"] for r in others if not _differs(r, spread[st])]
        line = f"- **{TITLES[st]}**: " + (f"differs measurably for {', '.join(diff)}" if diff
                                                 else "no pattern differs measurably")
        out.append(line + (f"; within noise for {', '.join(same)}" if same and diff else "") + "."
                   + (" *Re-derived*: the repeat ran other configs; noise floor from the same-config stages." if st
                      in rederived else ""))
    return [*out, "", "## What the data does not show", "",
            "- Per-CTA (per CSR row) times: the experiment never instruments FLA's kernels, so the tail is seen only "
            "as whole-kernel latency, the fan-in distribution and Nsight's SM-level imbalance, not measured per "
            "program.",
            "- Other shapes, FLA commits or Triton versions: the formal run is one shape on one H100 with one config "
            "tuned on `local` and reused; the H200 sections below measure other configs, routings and T.",
            "- `block_counts` tensors and the compression / sliding-window branches of NSA (packed `cu_seqlens` "
            "inputs: the Packed documents section below, H200).",
            "- Locked-clock numbers: clocks ran free (telemetry above), as in training.", ""]


def reproduce_section(result: BenchLike, paths: dict[str, str]) -> list[str]:
    config = BenchResult.coerce(result).config_path
    bench = f"scripts/run_h100.sh .venv/bin/python -m nsa_exp bench --config {config} --output "
    stem = Path(paths["result"]).stem
    return ["## Reproduce", "", "```bash", "bash scripts/install.sh h100",
            "scripts/run_h100.sh .venv/bin/invoke check smoke", bench + paths["result"],
            *([bench + paths["repeat"]] if paths.get("repeat") else []),
            "scripts/run_h100.sh .venv/bin/invoke ncu --stage dkv_core",
            "scripts/run_h100.sh .venv/bin/invoke ncu --stage dq_core",
            f"python scripts/plot_fanin_latency.py --input results/summaries/{stem}.csv --x fanin_cv --overwrite",
            paths["command"] + " --overwrite", "```", "",
            "(`--overwrite` regenerates the committed figure and this file; without it a command refuses to replace an "
            "existing default output.)", ""]
