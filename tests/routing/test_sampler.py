"""The weighted sampler: exact successive sampling on every path, today's draws bit for bit, bounded cost."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import time
import tracemalloc

import numpy as np
import pytest

from nsa_exp.core.config import Shape
from nsa_exp.io.config_files import load_config
from nsa_exp.routing import sampler
from nsa_exp.routing.patterns import (
    Rows,
    generate_routing,
    pattern_rng,
    routing_violations,
)
from tests.helpers import FAMILIES, PRIMARY_CONFIG, REPO, generate

# sha256 of the int32 [B,T,H,S] bytes that routing.generate_routing (commit 92dd52b, before this sampler)
# produced at configs/e1_h100.json (T=32768, H=4, S=16, BS=64, routing seed 20260726): the committed
# results were measured on exactly these routings, and the validator regenerates them.
E1_SHA256 = {
    "uniform": "ae6829edaede1026685620b0da504872833e8f4662a1bb608d505eaf6a257a7d",
    "zipf": "2108bd39c47f3d251275a0aaa11297cc3ba7058fb61be3dc06427975108950ba",
}


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _post(out: np.ndarray, shape: Shape) -> np.ndarray:
    return (-np.sort(-out, axis=1)).reshape(shape.B, shape.T, shape.H, shape.S).astype(np.int32)


def test_e1_uniform_and_zipf_regenerate_bit_for_bit():
    cfg = load_config(PRIMARY_CONFIG)
    shape, seed = cfg.shape, cfg.seeds.routing
    rows = Rows.for_shape(shape)
    ones = np.ones(shape.num_blocks)
    uniform = _post(sampler.sample_distinct(pattern_rng(seed, "uniform"), rows.cur, rows.n, shape.S, ones), shape)
    zipf = generate(FAMILIES["zipf"], {"exponent": 1.0}, shape, seed)
    assert _sha(uniform) == E1_SHA256["uniform"]
    assert _sha(zipf) == E1_SHA256["zipf"]
    assert _sha(generate_routing(cfg.pattern("zipf"), shape, seed)) == E1_SHA256["zipf"]


def test_the_zipf_routing_is_the_file_the_committed_h200_run_timed():
    """An anchor outside this file: the H200 bench of a routing file (results/raw/e1_h200_file.json) recorded the
    sha256 of the .npy that `routing --save` wrote from the config; today's sampler writes those very bytes."""
    cfg = load_config(REPO / "configs" / "e1_h200.json")  # the config that run's routing file was saved from
    recorded = json.loads((REPO / "results" / "raw" / "e1_h200_file.json").read_text())
    buf = io.BytesIO()
    np.save(buf, generate_routing(cfg.pattern("zipf"), cfg.shape, cfg.seeds.routing))
    assert hashlib.sha256(buf.getvalue()).hexdigest() == recorded["routing_files"]["file:zipf"]["sha256"]


@pytest.mark.parametrize("s,S", [(0.0, 16), (1.0, 8), (1.0, 10), (0.75, 16)])
def test_every_path_of_the_sampler_gives_a_valid_routing_and_the_same_draws_for_a_seed(s, S):
    """Where the Gumbel-max fallback fires on a few rows (these shapes): each row holds n distinct causal blocks
    (routing_violations, the experiment's own rules), and a seed gives one array. Which blocks are drawn how often
    is the successive-sampling tests' job below (a brute-force reference, not a copy of the sampler)."""
    shape = Shape(B=2, T=2048, HQ=48, H=3, K=16, V=16, S=S, block_size=16, dtype="float16")
    rows = Rows.for_shape(shape)
    w = (np.arange(shape.num_blocks) + 1.0) ** -s
    new = sampler.sample_distinct(np.random.default_rng(9), rows.cur, rows.n, S, w)
    again = sampler.sample_distinct(np.random.default_rng(9), rows.cur, rows.n, S, w)
    assert np.array_equal(new, again)
    assert routing_violations(_post(new, shape), shape) == []
    assert np.array_equal((new >= 0).sum(axis=1), rows.n)


