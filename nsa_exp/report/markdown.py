"""Markdown for RESULTS.md: a GitHub table, and every number with its 95% CI in one spelling.

>>> ms(23.3164, (23.302, 23.394)), times(4.0981, (4.067, 4.127), 2)
('23.316 (23.302–23.394)', '4.10× (4.07–4.13)')
"""

from __future__ import annotations

from collections.abc import Sequence


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
