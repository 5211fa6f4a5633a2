"""The sections of RESULTS.md drawn from the formal runs of both GPUs and their analyses: the per-stage answer
with the rule's verdicts, setup and telemetry, the full stage tables, repeatability (with the autotune configs
both runs launched), the figures, fan-in, stage sum, memory, autotune configs, limits and the commands that
reproduce them. Each returns its lines; nothing is read or written here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..analysis.config_drift import drift_of
from ..core.families import BASELINE_PATTERN
from ..core.protocol import THROTTLE_MASK
from ..core.records import BenchLike, BenchResult
from ..core.stages import TITLES
from ..errors import UserError
from .data import Formal, ReportData
from .markdown import md_table, ms, pct, times

MiB = 1024 * 1024



def throttled_cell(samples: list[dict[str, Any]]) -> str:
    """``0 of 600 timed (0 of 12 warm-up)``: samples whose throttle reasons hold a power, thermal or hardware
    slowdown (:data:`~nsa_exp.core.protocol.THROTTLE_MASK`), counted over the timed rounds and the warm-up apart."""
    def count(group: list[dict[str, Any]]) -> int:
        return sum(1 for s in group if int(s.get("throttle_reasons", 0)) & THROTTLE_MASK)
    timed = [s for s in samples if not s.get("warmup")]
    warm = [s for s in samples if s.get("warmup")]
    return f"{count(timed)} of {len(timed)} timed" + (f" ({count(warm)} of {len(warm)} warm-up)" if warm else "")

def config_json(cfg: Any) -> str:
    return f"`{json.dumps(cfg)}`"


def verdict_cell(data: ReportData, f: Formal, pattern: str, stage: str, digits: int = 3) -> str:
    """``ratio (CI)`` and the rule's verdict for one routing's stage in one formal run."""
    r = f.row(pattern, stage)
    if r is None:
        return "—"
    word = data.claims.judged(r["ratio_vs_local_ci95"], data.floor(stage, f.gpu))
    return f"{times(r['ratio_vs_local'], r['ratio_vs_local_ci95'], digits)}: {word}"


def answer_section(data: ReportData) -> list[str]:
    """Per stage and GPU: each skewed routing's ratio to local with its CI and the rule's verdict."""
    out = ["## The answer per stage, both GPUs", "",
           "Ratio of medians to `local` in the same interleaved rounds, paired bootstrap 95% CI; the verdict is the "
           "rule's (below) with the GPU's floor f of the stage.", ""]
    for f in data.formal:
        others = [p for p in f.run.patterns if p != BASELINE_PATTERN]
        rows = [[TITLES[s], pct(data.floor(s, f.gpu)), ms(r["median_ms"], r["ci95_ms"]),
                 *[verdict_cell(data, f, p, s) for p in others]]
                for s in f.run.timing.stages if (r := f.row(BASELINE_PATTERN, s))]
        out += [f"**{f.label}** (`{f.path}`, {f.run.metadata['created_utc'][:10]}, {f.run.timing.repetitions} rounds):",
                "", md_table(["stage", "floor f", "local ms (95% CI)", *[f"{p} × local" for p in others]], rows), ""]
    return out


def setup_section(data: ReportData) -> list[str]:
    """Both GPUs' runs: hardware, software, shape, timing, and the telemetry over their timed rounds."""
    hw, tele = [], []
    runs = [(f.path, f.run) for f in data.formal] + [(f.repeat_path, f.repeat) for f in data.formal if f.repeat]
    for path, run in runs:
        meta, gpu, v = run.metadata, run.gpu, run.metadata["versions"]
        hw.append([f"`{path}`", meta["created_utc"], gpu.name, str(gpu.sm_count), gpu.driver,
                   f"{gpu.max_sm_clock_mhz} MHz", f"{gpu.power_limit_w} W",
                   f"torch {v.get('torch')}, triton {v.get('triton')}, CUDA {v.get('cuda')}, "
                   f"fla-core {v.get('fla_core')}",
                   f"`{meta['git']['sha'][:7]}`"])
        samples = [s for s in run.telemetry["samples"] if not s["warmup"]]

        def span(key: str, unit: str, fmt: str = ".0f", samples: list = samples) -> str:
            vals = [s[key] for s in samples if s.get(key) is not None]
            return f"{min(vals):{fmt}}–{max(vals):{fmt}} {unit}" if vals else "not recorded"

        tele.append([f"`{path}`", span("sm_clock_mhz", "MHz"), span("mem_clock_mhz", "MHz"),
                     span("temperature_c", "°C"), span("power_w", "W"),
                     throttled_cell(run.telemetry["samples"])])
    f = data.formal[0]
    t, shape = f.run.timing, ", ".join(f"{k}={val}" for k, val in f.run.shape.items())
    return ["## Appendix: setup and telemetry", "",
            md_table(["run", "created (UTC)", "GPU", "SMs", "driver", "max SM clock", "power limit", "software",
                      "recorded commit"], hw), "",
            "NVML telemetry (one sample per round × pattern; the clock, temperature and power spans are over the "
            "timed rounds, the throttled count over the timed rounds and then the warm-up; clocks were not locked: the "
            "GPU's "
            "own boost behaviour, as a user runs it; a sample is throttled when its clocks-event reasons include a "
            "power, thermal or hardware slowdown, `nsa_exp/gpu/telemetry.py`):", "",
            md_table(["run", "SM clock", "memory clock", "temperature", "power", "throttled samples"], tele), "",
            f"- FLA commit `{f.run.fla['commit']}`: {f.run.fla['files_verified']} imported files verified "
            f"({f.run.fla['method']}).",
            f"- Shape: {shape}; routing seed {f.run.config['seeds']['routing']}, input seed "
            f"{f.run.config['seeds']['inputs']}, order seed {t.order_seed}.",
            f"- Timing: {t.warmup_rounds} warm-up + {t.repetitions} timed rounds, patterns interleaved "
            f"({t.order_mode}); "
            f"{t.method} (flush {t.l2_flush_bytes // MiB} MiB, spin {t.launch_guard_cycles:,} cycles). Each recorded "
            "commit and the code that ran: [PROVENANCE.md](PROVENANCE.md).", ""]


