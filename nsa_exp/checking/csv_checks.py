"""A summary CSV as a table, and cross-checked value by value against its JSON result.

Checks (names as in the validation report):

- ``csv_encoding``: UTF-8 text that ``csv`` can read (:func:`nsa_exp.io.strict_csv.decode_csv`). A UTF-8
  byte-order mark (a spreadsheet's "CSV UTF-8") is accepted and said once as a warning; CRLF line ends
  are accepted.
- ``csv_rows``: each row against ``summary_row``, every number under the one strict rule
  (:mod:`nsa_exp.io.strict_csv`: ASCII digits, no separators, padding, ``+`` or other scripts' digits).
- ``csv_table``: the header has exactly the summary columns; one row per pattern x stage (no
  duplicate, none missing, every stage known); one config name; per row min <= p10 <= median <= p90
  <= p95 and min <= mean; the pattern's fan-in columns and edges agree across its rows.
- ``csv_matches_json``: with its JSON, every CSV cell equals what the JSON gives for that row and
  column (rows missing or extra on either side are named).

A garbage file (binary, not UTF-8, not parseable as CSV) is a :class:`UserError` (exit 2), one line.
"""

from __future__ import annotations

from typing import Any

from ..core.records import STAT_FIELDS
from ..core.stages import OPTIONAL_STAGES
from ..core.stages import STAGE_NAMES as STAGES
from ..io.paths import recorded_path
from ..io.schemas import SUMMARY_COLUMNS, schema_errors
from ..io.strict_csv import parse_float, parse_int
from .checks import Add, Problems, close, schema_problems

FANIN_COLUMNS = {"fanin_mean": "mean", "fanin_max": "max", "fanin_p95": "p95", "fanin_p99": "p99",
                 "fanin_cv": "cv", "fanin_gini": "gini"}
INT_COLUMNS = {"n_obs", "edges"}
STR_COLUMNS = {"config_name", "pattern", "stage"}


def typed_value(column: str, value: str) -> Any:
    """A cell as its type (str, int, finite float) under the strict number rule
    (:mod:`nsa_exp.io.strict_csv`); ValueError naming the text when it does not parse."""
    if column in STR_COLUMNS:
        return value
    if column in INT_COLUMNS:
        return parse_int(value)
    return parse_float(value)


def _num(row: dict[str, str], key: str) -> float | None:
    try:
        return parse_float(row[key])
    except (KeyError, ValueError, TypeError):
        return None


def _where(i: int, row: dict[str, str]) -> str:
    return f"row {i + 2} ({row.get('pattern')}, {row.get('stage')})"


def table_problems(header: list[str], rows: list[dict[str, str]]) -> Problems:
    """``csv_table``: the CSV as one complete pattern x stage table with ordered percentiles."""
    problems: Problems = []
    if tuple(header) != SUMMARY_COLUMNS:
        problems.append(("$", f"columns {header} != the summary columns {list(SUMMARY_COLUMNS)}"))
    seen: dict[tuple[str, str], int] = {}
    patterns: list[str] = []
    for i, row in enumerate(rows):
        key = (row.get("pattern", ""), row.get("stage", ""))
        if key[0] not in patterns:
            patterns.append(key[0])
        if key in seen:
            problems.append((f"$[{i}]", f"{_where(i, row)} duplicates row {seen[key] + 2}"))
        else:
            seen[key] = i
        if key[1] not in STAGES:
            problems.append((f"$[{i}].stage", f"{_where(i, row)}: unknown stage {key[1]!r}"))
        v = {k: _num(row, k) for k in ("min_ms", "p10_ms", "median_ms", "p90_ms", "p95_ms", "mean_ms")}
        chain = ("min_ms", "p10_ms", "median_ms", "p90_ms", "p95_ms")
        for a, b in zip(chain, chain[1:], strict=False):
            lo, hi = v[a], v[b]
            if lo is not None and hi is not None and lo > hi:
                problems.append((f"$[{i}].{b}", f"{_where(i, row)}: {b} {hi} < {a} {lo}"))
        low, median, mean = v["min_ms"], v["median_ms"], v["mean_ms"]
        if low is not None and median is not None and median < low:
            problems.append((f"$[{i}].median_ms", f"{_where(i, row)}: median_ms {median} is below its own "
                             f"min_ms {low}"))
        if low is not None and mean is not None and mean < low:
            problems.append((f"$[{i}].mean_ms", f"{_where(i, row)}: mean_ms {mean} < min_ms {low}"))
    for p in patterns:
        for stage in STAGES:
            if (p, stage) not in seen and stage not in OPTIONAL_STAGES:
                problems.append(("$", f"no row for pattern {p!r} stage {stage!r}"))
        mine = [(i, r) for i, r in enumerate(rows) if r.get("pattern") == p]
        for col in ("edges", *FANIN_COLUMNS):
            values = {r.get(col, "") for _, r in mine}  # a column the header lacks: "" in every row
            if len(values) > 1:
                i, r = mine[0]
                problems.append((f"$[{i}].{col}", f"pattern {p!r}: {col} differs between its rows {sorted(values)}"))
    names = {r.get("config_name") for r in rows}
    if len(names) > 1:
        problems.append(("$", f"more than one config_name: {sorted(map(str, names))}"))
    return problems


