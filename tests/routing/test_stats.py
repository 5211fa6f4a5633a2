"""Fan-in and CSR statistics agree with brute-force references."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.routing.fanin import csr_rows, fanin_summary, gini
from nsa_exp.routing.patterns import generate_routing


def brute_force_rows(bi: np.ndarray, block_size: int) -> dict[tuple[int, int, int], list[int]]:
    B, T, H, S = bi.shape
    M = T // block_size
    rows = {(b, h, m): [] for b in range(B) for h in range(H) for m in range(M)}
    for b in range(B):
        for t in range(T):
            for h in range(H):
                for s in range(S):
                    blk = int(bi[b, t, h, s])
                    if 0 <= blk < M and blk * block_size <= t:
                        rows[(b, h, blk)].append(t)
    return rows


@settings(max_examples=25, deadline=None)
@given(pattern=st.sampled_from([Pattern("local"), Pattern("uniform"), Pattern("sink-heavy", sinks=2),
                                Pattern("zipf", exponent=1.0)]),
       seed=st.integers(0, 1000), H=st.integers(1, 2), B=st.integers(1, 2))
def test_csr_rows_match_brute_force(pattern, seed, H, B):
    shape = Shape(B=B, T=256, HQ=16, H=H, K=16, V=16, S=3, block_size=16, dtype="float16")
    bi = generate_routing(pattern, shape, seed)
    rows = csr_rows(bi, shape.block_size)
    ref = brute_force_rows(bi, shape.block_size)
    keys = sorted(ref, key=lambda k: (k[0] * H + k[1]) * (shape.T // 16) + k[2])  # FLA's row order
    assert rows.fanin.tolist() == [len(ref[k]) for k in keys]
    nonempty = [sorted(ref[k]) for k in keys if ref[k]]
    assert rows.span.tolist() == [q[-1] - q[0] for q in nonempty]
    assert rows.gaps.tolist() == [g for q in nonempty for g in np.diff(q).tolist()]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=2, max_size=60))
def test_gini_equals_mean_absolute_difference_definition(values):
    x = np.array(values, dtype=float)
    if x.sum() == 0:
        assert gini(x) == 0.0
        return
    mad = np.abs(x[:, None] - x[None, :]).sum() / (2 * len(x) ** 2 * x.mean())
    assert abs(gini(x) - mad) < 1e-12


def test_fanin_summary_against_numpy():
    f = np.array([0, 1, 1, 2, 10, 3])
    s = fanin_summary(f)
    assert s["mean"] == f.mean() and s["max"] == 10 and s["zero_rows"] == 1 and s["rows"] == 6
    assert abs(s["cv"] - f.std(ddof=1) / f.mean()) < 1e-12
    assert abs(s["p99"] - np.percentile(f, 99)) < 1e-12
