"""RESULTS.md sections of issue 14: H100 vs H200 (``compare``'s verdicts), the CUPTI agreement, the
itemised wrapper overhead and the achieved TFLOP/s — each rendered from the results that hold the data
(the H200 formal result once it is recorded; until then the H100 result, and a note for what it lacks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..analysis.compare import compare_results
from ..analysis.cupti import disagreement
from ..analysis.throughput import peak_tflops, throughput_rows
from ..core.gpus import gpu_spec
from ..core.records import BenchResult
from ..core.stages import TITLES
from ..io.store import load_document
from .manifest import Inputs, committed_inputs
from .markdown import md_table


def cross_gpu_section(h100_path: str, h100_repeat: str | None, h200_path: str | None,
                      inputs: Inputs | None = None) -> list[str]:
    """H100 vs H200 per pattern x stage with ``compare``'s verdicts (noise floor from the H100 repeat
    pair), or a note that the H200 formal result is not recorded yet; ``inputs``: where the Nsight
    Compute summaries are (default :func:`.manifest.committed_inputs`)."""
    out = ["## H100 vs H200", ""]
    if not h200_path or not Path(h200_path).exists():
        return out + [f"No H200 formal result at `{h200_path}` yet: run the formal bench on the H200 "
                      "(`configs/e1_h200.json`) and regenerate this file; this section then compares it with the "
                      "H100 run stage by stage.", ""]
    noise = [h100_path, h100_repeat] if h100_repeat else None
    doc = compare_results(h100_path, h200_path, noise_from=noise)
    cyc = {(r["pattern"], r["stage"]): r for r in compare_results(h100_path, h200_path, noise_from=noise,
                                                                   cycles=True)["rows"]}
    rows = [[r["pattern"], TITLES.get(r["stage"], r["stage"]), f"{r['a_median']:.3f}", f"{r['b_median']:.3f}",
             f"{r['ratio']:.3f} ({r['ci95'][0]:.3f}–{r['ci95'][1]:.3f})", f"{100 * r['floor']:.1f}%",
             r["verdict"], cyc[r["pattern"], r["stage"]]["verdict"]] for r in doc["rows"]]
    a, b = doc["a"], doc["b"]
    return out + [
        f"`python -m nsa_exp compare {h100_path} {h200_path}" + (f" --noise-from {h100_path} {h100_repeat}"
                                                                  if noise else "") + " --output ''`" +
        f": A = {a['name']} on {a['gpu']}, B = {b['name']} on {b['gpu']}. Ratio = median(H200) / median(H100) "
        f"with a bootstrap 95% CI (rounds of each run resampled on their own). Rule: {doc['rule']}; "
        f"floor = {doc['noise_floor']['rule']}. The last column repeats the verdict in SM-cycle space (each "
        "observation times the SM clock NVML sampled in its round).", "",
        md_table(["pattern", "stage", "H100 ms", "H200 ms", "H200/H100 (95% CI)", "floor", "verdict",
                  "verdict (cycles)"], rows), "",
        "Verdicts: " + ", ".join(f"{v} {n}" for v, n in doc["counts"].items()) + ".", "",
        *_ncu_across(h100_path, h200_path, all(row[6] == row[7] for row in rows), inputs)]


NCU_COLUMNS = {"duration_ns": "ncu ms", "dram_throughput_pct": "DRAM % of peak",
               "memory_throughput_pct": "memory pipes % of peak", "l2_hit_rate_pct": "L2 hit %",
               "sm_throughput_pct": "SM % of peak", "achieved_occupancy_pct": "occupancy %"}
#: HBM bandwidth, TB/s, of the two GPUs compared (the GPU table: the H100 SXM5 and H200 datasheets; docs/METHOD.md)
HBM_TBS = {"H100": gpu_spec("NVIDIA H100 80GB HBM3").hbm_tbs, "H200": gpu_spec("NVIDIA H200").hbm_tbs}


def _ncu_across(h100_path: str, h200_path: str, same_in_cycles: bool, inputs: Inputs | None = None) -> list[str]:
    """Nsight Compute side by side (``results/ncu/<stem>_local-vs-sink-heavy_<stage>.json`` of each run,
    :meth:`.manifest.Inputs.ncu_summary`) and what the counters say about the H200's larger HBM bandwidth;
    empty when either is missing."""
    inputs = committed_inputs() if inputs is None else inputs
    rows, dram, sms = [], {}, set()
    for stage in ("dq_core", "dkv_core"):
        for gpu, path in (("H100", h100_path), ("H200", h200_path)):
            f = inputs.ncu_summary(path, stage)
            if not f.exists():
                return []
            for k in load_document(f, ("ncu_summary",))["kernels"]:
                m = k["metrics"]
                dram.setdefault(stage, []).append(m["dram_throughput_pct"])
                dram.setdefault((stage, k["pattern"]), []).append(m["dram_throughput_pct"])
                sms.add(int(m["sm_count"]))
                rows.append([TITLES[stage], gpu, k["pattern"], *(
                    f"{m[c] / 1e6:.3f}" if c == "duration_ns" else f"{m[c]:.1f}" for c in NCU_COLUMNS)])
    dq = max(dram["dq_core"])
    reading = (f"dQ core draws at most {dq:.1f}% of either GPU's peak DRAM bandwidth, so it is not bound by HBM and "
               f"the H200's larger HBM bandwidth ({HBM_TBS['H200']} vs {HBM_TBS['H100']} TB/s, datasheets) cannot "
               "speed it up; what it saturates is on-chip (the memory-pipes column), which both GPUs share: "
               + (f"{sms.pop()} SMs on both" if len(sms) == 1 else f"SM counts {sorted(sms)}")
               + ("; every cycle-space verdict equals its time-space one, so the clocks do not explain the "
                  "difference either" if same_in_cycles else "; the cycle-space verdicts differ from the time-space "
                  "ones in places, so clocks explain part of the difference")
               if dq < 20 else f"dQ core draws up to {dq:.1f}% of peak DRAM bandwidth: HBM matters for it")
    return ["Nsight Compute on both GPUs (`invoke ncu --stage dq_core|dkv_core`, `local` vs `sink-heavy`, one "
            "profiled launch each, clocks free):", "",
            md_table(["stage", "GPU", "pattern", *NCU_COLUMNS.values()], rows), "",
            f"Reading: {reading}. dK/dV core draws at most "
            + ", ".join(f"{max(v):.1f}% on `{key[1]}`" for key, v in dram.items() if key[:1] == ("dkv_core",))
            + " of peak DRAM bandwidth; the skewed routing's extra time is not spent moving memory. The "
            "counters do not explain the H200's small uniform slowdown at equal clocks; they do rule out HBM.", ""]


def instrument_sections(result: dict[str, Any], path: str) -> list[str]:
    """CUPTI agreement, wrapper overhead and achieved TFLOP/s of ``result`` (read from ``path``)."""
    return _cupti(result, path) + _wrapper(result, path) + _throughput(result, path)


def _cupti(result: dict[str, Any], path: str) -> list[str]:
    out = ["## CUDA events vs CUPTI kernel time", ""]
    run = BenchResult.coerce(result)
    block = run.cupti
    if block is None:
        return out + [f"`{path}` was recorded before bench's CUPTI pass existed; the H200 formal result carries it.",
                      ""]
    rows = []
    for p, stages in block["median_kernel_ms"].items():
        for s, k in stages.items():
            e = run.patterns[p].median(s)
            rows.append([p, TITLES.get(s, s), f"{e:.3f}", f"{k:.3f}", f"{100 * (e - k) / e:+.1f}%",
                         "no" if disagreement(s, e, k) else "yes"])
    return out + [f"From `{path}`: each stage's CUDA-event median (timed rounds) against the median of its kernels' "
                  f"own device time over {block['rounds']} profiled rounds (torch.profiler). Agreement rule: "
                  "docs/METHOD.md (5% or 20 µs for one-launch stages; CSR, wrapper extra and the full wrapper may "
                  "spend up to 15% + 50 µs on launch gaps and host work).", "",
                  md_table(["pattern", "stage", "events ms", "kernels ms", "gap", "agree"], rows), ""]


def _wrapper(result: dict[str, Any], path: str) -> list[str]:
    out = ["## The wrapper's extra work, itemised", ""]
    recs = {p: v.stage_sum_vs_full_bwd.to_json() for p, v in BenchResult.coerce(result).patterns.items()}
    if not all("itemised_ratio" in r for r in recs.values()):
        return out + [f"`{path}` has no `wrapper_extra` stage (recorded before it existed); the H200 formal "
                      "result times it every round.", ""]
    rows = [[p, f"{r['stage_sum_median_ms']:.3f}", f"{r['wrapper_extra_median_ms']:.3f}",
             f"{r['stage_sum_median_ms'] + r['wrapper_extra_median_ms']:.3f}", f"{r['full_bwd_median_ms']:.3f}",
             f"{100 * (r['itemised_ratio'] - 1):+.2f}%"] for p, r in recs.items()]
    return out + [f"From `{path}`: `wrapper_extra` times what `parallel_nsa_bwd` does beyond the staged calls — its "
                  "three `torch.empty` gradient buffers and `dq.sum(0)`, `dk.sum(0)` over the NV dim (target: stage "
                  "sum + wrapper extra within 1% of the wrapper).", "",
                  md_table(["pattern", "stage sum ms", "wrapper extra ms", "sum + extra ms", "full bwd ms",
                            "gap"], rows), ""]


def _throughput(result: dict[str, Any], path: str) -> list[str]:
    gpu = BenchResult.coerce(result).gpu_name
    peak = peak_tflops(gpu)
    rows = [[r["pattern"], TITLES.get(r["stage"], r["stage"]), f"{r['gflop']:,.0f}", f"{r['median_ms']:.3f}",
             f"{r['tflops']:.1f}", "n/a" if r["pct_peak"] is None else f"{r['pct_peak']:.1f}%"]
            for r in throughput_rows(result)]
    note = f"dense BF16 peak {peak[0]:g} TFLOP/s ({peak[1]})" if peak else f"no peak on file for {gpu}"
    return ["## Achieved throughput", "",
            f"From `{path}` on {gpu}: matmul FLOPs per stage from the edge count (derivation in docs/METHOD.md; "
            f"useful FLOPs with the true head dims, padding not counted) over the stage's median; {note}.", "",
            md_table(["pattern", "stage", "GFLOP", "median ms", "TFLOP/s", "% of peak"], rows), ""]