def latency_appendix(data: ReportData) -> list[str]:
    """The full stage table of every formal run."""
    out = ["## Appendix: full stage tables", ""]
    for f in data.formal:
        b = f.analysis["bootstrap"]
        rows = [[r["pattern"], TITLES[r["stage"]], f"{r['median_ms']:.3f}", f"{r['p10_ms']:.3f}–{r['p90_ms']:.3f}",
                 f"{r['ci95_ms'][0]:.3f}–{r['ci95_ms'][1]:.3f} (±{r['ci95_halfwidth_pct']:.2f}%)",
                 times(r["ratio_vs_local"], r["ratio_vs_local_ci95"]), str(r["n_obs"])] for r in f.analysis["rows"]]
        widest = max(r["ci95_halfwidth_pct"] for r in f.analysis["rows"] if r["stage"] == "dkv_core")
        out += [f"### {f.label}: `{f.path}`", "",
                "Median over the timed rounds; p10–p90; 95% CI of the median by `scipy.stats.bootstrap` "
                f"({b['method']} method, {b['resamples']:,} resamples, seed {b['seed']}); ratio to "
                f"`{BASELINE_PATTERN}` "
                "with its 95% CI from a paired bootstrap (`paired=True`: rounds are resampled, each with its "
                "observation of both patterns, since every round ran every pattern).", "",
                md_table(["pattern", "stage", "median ms", "p10–p90 ms", "95% CI ms", "× local (95% CI)", "n"], rows),
                "",
                f"Widest dK/dV median CI: ±{widest:.2f}% of the median (within ±1%: "
                f"{'yes' if f.analysis['dkv_ci_within_1pct'] else 'no'}).", ""]
    return out


def repeatability_lines(d: dict[str, Any], repeat_path: str) -> list[str]:
    """The config paragraph and table of a repeat: how it got its autotune configs and which differ."""
    how = ("replayed the first run's autotune configs (`bench --autotune-from`)" if d["replayed"] else
           f"re-tuned its own autotune configs (mode `{d['repeat_mode']}`, not a replay of the first run)")
    rows = [[TITLES[k], config_json(d["first"][k]), config_json(d["repeat"].get(k)),
             "**differs**" if k in d["differing_kernels"] else "same"] for k in d["first"]]
    note = (f"The repeat ran **different configs** for {', '.join(TITLES[k] for k in d['differing_kernels'])}: its "
            f"differences for {', '.join(TITLES[s] for s in d['affected_stages'])} are a config change plus noise, so "
            "those stages are not a repeated quantity of this pair (the noise floor of a stage nothing repeated is "
            "borrowed)." if d["differing_kernels"] else
            "Both runs launched the same configs for every autotuned kernel, so their differences are noise.")
    return [f"`{repeat_path}` {how}. Autotune configs of both runs:", "",
            md_table(["kernel (stage)", "first run", "repeat", ""], rows), "", note, ""]


