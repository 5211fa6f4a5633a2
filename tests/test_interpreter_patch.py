"""The harness's interpreter shortcut (tests/interpreter.py) changes no bit of what a kernel computes: the same
staged backward and official wrapper, run with Triton's own device-function calls and with the shortcut, give
identical tensors, and the shortcut really skips the second patch (it is not a no-op that the test could not
tell from Triton's own path)."""

from __future__ import annotations

import torch

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.routing.patterns import generate_routing

from .interpreter import restore_repatching, skip_repatching_inside_a_launch

#: small enough to run twice in seconds (every stage, every device function FLA calls: tl.sum, tl.max, exp, ...)
SHAPE = Shape(B=1, T=32, HQ=16, H=1, K=16, V=16, S=2, block_size=8, dtype="float16")


def _every_output(launcher) -> list[torch.Tensor]:
    bi = generate_routing(Pattern("sink-heavy", sinks=1), SHAPE, seed=5)
    staged = launcher.StagedBackward(launcher.make_problem(SHAPE, bi, launcher.make_inputs(SHAPE, 9, "cpu")))
    state = staged.run_staged()
    official = staged.full_bwd(state["o"], state["lse"])
    return [state["o"], state["lse"], state["delta"], *staged.gradients(), *official]


def test_a_launch_gives_identical_bits_with_and_without_the_shortcut(fla_interpreter, monkeypatch):
    from triton.runtime import interpreter  # noqa: PLC0415 - after the harness set TRITON_INTERPRET

    calls = {"patch": 0}
    real_patch = interpreter._patch_lang

    def counting(fn):
        calls["patch"] += 1
        return real_patch(fn)

    monkeypatch.setattr(interpreter, "_patch_lang", counting)
    restore_repatching()
    try:
        own = _every_output(fla_interpreter)
        own_patches = calls["patch"]
    finally:
        assert skip_repatching_inside_a_launch()
    calls["patch"] = 0
    fast = _every_output(fla_interpreter)
    assert calls["patch"] < own_patches / 2, (calls["patch"], own_patches)  # the shortcut skipped the repatching
    assert len(own) == len(fast)
    for a, b in zip(own, fast, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a.view(torch.uint8) if a.dtype.is_floating_point else a,
                           b.view(torch.uint8) if b.dtype.is_floating_point else b)


def test_another_triton_gets_no_shortcut(monkeypatch):
    import triton  # noqa: PLC0415

    monkeypatch.setattr(triton, "__version__", "3.7.0")
    from triton.runtime import interpreter  # noqa: PLC0415

    was = getattr(interpreter, "_nsa_exp_skip_repatch", False)
    restore_repatching()
    try:
        assert skip_repatching_inside_a_launch() is False
        assert not getattr(interpreter, "_nsa_exp_skip_repatch", False)
    finally:
        monkeypatch.undo()
        if was:
            assert skip_repatching_inside_a_launch()

