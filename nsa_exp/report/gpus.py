"""RESULTS.md sections across and within the GPUs: H100 vs H200 (``compare``'s ratios and CIs, judged by the one
rule with the larger of the two GPUs' floors), the cross-GPU Nsight Compute reading, the CUPTI agreement, the
itemised wrapper overhead and the achieved TFLOP/s of the H200 formal run (each with the CIs of its medians).
"""

from __future__ import annotations

from typing import Any

from ..analysis.bootstrap import bootstrap_median_ci
from ..analysis.cupti import disagreement
from ..analysis.noise_table import NOISE_TABLE
from ..analysis.throughput import peak_tflops, throughput_rows
from ..checking import compare
from ..core.gpus import gpu_spec
from ..core.stages import TITLES
from ..io.store import load_document
from .data import Formal, ReportData, recorded
from .markdown import md_table, ms, pct, times


def judged_words(data: ReportData, row: dict[str, Any]) -> str:
    """The rule's words for a compare row (its CI and floor), with the direction when it differs."""
    word = data.claims.judged(row["ci95"], row["floor"])
    return word + (f" ({row['verdict']})" if row["verdict"] in ("slower", "faster") else "")


def cross_gpu_rows(data: ReportData, cycles: bool = False) -> tuple[dict[str, Any], Formal, Formal] | None:
    """``compare`` of the H200 formal run against the H100's, floors per stage the larger of the two GPUs'."""
    a, b = data.by_gpu("H100"), data.by_gpu("H200")
    if a is None or b is None:
        return None
    return _compare(data, a, b, cycles), a, b


def _compare(data: ReportData, a: Formal, b: Formal, cycles: bool) -> dict[str, Any]:
    root = data.inputs.root
    return compare.build(root / a.path, root / b.path, cycles=cycles, noise_table=root / NOISE_TABLE)