def repeatability_appendix(data: ReportData) -> list[str]:
    out = ["## Appendix: the repeat of each formal run", ""]
    for f in data.formal:
        if f.repeat is None or f.repeat_path is None:  # both or neither (load_report_data)
            continue
        drift = drift_of(f.run, f.repeat)
        by = {(r["pattern"], r["stage"]): r for r in f.analysis["rows"]}
        names, stages = list(f.run.patterns), f.run.timing.stages
        rows = [[TITLES[st] + (" (configs differ)" if st in drift["affected_stages"] else ""),
                 *[f"{by[(p, st)]['repeat_diff_pct']:+.2f}%" for p in names]] for st in stages]
        out += [f"### {f.label}", "", *repeatability_lines(drift, f.repeat_path),
                f"Each median's difference, repeat − first, in % of the first (`{f.repeat_path}` vs `{f.path}`):", "",
                md_table(["stage", *names], rows), ""]
    return out


def figures_lines(data: ReportData) -> list[str]:
    """Each formal run's latency-vs-fan-in figure (CV), the other statistics linked."""
    out = []
    for f in data.formal:
        figs = data.inputs.glob(data.inputs.figures, f"{Path(f.path).stem}_fanin_*_latency.png")
        if not figs:
            continue
        main = [g for g in figs if "fanin_cv" in g.name] or figs[:1]
        others = [g for g in figs if g not in main]
        out += [*[f"![{g.stem}](figures/{g.name})" for g in main], "",
                f"{f.label}: median latency of the four panel stages vs fan-in CV, one marker per routing with "
                "p10–p90 bars" + (": other fan-in statistics " + ", ".join(f"[{g.stem}](figures/{g.name})"
                                                                          for g in others) if others else "") + ".", ""]
    return out


def fanin_section(result: BenchLike) -> list[str]:
    rows = []
    for name, p in BenchResult.coerce(result).patterns.items():
        f, span, gap = p.fanin, p.query_span, p.adjacent_gap
        if span is None or gap is None:  # recorded by every bench result since the routing statistics existed
            raise UserError(f"pattern {name}: no query_span / adjacent_gap recorded; re-run `report` on a bench "
                            "result that records them")
        rows.append([name, f"{p.edges:,}", f"{f['mean']:.1f}", f"{f['max']:.0f}", f"{f['p95']:.1f}",
                     f"{f['p99']:.1f}", f"{f['cv']:.3f}", f"{f['gini']:.3f}", str(f["zero_rows"]),
                     f"{span['median']:.0f}", f"{gap['mean']:.2f}"])
    return ["Per (KV head, KV block) CSR row, zero rows included; span and gaps over non-empty rows (the same "
            "routings on both GPUs: same seeds and shape):", "",
            md_table(["pattern", "edges", "fan-in mean", "max", "p95", "p99", "CV", "Gini", "zero rows",
                      "span median", "gap mean"], rows), ""]


