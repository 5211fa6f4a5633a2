"""A derived document's sources, shared by every kind that is rebuilt from the files it names (compare, the
noise table, analyses, flush studies, model calibrations and validations, ncu summaries, what-if results):
:func:`read_source` reads one such file strictly (None when it is absent, unreadable or of another kind: its
figures stay unverified), :func:`deep_diff` compares a recorded document with its rebuild leaf by leaf (floats at
:data:`.checks.REL_TOL`), :func:`created_after_sources` holds a document's date to its sources'.

>>> out = []; deep_diff({"a": 1.0, "b": [1, 2]}, {"a": 1.0, "b": [1, 3]}, "$", out); out
[('$.b[1]', 'recorded 2, the recomputation gives 3')]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.kinds import DERIVED_KINDS
from ..errors import UserError
from ..io.reader import read_bounded
from ..io.strict_json import MAX_BYTES, _Rejected, parse_strict
from .checks import Add, Context, Problems, close, source_missing
from .record_checks import parse_utc


def deep_diff(got: Any, want: Any, path: str, out: Problems, limit: int = 50) -> None:
    """Append ``(path, message)`` for each leaf where ``got`` differs from ``want`` (floats at REL_TOL)."""
    if len(out) >= limit:
        return
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got), key=str):
            if k not in got:
                out.append((f"{path}.{k}", f"missing; the recomputation gives {json.dumps(want[k])[:80]}"))
            elif k not in want:
                out.append((f"{path}.{k}", "recorded, but the recomputation has no such field"))
            else:
                deep_diff(got[k], want[k], f"{path}.{k}", out, limit)
    elif isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            out.append((path, f"{len(got)} items, the recomputation gives {len(want)}"))
            return
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            deep_diff(g, w, f"{path}[{i}]", out, limit)
    elif isinstance(want, float) or isinstance(got, float):
        if (isinstance(got, bool) or not isinstance(got, (int, float)) or not isinstance(want, (int, float))
                or not close(float(got), float(want))):
            out.append((path, f"recorded {got}, the recomputation gives {want}"))
    elif got != want:
        out.append((path, f"recorded {json.dumps(got)[:80]}, the recomputation gives {json.dumps(want)[:80]}"))


def read_source(ctx: Context, recorded: str | None,
                kinds: tuple[str, ...]) -> tuple[Path, dict[str, Any]] | tuple[Path | None, None]:
    """(located path, strictly parsed document of one of ``kinds``) of a file a document names; the
    document is None when the file is absent (then the path is None too), too large, unreadable or of another
    kind."""
    found = ctx.locate(recorded)
    if found is None or found.stat().st_size > MAX_BYTES:
        return found, None
    try:
        doc = parse_strict(read_bounded(found, str(found), MAX_BYTES))
    except (OSError, _Rejected, UserError):
        return found, None
    if isinstance(doc, dict) and doc.get("kind") in kinds:
        return found, doc
    return found, None


def source_problems(ctx: Context, where: str, recorded: str | None,
                    source: tuple[Path, dict[str, Any]] | tuple[Path | None, None],
                    kinds: tuple[str, ...]) -> Problems:
    """What a derived document's source (``source``: :func:`read_source` of ``recorded``) says against it: a file
    found there that is not a document of ``kinds`` (another kind, unreadable, over the size limit), or one that
    does not pass every check of ``validate`` (``ctx.revalidate``): a document rebuilt from a forged source proves
    nothing, however well it matches it (an attacker's analysis rebuilt from a raw run with its dK/dV observations
    x0.3 PASSed, 2026-12-06). None for a source not found: its figures are listed unverified by the caller.

    >>> source_problems(Context(path="<bytes>"), "$.source", "x.json", (Path("x.json"), None), ("bench_result",))
    [('$.source', 'x.json: found at x.json, but not a bench_result document (another kind, unreadable or too large)')]
    """
    found, doc = source
    if found is None:
        return []
    if doc is None:
        return [(where, f"{recorded}: found at {found}, but not a {' or '.join(kinds)} document (another kind, "
                        "unreadable or too large)")]
    return rebuilt_from(ctx, where, str(recorded), found)


def failed_checks(ctx: Context, path: str | Path) -> list[str]:
    """The checks ``validate`` fails the file at ``path`` on (``ctx.revalidate``: once per file and process, the
    served cache of :func:`nsa_exp.checking.validate.validate_path`); none where nothing revalidates."""
    if ctx.revalidate is None:
        return []
    return [c["name"] for c in ctx.revalidate(str(path))["checks"] if not c["passed"]]


def rebuilt_from(ctx: Context, where: str, label: str, path: str | Path) -> Problems:
    """``(where, ...)`` when the file at ``path`` (named ``label``) that a document was rebuilt from does not pass
    validate (:func:`failed_checks`), else nothing. A derived source (a kind ``validate`` rebuilds from the files
    it names, :data:`nsa_exp.core.kinds.DERIVED_KINDS`) that passes with a check group of its own unverifiable for
    want of what it reads (:func:`.checks.source_missing`: not rebuilt) lists ``where`` unverifiable here too, so
    that ``validate --strict`` fails the document built on it as it fails the source: a compare judged by a noise
    table that names a results file found nowhere (its floors not rebuilt), or a validation predicted from a
    calibration whose point is found nowhere (not refitted), PASSed --strict with forged verdicts or predictions
    (an attacker, 2026-12-07). A measurement's own gaps (its config at a commit not in this history, say) are not
    passed on: every figure a document derives from it is recomputed from what it records."""
    failed = failed_checks(ctx, path)
    if failed:
        return [(where, f"{label} does not validate ({', '.join(failed)}); a document rebuilt from it proves "
                        "nothing")]
    report = ctx.revalidate(str(path)) if ctx.revalidate is not None else None
    if report is not None and report.get("document_kind") in DERIVED_KINDS:
        gaps = [u for u in report.get("unverified", []) if source_missing(u)]
        if gaps:
            ctx.unverifiable(where, f"unverified (its source {label} has {len(gaps)} check group(s) unverifiable, "
                                    f"first {gaps[0]['path']}: {gaps[0]['why'][:160]})")
    return []


def created_after_sources(doc: dict[str, Any], sources: list[dict[str, Any]], add: Add) -> None:
    mine = parse_utc(doc.get("metadata", {}).get("created_utc"))
    problems: Problems = []
    for s in sources:
        theirs = parse_utc(s.get("metadata", {}).get("created_utc"))
        if mine is not None and theirs is not None and mine < theirs:
            problems.append(("$.metadata.created_utc", f"{doc['metadata']['created_utc']} is before its source's "
                             f"{s['metadata']['created_utc']} ({s.get('name', s.get('kind'))})"))
    add("created_after_sources", problems)
