"""An opt-in on-disk memo of pure functions, shared by processes: :func:`memoised`.

**What.** ``@memoised`` keeps a function's result in the folder that the environment variable
``NSA_EXP_MEMO_DIR`` names, so that another process asking the same question reads the answer instead of
computing it again. Applied to the routing regenerations that ``validate`` repeats (a routing regenerated from
its pattern, shape and seed, with its edges, fan-in statistics and sha256; its per-CSR-row fan-in), to the
bootstrap CIs of raw observations (:func:`nsa_exp.analysis.bootstrap.percentile_ci`) and to the makespan model's
least-squares fit (:func:`nsa_exp.model.fit.fit_params`, keyed also by the BLAS thread settings it runs under): the
test suite runs ``report``, ``predict``, ``model-validate`` and ``validate`` in many child processes over the same
committed files.

**When on.** Only while ``NSA_EXP_MEMO_DIR`` is set and non-empty (read at each call). Unset, the wrapper calls the
function and touches no file: a user's ``validate`` recomputes everything, every time. ``tests/conftest.py`` sets it
to a fresh folder per test session, so every routing is still regenerated at least once per session.

**Key.** The sha256 of: the code's digest (:func:`code_digest`: the sha256 of every ``nsa_exp/**/*.py`` file's
bytes, by sorted path, and numpy's and scipy's versions; computed once per process), the function's module and
qualified name, and its arguments as JSON (str, int, float, bool, None and lists or tuples of them; tuples as
lists). A call whose arguments are not JSON is computed and not kept.

**Values.** A JSON value, kept only when it comes back from JSON exactly (equal, and of the same Python types
at every level: no tuple, numpy scalar or NaN), or a numpy array of a non-object dtype (``np.save``, read back
with ``np.load(allow_pickle=False)``: dtype, shape and values as computed). Anything else is returned and not kept.
Nothing is pickled. An entry is one file ``<key>`` under the folder: a line ``<sha256 of the body> json|npy``,
then the body.

**Why it is safe.** An entry answers only the exact question, asked of the exact code: any change to any source file
of the package, or another numpy, gives other keys. Entries are written atomically
(:func:`nsa_exp.io.store.write_bytes_atomic`), and a process that finds no entry computes it holding the entry's
lock (``flock`` on ``<key>.lock`` beside it): another process asking the same question meanwhile waits and reads
what the first wrote instead of computing it again (the test suite's workers and children validate the same
committed files at once); without a lock the processes would each write a whole file and the last would win; an
entry that cannot be read (truncated, corrupt, of another format) is computed again and rewritten, never an error
(its first line holds its body's sha256, so a truncated or altered body is not read). The folder is trusted like the
code: its sha256 detects damage, not tampering (anyone can compute a key), so a planted entry answers for the
function; point it only at a folder of your own.
A folder that cannot be made or written costs one ``warning:`` line on stderr per
process and the function is computed as if the memo were off.

>>> decode(encode({"edges": 3904, "p95": 974.4, "tile_shared": True}))
{'edges': 3904, 'p95': 974.4, 'tile_shared': True}
>>> decode(encode(np.arange(3, dtype=np.int64)))
array([0, 1, 2])
>>> encode({"heads": (1, 2)}) is None, encode({"mean": np.float64(1.5)}) is None  # would come back as another type
(True, True)
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

import numpy as np

from ..errors import UserError
from .reader import read_bounded
from .store import write_bytes_atomic

#: The environment variable naming the memo's folder; unset or empty: no memo.
MEMO_ENV = "NSA_EXP_MEMO_DIR"
PACKAGE = Path(__file__).resolve().parents[1]
#: the largest file read: an entry (a fan-in array of 2**27 rows; a larger file is not one and is recomputed) or a
#: source file of the package
MAX_ENTRY_BYTES = 2**30

P = ParamSpec("P")
T = TypeVar("T")

_warned: set[str] = set()


@functools.cache
def code_digest() -> str:
    """sha256 hex of every ``nsa_exp/**/*.py`` file (relative path and sha256 of its bytes, by sorted path) and
    numpy's and scipy's versions: what a memoised result depends on besides its arguments. Once per process."""
    h = hashlib.sha256()
    for rel in sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")):
        source = read_bounded(PACKAGE / rel, f"nsa_exp/{rel}", MAX_ENTRY_BYTES)
        h.update(f"{rel}\0{hashlib.sha256(source).hexdigest()}\n".encode())
    h.update(f"numpy {np.__version__} scipy {_version('scipy')}".encode())
    return h.hexdigest()


def _version(dist: str) -> str:
    """The installed version of ``dist`` as the import system finds it first ("absent" when it is not installed),
    without importing it."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def entry_key(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The sha256 hex naming the entry of ``name(*args, **kwargs)`` (module docstring, Key); None when an
    argument is not JSON."""
    try:
        question = json.dumps([code_digest(), name, args, sorted(kwargs.items())], allow_nan=False)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(question.encode()).hexdigest()


def _exact(a: Any, b: Any) -> bool:
    """``a == b`` with the same Python type at every level (``1 == 1.0 == True`` are three answers here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_exact(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_exact(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def encode(value: Any) -> bytes | None:
    """The entry holding ``value`` (module docstring, Values); None when it is not kept."""
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return None
        buf = io.BytesIO()
        np.save(buf, value, allow_pickle=False)
        kind, body = "npy", buf.getvalue()
    else:
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            return None
        if not _exact(json.loads(text), value):
            return None
        kind, body = "json", text.encode()
    return f"{hashlib.sha256(body).hexdigest()} {kind}\n".encode() + body


_MISSING = object()


def decode(entry: bytes) -> Any:
    """The value an entry holds; ``_MISSING`` when it is not a whole entry :func:`encode` wrote."""
    head, _, body = entry.partition(b"\n")
    digest, _, kind = head.decode("ascii", "replace").partition(" ")
    if digest != hashlib.sha256(body).hexdigest():
        return _MISSING
    try:
        if kind == "npy":
            return np.load(io.BytesIO(body), allow_pickle=False)
        if kind == "json":
            return json.loads(body)
    except (ValueError, EOFError, OSError):
        pass
    return _MISSING


def _read(path: Path) -> Any:
    """The value the entry at ``path`` holds (read through the bounded reader: a regular file, at most
    :data:`MAX_ENTRY_BYTES`); ``_MISSING`` when there is none or it is not a whole entry."""
    try:
        return decode(read_bounded(path, str(path), MAX_ENTRY_BYTES))
    except (UserError, OSError):
        return _MISSING


def _keep(folder: str, path: Path, value: Any) -> None:
    entry = encode(value)
    if entry is None:
        return
    try:
        if path.exists() and not path.is_file():  # a FIFO or device where an entry belongs: not ours to keep
            path.unlink()
        write_bytes_atomic(path, entry)
    except (UserError, OSError) as exc:
        if folder not in _warned:
            _warned.add(folder)
            print(f"warning: {MEMO_ENV}={folder}: {exc}; computing without the memo", file=sys.stderr)


#: the entry locks this process holds now (its threads share the set: a thread asking for an entry another
#: thread of it is computing computes it too, as without the lock)
_held: set[Path] = set()


@contextlib.contextmanager
def _computing(path: Path) -> Iterator[None]:
    """Hold the entry's lock (an exclusive ``flock`` on ``<key>.lock`` beside it) for the block, then remove the lock
    file: the entry is written by then, so a process that locks the removed file (it was waiting) or a new one
    finds the entry when it reads again. Without a lock (a folder not made yet or that cannot be written, a file
    system without locks) the block runs unlocked: at worst two processes compute one entry, as without the lock."""
    lock_path = path.with_name(path.name + ".lock")
    if lock_path in _held:  # asked again inside its own computation (a function memoised twice): a second flock on
        yield               # another descriptor of the same file would wait for this process forever
        return
    try:  # in the folder as it is (the first entry's write makes a missing folder): a lock makes no folder
        lock = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # a planted link: no lock
    except OSError:
        yield
        return
    _held.add(lock_path)
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        _held.discard(lock_path)
        with contextlib.suppress(OSError):
            lock_path.unlink()
        os.close(lock)  # closing the descriptor releases the lock


def memoised(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn``, its results kept in ``$NSA_EXP_MEMO_DIR`` when that is set (module docstring); ``fn`` itself
    otherwise. ``fn`` must be pure: its result a function of its arguments, the package's code and numpy's and
    scipy's versions alone (a result a BLAS thread count can change takes the thread settings as an argument, as
    :func:`nsa_exp.model.fit.fit_params` does: tests/checking/test_perturbed_numerics.py relies on it). Put an
    in-process cache (``functools.lru_cache``) in front: memory first, then disk."""
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        folder = os.environ.get(MEMO_ENV)
        key = entry_key(name, args, kwargs) if folder else None
        if folder is None or key is None:
            return fn(*args, **kwargs)
        path = Path(folder) / key
        found = _read(path)
        if found is not _MISSING:
            return cast(T, found)  # what fn returned for these arguments, read back
        with _computing(path):  # one process computes an entry; another asking meanwhile waits, then reads it
            found = _read(path)
            if found is not _MISSING:
                return cast(T, found)
            value = fn(*args, **kwargs)
            _keep(folder, path, value)
        return value

    return wrapper
