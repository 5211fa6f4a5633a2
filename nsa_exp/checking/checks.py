"""The checks' plumbing: a named check records its problems as (JSON path, message) pairs; a number
recorded in a document is compared with its recomputation at :data:`REL_TOL`; a :class:`Context` carries
what a kind's checks may need beyond the document (its path, the files it names, what stays unverified).

Files a document names (its sources: the results a compare read, the raw CSV of an ncu summary, the points
of a calibration) are looked for by :meth:`Context.locate`: beside the document first (its own folder,
then each folder above it, so a copied ``results/`` tree resolves within itself), then relative to the
working directory, then by its file name beside the document (a path recorded on the GPU host, e.g.
``/root/out/x.raw.csv``, whose file was committed beside it). A source that is not found leaves its figures
*unverified* (listed, never passed).

>>> c = Checks(); c.add("kind"), c.add("schema", [("$.a", "missing")])
(True, False)
>>> [(i["name"], i["passed"]) for i in c.items], close(1.0, 1.0 + 1e-13)
([('kind', True), ('schema', False)], True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Problems = list[tuple[str, str]]
#: ``add(name, problems)`` records one check; returns whether it passed.
Add = Callable[[str, Problems], bool]
# JSON floats round-trip exactly (Python writes repr), so a recorded statistic recomputes bit for bit
# with the same numpy call; only a different summation order (another tool's mean) may move it, by at
# most ~n * 2**-53 (< 1e-13 for n <= 1000). 1e-12 leaves that room yet still sees a one-observation
# change of ~n * 1e-12 relative through the mean (a 1e-8 change was invisible at the old 1e-9).
REL_TOL = 1e-12


class Checks:
    """The named checks of one document, in the order they ran."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, name: str, problems: list[tuple[str, str]] | None = None) -> bool:
        """Record check ``name``; ``problems`` are (json_path, message) pairs (none = passed)."""
        problems = problems or []
        entry: dict[str, Any] = {"name": name, "passed": not problems}
        if problems:
            entry["failures"] = [{"path": p, "message": m} for p, m in problems[:50]]
            entry["n_failures"] = len(problems)
        self.items.append(entry)
        return not problems


def close(a: float, b: float) -> bool:
    """``a`` and ``b`` agree to :data:`REL_TOL` (relative)."""
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b), 1e-12)


def same(recorded: Any, expected: Any) -> bool:
    """A recorded value equals the expected one (floats: :func:`close`; a bool is never a number)."""
    if isinstance(expected, float) or isinstance(recorded, float):
        return isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and close(recorded, expected)
    return recorded == expected


def guarded(name: str, add: Add, check: Callable[..., None], *args: Any) -> None:
    """Run one check; a document the schema let through but the check cannot read fails that check."""
    try:
        check(*args)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError, OverflowError) as exc:
        add(name, [("$", f"cannot be recomputed: {type(exc).__name__}: {exc}")])


def first_difference(a: list, b: list) -> int:
    """The first index where ``a`` and ``b`` differ (the shorter length when one is a prefix)."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


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

    def locate(self, recorded: str | None) -> Path | None:
        """The file a document records as ``recorded`` (see the module docstring), or None."""
        if not recorded:
            return None
        p = Path(recorded)
        here = Path(self.path).resolve().parent if self.path != "<bytes>" else None
        beside = [] if here is None else [here / p.name]  # written elsewhere (the GPU host's /root/out/...), kept here
        if p.is_absolute():
            return next((c for c in [p, *beside] if c.is_file()), None)
        candidates = [] if here is None else [here / p, *(d / p for d in here.parents)]
        candidates += [Path.cwd() / p, *beside]
        return next((c for c in candidates if c.is_file()), None)
