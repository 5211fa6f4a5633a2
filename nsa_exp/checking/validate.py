"""``validate``: check a file, ours or a third party's, beyond what a schema can say.

Each check has a name and, when it fails, a message with the JSON path it concerns. Order:

1. ``file_size`` (<= 64 MiB, before parsing) and ``json_syntax`` (strict: no duplicate keys, no
   NaN/Infinity tokens, no non-finite or over-long numbers, nesting <= 64), or a CSV's ``csv_syntax`` (UTF-8
   text with no NUL byte, read by Python's csv module).
2. ``kind`` (a known document kind, :data:`nsa_exp.core.kinds.KINDS`), ``schema_version`` (one we can
   read) and ``schema``.
3. Then the kind's checks (:data:`.kinds.KIND_CHECKS`: the ``checks`` of the module declaring the kind, a bench
   result's, a sweep point's, an autotune matrix's, a release result's): every derived number recomputed from
   its source, or listed under ``unverified``.

A CSV summary is validated row by row against ``summary_row``, then as a table and, given with its
JSON, cell by cell (:mod:`.csv_checks`).

>>> report = validate_bytes(b'{"a": 1, "a": 2}', "x.json")
>>> [(c["name"], c["passed"]) for c in report["checks"]]
[('file_size', True), ('json_syntax', False)]
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.kinds import KINDS, document_kind
from ..errors import UserError
from ..io.paths import recorded_path
from ..io.progress import progress
from ..io.reader import file_size, one_line, read_bounded, show_path
from ..io.schemas import SUMMARY_COLUMNS, file_schema_errors, schema_errors
from ..io.store import read_document
from ..io.strict_csv import decode_csv
from ..io.strict_json import MAX_BYTES, _Rejected, parse_strict
from . import validation_report
from .checks import UNCHECKABLE, Add, Checks, Context, schema_problems, source_missing
from .csv_checks import summary_csv_checks
from .kinds import KIND_CHECKS
from .ncu_summary import ncu_raw_csv_checks
from .sweep_checks import sweep_csv_checks

JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
NO_COMPANION = "unverified (no JSON result found beside the CSV, results/raw/<stem>.json)"

SUPPORTED_VERSIONS = {"1.0"}


def validate_bytes(data: bytes, name: str, companion: tuple[str, dict[str, Any]] | None = None,
                   routing_files: Sequence[str] = (), release_dirs: Sequence[str] = (),
                   depth: int = 0) -> dict[str, Any]:
    """Validate one file's bytes; returns the validation report (schema ``validation_report``).

    ``name``: the file's path as given (it names the files beside it a kind's checks read: a summary's
    JSON, an ncu summary's raw CSV, a compare's results); ``companion`` = (path, parsed bench result)
    cross-checks a summary CSV against that JSON instead of the one found beside it; ``routing_files``:
    the files a bench result / sweep point timed, re-checked (:func:`.routing_checks.routing_file_recompute`);
    ``release_dirs``: the folders holding a release result's FLA, its imported files re-hashed
    (:mod:`.release_result`); ``depth``: 1 when this validation serves another one (a companion, a
    validation report's file).
    """
    checks = Checks()
    ctx = Context(path=name, routing_files=routing_files, release_dirs=release_dirs, depth=depth,
                  revalidate=lambda path: validate_path(path, depth=depth + 1))
    if not checks.add("file_size", [] if len(data) <= MAX_BYTES else
                      [("$", f"{len(data)} bytes > {MAX_BYTES} (refused before parsing)")]):
        return validation_report.build(name, checks)
    if name.endswith(".csv"):
        table_kind = _csv_checks(data, name, checks.add, ctx, companion)
        return validation_report.build(name, checks, table_kind, ctx)
    try:
        doc = parse_strict(data)
    except _Rejected as exc:
        checks.add("json_syntax", [("$", str(exc))])
        return validation_report.build(name, checks)
    checks.add("json_syntax")
    raw_kind = doc.get("kind") if isinstance(doc, dict) else None
    kind = raw_kind if isinstance(raw_kind, str) else None  # a list or an object is no kind (and unhashable)
    not_object = None if isinstance(doc, dict) else (
        f"the top level is a JSON {JSON_TYPES.get(type(doc), type(doc).__name__)}, not a document object"
        + (" (validate --json prints a list of validation reports: give one of them)" if isinstance(doc, list) else ""))
    if (not checks.add("kind", [] if kind in KINDS else [("$" if not_object else "$.kind", not_object or (
            f"unknown document kind {raw_kind!r}; expected one of {', '.join(KINDS)}" + _input_hint(doc)))])
            or kind is None):
        return validation_report.build(name, checks)
    version = doc.get("schema_version", None if document_kind(kind).versioned else document_kind(kind).version)
    if not checks.add("schema_version", [] if isinstance(version, str) and version in SUPPORTED_VERSIONS else
                      [("$.schema_version", f"{version!r} is not a supported schema version "
                                            f"({', '.join(sorted(SUPPORTED_VERSIONS))})")]):
        return validation_report.build(name, checks)
    errors = file_schema_errors(data, doc, KINDS[kind], "$")
    if checks.add("schema", schema_problems(errors)):
        try:
            KIND_CHECKS[kind](doc, checks.add, ctx)
        except UNCHECKABLE as exc:
            checks.add(f"{kind}_checks", [("$", f"cannot be checked: {type(exc).__name__}: {exc}")])
    return validation_report.build(name, checks, kind, ctx)


#: The input files a command reads with ``--config`` (schemas/<name>.schema.json), which validate does not judge.
INPUT_SCHEMAS = ("config", "sweep_config", "release_config")


def _input_hint(doc: Any) -> str:
    """What a file without a document kind is when it is an input config (a new user's ``validate
    configs/e1_h200.json``): the schema it satisfies and who checks it; '' otherwise.

    >>> _input_hint({"kind": "nothing"})
    ''
    """
    found = next((name for name in INPUT_SCHEMAS if not schema_errors(doc, name, "$")), None)
    return "" if found is None else (f" (it is an input config, schemas/{found}.schema.json: validate judges what "
                                     "the commands write; the command that reads it with --config checks it)")


def csv_kind(rows: list[list[str]], name: str) -> str:
    """The CSV kind of a table (:data:`nsa_exp.core.kinds.CSV_KINDS`) by its header; a CSV of no kind the
    bundle reads is a one-line :class:`UserError`."""
    if any(r and r[0] == "ID" and "Kernel Name" in r for r in rows[:8]):
        return "ncu_raw_csv"
    header = rows[0] if rows else []
    if {"sweep", "point_id", "family"} <= set(header):
        return "sweep_csv"
    if set(header) & set(SUMMARY_COLUMNS):  # a column twice fails csv_table (it was exit 2: a re-attacker, 2026-12-07)
        return "summary_csv"
    raise UserError(f"{name}: the first line {','.join(header)[:80]!r} is not the header of a CSV validate reads "
                    f"(a bench summary {','.join(SUMMARY_COLUMNS[:3])},..., a sweep table sweep,point_id,..., or "
                    "ncu's raw export ID,...,Kernel Name,...)")


def _csv_checks(data: bytes, name: str, add: Add, ctx: Context,
                companion: tuple[str, dict[str, Any]] | None) -> str | None:
    try:
        rows, notes = decode_csv(data, name)
    except UserError as exc:  # a NUL, a byte that is not UTF-8, a csv error: a failed check, as malformed JSON is
        # (it ended a batch of validate before the files after it: an attacker, 2026-12-07)
        add("csv_syntax", [("$", str(exc).removeprefix(f"{name}: "))])
        return None
    add("csv_syntax", [])
    ctx.warnings += [{"check": "csv_encoding", "path": "$", "message": n} for n in notes]
    kind = csv_kind(rows, name)
    try:
        _table_checks(kind, rows, name, add, ctx, companion)
    except UNCHECKABLE as exc:  # a sweep table's params cell '{bad' or an empty median: 'internal error', the batch
        # ended (an attacker, 2026-12-07)
        add(f"{kind}_checks", [("$", f"cannot be checked: {type(exc).__name__}: {exc}")])
    return kind


def _table_checks(kind: str, rows: list[list[str]], name: str, add: Add, ctx: Context,
                  companion: tuple[str, dict[str, Any]] | None) -> None:
    """The checks of a CSV of ``kind`` (:func:`csv_kind`)."""
    if kind == "ncu_raw_csv":
        ncu_raw_csv_checks(rows, add, ctx)
        return
    if kind == "sweep_csv":
        sweep_csv_checks(rows[0], rows[1:], add, ctx)
        return
    if companion is None:
        companion = next(((str(p), doc) for p in _companion_paths(name, ctx) if (doc := bench_document(p))), None)
    if companion is None:
        ctx.unverifiable("$", f"{NO_COMPANION}: values not cross-checked (validate X.json X.csv, or --also X.json)")
    else:
        sub = validate_path(companion[0], depth=ctx.depth + 1)
        bad = [c["name"] for c in sub["checks"] if not c["passed"]]
        shown = recorded_path(companion[0])
        add("companion_valid", [("$", f"its JSON {shown} does not validate ({', '.join(bad)}): a CSV is only as good "
                                      "as the result it is checked against")] if bad else [])
    summary_csv_checks(rows[0], rows[1:], add, name, companion)


def load_validated(path: str | Path, kinds: tuple[str, ...], label: str | None = None, hint: str = "",
                   missing_hint: str = "", as_source: bool = False) -> dict[str, Any]:
    """:func:`nsa_exp.io.store.load_document`, and every check of :func:`validate_bytes` must pass (one
    :class:`UserError` line naming the failed checks, then ``hint``). ``as_source``: checked as ``validate`` checks
    a file another document reads (``depth`` 1: a noise table that is a version this repository committed has its
    floors rebuilt from its sources' statistics, its sources not validated in full; :mod:`.noise_table`)."""
    label = str(path) if label is None else label
    data, doc = read_document(path, kinds, label, missing_hint)
    report = validate_bytes(data, str(path), depth=1 if as_source else 0)
    if not report["passed"]:
        bad = [c["name"] for c in report["checks"] if not c["passed"]]
        raise UserError(f"{label} does not validate ({', '.join(bad)})" + (f"; {hint}" if hint else ""))
    return doc


_SERVED: dict[tuple, dict[str, Any]] = {}


def _companion_paths(name: str, ctx: Context) -> Iterator[Path]:
    """Where a summary CSV's bench result is looked for, in order, each only when the one before is not it:
    ``raw/<stem>.json`` beside its ``summaries/`` folder (bench's layout: the published tree, a run's folder
    ``runs/<name>/``, named from inside it too: a re-attacker, 2026-12-07), ``<stem>.json`` beside it (a submission
    folder holds both; its CSV alone was checked against the published JSON of that name: a new user, the same day),
    then ``results/raw/<stem>.json`` of its tree or the repository's. In a ``summaries/`` folder the JSON beside
    the CSV comes after ``raw/``: another run's JSON put beside a published CSV under its name was taken for it (an
    attacker, the same day)."""
    here = Path(name)
    folder = here.resolve().parent
    if folder.name == "summaries":
        yield folder.parent / "raw" / f"{here.stem}.json"
    yield here.with_suffix(".json")
    found = ctx.locate(f"results/raw/{here.stem}.json")
    if found is not None:
        yield found


def bench_document(path: str | Path) -> dict[str, Any] | None:
    """The parsed bench result at ``path`` when it is one that passes its schema (for CSV cross-checks)."""
    try:
        data = read_bounded(path, show_path(path), MAX_BYTES)
        doc = parse_strict(data)
    except (UserError, _Rejected):
        return None
    if isinstance(doc, dict) and doc.get("kind") == "bench_result" and not file_schema_errors(data, doc, "result", "$"):
        return doc
    return None


def validate_paths(paths: list[str], also: list[str] | None = None,
                   routing_files: Sequence[str] = (), release_dirs: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Validate every path; a summary CSV is cross-checked against its JSON result: the bench result
    (among ``paths`` + ``also``) with the same file stem, else the only one given. ``routing_files``
    (``--routing-file``) re-check the routing files the results timed; ``release_dirs`` (``--release-dir``)
    the FLA files a release result imported."""
    for p in also or []:  # a companion named on purpose must be usable, or the CSV would go unchecked silently
        if bench_document(p) is None:
            raise UserError(f"--also {p}: not a readable, schema-valid bench result; the CSV cannot be "
                            "cross-checked against it")
    # (each companion used is then validated in full: the CSV's report fails companion_valid if it does not pass)
    results = {p: doc for p in [*paths, *(also or [])] if not p.endswith(".csv")
               for doc in [bench_document(p)] if doc is not None}
    reports = []
    for path in progress(paths, "validate", unit="file") if len(paths) > 1 else paths:
        companion = None
        if path.endswith(".csv"):
            same = [p for p in results if Path(p).stem == Path(path).stem]
            pick = same[0] if same else next(iter(results)) if len(results) == 1 else None
            companion = (pick, results[pick]) if pick else None
        try:
            reports.append(validate_path(path, companion, routing_files, release_dirs))
        except UserError as exc:  # bad input ends the batch (exit 2): say what was left unjudged (a new user met a
            # submission folder's gpu.csv and no verdict at all, 2026-12-06)
            if len(paths) == 1:
                raise
            raise UserError(f"{exc}; validate stopped there, {len(paths) - 1} other file(s) not judged: name only "
                            "the files the bundle writes (results, summaries, sweep tables, ncu exports)") from None
    return reports


def validate_path(path: str | Path, companion: tuple[str, dict[str, Any]] | None = None,
                  routing_files: Sequence[str] = (), release_dirs: Sequence[str] = (),
                  depth: int = 0) -> dict[str, Any]:
    """Validate a file on disk: a regular file (a FIFO, device or folder is one :class:`UserError` line), its
    size checked with stat before reading (:mod:`nsa_exp.io.reader`). A validation that serves another one
    (``depth`` > 0: a companion JSON, a validation report's file) is made once per file and process."""
    path, label = Path(path), show_path(path)
    if depth:  # served at depth 1 (its checks may spare what only its own validation needs: the noise table)
        try:
            st = path.stat()
        except OSError:
            st = None
        key = (str(path.resolve()), st and st.st_size, st and st.st_mtime_ns)
        if key not in _SERVED:
            _SERVED[key] = _validate_file(path, label, companion, routing_files, release_dirs, 1)
        return _SERVED[key]
    return _validate_file(path, label, companion, routing_files, release_dirs, 0)


def _validate_file(path: Path, label: str, companion: tuple[str, dict[str, Any]] | None,
                   routing_files: Sequence[str], release_dirs: Sequence[str], depth: int) -> dict[str, Any]:
    size = file_size(path, label, sys.maxsize)
    if size > MAX_BYTES:
        (checks := Checks()).add("file_size", [("$", f"{size} bytes > {MAX_BYTES} (refused before parsing)")])
        return validation_report.build(str(path), checks)
    return validate_bytes(read_bounded(path, label, MAX_BYTES), str(path), companion, routing_files, release_dirs,
                          depth)


#: The longest line ``validate`` prints of a document's own text (a message quoting a 1 MB field was a 1 MB line).
MAX_LINE = 2_000


def _line(text: str) -> str:
    """One printed line: a newline or ESC a forged document carries escaped (a forged ``a.path`` printed a green
    "PASS" line of its own: an attacker, 2026-12-07), and at most :data:`MAX_LINE` characters."""
    return one_line(text, MAX_LINE)


def format_report(report: dict[str, Any]) -> str:
    """The console report of one file: a verdict line, then a line per failure, warning and missing source."""
    lines = [f"{show_path(report['path'])}: {'PASS' if report['passed'] else 'FAIL'}"]
    for c in report["checks"]:
        if c["passed"]:
            continue
        for f in c["failures"]:
            lines.append(_line(f"  [{c['name']}] {f['path']}: {f['message']}"))
        if c["n_failures"] > len(c["failures"]):
            lines.append(f"  [{c['name']}] ... {c['n_failures'] - len(c['failures'])} more")
    for w in report.get("warnings", []):
        lines.append(_line(f"  warning [{w['check']}] {w['path']}: {w['message']}"))
    lines += [_line(f"  {u['path']}: {u['why']}") for u in report.get("unverified", []) if source_missing(u)]
    if report.get("unverified"):
        lines.append(f"  {len(report['unverified'])} value group(s) listed as unverifiable (--json shows them)")
    return "\n".join(lines)
