"""One redundant step of Triton 3.6.0's interpreter skipped, in the test harness only (issue 30: CI time).

Under ``TRITON_INTERPRET=1`` a launch (``GridExecutor.__call__``) patches ``triton.language`` (every builtin of
``tl``, ``tl.core``, ``tl.tensor``, ``tl.math`` rebound to the interpreter's builder) for the whole grid and
restores it after the last program. A call of a device function inside a program
(``InterpretedFunction.__call__``, e.g. FLA's ``exp`` or ``safe_exp``) then patches the same module objects
again, every call, and never restores (triton/runtime/interpreter.py, ``InterpretedFunction.__call__`` and
``_patch_lang``): the launch's own restore undoes it. The rebinding is stateless (``TritonSemantic`` holds the
builder only, and the builder is the interpreter's one global), so the second patch changes nothing the
program sees; it only costs time (about a fifth of a profiled launcher test: 45,600 device-function calls,
40 s of 208 s).

:func:`skip_repatching_inside_a_launch` makes a device-function call skip that patch exactly when every module it
would patch has already been patched during the running launch (by the launch itself or by an earlier
device-function call in it: Triton's own ``tl.sum``/``tl.max``/``tl.zeros`` see ``tl.core`` as well, which the
launch does not patch, so the first of them in each launch still goes through Triton's code); any other call goes
through Triton's own code unchanged. The kernels, their grids, the interpreter's arithmetic and every FLA file are
untouched; tests/test_interpreter_patch.py pins that a launch gives bit-identical outputs with and without it and
that the patches really are skipped. Applied only to the pinned triton 3.6.0, whose code this reads.
"""

from __future__ import annotations

import inspect
from typing import Any

PINNED_TRITON = "3.6.0"


def _langs(fn: Any) -> frozenset[int]:
    """The ``triton.language`` module objects (``tl``, ``tl.core``) visible in ``fn``'s globals, by id: what
    Triton's ``_patch_lang(fn)`` patches."""
    import triton.language as tl  # noqa: PLC0415 - after the harness set TRITON_INTERPRET

    return frozenset(id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core))


def skip_repatching_inside_a_launch() -> bool:
    """Install the skip (idempotent); False (nothing installed) under another triton than the pinned one."""
    import triton  # noqa: PLC0415
    from triton.runtime import interpreter  # noqa: PLC0415

    if triton.__version__ != PINNED_TRITON:
        return False
    if getattr(interpreter, "_nsa_exp_skip_repatch", False):
        return True
    grid_call, device_call = interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.__call__
    patched: list[set[int]] = []  # per launch running now (innermost last): the modules patched during it so far
    langs: dict[Any, frozenset[int]] = {}

    def launch(self, *args, **kwargs):
        patched.append(set(_langs(self.fn)))
        try:
            return grid_call(self, *args, **kwargs)
        finally:
            patched.pop()

    def call(self, *args, **kwargs):
        own = langs.get(self.fn)
        if own is None:
            own = langs[self.fn] = _langs(self.fn)
        if not patched or not own or not own <= patched[-1]:
            if patched:
                patched[-1].update(own)
            return device_call(self, *args, **kwargs)
        fn = self.rewrite()
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # as Triton's own __call__ does
            raise interpreter.InterpreterError(repr(e)) from e

    interpreter.GridExecutor.__call__ = launch
    interpreter.InterpretedFunction.__call__ = call
    interpreter._nsa_exp_skip_repatch = True
    interpreter._nsa_exp_original_calls = (grid_call, device_call)
    return True


def restore_repatching() -> None:
    """Undo :func:`skip_repatching_inside_a_launch` (Triton's own two methods back)."""
    from triton.runtime import interpreter  # noqa: PLC0415

    if getattr(interpreter, "_nsa_exp_skip_repatch", False):
        interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.__call__ = \
            interpreter._nsa_exp_original_calls
        interpreter._nsa_exp_skip_repatch = False
