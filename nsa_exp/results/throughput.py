"""Achieved throughput per stage: FLOPs from the edge count, TFLOP/s from the median, % of dense BF16 peak.

An *edge* is one (query, KV head, selected block) triple (:mod:`nsa_exp.routing.edges`). For each edge
the kernels of FLA 0a9b9f2 (``fla/ops/nsa/parallel.py``) do these matmuls over the ``G = HQ / H`` query
heads that share the KV head and the ``BS`` keys of the block (2 FLOPs per multiply-add):

- ``parallel_nsa_fwd_kernel`` (selection_fwd): ``S = q k^T`` [G,K]x[K,BS], ``O += P v`` [G,BS]x[BS,V]
  -> ``2 G BS (K + V)``;
- ``parallel_nsa_bwd_kernel_dq`` (dq_core): ``S = q k^T``, ``dP = dO v^T`` [G,V]x[V,BS],
  ``dQ += dS k`` [G,BS]x[BS,K] -> ``2 G BS (2K + V)``;
- ``parallel_nsa_bwd_kernel_dkv`` (dkv_core): ``S = k q^T``, ``dV += P^T dO``, ``dP = v dO^T``,
  ``dK += dS^T q`` -> ``2 G BS (2K + 2V)``;
- full_bwd (the wrapper) = dq_core + dkv_core (delta, CSR and the reductions do no matmul).

These are the useful FLOPs with the true head dims; the kernels pad ``K`` to ``BK = next_pow2(K)``
(192 -> 256 at the primary shape) and dK/dV's gathered query tiles to ``BQ``, so the tensor cores do
more work than counted here. The peak is the GPU's dense BF16 tensor-core rate (no sparsity) from the
vendor's datasheet (:data:`PEAK_BF16_TFLOPS`).

>>> from nsa_exp.routing.config import Shape
>>> tiny = Shape(B=1, T=256, HQ=16, H=1, K=64, V=64, S=4, block_size=32, dtype="float16")
>>> stage_flops("dq_core", tiny, edges=10)  # 10 * 2 * 16 * 32 * (2*64 + 64)
1966080
"""

from __future__ import annotations

from typing import Any

from ..routing.config import Shape

#: Dense BF16 tensor-core peak, TFLOP/s, by a substring of the GPU name, with the source.
PEAK_BF16_TFLOPS: dict[str, tuple[float, str]] = {
    "H100": (989.4, "NVIDIA H100 SXM5 datasheet: 1,979 TFLOPS BF16 with sparsity, half without"),
    "H200": (989.4, "NVIDIA H200 SXM datasheet: 1,979 TFLOPS BF16 with sparsity, half without (the H100's SMs)"),
}


def flops_per_edge(stage: str, shape: Shape) -> int | None:
    """Matmul FLOPs one edge costs in ``stage`` (None for a stage without matmuls); see the module doc."""
    G, BS, K, V = shape.group_size, shape.block_size, shape.K, shape.V
    per = {"selection_fwd": 2 * G * BS * (K + V), "dq_core": 2 * G * BS * (2 * K + V),
           "dkv_core": 2 * G * BS * (2 * K + 2 * V)}
    per["full_bwd"] = per["dq_core"] + per["dkv_core"]
    return per.get(stage)


def stage_flops(stage: str, shape: Shape, edges: int) -> int | None:
    """Total matmul FLOPs of one call of ``stage`` over ``edges`` edges (None without matmuls)."""
    per = flops_per_edge(stage, shape)
    return None if per is None else per * edges


def peak_tflops(gpu_name: str | None) -> tuple[float, str] | None:
    """``(peak, source)`` for a GPU name containing a key of :data:`PEAK_BF16_TFLOPS`, else None."""
    for key, value in PEAK_BF16_TFLOPS.items():
        if gpu_name and key in gpu_name:
            return value
    return None


def throughput_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per pattern x matmul stage of a bench result: FLOPs, median ms, achieved TFLOP/s, % of peak
    (None when the GPU is not in the peak table)."""
    shape = Shape(**result["shape"])
    gpu = (result["metadata"].get("gpu") or {}).get("name")
    peak = peak_tflops(gpu)
    rows = []
    for name, p in result["patterns"].items():
        for stage, s in p["stages"].items():
            flops = stage_flops(stage, shape, p["edges"])
            if flops is None:
                continue
            tflops = flops / (s["median_ms"] * 1e-3) / 1e12
            rows.append({"pattern": name, "stage": stage, "gflop": flops / 1e9, "median_ms": s["median_ms"],
                         "tflops": tflops, "pct_peak": None if peak is None else 100 * tflops / peak[0]})
    return rows