def expected_rows(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """What bench's summary writes for a result: (pattern, stage) -> column -> value."""
    out = {}
    for name, p in doc["patterns"].items():
        for stage, s in p["stages"].items():
            row = {"config_name": doc["config"]["name"], "pattern": name, "stage": stage, "edges": p["edges"]}
            row |= {k: s[k] for k in STAT_FIELDS}
            row |= {col: p["fanin"][key] for col, key in FANIN_COLUMNS.items()}
            out[(name, stage)] = row
    return out


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return close(a, b)
    return a == b


def json_problems(rows: list[dict[str, str]], doc: dict[str, Any], json_name: str) -> Problems:
    """``csv_matches_json``: each cell against the JSON result, naming the CSV row and column."""
    want = expected_rows(doc)
    problems: Problems = []
    seen = set()
    for i, row in enumerate(rows):
        key = (row.get("pattern", ""), row.get("stage", ""))
        seen.add(key)
        exp = want.get(key)
        if exp is None:
            problems.append((f"$[{i}]", f"{_where(i, row)} is not in {json_name}"))
            continue
        for col, value in exp.items():
            if col not in row:
                continue
            try:
                got = typed_value(col, row[col])
            except ValueError:
                continue  # csv_rows names it
            if not _equal(got, value):
                problems.append((f"$[{i}].{col}", f"{_where(i, row)} column {col}: CSV {row[col]} but {json_name} "
                                 f"gives {value}"))
    for key in want:
        if key not in seen:
            problems.append(("$", f"{json_name} has pattern {key[0]!r} stage {key[1]!r}; the CSV has no such row"))
    return problems


def summary_csv_checks(header: list[str], body: list[list[str]], add: Add, name: str = "<csv>",
                       companion: tuple[str, dict[str, Any]] | None = None) -> None:
    """Row schema (``csv_rows``), the table (``csv_table``) and, with its JSON, ``csv_matches_json``."""
    ragged = [(f"$[{i}]", f"line {i + 2} has {len(cells)} cells, the header has {len(header)}")
              for i, cells in enumerate(body) if len(cells) != len(header)]
    if ragged:  # a FAIL, as a sweep table's (it was exit 2 and ended a batch of validate: a re-attacker, 2026-12-07)
        add("csv_rows", ragged)
        return
    rows = [dict(zip(header, cells, strict=True)) for cells in body]
    if not rows:
        add("csv_rows", [("$", "no rows")])
        return
    problems = []
    for i, row in enumerate(rows):
        typed: dict[str, Any] = {}
        for key, value in row.items():
            try:
                typed[key] = typed_value(key, value)
            except (ValueError, TypeError) as exc:
                problems.append((f"$[{i}].{key}", str(exc)))
        problems += schema_problems(schema_errors(typed, "summary_row", f"$[{i}]"))
    missing = [c for c in SUMMARY_COLUMNS if c not in header]
    problems += [("$", f"missing column {c}") for c in missing]
    add("csv_rows", problems)
    add("csv_table", table_problems(header, rows))
    if companion is not None:
        # the JSON named as a document records a path (repository-relative inside it), so that a validation report of
        # this CSV rebuilds in another clone (it named the absolute path: a re-attacker, 2026-12-07)
        add("csv_matches_json", json_problems(rows, companion[1], recorded_path(companion[0])))
