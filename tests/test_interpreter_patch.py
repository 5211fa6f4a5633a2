"""The harness's interpreter shortcuts (tests/interpreter.py) change no bit of what a kernel computes: the same
staged backward and official wrapper, run with Triton's own device-function calls and with the shortcut, give
identical tensors, and the shortcut really skips the second patch (it is not a no-op that the test could not
tell from Triton's own path); a replayed launch gives the real launch's bits without running it, and a launch
on other bytes (an output's prior contents included) runs."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.routing.patterns import generate_routing

from .helpers import REPO, harness_env
from .interpreter import REPLAY, restore_repatching, skip_repatching_inside_a_launch

#: small enough to run twice in seconds (every stage, every device function FLA calls: tl.sum, tl.max, exp, ...)
SHAPE = Shape(B=1, T=32, HQ=16, H=1, K=16, V=16, S=2, block_size=8, dtype="float16")


def _every_output(launcher) -> list[torch.Tensor]:
    bi = generate_routing(Pattern("sink-heavy", sinks=1), SHAPE, seed=5)
    staged = launcher.StagedBackward(launcher.make_problem(SHAPE, bi, launcher.make_inputs(SHAPE, 9, "cpu")))
    state = staged.run_staged()
    official = staged.full_bwd(state["o"], state["lse"])
    return [state["o"], state["lse"], state["delta"], *staged.gradients(), *official]


def _bits(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each tensor as what it holds bit for bit (floating point viewed as bytes: NaN == NaN, -0.0 != 0.0)."""
    return [t.view(torch.uint8) if t.dtype.is_floating_point else t for t in tensors]


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
    with REPLAY.state(enabled=False):  # every launch through the interpreter, as the first pass ran them
        fast = _every_output(fla_interpreter)
    assert calls["patch"] < own_patches / 2, (calls["patch"], own_patches)  # the shortcut skipped the repatching
    assert len(own) == len(fast)
    for a, b in zip(own, fast, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
    for a, b in zip(_bits(own), _bits(fast), strict=True):
        assert torch.equal(a, b)


def test_a_tuple_type_shows_tritons_own_name_with_and_without_the_shortcut(fla_interpreter):
    """The shortcut builds a tuple type's name when read: the same string Triton's constructor stores, from the same
    members and fields (nested tuples, constexprs, block types, named fields), and nothing stored before it is read."""
    import triton.language as tl  # noqa: PLC0415 - after the harness set TRITON_INTERPRET
    from triton.language import core  # noqa: PLC0415

    def types() -> list:
        inner = core._type_for_tuple_values([1, 2.5, tl.int8, tl.tensor(None, core.block_type(tl.float16, [4, 8]))])
        return [inner, core.tuple_type([inner, core.constexpr_type(16), tl.float32], ["a", "b", "c"]),
                core.tuple(tl.tuple([tl.constexpr(3), tl.constexpr(5)]).values).type]

    fast = types()
    assert all("name" not in vars(t) for t in fast)  # not built at construction
    restore_repatching()
    try:
        own = types()
        assert all("name" in vars(t) for t in own)  # Triton's constructor stores it
        assert [str(t) for t in fast] == [str(t) for t in own]  # one made under the shortcut still names itself
    finally:
        assert skip_repatching_inside_a_launch()
    assert [t.name for t in fast] == [t.name for t in own] and [str(t) for t in fast] == [str(t) for t in own]
    assert own[1].name.startswith("[a:[:constexpr_type[1],") and "c:fp32" in own[1].name
    fast[0].name = "assigned"  # as an attribute: stored, read back
    assert str(fast[0]) == "assigned" and vars(fast[0])["name"] == "assigned"


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


def test_a_replayed_launch_gives_the_bits_of_a_real_one_and_runs_no_kernel(fla_interpreter, monkeypatch):
    """Every stage and the official wrapper: run for real (replay off), then twice with the replay on: the first pass
    runs each distinct launch (the tiny problem repeats none but FLA's own repeated calls), the second runs none,
    and both give the real run's bits."""
    from triton.runtime import interpreter  # noqa: PLC0415 - after the harness set TRITON_INTERPRET

    with REPLAY.state(enabled=False):
        real = _every_output(fla_interpreter)
    with REPLAY.state(enabled=True) as replay:
        first = _every_output(fla_interpreter)
        ran = replay.misses
        assert ran > 5, ran  # every stage's kernels, each once
        programs = {"n": 0}
        builder = interpreter.interpreter_builder
        real_index = builder.set_grid_idx

        def counting(*idx):
            programs["n"] += 1
            return real_index(*idx)

        monkeypatch.setattr(builder, "set_grid_idx", counting)  # the interpreter calls it once per program it runs
        second = _every_output(fla_interpreter)
        assert programs["n"] == 0, programs  # not one program of any kernel ran
        assert replay.misses == ran and replay.hits >= ran  # nothing new ran: every launch of the pass replayed
    for a, b, c in zip(_bits(real), _bits(first), _bits(second), strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_a_launch_on_other_bytes_or_into_another_output_runs_the_kernel(fla_interpreter):
    """The key holds every storage's bytes before the launch, outputs included: a kernel that accumulates into its
    output (``out += x``) is replayed only onto the same prior contents, and each result is the kernel's own."""
    import triton  # noqa: PLC0415
    import triton.language as tl  # noqa: PLC0415

    @triton.jit
    def accumulate(out_ptr, x_ptr, n: tl.constexpr):
        i = tl.arange(0, n)
        tl.store(out_ptr + i, tl.load(out_ptr + i) + tl.load(x_ptr + i))

    x = torch.arange(8, dtype=torch.float32)
    with REPLAY.state(enabled=True) as replay:
        outs = []
        for start in (1.0, 1.0, 2.0):
            out = torch.full((8,), start)
            accumulate[(1,)](out, x, 8)
            outs.append(out)
        y = x + 1
        again = torch.full((8,), 1.0)
        accumulate[(1,)](again, y, 8)
        assert (replay.misses, replay.hits) == (3, 1)
    assert torch.equal(outs[0], x + 1) and torch.equal(outs[1], x + 1) and torch.equal(outs[2], x + 2)
    assert torch.equal(again, y + 1)


def test_a_child_started_with_the_harness_env_has_the_shortcuts_and_no_other_child_does():
    """tests/child_site: a child the suite starts with :func:`harness_env` (the release arm's, through its parent's
    ``sys.path``) replays and skips re-patching; one without it, or without the interpreter, runs Triton as it is."""

    probe = ("import sys, tests.interpreter as i, triton.runtime.interpreter as t; "
             "print(i.REPLAY.enabled, getattr(t, '_nsa_exp_skip_repatch', False), 'sitecustomize' in sys.modules)")
    base = {k: v for k, v in os.environ.items() if k not in ("NSA_EXP_TEST_HARNESS", "PYTHONPATH")}

    def run(env: dict[str, str]) -> list[str]:
        return subprocess.run([sys.executable, "-c", probe], env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=120, check=True).stdout.split()

    assert run({**base, **harness_env(), "TRITON_INTERPRET": "1"}) == ["True", "True", "True"]
    without = {**base, **harness_env(), "TRITON_INTERPRET": "1"}
    without.pop("NSA_EXP_TEST_HARNESS")
    assert run(without)[:2] == ["False", "False"]
    assert run({**{k: v for k, v in base.items() if k != "TRITON_INTERPRET"}, **harness_env()})[:2] == ["False",
                                                                                                   "False"]
