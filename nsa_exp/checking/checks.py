"""The checks' plumbing: a named check records its problems as (JSON path, message) pairs; a number
recorded in a document is compared with its recomputation at a tolerance that fits the computation
(:func:`close`: integers, copies and hashes exactly; float reductions at :data:`REL_TOL`, see
:func:`reduction_tol`; iterative fits at their solver's tolerance, e.g.
:func:`nsa_exp.model.fit.refit_problems`; docs/SCHEMAS.md, Tolerances); a :class:`Context` carries
what a kind's checks may need beyond the document (its path, the files it names, what stays unverified).

Files a document names (its sources: the results a compare read, the raw CSV of an ncu summary, the points
of a calibration) are looked for by :meth:`Context.locate`: in the tree the document lies in first (a recorded
``results/noise/floors.json`` of a document in ``<root>/results/compare/`` is ``<root>/results/noise/floors.json``),
then beside the document (its own folder, then each folder above it, so a copied ``results/`` tree resolves
within itself), then relative to the working directory, then in this repository (the checkout the code runs from:
``configs/e1_h200.json`` of a submission validated from its own folder, as the compose ``validate`` service runs
in ``/submissions``; a new user, 2026-12-06); a path recorded absolute (on another machine) by its
tails, longest first, in those folders, and only then as itself; a path recorded relative and outside the
repository's own folders (``runs/reproduce_h200/e1_h200.json``) also by its shorter tails, beside the document
only; never as the document itself (:func:`nsa_exp.io.paths.locate_recorded`).
A source that is not found leaves its figures *unverified* (listed, never passed).

>>> c = Checks(); c.add("kind"), c.add("schema", [("$.a", "missing")])
(True, False)
>>> [(i["name"], i["passed"]) for i in c.items], close(1.0, 1.0 + 1e-13), close(3, 4), close(1.0, 1.0 + 1e-7, rel=1e-6)
([('kind', True), ('schema', False)], True, False, True)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import REPO_ROOT
from ..errors import UserError
from ..io.paths import locate_recorded

Problems = list[tuple[str, str]]
#: ``add(name, problems)`` records one check; returns whether it passed.
Add = Callable[[str, Problems], bool]
#: float64's machine epsilon (2**-52)
EPS = sys.float_info.epsilon


def schema_problems(errors: Iterable[str]) -> Problems:
    """:func:`nsa_exp.io.schemas.schema_errors`' lines (``<json path>: <message>``) as ``(path, message)``
    problems, split at the first ``": "``."""
    return [(path, message) for path, _, message in (e.partition(": ") for e in errors)]


def reduction_tol(n: int) -> float:
    """Relative room (float) between two evaluations of a float64 reduction of ``n`` like-signed terms
    (sum, mean, a percentile's interpolation) in different orders: ``n * EPS`` (Higham's bound
    ``gamma_n ~ n * u`` on each, ``u = EPS / 2``). Raises nothing; ``n < 1`` counts as 1."""
    return max(int(n), 1) * EPS


#: JSON floats round-trip exactly (Python writes repr), so a recorded statistic recomputes bit for bit with
#: the same numpy call; another summation order (another BLAS, thread count, numpy) may move it by at most
#: :func:`reduction_tol` of its length. 1e-12 = ``reduction_tol(4503)``: every reduction the documents hold
#: is shorter (the longest, a run's ``raw_ms``, has 150 terms; medians and bootstrap percentiles are order
#: statistics plus one interpolation), yet a one-observation change of ~n * 1e-12 relative is still seen.
REL_TOL = 1e-12


#: The most failures one check lists (``n_failures`` counts them all).
MAX_LISTED = 50


class Checks:
    """The named checks of one document, in the order they ran."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, name: str, problems: list[tuple[str, str]] | None = None) -> bool:
        """Record check ``name``; ``problems`` are (json_path, message) pairs (none = passed)."""
        problems = problems or []
        entry: dict[str, Any] = {"name": name, "passed": not problems}
        if problems:
            entry["failures"] = [{"path": p, "message": m} for p, m in problems[:MAX_LISTED]]
            entry["n_failures"] = len(problems)
        self.items.append(entry)
        return not problems


