"""Strict JSON: the parser every document read goes through (no duplicate keys, no NaN/Infinity
tokens, no number that overflows to infinity, nesting at most :data:`MAX_DEPTH`).

>>> parse_strict(b'{"a": 1}')
{'a': 1}
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 64


class _Rejected(ValueError):
    """A JSON text we refuse (duplicate key, bare NaN, non-finite or huge number)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Rejected(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _constant(token: str) -> Any:
    raise _Rejected(f"bare {token} token (JSON has no NaN/Infinity)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Rejected(f"number {text[:20]} overflows to infinity")
    return value


def _depth(doc: Any) -> int:
    depth, frontier = 0, [doc]
    while frontier:
        depth += 1
        nxt: list[Any] = []
        for node in frontier:
            if isinstance(node, dict):
                nxt.extend(node.values())
            elif isinstance(node, list):
                nxt.extend(node)
        frontier = nxt
    return depth - 1


#: The longest integer literal a document may hold: every integer this project writes has far fewer digits, and a
#: longer one (a 4000-digit "wall time") overflows a float wherever it is used.
MAX_INT_DIGITS = 40


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Rejected(f"an integer of {len(text.lstrip('-'))} digits (more than {MAX_INT_DIGITS})")
    return int(text)


def parse_strict(data: bytes) -> Any:
    """Parse JSON, refusing duplicate keys, NaN/Infinity, overflowing numbers and deep nesting."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Rejected(f"not UTF-8 at byte {exc.start}") from None
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_constant, parse_float=_float,
                         parse_int=_int)
    except json.JSONDecodeError as exc:
        raise _Rejected(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise _Rejected(f"nesting deeper than Python can parse (limit here {MAX_DEPTH})") from None
    except ValueError as exc:  # int digits limit
        raise _Rejected(str(exc).split(";")[0]) from None
    if _depth(doc) > MAX_DEPTH:
        raise _Rejected(f"nesting deeper than {MAX_DEPTH} levels")
    return doc


def dumps_strict(doc: Any) -> str:
    """JSON text with no NaN/Infinity tokens (``allow_nan=False``), 1-space indent, trailing newline."""
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"
