"""``report``: docs/RESULTS.md and results/analysis/<name>.json, generated from committed results.

No number in RESULTS.md is typed by hand: each is read from, or recomputed out of, the raw result
JSON (and the repeat run, the ncu summaries) by this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.families import BASELINE_PATTERN
from ..core.kinds import KINDS
from ..core.stages import PANEL_ORDER, TITLES
from ..errors import UserError
from ..io.metadata import base_metadata
from ..io.store import check_writable, write_json, write_text_atomic
from .analysis import analyse
from .autotune_report import autotune_section
from .config_drift import autotune_lines, drift_of, noise_spread, repeatability_lines
from .model_report import model_section
from .packing_report import packing_section
from .report_gpus import DEFAULT_H200, cross_gpu_section, instrument_sections
from .report_ncu import md_table as _table
from .report_ncu import ncu_section
from .sweep_report import sweep_section
from .validate import load_validated

MiB = 1024 * 1024


def _load(path: str | Path) -> dict[str, Any]:
    return load_validated(path, tuple(KINDS), hint=f"run `invoke validate {path}`")


def _differs(row: dict[str, Any], repeat_spread: float) -> bool:
    """A pattern's stage differs measurably from local: the ratio's 95% CI excludes 1 and the
    difference exceeds twice the largest run-to-run median difference seen for that stage."""
    lo, hi = row["ratio_vs_local_ci95"]
    return (lo > 1 or hi < 1) and abs(row["ratio_vs_local"] - 1) * 100 > 2 * repeat_spread


def _setup(result: dict[str, Any]) -> list[str]:
    meta, gpu = result["metadata"], result["metadata"]["gpu"]
    samples = [s for s in result["telemetry"]["samples"] if not s["warmup"]]
    clocks = sorted({s["sm_clock_mhz"] for s in samples if "sm_clock_mhz" in s})
    temps = [s["temperature_c"] for s in samples if "temperature_c" in s]
    powers = [s["power_w"] for s in samples if "power_w" in s]
    v, t = meta["versions"], result["timing"]
    shape = ", ".join(f"{k}={val}" for k, val in result["shape"].items())
    return [
        "## Setup", "",
        f"- Run: {meta['created_utc']} on **{gpu['name']}** ({gpu['sm_count']} SMs, driver {gpu['driver']}, "
        f"max SM clock {gpu.get('max_sm_clock_mhz')} MHz, power limit {gpu.get('power_limit_w')} W).",
        f"- Telemetry over the timed rounds: SM clock {', '.join(map(str, clocks))} MHz; temperature "
        f"{min(temps)}–{max(temps)} °C; power {min(powers):.0f}–{max(powers):.0f} W; "
        f"{result['telemetry']['throttled_samples']} of {len(result['telemetry']['samples'])} samples flagged "
        "as throttled. Clocks were not locked (the GPU's own boost behaviour, as a user runs it).",
        f"- Software: torch {v.get('torch')}, triton {v.get('triton')}, CUDA {v.get('cuda')}, "
        f"python {v.get('python')}, fla-core {v.get('fla_core')}.",
        f"- FLA commit `{result['fla']['commit']}`: {result['fla']['files_verified']} imported files verified "
        f"({result['fla']['method']}).",
        f"- Shape: {shape}; routing seed {result['config']['seeds']['routing']}, input seed "
        f"{result['config']['seeds']['inputs']}, order seed {t['order_seed']}.",
        f"- Timing: {t['warmup_rounds']} warm-up + {t['repetitions']} timed rounds, patterns interleaved "
        f"({t['order_mode']}); {t['method']} (flush {t['l2_flush_bytes'] // MiB} MiB, spin "
        f"{t['launch_guard_cycles']:,} cycles). Repo commit `{meta['git']['sha']}` as recorded by the run "
        "([PROVENANCE.md](PROVENANCE.md) maps recorded commits to this repository's history).", ""]


def _latency(analysis: dict[str, Any]) -> list[str]:
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
            _table(["pattern", "stage", "median ms", "p10–p90 ms", "95% CI ms", "× local (95% CI)", "n"], table), "",
            "Every dK/dV median's 95% CI is within ±1% of the median: "
            f"**{'yes' if analysis['dkv_ci_within_1pct'] else 'no'}** (widest ±{widest:.2f}%).", ""]


def _repeatability(analysis: dict[str, Any], names: list[str], stages: list[str], repeat: str,
                   drift: dict[str, Any]) -> list[str]:
    by = {(r["pattern"], r["stage"]): r for r in analysis["rows"]}
    rows = [[TITLES[st] + (" (configs differ)" if st in drift["affected_stages"] else ""),
             *[f"{by[(p, st)]['repeat_diff_pct']:+.2f}%" for p in names]] for st in stages]
    return ["## Repeatability", "", *repeatability_lines(drift, repeat),
            f"A second, independent bench process on the same GPU (`{repeat}`): each median's difference, "
            "repeat − first, in % of the first.", "", _table(["stage", *names], rows), ""]


def _figure(result_stem: str, figures: Path) -> list[str]:
    figs = sorted(figures.glob(f"{result_stem}_*_latency.png"))
    if not figs:
        return []
    main = [f for f in figs if "fanin_cv" in f.name] or figs[:1]
    others = [f for f in figs if f not in main]
    return ["## Figure", "", *[f"![{f.stem}](figures/{f.name})" for f in main], "",
            "Median latency vs fan-in CV, one marker per pattern with p10–p90 bars; the other fan-in statistics: "
            + ", ".join(f"[{f.stem}](figures/{f.name})" for f in others) + ".", ""]


def _fanin(result: dict[str, Any]) -> list[str]:
    rows = []
    for name, p in result["patterns"].items():
        f = p["fanin"]
        rows.append([name, f"{p['edges']:,}", f"{f['mean']:.1f}", f"{f['max']:.0f}", f"{f['p95']:.1f}",
                     f"{f['p99']:.1f}", f"{f['cv']:.3f}", f"{f['gini']:.3f}", str(f["zero_rows"]),
                     f"{p['query_span']['median']:.0f}", f"{p['adjacent_gap']['mean']:.2f}"])
    return ["## Fan-in and CSR-row statistics", "",
            "Per (KV head, KV block) CSR row, zero rows included; span and gaps over non-empty rows.", "",
            _table(["pattern", "edges", "fan-in mean", "max", "p95", "p99", "CV", "Gini", "zero rows",
                    "span median", "gap mean"], rows), ""]


def _stage_sum(analysis: dict[str, Any]) -> list[str]:
    rows = [[n, f"{s['stage_sum_median_ms']:.3f}", f"{s['full_bwd_median_ms']:.3f}", f"{s['ratio']:.3f}"]
            for n, s in analysis["stage_sum_vs_full_bwd"].items()]
    return ["## Stage sum vs the official wrapper", "",
            "Sum of the medians of delta preprocess, CSR, dQ core and dK/dV core, against the median of "
            "`parallel_nsa_bwd` as a whole (which also sums `dq`/`dk` over NV and allocates its outputs).", "",
            _table(["pattern", "stage sum ms", "full_bwd ms", "ratio"], rows), ""]


def _memory(analysis: dict[str, Any]) -> list[str]:
    def mib(m: dict[str, int], *keys: str) -> str:
        return f"{sum(m[k] for k in keys) / MiB:.1f}"

    rows = [[n, mib(m, "delta_bytes"), mib(m, "csr_indices_bytes", "csr_offsets_bytes"),
             mib(m, "preallocated_gradient_bytes"), mib(m, "official_peak_minus_baseline_bytes"),
             mib(m, "official_peak_allocated_bytes")] for n, m in analysis["memory"].items()]
    return ["## Memory", "", "MiB. Peak = `torch.cuda.max_memory_allocated()` during one official "
            "`parallel_nsa_bwd` call after a reset, its outputs included; baseline = allocated before the call.", "",
            _table(["pattern", "delta", "CSR indices + offsets", "pre-allocated dQ/dK/dV", "wrapper peak − baseline",
                    "wrapper peak (process)"], rows), ""]


def _findings(analysis: dict[str, Any], names: list[str], stages: list[str], drift: dict | None = None) -> list[str]:
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


def _reproduce(result: dict[str, Any], paths: dict[str, str]) -> list[str]:
    bench = f"scripts/run_h100.sh .venv/bin/python -m nsa_exp bench --config {result['config_path']} --output "
    stem = Path(paths["result"]).stem
    return ["## Reproduce", "", "```bash", "bash scripts/install.sh h100",
            "scripts/run_h100.sh .venv/bin/invoke check smoke", bench + paths["result"],
            *([bench + paths["repeat"]] if paths.get("repeat") else []),
            "scripts/run_h100.sh .venv/bin/invoke ncu --stage dkv_core",
            "scripts/run_h100.sh .venv/bin/invoke ncu --stage dq_core",
            f"python scripts/plot_fanin_latency.py --input results/summaries/{stem}.csv --x fanin_cv",
            paths["command"], "```", ""]


def render(result: dict[str, Any], analysis: dict[str, Any], ncu: list[dict[str, Any]], paths: dict[str, str],
           figures: Path = Path("docs/figures"), drift: dict[str, Any] | None = None,
           matrix: list[str] = (), gpus: list[str] = ()) -> str:
    """The whole RESULTS.md text, section by section, from the result, its analysis and ncu summaries
    (``drift``: :func:`drift_of` the repeat; ``matrix``: the autotune-matrix section's lines; ``gpus``: the
    issue-14 sections, :mod:`nsa_exp.results.report_gpus`)."""
    names, stages = list(result["patterns"]), result["timing"]["stages"]
    source = f"_Generated by `{paths['command']}` from `{paths['result']}`" + (
        f" and the independent repeat `{paths['repeat']}`" if paths.get("repeat") else "") + ". Do not edit by hand._"
    out = ["# E1 results: equal-edge NSA routings vs FLA backward stage latency", "", source, "",
           "## Question", "",
           "Four routings of NSA selection attention have exactly the same number of effective causal sparse edges "
           f"({result['edges']['closed_form']:,} at this shape, checked by the equal-edge gate) but different query "
           "fan-in per selected KV block. Do FLA's backward stages take measurably different time on an H100, and on "
           "an H200?", ""]
    out += _setup(result) + _latency(analysis)
    if paths.get("repeat"):
        out += _repeatability(analysis, names, stages, paths["repeat"], drift)
    out += _figure(Path(paths["result"]).stem, figures) + _fanin(result) + _stage_sum(analysis) + _memory(analysis)
    out += autotune_lines(result) + list(matrix) + ncu_section(ncu) + _findings(analysis, names, stages, drift)
    out += list(gpus) + sweep_section() + packing_section() + model_section()
    out += _reproduce(result, paths)
    return "\n".join(out)


README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


def headline(result: dict[str, Any], analysis: dict[str, Any], results_md: str, formal: bool = False) -> str:
    """README's results block: date, hardware, and the stage ratios vs local with their CIs."""
    by = {(r["pattern"], r["stage"]): r for r in analysis["rows"]}
    gpu = result["metadata"]["gpu"]
    others = [p for p in result["patterns"] if p != BASELINE_PATTERN]

    def cell(p: str, st: str) -> str:
        r = by[(p, st)]
        lo, hi = r["ratio_vs_local_ci95"]
        return f"{r['ratio_vs_local']:.2f}× ({lo:.2f}–{hi:.2f})"

    rows = [[TITLES[st], f"{by[(BASELINE_PATTERN, st)]['median_ms']:.3f}", *[cell(p, st) for p in others]]
            for st in PANEL_ORDER]
    return "\n".join([
        f"{'Formal run' if formal else 'Run'} of {result['metadata']['created_utc'][:10]} on one **{gpu['name']}** "
        f"(driver {gpu['driver']}), "
        f"{result['timing']['repetitions']} interleaved rounds, FLA `{result['fla']['commit'][:12]}`; every routing "
        f"has {result['edges']['closed_form']:,} edges. Median latency of `local` and each routing's ratio to it "
        "(bootstrap 95% CI):", "",
        _table(["stage", "local (ms)", *[f"{p} × local" for p in others]], rows), "",
        f"Full tables, repeatability, memory, Nsight evidence and limits: [{results_md}]({results_md}).",
    ])


