"""The ``validation_report`` kind: what ``validate --json`` (and ``--report``) says of one file. Its builder
(:func:`build`; :mod:`.validate` calls it for every file it judges) and its check (:func:`recompute`), in one
module.

- ``validation_report_consistent``: ``passed`` from the checks, failure counts; with the validated file at hand,
  the report re-made by ``validate`` and compared (kind, checks, verdicts, unverified list).

>>> c = Checks(); _ = c.add("file_size", [("$", "too large")])
>>> r = build("x.json", c); r["kind"], r["passed"], [ch["name"] for ch in r["checks"]], "unverified" in r
('validation_report', False, ['file_size'], False)
"""

from __future__ import annotations

from typing import Any

from ..core.kinds import schema_version
from ..errors import UserError
from .checks import Add, Checks, Context, Problems, one_check
from .sources import deep_diff

KIND = "validation_report"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def build(path: str, checks: Checks, document_kind: str | None = None, ctx: Context | None = None) -> dict[str, Any]:
    """The report on the file at ``path`` (as given): its ``checks`` so far, ``passed`` when every one passed;
    ``document_kind`` once the kind is known; ``ctx``'s unverified figures and warnings once the kind's checks ran
    (a report cut short at the size, syntax, kind or version has neither)."""
    report: dict[str, Any] = {"schema_version": schema_version("validation_report"), "kind": "validation_report",
                              "path": path}
    if document_kind is not None:
        report["document_kind"] = document_kind
    report.update(passed=all(c["passed"] for c in checks.items), checks=checks.items)
    if ctx is not None:
        report.update(unverified=ctx.unverified, warnings=ctx.warnings)
    return report


def recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    for i, c in enumerate(doc["checks"]):
        n = len(c.get("failures", []))
        if c["passed"] != (n == 0) or c.get("n_failures", 0) < n or (n and c.get("n_failures") is None):
            problems.append((f"$.checks[{i}]", f"check {c['name']!r}: passed {c['passed']} with {n} failure(s) "
                             f"(n_failures {c.get('n_failures')})"))
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
