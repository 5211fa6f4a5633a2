"""RESULTS.md's Nsight Compute section: one row per profiled kernel (a multi-kernel stage such as
``csr`` or ``full_bwd`` names each kernel next to its pattern)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .markdown import md_table


def ncu_section(ncu: list[dict[str, Any]]) -> list[str]:
    if not ncu:
        return []
    rows = []
    for doc in ncu:
        # One row per kernel; a multi-kernel stage (csr, full_bwd) names each kernel next to its pattern.
        per_pattern = Counter(k["pattern"] for k in doc["kernels"])
        for k in doc["kernels"]:
            m = k["metrics"]
            sm = f"{m['sm_throughput_pct']:.1f} ({m['sm_throughput_min_pct']:.1f}–{m['sm_throughput_max_pct']:.1f})"
            stalls = ", ".join(f"{s['reason']} {s['cycles_per_issue']:.2f}" for s in k["top_stalls"][:3])
            label = (k["pattern"] or "?") + (f": {k['kernel']}" if per_pattern[k["pattern"]] > 1 else "")
            rows.append([doc["stage"], k.get("device") or "?", label, f"{m['duration_ns'] / 1e6:.2f}",
                         f"{m['achieved_occupancy_pct']:.1f} / {m['theoretical_occupancy_pct']:.1f}",
                         f"{m['waves_per_sm']:.2f}", sm, f"{m['dram_throughput_pct']:.1f}",
                         f"{m['l2_hit_rate_pct']:.1f}", stalls])
    return ["## Appendix: Nsight Compute", "",
            "Whole-kernel metrics (`--set full`, `--clock-control none`), each pattern's launch of the stage in one "
            "NVTX range, autotune configs replayed from the bench result; one profiled launch per pattern (no CI: "
            "compare the duration with the bench medians' CIs). SM throughput min/max are over SMs: a wide gap means "
            "some SMs stay busy while the rest idle. Durations are stored in ns (`duration_ns`) and shown in ms.", "",
            md_table(["stage", "GPU", "pattern", "duration ms", "occupancy achieved / theoretical %", "waves/SM",
                    "SM throughput % avg (min–max)", "DRAM %", "L2 hit %", "top stalls (cycles/issue)"], rows), "",
            "Sources: " + ", ".join(f"`{d['_path']}`" for d in ncu), ""]
