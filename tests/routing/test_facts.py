"""One draw per routing for the routing checks and the model (nsa_exp/routing/facts.py): what ``regenerate``
returns equals the formulas computed from a fresh draw, and the checks' statistics and the model's fan-in of one
routing draw it once."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nsa_exp.checking.routing_checks import _routing_stats
from nsa_exp.core.config import Pattern, Shape
from nsa_exp.model.points import _fanin, _key
from nsa_exp.routing import facts, patterns
from nsa_exp.routing.edges import effective_edges
from nsa_exp.routing.fanin import csr_rows, routing_statistics, row_fanin
from nsa_exp.routing.packing import generate_packed_routing
from nsa_exp.routing.patterns import generate_routing, routing_sha256

SHAPE = Shape(B=2, T=640, HQ=16, H=2, K=16, V=16, S=4, block_size=32, dtype="float16")
ZIPF = Pattern("zipf", exponent=1.2)
CU = (0, 192, 640)


@pytest.fixture
def draws(monkeypatch):
    """The zipf generator counting its calls; no facts kept yet, the disk memo off."""
    calls: list[int] = []
    real = patterns.GENERATORS["zipf"]
    monkeypatch.setitem(patterns.GENERATORS, "zipf", lambda *a: calls.append(1) or real(*a))
    monkeypatch.delenv("NSA_EXP_MEMO_DIR", raising=False)
    facts._regenerate.cache_clear()
    facts._draw.cache_clear()  # the last draws kept in front of the disk memo
    yield calls
    facts._regenerate.cache_clear()
    facts._draw.cache_clear()


def test_the_facts_equal_the_formulas_of_a_fresh_draw(draws):
    got = facts.regenerate(ZIPF, SHAPE, seed=5)
    bi = generate_routing(ZIPF, SHAPE, 5)
    assert got.stats == {"edges": effective_edges(bi, 32), **routing_statistics(bi, 32), "routing_sha256":
                         routing_sha256(bi)}
    assert got.row_fanin.dtype == np.int64 and np.array_equal(got.row_fanin, row_fanin(bi, 32))
    assert not got.row_fanin.flags.writeable  # shared by every caller: read-only
    packed = facts.regenerate(ZIPF, Shape(**{**SHAPE.to_dict(), "B": 1}), seed=5, cu=CU)
    pbi = generate_packed_routing(ZIPF, Shape(**{**SHAPE.to_dict(), "B": 1}), 5, np.asarray(CU, dtype=np.int32))
    assert packed.stats["routing_sha256"] == routing_sha256(pbi)
    assert np.array_equal(packed.row_fanin, csr_rows(pbi, 32, np.asarray(CU)).fanin)


def test_the_checks_and_the_model_draw_one_routing_once(draws):
    stats = _routing_stats.__wrapped__(json.dumps(ZIPF.to_dict(), sort_keys=True),
                                       json.dumps(SHAPE.to_dict(), sort_keys=True), 7)
    fanin = _fanin.__wrapped__(*_key(ZIPF.to_dict(), SHAPE.to_dict()), SHAPE.T, 7)
    assert len(draws) == 1
    assert int(fanin.sum()) == stats["edges"] and fanin.flags.writeable  # the model gets its own copy
    _fanin.__wrapped__(*_key(ZIPF.to_dict(), SHAPE.to_dict()), SHAPE.T, 8)  # another seed: another draw
    assert len(draws) == 2


def test_a_gpu_computed_routing_is_kept_under_the_visible_gpu_model(monkeypatch):
    """fla-topk's draw differs between GPU models (routing_checks.pattern_stats), so its facts are asked under the
    visible GPU's name, in the process and on disk: a memo folder shared by an H100 and an H200 host keeps two
    answers. A routing drawn on the CPU is one answer everywhere."""
    asked: list[tuple[str, str | None]] = []
    monkeypatch.setattr(facts, "_regenerate", lambda pattern_json, *rest: asked.append(
        (json.loads(pattern_json)["name"], rest[-1])))
    for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        monkeypatch.setattr(facts, "visible_gpu_name", lambda gpu=gpu: gpu)
        facts.regenerate(Pattern("fla-topk"), SHAPE, seed=0)
        facts.regenerate(ZIPF, SHAPE, seed=0)
    assert asked == [("fla-topk", "NVIDIA H100 80GB HBM3"), ("zipf", None), ("fla-topk", "NVIDIA H200"),
                     ("zipf", None)]
