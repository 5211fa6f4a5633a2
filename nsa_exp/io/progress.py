"""Progress of anything that can take more than a few seconds, on stderr (issue 23): a tqdm bar when stderr is a
terminal; otherwise (a log, CI, a pipe) one start line naming the work, and nothing more, so logs stay short.

Call it after a command's argument checks, when the long work starts: a refusal stays the one line it is.

>>> import io, contextlib
>>> err = io.StringIO()
>>> with contextlib.redirect_stderr(err):
...     done = [x * 2 for x in progress(range(3), "predicting", unit="point")]
>>> done, err.getvalue()
([0, 2, 4], 'predicting: 3 points...\\n')
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sized
from typing import TypeVar

T = TypeVar("T")


def _tty() -> bool:
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


def is_progress_line(line: str) -> bool:
    """Whether a stderr line is one of ours (a start line), not a message: it ends with ``...`` and is no
    ``error:`` / ``warning:`` line. The one-line contract of a refusal counts the other lines."""
    return line.rstrip().endswith("...") and not line.startswith(("error:", "warning:"))


def start(what: str) -> None:
    """One line on stderr saying what starts (``"routing: fla-topk under the Triton interpreter, ~2 min"``)."""
    print(f"{what}...", file=sys.stderr, flush=True)


def progress(items: Iterable[T], desc: str, total: int | None = None, unit: str = "item") -> Iterator[T]:
    """``items`` with a tqdm bar on a terminal's stderr, else one start line (``desc: N units...``)."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    if not _tty():
        count = f"{total} {unit}{'' if total == 1 else 's'}" if total is not None else unit + "s"
        start(f"{desc}: {count}")
        yield from items
        return
    from tqdm import tqdm  # noqa: PLC0415 - a terminal's bar only: the doors import this module for start()

    yield from tqdm(items, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)