def close(a: float, b: float, rel: float = REL_TOL) -> bool:
    """``a`` and ``b`` agree to ``rel`` (relative; default :data:`REL_TOL`, a float reduction's room); two
    integers (counts, indices: an exact computation) agree only when equal. Returns a bool, raises nothing
    for numbers."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def same(recorded: Any, expected: Any) -> bool:
    """A recorded value equals the expected one (floats: :func:`close`; a bool is never a number)."""
    if isinstance(expected, float) or isinstance(recorded, float):
        return isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and close(recorded, expected)
    return recorded == expected


#: What a check raises on a value no schema rules out but no check expected (a CSV cell, a nested key): the file
#: FAILs that check with the error, and a batch of validate goes on to the files after it (:func:`guarded`, and
#: validate's net around a kind's checks).
UNCHECKABLE = (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError, OverflowError)


def guarded(name: str, add: Add, check: Callable[..., None], *args: Any) -> None:
    """Run one check; a document the schema let through but the check cannot read fails that check, and so does
    one holding what a door refuses (a :class:`UserError` raised while recomputing, e.g. an unknown pattern name in
    a calibration's points: that file fails, and ``validate`` goes on with the next instead of stopping with exit 2;
    an attacker's trial of 2026-12-05)."""
    try:
        check(*args)
    except UserError as exc:
        add(name, [("$", f"cannot be recomputed: {exc}")])
    except UNCHECKABLE as exc:
        add(name, [("$", f"cannot be recomputed: {type(exc).__name__}: {exc}")])


def first_difference(a: list, b: list) -> int:
    """The first index where ``a`` and ``b`` differ (the shorter length when one is a prefix)."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def fixed_field_problems(block: Mapping[str, Any], want: Mapping[str, Any], where: str, says: str) -> Problems:
    """``(where.key, ...)`` for each key of ``want`` whose value in the recorded ``block`` is not exactly ``want``'s:
    the values a command always records (its protocol's constants), held also where no source is at hand. ``says``
    names who fixes them, as the message reads.

    >>> fixed_field_problems({"seed": 1, "level": 0.95}, {"seed": 7, "level": 0.95}, "$.bootstrap", "compare records")
    [('$.bootstrap.seed', '1, compare records 7')]
    """
    return [(f"{where}.{k}", f"{block.get(k)!r}, {says} {v!r}") for k, v in want.items() if block.get(k) != v]


def source_missing(entry: dict[str, str]) -> bool:
    """An ``unverified`` entry of a check group that could not run because a source it reads (a routing file,
    the raw CSV, the results a derived file read, its config) was not found, or because the recorded argv is not
    this CLI's (its options, against which ``config_path``, ``name``, ``--resume``, ``--allow-gpu`` and the stop
    rule are checked, cannot be read: an attacker's argv[0] switched those checks off, 2026-12-06), or because its
    GPU is no row of the GPU table (its facts cannot be checked: an H200 run relabelled with a look-alike letter
    passed, 2026-12-06), or because a source it was rebuilt from has such a group itself: what ``validate --strict``
    fails on. Each such entry's reason starts ``unverified (``. Values no CPU can recompute (GPU latencies, host
    facts) are listed too but are not such a group."""
    return entry["why"].startswith("unverified (")


@dataclass
class Context:
    """What a kind's checks get besides the document: its path as given (``"<bytes>"`` when none),
    the routing files given with ``--routing-file``, how deep a re-validation this is (a validation
    report re-validates the file it names once), and the report's ``unverified`` / ``warnings`` lists."""

    path: str = "<bytes>"
    routing_files: Sequence[str] = ()
    #: the folders holding a release result's FLA (``validate --release-dir``), its imported files re-hashed
    release_dirs: Sequence[str] = ()
    depth: int = 0
    #: ``validate_path`` one level deeper (set by :mod:`.validate`; a validation report re-makes its report)
    revalidate: Callable[[str], dict[str, Any]] | None = None
    unverified: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)

    def unverifiable(self, path: str, why: str) -> None:
        """List the figures at ``path`` as not recomputed, with the reason."""
        self.unverified.append({"path": path, "why": why})

    def locate(self, recorded: str | None, folder: bool = False) -> Path | None:
        """The file (``folder``: the folder) a document records as ``recorded`` (see the module docstring), or
        None."""
        here = Path(self.path).resolve().parent if self.path != "<bytes>" else None
        return locate_recorded(recorded, [*([] if here is None else [here, *here.parents]), Path.cwd(),
                                          Path(REPO_ROOT)], folder,
                               beside=here, itself=None if here is None else Path(self.path))


#: A kind module's ``checks(doc, add, ctx)`` (:mod:`.kinds`): records its checks through ``add``, unverified
#: figures and warnings on ``ctx``.
KindChecks = Callable[[dict[str, Any], Add, Context], None]


def one_check(name: str, check: KindChecks,
              host: Callable[[dict[str, Any]], Problems] | None = None) -> KindChecks:
    """The ``checks`` of a kind whose checks are one function recording check ``name`` (guarded: a document
    the schema let through but the check cannot read fails that check); ``host``: plus ``metadata_plausible``,
    the problems ``host`` finds in the document's ``metadata`` (:func:`.record_checks.host_problems`).

    >>> c = Checks(); one_check("x_recompute", lambda doc, add, ctx: add("x_recompute", []))({}, c.add, Context())
    >>> run = one_check("x_recompute", lambda doc, add, ctx: doc["y"], host=lambda meta: [])
    >>> run({"metadata": {}}, c.add, Context())
    >>> [(i["name"], i["passed"]) for i in c.items]
    [('x_recompute', True), ('x_recompute', False), ('metadata_plausible', True)]
    """
    def run(doc: dict[str, Any], add: Add, ctx: Context) -> None:
        guarded(name, add, check, doc, add, ctx)
        if host is not None and "metadata" in doc:
            add("metadata_plausible", host(doc["metadata"]))
    run.__doc__ = check.__doc__
    return run
