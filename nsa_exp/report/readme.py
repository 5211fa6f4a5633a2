"""README's results block, written between the ``<!-- results:start -->`` and ``<!-- results:end -->`` markers
(the block itself: :func:`nsa_exp.report.summary.readme_block`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..io.store import write_text_atomic

README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


def update_readme(readme: Path, block: str, source: str | Path | None = None) -> None:
    """Write ``readme``: ``source``'s text (default ``readme`` itself) with its results block replaced by ``block``."""
    text = Path(source or readme).read_text()
    if README_START not in text or README_END not in text:
        raise UserError(f"{readme}: no {README_START} ... {README_END} markers for the results block")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    write_text_atomic(readme, f"{head}{README_START}\n{block}\n{README_END}{tail}")