def cross_gpu_section(data: ReportData) -> list[str]:
    """H100 vs H200 per pattern x stage, judged by the rule (and again in SM-cycle space)."""
    out = ["## H100 vs H200", ""]
    got = cross_gpu_rows(data)
    if got is None:
        return out + ["Not both formal results are committed: nothing to compare across GPUs.", ""]
    doc, a, b = got
    cyc = {(r["pattern"], r["stage"]): r for r in _compare(data, a, b, cycles=True)["rows"]}
    rows, words = [], []
    counts: dict[str, int] = {}
    for r in doc["rows"]:
        c = cyc[r["pattern"], r["stage"]]
        word, cword = judged_words(data, r), judged_words(data, c)
        words.append((r["verdict"], c["verdict"]))
        counts[word] = counts.get(word, 0) + 1
        rows.append([r["pattern"], TITLES.get(r["stage"], r["stage"]), f"{r['a_median']:.3f}", f"{r['b_median']:.3f}",
                     times(r["ratio"], r["ci95"]), pct(r["floor"]), word, cword])
    same_in_cycles = all(v == c for v, c in words)
    return out + [
        f"B = `{b.path}` ({b.gpu}) over A = `{a.path}` ({a.gpu}): ratio of medians with a bootstrap 95% CI (the rounds "
        "of each run resampled on their own, `paired=False`), judged by the rule with f = the larger of the two "
        f"GPUs' floors of the stage in the noise table `{NOISE_TABLE}` (`python -m nsa_exp compare {a.path} {b.path} "
        "--output ''` gives the same ratios, CIs, floors and verdicts). The last column judges the same ratio in "
        "SM-cycle space (each "
        "observation times the SM clock NVML sampled in its round).", "",
        md_table(["pattern", "stage", "H100 ms", "H200 ms", "H200 / H100 (95% CI)", "floor", "verdict",
                  "in cycles"], rows), "",
        data.claims.define("Verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) + "."), "",
        *_ncu_across(data, a, b, same_in_cycles)]


def sm_clocks(*runs: Formal) -> list[float]:
    """The distinct SM clocks (MHz) NVML sampled over the timed rounds of ``runs``."""
    return sorted({s["sm_clock_mhz"] for f in runs for s in f.run.telemetry["samples"]
                   if not s.get("warmup") and s.get("sm_clock_mhz") is not None})


NCU_COLUMNS = {"duration_ns": "ncu ms", "dram_throughput_pct": "DRAM % of peak",
               "memory_throughput_pct": "memory pipes % of peak", "l2_hit_rate_pct": "L2 hit %",
               "sm_throughput_pct": "SM % of peak", "achieved_occupancy_pct": "occupancy %"}


def _hbm_tbs(name: str) -> float | None:
    spec = gpu_spec(name)
    if spec is None:
        raise KeyError(f"{name}: not in the GPU table (nsa_exp.core.gpus)")
    return spec.hbm_tbs


#: HBM bandwidth, TB/s, of the two GPUs compared (the GPU table: the H100 SXM5 and H200 datasheets; docs/METHOD.md)
HBM_TBS = {"H100": _hbm_tbs("NVIDIA H100 80GB HBM3"), "H200": _hbm_tbs("NVIDIA H200")}


def _clock_clause(same_in_cycles: bool, clocks: list[float]) -> str:
    """What the cycle-space column can say, from the recorded clocks: with one SM clock over every timed sample
    of both runs cycles are time × one constant, so its verdicts equal the time ones by construction."""
    if len(clocks) == 1:
        return (f"; every timed sample of both runs ran at {clocks[0]:.0f} MHz, so the cycle-space verdicts equal "
                "the time-space ones by construction: the clocks did not vary, and that check cannot tell more")
    if same_in_cycles and clocks:
        return (f"; with SM clocks of {clocks[0]:.0f}–{clocks[-1]:.0f} MHz over the timed rounds every cycle-space "
                "verdict equals its time-space one, so the clocks do not explain the difference either")
    if same_in_cycles:
        return "; every cycle-space verdict equals its time-space one (no SM clock recorded over the timed rounds)"
    return ("; the cycle-space verdicts differ from the time-space ones in places, so clocks explain part of the "
            "difference")


def _ncu_across(data: ReportData, a: Formal, b: Formal, same_in_cycles: bool) -> list[str]:
    """Nsight Compute side by side (``results/ncu/<stem>_local-vs-sink-heavy_<stage>.json`` of each run) and
    what the counters say about the H200's larger HBM bandwidth; empty when either is missing."""
    rows, sms = [], set()
    dram: dict[str | tuple[str, str], list[float]] = {}
    for stage in ("dq_core", "dkv_core"):
        for f in (a, b):
            path = data.inputs.ncu_summary(f.path, stage)
            if not data.inputs.committed(path):
                return []
            for k in load_document(path, ("ncu_summary",))["kernels"]:
                m = k["metrics"]
                dram.setdefault(stage, []).append(m["dram_throughput_pct"])
                dram.setdefault((stage, k["pattern"]), []).append(m["dram_throughput_pct"])
                sms.add(int(m["sm_count"]))
                rows.append([TITLES[stage], f.label, k["pattern"], *(
                    f"{m[c] / 1e6:.3f}" if c == "duration_ns" else f"{m[c]:.1f}" for c in NCU_COLUMNS)])
    dq = max(dram["dq_core"])
    reading = (f"dQ core draws at most {dq:.1f}% of either GPU's peak DRAM bandwidth, so it is not bound by HBM and "
               f"the H200's larger HBM bandwidth ({HBM_TBS['H200']} vs {HBM_TBS['H100']} TB/s, datasheets) cannot "
               "speed it up; what it saturates is on-chip (the memory-pipes column), which both GPUs share: "
               + (f"{sms.pop()} SMs on both" if len(sms) == 1 else f"SM counts {sorted(sms)}")
               + _clock_clause(same_in_cycles, sm_clocks(a, b))
               if dq < 20 else f"dQ core draws up to {dq:.1f}% of peak DRAM bandwidth: HBM matters for it")
    return ["Nsight Compute on both GPUs (`invoke ncu --stage dq_core|dkv_core`, `local` vs `sink-heavy`, one "
            "profiled launch each, clocks free; one launch, so no CI; full metrics: the Nsight appendix):", "",
            md_table(["stage", "GPU", "pattern", *NCU_COLUMNS.values()], rows), "",
            f"Reading: {reading}. dK/dV core draws at most "
            + ", ".join(f"{max(v):.1f}% on `{key[1]}`" for key, v in dram.items() if key[:1] == ("dkv_core",))
            + " of peak DRAM bandwidth; the skewed routing's extra time is not spent moving memory.", ""]


def instrument_sections(data: ReportData) -> list[str]:
    """CUPTI agreement, wrapper overhead and achieved TFLOP/s of the H200 formal run (else the first formal)."""
    f = data.by_gpu("H200") or data.formal[0]
    return _cupti(f) + _wrapper(f) + _throughput(f)


def _cupti(f: Formal) -> list[str]:
    out = ["## Appendix: CUDA events vs CUPTI kernel time", ""]
    run = f.run
    block = run.cupti
    if block is None:
        return out + [f"`{f.path}` was recorded before bench's CUPTI pass existed.", ""]
    rows, paired = [], "median_event_ms" in block  # a paired pass: the rule holds on the same calls' events
    for p, stages in block["median_kernel_ms"].items():
        for s, k in stages.items():
            r = f.stage_row(p, s)
            calls = block["kernel_ms"][p][s]
            kci = bootstrap_median_ci(calls) if len(calls) > 1 else (k, k)
            e = block["median_event_ms"][p][s] if paired else r["median_ms"]
            rows.append([p, TITLES.get(s, s), ms(r["median_ms"], r["ci95_ms"]),
                         *([f"{e:.4f}"] if paired else []), ms(k, kci), f"{100 * (e - k) / e:+.1f}%",
                         "no" if disagreement(s, e, k) else "yes"])
    return out + [f"From `{f.path}`: each stage's CUDA-event median over the timed rounds (95% CI) against the median "
                  f"of its kernels' own device time over {block['rounds']} profiled rounds (95% CI of those "
                  f"{block['rounds']}). Agreement rule: docs/METHOD.md (5% or 20 µs for one-launch stages; CSR, "
                  "wrapper "
                  "extra and the full wrapper may spend at most 15% + 50 µs on launch gaps and host work).", "",
                  *(["The profiled calls kept their CUDA-event pair: `profiled events ms` is their median, and the "
                     "gap and the rule are of those same calls.", ""] if paired else []),
                  md_table(["pattern", "stage", "events ms (95% CI)", *(["profiled events ms"] if paired else []),
                            "kernels ms (95% CI)", "gap", "agree"], rows), ""]


def _wrapper(f: Formal) -> list[str]:
    out = ["## Appendix: the wrapper's extra work, itemised", ""]
    recs = {p: recorded(v.stage_sum_vs_full_bwd, f"{f.path}: {p}'s stage_sum_vs_full_bwd").to_json()
            for p, v in f.run.patterns.items()}
    if not all("itemised_ratio" in r for r in recs.values()):
        return out + [f"`{f.path}` has no `wrapper_extra` stage (recorded before it existed).", ""]
    rows = [[p, f"{r['stage_sum_median_ms']:.3f}",
             ms(r["wrapper_extra_median_ms"], f.stage_row(p, "wrapper_extra")["ci95_ms"]),
             f"{r['stage_sum_median_ms'] + r['wrapper_extra_median_ms']:.3f}",
             ms(r["full_bwd_median_ms"], f.stage_row(p, "full_bwd")["ci95_ms"]),
             f"{100 * (r['itemised_ratio'] - 1):+.2f}%"] for p, r in recs.items()]
    return out + [f"From `{f.path}`: `wrapper_extra` times what `parallel_nsa_bwd` does beyond the staged calls — its "
                  "three `torch.empty` gradient buffers and `dq.sum(0)`, `dk.sum(0)` over the NV dim (target: stage "
                  "sum + wrapper extra at most 1% off the wrapper). Medians with their 95% CIs; the sum's CI is not "
                  "a sum of CIs and is not shown.", "",
                  md_table(["pattern", "stage sum ms", "wrapper extra ms", "sum + extra ms", "full bwd ms",
                            "gap"], rows), ""]


def _throughput(f: Formal) -> list[str]:
    gpu = f.run.gpu_name
    peak = peak_tflops(gpu)
    rows = []
    for r in throughput_rows(f.run):
        lo, hi = f.stage_row(r["pattern"], r["stage"])["ci95_ms"]
        tlo, thi = r["gflop"] / hi, r["gflop"] / lo  # GFLOP / ms = TFLOP/s
        rows.append([r["pattern"], TITLES.get(r["stage"], r["stage"]), f"{r['gflop']:,.0f}",
                     f"{r['median_ms']:.3f}", f"{r['tflops']:.1f} ({tlo:.1f}–{thi:.1f})",
                     "n/a" if r["pct_peak"] is None else f"{r['pct_peak']:.1f}%"])
    note = f"dense BF16 peak {peak[0]:g} TFLOP/s ({peak[1]})" if peak else f"no peak on file for {gpu}"
    return ["## Appendix: achieved throughput", "",
            f"From `{f.path}` on {gpu}: matmul FLOPs per stage from the edge count (derivation in docs/METHOD.md; "
            f"useful FLOPs with the true head dims, padding not counted) over the stage's median, with the CI of "
            f"the median carried over; {note}.", "",
            md_table(["pattern", "stage", "GFLOP", "median ms", "TFLOP/s (95% CI)", "% of peak"], rows), ""]

