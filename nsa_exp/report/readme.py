"""README's results block, written between the ``<!-- results:start -->`` and ``<!-- results:end -->`` markers
(the block itself: :func:`nsa_exp.report.summary.readme_block`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..io.store import write_text_atomic
from .markdown import rebased_links

README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


def update_readme(readme: Path, block: str, source: str | Path | None = None) -> None:
    """Write ``readme``: ``source``'s text (default ``readme`` itself) with its results block replaced by ``block``
    and its relative links reaching their files from ``readme``'s folder (:func:`.markdown.rebased_links`)."""
    source = Path(source or readme)
    text = source.read_text()
    if README_START not in text or README_END not in text:
        raise UserError(f"{readme}: no {README_START} ... {README_END} markers for the results block")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    text = f"{head}{README_START}\n{block}\n{README_END}{tail}"  # the block's links are README's own
    write_text_atomic(readme, rebased_links(text, source.parent, readme))
