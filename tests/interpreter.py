"""Three shortcuts through Triton 3.6.0's interpreter, in the test harness only (issue 30: CI time): one redundant
step skipped in every launch, a tuple type's display name built when asked, and a launch already run on
byte-identical arguments replayed (:class:`LaunchReplay`).

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

Every value the interpreter makes (a tensor's shape, a block type's shape, each ``tl.tuple``) builds a
``tl.core.tuple_type``, whose constructor formats a display name from every member type (``'[:constexpr_type[16],
...]'``), a string read only by ``str()`` (error messages): about a tenth of a launch's time (a profiled launcher
test: the constructor, its list and the members' ``__repr__``, 9-12 % of the samples; FLA's preprocess kernel at
T=128, HQ=16: 2.44 -> 2.20 CPU-s, six interleaved pairs). :func:`skip_repatching_inside_a_launch` installs the same
constructor without it and the same name as a property, built from the same fields when read (a name stored on
the instance, by Triton's constructor or an assignment, is read as it is).

A bench repeats each stage on the same inputs round after round, and the tests run the same tiny problems in many
arms: :class:`LaunchReplay` runs each distinct launch through the interpreter once per process and gives every
later launch with the same kernel, grid, scalars and argument bytes the bytes the first one wrote (a launch's
effect in the interpreter is a function of exactly those). Every distinct launch still runs FLA's kernel; a test
that must run a launch twice (the shortcut's own test) switches the replay off (:meth:`LaunchReplay.state`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
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
            return REPLAY(grid_call, self, args, kwargs)
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
    interpreter._nsa_exp_original_calls = (grid_call, device_call, _name_tuple_types_when_asked())
    return True


def _tuple_type_name(self: Any) -> str:
    """A ``tuple_type``'s name: the one stored on it (by Triton's own constructor, or assigned), else Triton 3.6.0's
    formula (triton/language/core.py, ``tuple_type.__init__``) from its members and fields as they are now."""
    stored = self.__dict__.get("name")
    if stored is not None:
        return stored
    return "[" + ",".join([f"{k}:{v}" for k, v in zip(self.fields, self.types, strict=False)]) + "]"


def _store_tuple_type_name(self: Any, name: str) -> None:
    self.__dict__["name"] = name


def _tuple_type_init(self: Any, types: Any, fields: Any = None) -> None:
    """Triton 3.6.0's ``tuple_type.__init__`` but for its name (:func:`_tuple_type_name`)."""
    self.types = types
    self.fields = fields or [""] * len(types)


def _name_tuple_types_when_asked() -> Any:
    """Install :func:`_tuple_type_init` and the ``name`` property on ``tl.core.tuple_type``; return Triton's own
    constructor (for :func:`restore_repatching`). The property stays once installed: it reads a name stored on the
    instance first and stores an assigned one, so Triton's own constructor, put back, works through it unchanged, and
    a tuple type made while the shortcut was on still has its name after."""
    from triton.language import core  # noqa: PLC0415

    own = core.tuple_type.__init__
    core.tuple_type.__init__ = _tuple_type_init
    core.tuple_type.name = property(_tuple_type_name, _store_tuple_type_name)
    return own


def restore_repatching() -> None:
    """Undo :func:`skip_repatching_inside_a_launch` (Triton's own three methods back)."""
    from triton.language import core  # noqa: PLC0415
    from triton.runtime import interpreter  # noqa: PLC0415

    if getattr(interpreter, "_nsa_exp_skip_repatch", False):
        interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.__call__, core.tuple_type.__init__ = \
            interpreter._nsa_exp_original_calls  # the name property stays (:func:`_name_tuple_types_when_asked`)
        interpreter._nsa_exp_skip_repatch = False


# --- Replaying a launch the interpreter has already run on the same bytes -------------------------------------------

#: How many launches the replay keeps (least recently used out first): a bench of the tiny shape makes a few hundred.
REPLAY_ENTRIES = 4096


class _Unkeyable(Exception):
    """An argument the replay cannot key exactly (a tensor descriptor, an object of an unknown type): run it."""


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value).__name__, value)
    import torch  # noqa: PLC0415

    if isinstance(value, torch.dtype):
        return ("dtype", str(value))
    import triton.language as tl  # noqa: PLC0415

    if isinstance(value, tl.dtype):
        return ("tl.dtype", str(value))
    if isinstance(value, tl.constexpr):
        return ("constexpr", _scalar(value.value))
    raise _Unkeyable(type(value).__name__)


def _storage_bytes(storage: Any) -> Any:
    """A storage as a flat uint8 tensor sharing its memory."""
    import torch  # noqa: PLC0415

    return torch.empty(0, dtype=torch.uint8).set_(storage)