def stage_sum_section(data: ReportData) -> list[str]:
    out = ["## Appendix: stage sum vs the official wrapper, memory", ""]
    for f in data.formal:
        rows = [[n, f"{s['stage_sum_median_ms']:.3f}", f"{s['full_bwd_median_ms']:.3f}", f"{s['ratio']:.3f}"]
                for n, s in f.analysis["stage_sum_vs_full_bwd"].items()]
        out += [f"{f.label} (`{f.path}`): sum of the medians of delta preprocess, CSR, dQ core and dK/dV core against "
                "the median of `parallel_nsa_bwd` as a whole (which also sums `dq`/`dk` over NV and allocates its "
                "outputs; itemised for the H200 in the wrapper appendix).", "",
                md_table(["pattern", "stage sum ms", "full_bwd ms", "ratio"], rows), ""]

    def mib(m: dict[str, int], *keys: str) -> str:
        return f"{sum(m[k] for k in keys) / MiB:.1f}"

    for f in data.formal:
        rows = [[n, mib(m, "delta_bytes"), mib(m, "csr_indices_bytes", "csr_offsets_bytes"),
                 mib(m, "preallocated_gradient_bytes"), mib(m, "official_peak_minus_baseline_bytes"),
                 mib(m, "official_peak_allocated_bytes")] for n, m in f.analysis["memory"].items()]
        out += [f"Memory, {f.label}, MiB. Peak = `torch.cuda.max_memory_allocated()` during one official "
                "`parallel_nsa_bwd` call after a reset, its outputs included; baseline = allocated before the call.",
                "",
                md_table(["pattern", "delta", "CSR indices + offsets", "pre-allocated dQ/dK/dV",
                          "wrapper peak − baseline", "wrapper peak (process)"], rows), ""]
    return out


def autotune_lines(data: ReportData) -> list[str]:
    """Each formal run's autotune configs: the arm, and the configs launched."""
    out = ["## Appendix: autotune configs of the formal runs", ""]
    for f in data.formal:
        a = f.run.autotune
        mode = a.get("mode", "tune-on")
        how = {"tune-on": f"tuned once on `{a['tuned_on']}` ({a['tune_seconds']:.1f} s), then used for every pattern",
               "per-pattern": "tuned on each pattern itself (autotuner caches reset between patterns)",
               "replay": f"replayed from `{(a.get('replayed_from') or {}).get('path')}` (nothing tuned)"}[mode]
        rows = [[s, k["kernel"], config_json(k["best_config"])] for s, k in a["kernels"].items()]
        out += [f"{f.label}: configs {how}; one config set for all patterns: {a['same_config_all_patterns']}.", "",
                md_table(["stage", "kernel", "config"], rows), ""]
    return out


def limits_section() -> list[str]:
    return ["## What the data does not show", "",
            "- Per-CTA (per CSR row) times: the experiment never instruments FLA's kernels, so the tail is seen only "
            "as whole-kernel latency, the fan-in distribution, Nsight's SM-level imbalance and the makespan model, "
            "not measured per program.",
            "- Other shapes, FLA commits or Triton versions: both formal runs are one shape, FLA `0a9b9f2`, Triton "
            "3.6.0, configs tuned on `local` and reused; the H200 sections measure other configs, routings, T and "
            "packed documents, and the release section other FLA versions where measured.",
            "- `block_counts` tensors and the compression / sliding-window branches of NSA.",
            "- Locked-clock numbers: clocks ran free (telemetry appendix), as in training.", ""]


def reproduce_section(data: ReportData, command: str) -> list[str]:
    out = ["## Appendix: reproduce", "", "```bash", "bash scripts/install.sh h100",
           "scripts/run_h100.sh .venv/bin/invoke check smoke"]
    for f in data.formal:
        config = f.run.config_path
        bench = (f"scripts/run_h100.sh .venv/bin/python -m nsa_exp bench --config {config} --publish --overwrite "
                 "--output ")
        out.append(bench + f.path)
        if f.repeat_path:
            replay = (f" --autotune-from {f.path}"
                      if f.repeat is not None and f.repeat.autotune.get("mode") == "replay" else "")
            out.append(bench + f.repeat_path + replay)
    out += ["scripts/run_h100.sh .venv/bin/invoke ncu --stage dkv_core --publish --overwrite",
            "scripts/run_h100.sh .venv/bin/invoke ncu --stage dq_core --publish --overwrite",
            *[f"python -m nsa_exp plot --input results/summaries/{Path(f.path).stem}.csv --publish --overwrite"
              for f in data.formal],
            command + " --publish --overwrite", "```", "",
            "(`--publish --overwrite` regenerates the committed results, figures and this file on purpose; without "
            "`--publish` each command writes the run folder `runs/<name>/` instead — `check` and `smoke` above write "
            "`runs/e1_h100/reports/` — and never replaces an existing output unasked.) The H200 runs behind every "
            "other committed result: "
            "`scripts/h200_session.sh PART OUTDIR` (the part of each file: [PROVENANCE.md](PROVENANCE.md)).", ""]
    return out
