"""Achieved throughput per stage: FLOPs from the edge count, TFLOP/s from the median, % of dense BF16 peak.

FLOPs per edge come from the Stage table (:func:`nsa_exp.core.stages.flops_per_edge`, which derives them
matmul by matmul from FLA 0a9b9f2's kernels): the useful FLOPs with the true head dims, padding not counted.
The peak is the GPU's dense BF16 tensor-core rate (no sparsity) from the
vendor's datasheet (the GPU table, :data:`nsa_exp.core.gpus.GPUS`).

>>> from nsa_exp.core.config import Shape
>>> tiny = Shape(B=1, T=256, HQ=16, H=1, K=64, V=64, S=4, block_size=32, dtype="float16")
>>> stage_flops("dq_core", tiny, edges=10)  # 10 * 2 * 16 * 32 * (2*64 + 64)
1966080
"""

from __future__ import annotations

from typing import Any

from ..core.config import Shape
from ..core.gpus import gpu_spec
from ..core.records import BenchLike, BenchResult
from ..core.stages import flops_per_edge


def stage_flops(stage: str, shape: Shape, edges: int) -> int | None:
    """Total matmul FLOPs of one call of ``stage`` over ``edges`` edges (None without matmuls)."""
    per = flops_per_edge(stage, shape)
    return None if per is None else per * edges


def peak_tflops(gpu_name: str | None) -> tuple[float, str] | None:
    """``(peak, source)`` of the GPU table's row for ``gpu_name`` (dense BF16 TFLOP/s), else None."""
    spec = gpu_spec(gpu_name)
    if spec is None or spec.peak_bf16_tflops is None:
        return None
    return spec.peak_bf16_tflops, (spec.peak_source
                                   or f"{spec.source}: dense BF16, half the datasheet's with-sparsity figure")


def throughput_rows(result: BenchLike) -> list[dict[str, Any]]:
    """Per pattern x matmul stage of a bench result: FLOPs, median ms, achieved TFLOP/s, % of peak
    (None when the GPU is not in the peak table)."""
    run = BenchResult.coerce(result)
    shape = Shape.from_dict(run.shape)
    peak = peak_tflops(run.gpu_name)
    rows = []
    for name, p in run.patterns.items():
        for stage, s in p.stages.items():
            flops = stage_flops(stage, shape, p.edges)
            if flops is None:
                continue
            tflops = flops / (s.median_ms * 1e-3) / 1e12
            rows.append({"pattern": name, "stage": stage, "gflop": flops / 1e9, "median_ms": s.median_ms,
                         "tflops": tflops, "pct_peak": None if peak is None else 100 * tflops / peak[0]})
    return rows
