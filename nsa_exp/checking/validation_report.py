"""The ``validation_report`` kind: what ``validate --json`` (and ``--report``) says of one file. Its record
(:class:`ValidationReport`, from which its schema file is generated), its builder (:func:`build`; :mod:`.validate`
calls it for every file it judges) and its check (:func:`recompute`), in one module.

- ``validation_report_consistent``: ``passed`` from the checks, failure counts; with the validated file at hand,
  the report re-made by ``validate`` and compared (kind, checks, verdicts, unverified list).

>>> c = Checks(); _ = c.add("file_size", [("$", "too large")])
>>> r = build("x.json", c); r["kind"], r["passed"], [ch["name"] for ch in r["checks"]], "unverified" in r
('validation_report', False, ['file_size'], False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from ..core.kinds import schema_version
from ..core.records import Keywords, Record
from ..errors import UserError
from .checks import MAX_LISTED, Add, Checks, Context, Problems, one_check
from .sources import deep_diff

KIND = "validation_report"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


@dataclass(frozen=True)
class Failure(Record):
    """One way a check failed: the JSON path it concerns and what is wrong there."""

    path: str
    message: str


@dataclass(frozen=True)
class CheckResult(Record):
    """One named check, in the order the checks ran: passed, or its first 50 failures and how many there were."""

    name: str
    passed: bool
    failures: tuple[Failure, ...] | None = None
    n_failures: Annotated[int, Keywords(minimum=1)] | None = None


@dataclass(frozen=True)
class Unverified(Record):
    """A figure the validator cannot recompute here, and why."""

    path: str
    why: str


@dataclass(frozen=True)
class Finding(Record):
    """What a check found that does not fail the file (throttled samples, a CSV byte-order mark)."""

    check: str
    path: str
    message: str


UNVERIFIED = "numbers the validator cannot recompute (each with why)"
WARNINGS = "findings that do not fail validation (e.g. throttled samples, a CSV byte-order mark)"


@dataclass(frozen=True)
class ValidationReport(Record):
    """The report on one file: its kind once known, every check run, and (once the kind's checks ran) what stays
    unverified and the warnings."""

    ORDER: ClassVar[tuple[str, ...]] = ("schema_version", "kind", "path", "document_kind", "passed", "checks",
                                        "unverified", "warnings")
    schema_version: str
    kind: str
    path: str
    passed: bool
    checks: Annotated[tuple[CheckResult, ...], Keywords(minItems=1)]
    document_kind: str | None = None
    unverified: Annotated[tuple[Unverified, ...], Keywords(description=UNVERIFIED)] | None = None
    warnings: Annotated[tuple[Finding, ...], Keywords(description=WARNINGS)] | None = None


RECORD = ValidationReport


def build(path: str, checks: Checks, document_kind: str | None = None, ctx: Context | None = None) -> dict[str, Any]:
    """The report on the file at ``path`` (as given): its ``checks`` so far, ``passed`` when every one passed;
    ``document_kind`` once the kind is known; ``ctx``'s unverified figures and warnings once the kind's checks ran
    (a report cut short at the size, syntax, kind or version has neither)."""
    return ValidationReport(
        schema_version(KIND), KIND, path, all(c["passed"] for c in checks.items),
        tuple(CheckResult.from_json(c) for c in checks.items), document_kind,
        None if ctx is None else tuple(Unverified.from_json(u) for u in ctx.unverified),
        None if ctx is None else tuple(Finding.from_json(w) for w in ctx.warnings)).to_json()


def recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    for i, c in enumerate(doc["checks"]):  # Checks.add: a failed check lists its first MAX_LISTED failures and counts
        # them all; a passed one lists and counts none (a passed check counting 5 passed: a re-attacker, 2026-12-07)
        n, count = len(c.get("failures", [])), c.get("n_failures")
        if (c["passed"] != (n == 0) or (c["passed"] and count is not None) or (n and count is None)
                or (count is not None and not (count == n if n < MAX_LISTED else count >= n))):
            problems.append((f"$.checks[{i}]", f"check {c['name']!r}: passed {c['passed']} with {n} failure(s) "
                             f"(n_failures {count})"))
    passed = all(c["passed"] for c in doc["checks"])
    if doc["passed"] != passed:
        problems.append(("$.passed", f"{doc['passed']}, the checks give {passed}"))
    found = ctx.locate(doc["path"])
    if found is None or ctx.revalidate is None or ctx.depth > 0:
        ctx.unverifiable("$.checks, $.unverified, $.document_kind", f"unverified (file not found or not re-validated "
                         f"here): {doc['path']}")
        add("validation_report_consistent", problems)
        return
    try:
        want = ctx.revalidate(str(found))
    except UserError as exc:
        problems.append(("$.path", f"{doc['path']}: validate refuses it ({exc})"))
    else:
        want["path"] = doc["path"]
        deep_diff(doc, want, "$", problems)
    add("validation_report_consistent", problems)


checks = one_check("validation_report_consistent", recompute)
