"""Issue 14: FLOPs per stage from the edge count (counted by hand on a tiny case) and achieved TFLOP/s."""

from __future__ import annotations

import json

import pytest

from nsa_exp.analysis.throughput import peak_tflops, stage_flops, throughput_rows
from nsa_exp.core.config import Shape
from nsa_exp.core.stages import flops_per_edge
from tests.helpers import REPO

# G = 4 query heads per KV head, BS = 2 keys per block, K = 3, V = 5.
HAND = Shape(B=1, T=8, HQ=4, H=1, K=3, V=5, S=1, block_size=2, dtype="float16")


def test_flops_per_edge_count_each_matmul_of_the_kernels_by_hand():
    # dQ: S = q k^T [4,3]x[3,2] = 24 MACs; dP = dO v^T [4,5]x[5,2] = 40; dQ += dS k [4,2]x[2,3] = 24 -> 88 MACs
    assert flops_per_edge("dq_core", HAND) == 2 * 88
    # dK/dV: S 24, dV += P^T dO [2,4]x[4,5] = 40, dP 40, dK += dS^T q [2,4]x[4,3] = 24 -> 128 MACs
    assert flops_per_edge("dkv_core", HAND) == 2 * 128
    assert flops_per_edge("selection_fwd", HAND) == 2 * (24 + 40)
    assert flops_per_edge("full_bwd", HAND) == 2 * (88 + 128)
    assert flops_per_edge("csr", HAND) is None and stage_flops("delta_preprocess", HAND, 7) is None
    assert stage_flops("dq_core", HAND, edges=7) == 7 * 176


def test_achieved_tflops_of_the_h100_result_follow_from_edges_and_medians():
    result = json.loads((REPO / "results" / "raw" / "e1_h100.json").read_text())
    rows = {(r["pattern"], r["stage"]): r for r in throughput_rows(result)}
    assert {s for _, s in rows} == {"selection_fwd", "dq_core", "dkv_core", "full_bwd"}
    local = rows["local", "dkv_core"]
    flops = 2066432 * 2 * 16 * 64 * (2 * 192 + 2 * 128)
    assert local["tflops"] == pytest.approx(flops / (local["median_ms"] * 1e-3) / 1e12)
    assert local["pct_peak"] == pytest.approx(100 * local["tflops"] / 989.4)
    # The fan-in skew costs dK/dV throughput: sink-heavy runs at a quarter of local's rate.
    assert rows["sink-heavy", "dkv_core"]["tflops"] < 0.3 * local["tflops"]
    assert peak_tflops("NVIDIA H200")[0] == 989.4 and peak_tflops("Some GPU") is None
