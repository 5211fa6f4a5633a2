"""Markdown for RESULTS.md: a GitHub table, and every number with its 95% CI in one spelling.

>>> ms(23.3164, (23.302, 23.394)), times(4.0981, (4.067, 4.127), 2)
('23.316 (23.302–23.394)', '4.10× (4.07–4.13)')
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..io.reader import read_bounded
from ..io.store import write_text_atomic
from ..io.strict_json import MAX_BYTES

#: a markdown link's or image's target that is a relative path (not a URL, an anchor or an absolute path), and its
#: anchor: ``[text](docs/METHOD.md#the-rule)``
_RELATIVE_TARGET = re.compile(r"\]\((?![a-z][a-z0-9+.-]*:|#|/)([^)\s#]+)(#[^)\s]*)?\)")


def rebased_links(text: str, source_dir: Path, output_md: Path) -> str:
    """``text``, written in ``source_dir``, with every relative link target rewritten to reach the same file from
    ``output_md``'s folder: unchanged where the two folders are one (docs/RESULTS.md, README.md), ``../../docs/…``
    for a run folder's copy ``runs/<name>/RESULTS.md`` or ``README.md`` (whose links were broken: a new user's
    findings, 2026-12-06).

    >>> rebased_links("![f](figures/a.png) [m](METHOD.md#x) [w](https://x.org) [s](#here)", Path("/r/docs"),
    ...               Path("/r/runs/e1/RESULTS.md"))
    '![f](../../docs/figures/a.png) [m](../../docs/METHOD.md#x) [w](https://x.org) [s](#here)'
    """
    source, out = Path(os.path.abspath(source_dir)), Path(os.path.abspath(output_md)).parent
    if source == out:
        return text

    def moved(m: re.Match[str]) -> str:
        return f"]({Path(os.path.relpath(source / m.group(1), out)).as_posix()}{m.group(2) or ''})"

    return _RELATIVE_TARGET.sub(moved, text)


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def ms(value: float, ci: Sequence[float], digits: int = 3) -> str:
    """A median in ms with its 95% CI: ``23.316 (23.302–23.394)``."""
    return f"{value:.{digits}f} ({ci[0]:.{digits}f}–{ci[1]:.{digits}f})"


def times(value: float, ci: Sequence[float], digits: int = 3) -> str:
    """A ratio with its 95% CI: ``4.098× (4.067–4.127)``."""
    return f"{value:.{digits}f}× ({ci[0]:.{digits}f}–{ci[1]:.{digits}f})"


def pct(value: float, digits: int = 1) -> str:
    """A fraction as a percentage: ``0.0499`` -> ``5.0%``."""
    return f"{100 * value:.{digits}f}%"


def anchor(title: str) -> str:
    """GitHub's anchor of a heading ``title``."""
    out = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return "#" + out.replace(" ", "-")


@dataclass(frozen=True)
class MarkedFile:
    """A Markdown file whose generated block lies between two markers (README's results block, PROVENANCE.md's
    table), read before the work that fills the block so that a missing file or marker is refused before anything
    is written: ``head`` and ``tail`` are its text around the block, ``source`` the file they were read from."""

    source: Path
    start: str
    end: str
    head: str
    tail: str

    @classmethod
    def read(cls, source: str | Path, start: str, end: str, what: str) -> MarkedFile:
        """``source``, bounded and UTF-8 (:func:`nsa_exp.io.reader.read_bounded`).

        Raises:
            UserError: it is missing or unreadable, or lacks either marker: one line naming it and ``what`` the
                markers hold."""
        path = Path(source)
        try:
            text = read_bounded(path, str(path), MAX_BYTES, not_found=f"{path}: no such file; the {what} is written "
                                "between the markers of an existing Markdown file (copy the published one there "
                                "first)").decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{path}: not UTF-8 text; give a Markdown file holding the {what}") from None
        if start not in text or end not in text.split(start, 1)[1]:  # an end marker before the start one is none
            raise UserError(f"{path}: no {start} ... {end} markers for the {what}")
        head, rest = text.split(start, 1)
        return cls(path, start, end, head, rest.split(end, 1)[1])

    def write(self, path: str | Path, block: str) -> None:
        """Write ``path``: this file's text with ``block`` between its markers, its relative links reaching their files
        from ``path``'s folder (:func:`rebased_links`), atomically."""
        text = f"{self.head}{self.start}\n{block}\n{self.end}{self.tail}"
        write_text_atomic(path, rebased_links(text, self.source.parent, Path(path)))