def update_readme(readme: Path, block: str) -> None:
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        raise UserError(f"{readme}: no {README_START} ... {README_END} markers for the results block")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    write_text_atomic(readme, f"{head}{README_START}\n{block}\n{README_END}{tail}")


def is_formal(result: dict[str, Any], flag: bool = False) -> bool:
    """A run is formal only when its config says so (``"formal": true``), or ``--formal`` labels a result
    recorded before the field existed; ``--formal`` on a config that says ``"formal": false`` is refused."""
    said = result["config"].get("formal")
    if flag and said is False:
        raise UserError("--formal: the result's config says \"formal\": false; it cannot be labelled formal")
    return said is True or flag


def build_report(result_path: str, repeat_path: str | None, ncu_paths: list[str], output_md: str,
                 output_json: str, command: str, readme: str | None = None, formal: bool = False,
                 autotune_matrix: str | None = None, tune_arms: list[str] | None = None,
                 h200: str | None = DEFAULT_H200) -> dict[str, Any]:
    check_writable(output_md, output_json, *([readme] if readme else []))
    result = _load(result_path)
    formal = is_formal(result, formal)
    repeat = _load(repeat_path) if repeat_path else None
    if repeat is not None and repeat["shape"] != result["shape"]:
        raise UserError(f"{repeat_path}: shape differs from {result_path}; a repeat must run the same config")
    ncu = []
    for p in ncu_paths:
        doc = _load(p)
        doc["_path"] = p
        ncu.append(doc)
    analysis = analyse(result, repeat)
    analysis["metadata"] = base_metadata()
    write_json(output_json, analysis, "analysis")
    drift = drift_of(result, repeat) if repeat is not None else None
    matrix = autotune_section(autotune_matrix, tune_arms or [], _load) if autotune_matrix else []
    has_h200 = bool(h200) and Path(h200).exists()
    gpus = cross_gpu_section(result_path, repeat_path, h200) + (
        instrument_sections(_load(h200), h200) if has_h200 else instrument_sections(result, result_path))
    text = render(result, analysis, ncu, {"result": result_path, "repeat": repeat_path, "command": command},
                  drift=drift, matrix=matrix, gpus=gpus)
    write_text_atomic(output_md, text)
    if readme:
        update_readme(Path(readme), headline(result, analysis, str(Path(output_md).as_posix()), formal))
    return analysis
