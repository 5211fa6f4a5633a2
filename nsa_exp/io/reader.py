"""The one reader of user files: regular files only, their size bounded before a byte is read.

Every loader of a file a user names (configs, results and other documents, summary and sweep CSVs,
routing files, calibrations, ncu CSVs) opens it here, so that:

- a FIFO, a character device (``/dev/zero``), a socket or a folder is refused in one line, without
  blocking and without reading (the path is ``stat``-ed first and opened ``O_NONBLOCK``, so a FIFO
  swapped in between cannot hang it either; the opened file is ``fstat``-ed again);
- a file larger than the loader's ``limit`` is refused before reading (``st_size``), and the read
  itself stops at ``limit + 1`` bytes (a file that grows while read is refused too);
- a path the OS cannot look up (too long, a loop of links, not a folder) is one line, the path shown
  shortened (:func:`show_path`).

Every refusal is one :class:`nsa_exp.errors.UserError` line starting with the loader's ``label``.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "a.json"
>>> _ = p.write_bytes(b"{}")
>>> read_bounded(p, "config", 10)
b'{}'
>>> try:
...     read_bounded("/dev/zero", "config /dev/zero", 10)
... except Exception as exc:
...     print(exc)
config /dev/zero: a character device, not a regular file; give a file
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ..errors import UserError

CHUNK = 1 << 20  #: bytes per further read when a file's size changes while it is read

#: A path longer than this is shown shortened in messages (the OS refuses names > 255 bytes anyway).
SHOWN_PATH_CHARS = 120

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def printable(text: str) -> str:
    """``text`` for a one-line message: as given, or escaped as Python would (``\\n``, ``\\x1b``) when it holds a
    character that is not printable (a newline split the error line in two, an ESC reached the terminal raw: an
    attacker, 2026-12-07).

    >>> printable("configs/e1.json"), printable("a\\nb")
    ('configs/e1.json', 'a\\\\nb')
    """
    return text if text.isprintable() else repr(text)[1:-1]


def one_line(text: str, limit: int) -> str:
    """``text`` for a one-line message (:func:`printable`), or its first characters and its length when it is longer
    than ``limit`` characters.

    >>> one_line("a" * 5000, 120)[-30:]
    'aaaaaaaaa... (5000 characters)'
    """
    text = printable(text)
    return text if len(text) <= limit else f"{text[:limit - 40]}... ({len(text)} characters)"


def show_path(path: str | Path) -> str:
    """``path`` for a message: :func:`one_line` at :data:`SHOWN_PATH_CHARS`."""
    return one_line(str(path), SHOWN_PATH_CHARS)


def _os_error(label: str, exc: OSError, not_found: str | None) -> UserError:
    if exc.errno == errno.ENOENT:
        return UserError(not_found or f"{label}: no such file")
    if exc.errno == errno.ENAMETOOLONG:
        return UserError(f"{label}: the path is too long for this file system ({exc.strerror})")
    return UserError(f"{label}: cannot be read: {exc.strerror or exc}")


def _refuse_kind(mode: int, label: str) -> None:
    for test, what in _KINDS:
        if test(mode):
            raise UserError(f"{label}: {what}, not a regular file; give a file")
    if not stat.S_ISREG(mode):
        raise UserError(f"{label}: not a regular file; give a file")


def _too_big(label: str, size: int, limit: int) -> UserError:
    return UserError(f"{label}: {size} bytes, more than the {limit} bytes such a file can hold (refused before "
                     "reading)")


def file_size(path: str | Path, label: str, limit: int, not_found: str | None = None) -> int:
    """The size of the regular file ``path`` (``stat``, nothing opened or read), refused in one line when it
    is missing, not a regular file, or larger than ``limit`` bytes."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _os_error(label, exc, not_found) from None
    except ValueError as exc:  # an embedded NUL byte
        raise UserError(f"{label}: not a usable path ({exc})") from None
    _refuse_kind(st.st_mode, label)
    if st.st_size > limit:
        raise _too_big(label, st.st_size, limit)
    return st.st_size


def require_folder(path: str | Path, label: str, hint: str) -> None:
    """``path`` is a folder (``stat`` only, nothing opened): one :class:`UserError` line ``<label>: <why>; <hint>``
    otherwise, saying whether it is missing or what it is instead (``--fla-source /dev/zero`` was "no such folder" of
    a character device).

    >>> require_folder("/dev/null", "--wheel-dir /dev/null", "pass a folder")
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: --wheel-dir /dev/null: a character device, not a folder; pass a folder
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise _os_error(label, exc, None) from None
        raise UserError(f"{label}: no such folder; {hint}") from None
    except ValueError as exc:  # an embedded NUL byte
        raise UserError(f"{label}: not a usable path ({exc})") from None
    if not stat.S_ISDIR(mode):
        what = next((w for test, w in _KINDS if test(mode)), "a file")
        raise UserError(f"{label}: {what}, not a folder; {hint}")


@contextmanager
def open_bounded(path: str | Path, label: str, limit: int, not_found: str | None = None) -> Iterator[BinaryIO]:
    """The regular file ``path`` opened for binary reading, after :func:`file_size`'s checks (and the same
    checks again on the opened descriptor: the path cannot be swapped for a FIFO or device in between)."""
    file_size(path, label, limit, not_found)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _os_error(label, exc, not_found) from None
    try:
        st = os.fstat(fd)
        _refuse_kind(st.st_mode, label)
        if st.st_size > limit:
            raise _too_big(label, st.st_size, limit)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def read_bounded(path: str | Path, label: str, limit: int, not_found: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (:func:`open_bounded`)."""
    with open_bounded(path, label, limit, not_found) as fh:
        try:
            first = min(os.fstat(fh.fileno()).st_size, limit) + 1  # what stat said, and a byte more: did it grow?
            parts: list[bytes] = []
            total = 0
            while total <= limit:  # to the end of the file, never past limit + 1 bytes
                chunk = fh.read(min(CHUNK, limit + 1 - total) if parts else first)
                if not chunk:
                    break
                parts.append(chunk)
                total += len(chunk)
        except OSError as exc:
            raise _os_error(label, exc, not_found) from None
    if total > limit:
        raise _too_big(label, total, limit)
    return b"".join(parts)


def same_file(a: str | Path, b: str | Path) -> bool:
    """``a`` and ``b`` name one file: the same resolved path, or the same inode (a hard link, a bind mount).

    >>> same_file(".", "./")
    True
    """
    try:
        return Path(a).resolve() == Path(b).resolve() or os.path.samefile(a, b)
    except (OSError, RuntimeError, ValueError):  # RuntimeError: a symlink loop (Path.resolve before Python 3.13)
        return False
