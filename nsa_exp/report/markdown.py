"""Markdown for RESULTS.md: a GitHub table."""

from __future__ import annotations


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
