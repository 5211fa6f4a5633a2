"""compare with a peer result (nsa_exp/analysis/peer_compare.py), on the committed H200 files: bench's full_bwd
pairs with the peer arm's FLA backward routing by routing, two peer results pair cell by cell, and what is not the
same experiment or cannot be compared is refused in one line."""

from __future__ import annotations

import json

import pytest

from nsa_exp.checking import compare
from nsa_exp.checking.validate import validate_path
from nsa_exp.errors import UserError
from tests.helpers import REPO

BENCH, PEERS = REPO / "results/raw/e1_h200.json", REPO / "results/peers/peers_h200.json"
FLA_ONLY, T8192 = REPO / "results/peers/peers_h200_fla_only.json", REPO / "results/peers/peers_h200_T8192.json"


def test_bench_full_bwd_pairs_with_the_peer_arms_fla_backward():
    doc = compare.build(BENCH, PEERS, resamples=2000)
    assert [(r["pattern"], r["stage"]) for r in doc["rows"]] == \
        [(p, "full_bwd") for p in ("local", "uniform", "sink-heavy", "zipf")]
    peers = json.loads(PEERS.read_text())
    for r in doc["rows"]:
        assert r["b_median"] == peers["cells"][f"{r['pattern']}|fla"]["stages"]["bwd"]["median_ms"]
    assert doc["peers"]["only_in_b"] == ["fla-topk", "tile-uniform", "tile-zipf"]


def test_two_peer_results_pair_every_cell_both_timed():
    doc = compare.build(FLA_ONLY, PEERS, resamples=2000)
    assert {r["stage"] for r in doc["rows"]} == {"fla:fwd", "fla:bwd", "fla:fwd_bwd"} and len(doc["rows"]) == 21
    assert any(s["what"] == "dense sdpa-dense:bwd" for s in doc["peers"]["not_compared"])


@pytest.mark.parametrize("b,kwargs,fragment", [
    (T8192, {}, "shape.T: A 32768 vs B 8192"),
    (PEERS, {"cycles": True}, "--cycles"),
    (PEERS, {"noise_from": [str(BENCH), str(REPO / "results/raw/e1_h200_repeat.json")]}, "--noise-from"),
])
def test_what_compare_refuses_with_a_peer_result(b, kwargs, fragment):
    with pytest.raises(UserError, match=fragment.replace("(", r"\(")):
        compare.build(FLA_ONLY if b is T8192 else BENCH, b, **kwargs)


def test_a_compare_of_a_peer_result_validates_and_a_forged_median_fails(tmp_path):
    doc = compare.build(BENCH, PEERS)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(doc))
    assert validate_path(good)["passed"]
    doc["rows"][2]["b_median"] *= 0.98
    doc["rows"][2]["ratio"] = doc["rows"][2]["b_median"] / doc["rows"][2]["a_median"]
    bad.write_text(json.dumps(doc))
    failed = {c["name"] for c in validate_path(bad)["checks"] if not c["passed"]}
    assert failed == {"compare_recompute"}