def _successive_probs(weights: np.ndarray, n: int, drawn: tuple[int, ...] = ()) -> dict[frozenset, float]:
    """Brute force: probability of each final set of n blocks under successive sampling, given ``drawn``."""
    probs: dict[frozenset, float] = {}
    free = [b for b in range(len(weights)) if b not in drawn]
    for order in itertools.permutations(free, n - len(drawn)):
        p, left = 1.0, set(free)
        for b in order:
            p *= weights[b] / sum(weights[x] for x in left)
            left.discard(b)
        key = frozenset(order) | frozenset(drawn)
        probs[key] = probs.get(key, 0.0) + p
    return probs


def _check_frequencies(sets: np.ndarray, probs: dict[frozenset, float]) -> None:
    N = sets.shape[0]
    counts: dict[frozenset, int] = {}
    for row in sets.tolist():
        key = frozenset(b for b in row if b >= 0)
        assert len(key) == len([b for b in row if b >= 0]), row  # distinct
        counts[key] = counts.get(key, 0) + 1
    assert set(counts) <= set(probs)
    for key, p in probs.items():
        sigma = np.sqrt(N * p * (1 - p)) + 1.0
        assert abs(counts.get(key, 0) - N * p) < 5 * sigma, (sorted(key), counts.get(key, 0), N * p)


@pytest.mark.parametrize("s", [0.0, 1.5, 4.0])
def test_rejection_path_is_successive_sampling(s):
    w = (np.arange(6) + 1.0) ** -s
    N = 20000
    cur, n = np.full(N, 5), np.full(N, 3)
    out = sampler.sample_distinct(np.random.default_rng(7), cur, n, 3, w)
    _check_frequencies(out, _successive_probs(w, 3))


@pytest.mark.parametrize("s,window", [(1.0, 2), (3.0, 3), (0.0, 1), (2.0, 10)])
def test_exponential_race_is_successive_sampling(s, window):
    """finish_rows with a small window exercises the lazy tail race; one block already drawn."""
    w = (np.arange(7) + 1.0) ** -s
    rcum = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
    N = 20000
    drawn = np.full((N, 1), 1)
    cur = np.full(N, 6)
    out = sampler.finish_rows(np.random.default_rng(3), drawn, cur, 2, w, rcum, window=window)
    _check_frequencies(np.concatenate([drawn, out], axis=1), _successive_probs(w, 3, drawn=(1,)))


def test_exact_draw_matches_the_conditional():
    w = (np.arange(6) + 1.0) ** -2.0
    rcum = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
    N = 30000
    x = sampler.exact_draw(np.random.default_rng(5), np.tile([0, 3], (N, 1)), np.full(N, 5), rcum)
    free = [1, 2, 4, 5]
    p = w[free] / w[free].sum()
    counts = np.array([(x == b).sum() for b in free])
    assert counts.sum() == N
    assert np.all(np.abs(counts - N * p) < 5 * np.sqrt(N * p * (1 - p)) + 1)


def test_steep_weights_take_the_fast_paths_within_budget():
    """zipf 8 (and the schema's maximum 64) at S=32: today's fallback built [rows, 32, width] masks here."""
    shape = Shape(B=1, T=16384, HQ=64, H=4, K=16, V=16, S=32, block_size=64, dtype="bfloat16")
    for s in (8.0, 64.0):
        tracemalloc.start()
        t0 = time.perf_counter()
        bi = generate(FAMILIES["zipf"], {"exponent": s}, shape, seed=1)
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert routing_violations(bi, shape) == []
        out_bytes = shape.B * shape.T * shape.H * shape.S * 8
        assert peak < 12 * out_bytes, (s, peak / 1e6)  # O(T*H*S), not O(T*H*S*M)
        assert seconds < 4.0, (s, seconds)
    # steep weights select (almost surely) the lowest causal blocks
    assert bi[0, -1, 0].tolist() == list(range(31, -1, -1))
