"""The one way a CSV the bundle reads becomes text cells and numbers: strict UTF-8, strict numbers.

Numbers (every CSV: summaries, sweep tables, ncu's raw export): ASCII digits only, an optional leading
``-``, no ``+``, no padding or spaces, no leading zeros, no digit separators (``2_066_432``), no other
script's digits (``٢٠٦٦٤٣٢``, ``２０６６４３２``), no ``nan``/``inf``. ``int()`` and ``float()`` accept all of
those, so they are only called on text that matched :data:`INT_RE` / :data:`FLOAT_RE` first. Nsight
Compute's raw export groups thousands (``2,048``): that is the one dialect, :func:`parse_ncu_number`,
which accepts exactly ncu's grouping (1-3 digits, then groups of three) and nothing looser.

>>> parse_int("2066432"), parse_float("1e-05"), parse_ncu_number("2,048")
(2066432, 1e-05, 2048.0)
>>> for bad in ("٢٠٦٦٤٣٢", "2_066_432", " 15.3 ", "+32768.0", "007", "nan"):
...     try:
...         parse_float(bad)
...     except ValueError as exc:
...         print(str(exc).split(" (")[0])  # then the rule, _FLOAT_RULE
'٢٠٦٦٤٣٢' is not a number
'2_066_432' is not a number
' 15.3 ' is not a number
'+32768.0' is not a number
'007' is not a number
'nan' is not a number
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import Any

from ..errors import UserError
from .reader import read_bounded
from .schemas import load_schema
from .strict_json import MAX_BYTES

INT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)\Z", re.ASCII)
FLOAT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\Z", re.ASCII)
NCU_RE = re.compile(r"-?(?:0|[1-9][0-9]{0,2}(?:,[0-9]{3})+|[1-9][0-9]*)(?:\.[0-9]+)?\Z", re.ASCII)
NCU_MISSING = ("", "n/a", "N/A")
BOM = b"\xef\xbb\xbf"
_RULE = "ASCII digits, optional '-', no separators, padding or '+'"
_FLOAT_RULE = ("a decimal such as 0.02 or 1e-3: ASCII digits, optional '-', '.' and exponent; no separators, padding, "
               "'+' or '%'")
_POSITIVE_RULE = "ASCII digits, no separators, padding or '+'"  # _RULE for a count: a '-' is never positive


def parse_int(text: str) -> int:
    """A strict integer cell (ValueError naming the text otherwise)."""
    if not INT_RE.match(text):
        raise ValueError(f"{text!r} is not an integer ({_RULE})")
    return int(text)


def parse_float(text: str) -> float:
    """A strict, finite number cell (ValueError naming the text otherwise)."""
    if not FLOAT_RE.match(text):
        raise ValueError(f"{text!r} is not a number ({_FLOAT_RULE})")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not finite")
    return value


def parse_positive_ints(text: str, option: str, example: str) -> list[int]:
    """A comma list of positive integers given on the command line (``--max-fanin 4096,8192``), each by
    :func:`parse_int`'s rule: one :class:`UserError` line naming ``option`` otherwise.

    >>> parse_positive_ints("4096,8192", "--max-fanin", "4096,8192")
    [4096, 8192]
    """
    values = []
    for part in text.split(","):
        try:
            value = parse_int(part.strip())
        except ValueError:
            value = 0
        if value < 1:
            raise UserError(f"{option}: {part!r} is not a positive integer ({_POSITIVE_RULE}; e.g. {option} {example})")
        values.append(value)
    return values


def parse_ncu_number(text: str) -> float | None:
    """A number of ncu's raw export (thousands grouped as ncu prints them); None where ncu reports none."""
    if text in NCU_MISSING:
        return None
    if not NCU_RE.match(text):
        raise ValueError(f"{text!r} is not a number as ncu writes one (ASCII digits, ',' between groups of three)")
    return float(text.replace(",", ""))


def decode_csv(data: bytes, name: str) -> tuple[list[list[str]], list[str]]:
    """Non-empty rows of a CSV file's bytes, and notes (a UTF-8 byte-order mark, accepted); a binary,
    non-UTF-8 or unreadable file is a one-line :class:`UserError`."""
    notes = []
    if data.startswith(BOM):
        data = data[len(BOM):]
        notes.append("the file starts with a UTF-8 byte-order mark (a spreadsheet export); accepted and ignored")
    nul = data.find(b"\0")
    if nul >= 0:
        raise UserError(f"{name}: binary data (NUL byte at offset {nul}), not a CSV")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{name}: not UTF-8 text (bad byte at offset {exc.start}); save the CSV as UTF-8") from None
    try:
        return [row for row in csv.reader(io.StringIO(text, newline="")) if row], notes
    except csv.Error as exc:
        raise UserError(f"{name}: not a readable CSV: {exc}") from None


def column_types(row_schema: str) -> dict[str, tuple[str, ...]]:
    """Column -> the JSON types its row schema allows (``("integer",)``, ``("number", "null")``, ...)."""
    props = load_schema(row_schema)["properties"]
    out = {}
    for col, spec in props.items():
        t = spec.get("type", "string")
        out[col] = tuple(t) if isinstance(t, list) else (t,)
    return out


def typed_cell(types: tuple[str, ...], text: str) -> Any:
    """A cell as the type its schema allows: an empty cell is null where null is allowed; numbers strict."""
    if text == "" and "null" in types:
        return None
    if "integer" in types:
        return parse_int(text)
    if "number" in types:
        return parse_float(text)
    return text


def typed_rows(header: list[str], body: list[list[str]], row_schema: str, name: str) -> list[dict[str, Any]]:
    """Each row as typed values (:func:`typed_cell`); the first bad cell is one :class:`UserError` line
    naming the file, line and column."""
    types = column_types(row_schema)
    out = []
    for i, cells in enumerate(body):
        if len(cells) != len(header):
            raise UserError(f"{name}: line {i + 2} has {len(cells)} cells, the header has {len(header)}")
        row = {}
        for col, text in zip(header, cells, strict=True):
            try:
                row[col] = typed_cell(types.get(col, ("string",)), text)
            except ValueError as exc:
                raise UserError(f"{name}: line {i + 2} column {col}: {exc}") from None
        out.append(row)
    return out


def read_csv_table(path: str | Path, label: str, row_kind: str, what: str, hint: str = "",
                   not_found: str | None = None) -> str:
    """The text of a CSV table whose rows are ``row_kind`` (a schema under ``schemas/``, e.g. ``summary_row``,
    ``sweep_row``): read bounded (:func:`~nsa_exp.io.reader.read_bounded`, at most
    :data:`~nsa_exp.io.strict_json.MAX_BYTES`), UTF-8 (a byte-order mark dropped), its header holding every column
    the row schema requires; else one :class:`UserError` line starting with ``label``, saying it is not ``what``
    (``hint`` appended, e.g. the command that draws the other kind)."""
    data = read_bounded(path, label, MAX_BYTES, not_found)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{label}: not UTF-8 text (byte {exc.start}); not a CSV table") from None
    header = next(csv.reader(io.StringIO(text)), [])
    missing = [c for c in load_schema(row_kind)["required"] if c not in header]
    if missing:
        raise UserError(f"{label}: not {what} (no column {', '.join(missing[:3])}"
                        f"{' ...' if len(missing) > 3 else ''})" + (f"; {hint}" if hint else ""))
    return text
