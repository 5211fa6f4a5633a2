"""The peer summary's ratios (nsa_exp/analysis/peers.py): paired when both cells were timed every round, unpaired
when the stop rule stopped timing one of them earlier (the H200 run at b793430 failed there: 72 against 20)."""

from __future__ import annotations

import numpy as np

from nsa_exp.analysis.compare import ratio_ci
from nsa_exp.analysis.peers import peer_summary


def _cells(n_local: int, n_skewed: int, n_dense: int) -> dict:
    rng = np.random.default_rng(5)

    def cell(routing, peer, n, ms):
        raw = list(ms * (1 + 0.01 * rng.standard_normal(n)))
        st = {"raw_ms": raw, "median_ms": float(np.median(raw))}
        return {"routing": routing, "peer": peer, "stages": {"bwd": st, "fwd_bwd": st}}
    return {"local|fla": cell("local", "fla", n_local, 40.0),
            "sink-heavy|fla": cell("sink-heavy", "fla", n_skewed, 90.0),
            "dense": cell(None, "sdpa-dense", n_dense, 110.0)}


ROUTINGS = {r: {"work": {"fla": 1, "block_mask": 1, "dense": 3, "edges": 1}} for r in ("local", "sink-heavy")}


def test_cells_stopped_at_different_rounds_get_an_unpaired_ratio_ci():
    cells = _cells(20, 72, 20)
    s = peer_summary(cells, ROUTINGS)["routings"]["sink-heavy"]["fla"]
    raw = {c: v["stages"]["bwd"]["raw_ms"] for c, v in cells.items()}
    assert s["skew_penalty"]["ci"] == list(ratio_ci(raw["local|fla"], raw["sink-heavy|fla"]))
    assert s["skew_penalty"]["ci"][0] < s["skew_penalty"]["ratio"] < s["skew_penalty"]["ci"][1]
    assert abs(s["skew_penalty"]["ratio"] - 2.25) < 0.05


def test_cells_timed_every_round_keep_the_paired_ci():
    cells = _cells(20, 20, 20)
    raw = {c: v["stages"]["bwd"]["raw_ms"] for c, v in cells.items()}
    s = peer_summary(cells, ROUTINGS)["routings"]["sink-heavy"]["fla"]
    assert s["vs_dense"]["ci"] != list(ratio_ci(raw["dense"], raw["sink-heavy|fla"]))  # paired, not unpaired
