"""RESULTS.md sections of issue 14: H100 vs H200 (``compare``'s verdicts), the CUPTI agreement, the
itemised wrapper overhead and the achieved TFLOP/s — each rendered from the results that hold the data
(the H200 formal result once it is recorded; until then the H100 result, and a note for what it lacks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..routing.stages import STAGES
from .compare import compare_results
from .cupti import disagreement
from .report_ncu import md_table
from .throughput import peak_tflops, throughput_rows

TITLES = {s.name: s.title for s in STAGES}
DEFAULT_H200 = "results/raw/e1_h200.json"


def cross_gpu_section(h100_path: str, h100_repeat: str | None, h200_path: str | None) -> list[str]:
    """H100 vs H200 per pattern x stage with ``compare``'s verdicts (noise floor from the H100 repeat
    pair), or a note that the H200 formal result is not recorded yet."""
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
        f"`python -m nsa_exp compare {h100_path} {h200_path}" + (f" --noise-from {h100_path} {h100_repeat}`"
                                                                  if noise else "`") +
        f": A = {a['name']} on {a['gpu']}, B = {b['name']} on {b['gpu']}. Ratio = median(H200) / median(H100) "
        f"with a bootstrap 95% CI (rounds of each run resampled on their own). Rule: {doc['rule']}; "
        f"floor = {doc['noise_floor']['rule']}. The last column repeats the verdict in SM-cycle space (each "
        "observation times the SM clock NVML sampled in its round).", "",
        md_table(["pattern", "stage", "H100 ms", "H200 ms", "H200/H100 (95% CI)", "floor", "verdict",
                  "verdict (cycles)"], rows), "",
        "Verdicts: " + ", ".join(f"{v} {n}" for v, n in doc["counts"].items()) + ".", ""]


def instrument_sections(result: dict[str, Any], path: str) -> list[str]:
    """CUPTI agreement, wrapper overhead and achieved TFLOP/s of ``result`` (read from ``path``)."""
    return _cupti(result, path) + _wrapper(result, path) + _throughput(result, path)


def _cupti(result: dict[str, Any], path: str) -> list[str]:
    out = ["## CUDA events vs CUPTI kernel time", ""]
    block = result.get("cupti")
    if block is None:
        return out + [f"`{path}` was recorded before bench's CUPTI pass existed; the H200 formal result carries it.",
                      ""]
    rows = []
    for p, stages in block["median_kernel_ms"].items():
        for s, k in stages.items():
            e = result["patterns"][p]["stages"][s]["median_ms"]
            rows.append([p, TITLES.get(s, s), f"{e:.3f}", f"{k:.3f}", f"{100 * (e - k) / e:+.1f}%",
                         "no" if disagreement(s, e, k) else "yes"])
    return out + [f"From `{path}`: each stage's CUDA-event median (timed rounds) against the median of its kernels' "
                  f"own device time over {block['rounds']} profiled rounds (torch.profiler). Agreement rule: "
                  "docs/METHOD.md (5% or 20 µs for one-launch stages; CSR, wrapper extra and the full wrapper may "
                  "spend up to 15% + 50 µs on launch gaps and host work).", "",
                  md_table(["pattern", "stage", "events ms", "kernels ms", "gap", "agree"], rows), ""]


def _wrapper(result: dict[str, Any], path: str) -> list[str]:
    out = ["## The wrapper's extra work, itemised", ""]
    recs = {p: v["stage_sum_vs_full_bwd"] for p, v in result["patterns"].items()}
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
    gpu = (result["metadata"].get("gpu") or {}).get("name")
    peak = peak_tflops(gpu)
    rows = [[r["pattern"], TITLES.get(r["stage"], r["stage"]), f"{r['gflop']:,.0f}", f"{r['median_ms']:.3f}",
             f"{r['tflops']:.1f}", "n/a" if r["pct_peak"] is None else f"{r['pct_peak']:.1f}%"]
            for r in throughput_rows(result)]
    note = f"dense BF16 peak {peak[0]:g} TFLOP/s ({peak[1]})" if peak else f"no peak on file for {gpu}"
    return ["## Achieved throughput", "",
            f"From `{path}` on {gpu}: matmul FLOPs per stage from the edge count (derivation in docs/METHOD.md; "
            f"useful FLOPs with the true head dims, padding not counted) over the stage's median; {note}.", "",
            md_table(["pattern", "stage", "GFLOP", "median ms", "TFLOP/s", "% of peak"], rows), ""]
