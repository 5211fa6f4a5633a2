"""README's results block, written between the ``<!-- results:start -->`` and ``<!-- results:end -->`` markers
(the block itself: :func:`nsa_exp.report.summary.readme_block`)."""

from __future__ import annotations

from pathlib import Path

from .markdown import MarkedFile

README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


def update_readme(readme: Path, block: str, source: str | Path | None = None) -> None:
    """Write ``readme``: ``source``'s text (default ``readme`` itself) with its results block replaced by ``block``
    and its relative links reaching their files from ``readme``'s folder (:class:`.markdown.MarkedFile`)."""
    readme_file(source or readme).write(readme, block)


def readme_file(source: str | Path) -> MarkedFile:
    """README (``source``) read around its results block (UserError: missing, or without the markers)."""
    return MarkedFile.read(source, README_START, README_END, "results block")
