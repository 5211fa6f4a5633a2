"""The seeded inputs drawn in the background during the gates are the very values drawn in the foreground, a
refused gate stops the draw at once, and a bench or the autotune matrix starts it only once the GPU gate has
passed (issue 30: the ``inputs`` phase overlapped with the gates). CPU only; no FLA."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from nsa_exp.core.config import Shape
from nsa_exp.errors import GateFailure
from nsa_exp.gpu import gates
from nsa_exp.gpu.engine import Arm, Run
from nsa_exp.gpu.inputs import Prefetch, random_inputs, to_device
from nsa_exp.io.config_files import config_from_dict
from tests.helpers import REPO

SHAPE = Shape(B=1, T=128, HQ=16, H=1, K=32, V=16, S=2, block_size=16, dtype="float16")


def test_the_background_draw_is_bit_identical_to_the_foreground_one():
    drawn = Prefetch(SHAPE, 7).result(SHAPE, 7)
    want = random_inputs(SHAPE, 7)
    assert list(drawn) == ["q", "k", "v", "do"] == list(want)
    assert all(torch.equal(drawn[n], want[n]) for n in want)
    assert drawn["q"].shape == (1, 128, 16, 32) and drawn["do"].shape == (1, 128, 16, 16)
    assert not torch.equal(random_inputs(SHAPE, 8)["q"], want["q"])  # the seed matters
    moved = to_device(drawn, torch.float16, "cpu")
    assert all(t.dtype == torch.float16 for t in moved.values())


def test_another_shape_or_seed_is_not_served_from_the_prefetch():
    prefetch = Prefetch(SHAPE, 7)
    assert prefetch.result(SHAPE, 8) is None and prefetch.result(Shape(**{**SHAPE.__dict__, "T": 64}), 7) is None


def test_a_cancelled_draw_stops_between_tensors_and_serves_nothing():
    stop = threading.Event()
    stop.set()
    assert random_inputs(SHAPE, 7, cancelled=stop) == {}
    prefetch = Prefetch(SHAPE, 7)
    prefetch.cancel()
    assert prefetch.result(SHAPE, 7) is None


class _Arm(Arm):
    prefetch_inputs = True


def test_the_engine_draws_after_the_gpu_gate_and_cancels_when_a_later_gate_refuses(monkeypatch):
    raw = json.loads((REPO / "configs" / "e1_h200.json").read_text())
    # a tiny shape: the draw the refusal cancels takes ms, not the primary shape's 5 s
    config = config_from_dict({**raw, "shape": {**raw["shape"], **SHAPE.__dict__}, "patterns": [{"name": "local"}]})
    monkeypatch.setattr(gates, "environment_gate", lambda: {})
    seen = []
    monkeypatch.setattr(gates, "gpu_gate", lambda required, allow: seen.append("gpu") or {"name": "fake"})

    def refuse():
        raise GateFailure("versions: refused")

    monkeypatch.setattr(gates, "versions_gate", refuse)
    run = Run(config, allow_gpu=False, device=object())
    with pytest.raises(GateFailure, match="versions: refused"):
        _Arm().gates(run)
    assert seen == ["gpu"] and run.prefetch is not None and run.prefetch.result(config.shape, 1) is None
    run = Run(config, allow_gpu=False, device=object())
    with pytest.raises(GateFailure):
        Arm().gates(run)  # an arm that does not read them draws none
    assert run.prefetch is None