class LaunchReplay:
    """A launch the interpreter ran before, on byte-identical arguments, replayed from its recorded effect.

    The key of a launch is everything its result can depend on: the kernel (its code object), the grid it resolves
    to, every scalar and constexpr, and for each tensor argument its dtype, shape, strides, offset, which storage it
    lies in and the full bytes of every storage involved before the launch (outputs included, so a kernel that
    accumulates into its output keys on what it found there). The recorded effect is every one of those storages'
    bytes after the launch: exactly what ``GridExecutor`` copies back to the caller's tensors. A replay writes
    those bytes, the same bits the kernel wrote (the interpreter runs programs one after another, so a kernel's
    result is a function of its arguments; tests/test_interpreter_patch.py pins a replay against a real run).
    Needs uninitialised memory filled (``torch.utils.deterministic.fill_uninitialized_memory``): an output from
    ``torch.empty`` would otherwise carry whatever the allocator last held, and no two launches would match."""

    def __init__(self, entries: int = REPLAY_ENTRIES):
        from collections import OrderedDict  # noqa: PLC0415

        self.entries = entries
        self.memo: OrderedDict[Any, list[Any]] = OrderedDict()  # key -> each storage's bytes after (uint8 tensors)
        self.hits = self.misses = 0
        self.enabled = False

    @contextlib.contextmanager
    def state(self, enabled: bool) -> Iterator[LaunchReplay]:
        """Within the block: on or off as asked, with an empty memo and counters of its own (the session's are
        back afterwards), so a test sees only its own launches."""
        saved = self.enabled, self.memo, self.hits, self.misses
        self.enabled, self.memo, self.hits, self.misses = enabled, type(self.memo)(), 0, 0
        try:
            yield self
        finally:
            self.enabled, self.memo, self.hits, self.misses = saved

    def key(self, executor: Any, args: tuple, kwargs: dict) -> tuple[Any, list[Any]]:
        """The launch's key and its distinct storages (first seen first); raises :class:`_Unkeyable`."""
        import hashlib  # noqa: PLC0415

        from triton.runtime import interpreter  # noqa: PLC0415

        storages: dict[int, int] = {}  # storage data_ptr -> index
        order: list[Any] = []

        def describe(value: Any) -> Any:
            if isinstance(value, tuple):
                return ("tuple", tuple(describe(v) for v in value))
            if hasattr(value, "data_ptr"):
                tensor = interpreter._unwrap_tensor(value)
                storage = tensor.untyped_storage()
                index = storages.setdefault(storage.data_ptr(), len(storages))
                if index == len(order):
                    order.append(storage)
                return ("tensor", str(value.dtype), tuple(tensor.shape), tuple(tensor.stride()),
                        tensor.storage_offset(), index)
            return _scalar(value)

        code = executor.fn.__code__
        names = inspect.getfullargspec(executor.fn).args
        kwargs = {k: v for k, v in kwargs.items() if k in names}
        described = (tuple(describe(a) for a in args), tuple(sorted((k, describe(v)) for k, v in kwargs.items())))
        grid = executor.grid
        if callable(grid):
            grid = grid(inspect.getcallargs(executor.fn, *args, **kwargs))
        digests = tuple(hashlib.blake2b(_storage_bytes(s).numpy(), digest_size=20).digest() for s in order)
        return (code.co_filename, code.co_firstlineno, code.co_name, tuple(grid), described, digests), order

    def __call__(self, run: Any, executor: Any, args: tuple, kwargs: dict) -> None:
        if not self.enabled:
            return run(executor, *args, **kwargs)
        try:
            key, storages = self.key(executor, args, kwargs)
        except _Unkeyable:
            return run(executor, *args, **kwargs)
        after = self.memo.get(key)
        if after is not None:
            self.memo.move_to_end(key)
            self.hits += 1
            for storage, saved in zip(storages, after, strict=True):
                _storage_bytes(storage).copy_(saved)
            return None
        self.misses += 1
        result = run(executor, *args, **kwargs)
        self.memo[key] = [_storage_bytes(s).clone() for s in storages]
        if len(self.memo) > self.entries:
            self.memo.popitem(last=False)
        return result


#: The session's replay (installed by :func:`replay_identical_launches`).
REPLAY = LaunchReplay()


def replay_identical_launches() -> None:
    """Switch :data:`REPLAY` on (it sits in :func:`skip_repatching_inside_a_launch`'s launch) and fill uninitialised
    memory so that launches can match (``torch.use_deterministic_algorithms``, warnings only)."""
    import torch  # noqa: PLC0415

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    REPLAY.enabled = True
