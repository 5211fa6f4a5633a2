"""The ``noise_table`` kind: the committed noise floors f(GPU, stage) (results/noise/floors.json, written by
``noise-table``; read by every door through :mod:`nsa_exp.analysis.noise_table`). Its builder (:func:`build`: the
rows from :func:`nsa_exp.analysis.noise_table.floor_rows`) and its check (:func:`recompute`), in one module.

- ``noise_table_recompute``: every source it names read (bench results, sweep points) and the table rebuilt by
  :func:`build` (rows, floors, rules, the quantities and members that set them); every committed file of
  :data:`nsa_exp.analysis.noise_table.SOURCES` under the table's repository must be a source or excluded (a
  dropped file is named), an excluded file must fail ``validate``; without the sources: each floor from its
  ``set_by`` spread (at least ``min_floor``), a borrowed floor equal to its lender's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from itertools import combinations
from pathlib import Path, PurePosixPath
from typing import Any

from .. import REPO_ROOT
from ..analysis.noise import MIN_FLOOR, MIN_ROUNDS, SHARED_LIMIT, shared_observations
from ..analysis.noise_table import FLOOR_RULE, NOISE_TABLE, committed_sources, floor_rows
from ..core.kinds import schema_version
from ..core.records import BenchResult, RunRecord, SweepPoint
from ..io.metadata import file_versions
from ..io.paths import changed_files, tracked_files
from ..io.reader import read_bounded
from ..io.strict_json import MAX_BYTES
from .checks import Add, Context, Problems, close, one_check
from .sources import deep_diff, read_source, source_problems
from .stats_checks import stats_problems

KIND = "noise_table"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS
SOURCE_KINDS = ("bench_result", "sweep_point")  # what a source may be


def build(runs: Iterable[tuple[str, RunRecord]], excluded: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The noise table of ``runs`` (``(repo-relative path, record)``: bench results and sweep points);
    ``excluded``: path -> why a committed source was left out (recorded as such)."""
    runs = list(runs)
    return {"schema_version": schema_version("noise_table"), "kind": "noise_table", "rule": FLOOR_RULE,
            "min_floor": MIN_FLOOR, "min_rounds": MIN_ROUNDS, "sources": sorted(p for p, _ in runs),
            "excluded": [{"path": p, "why": w} for p, w in sorted((excluded or {}).items())],
            "floors": floor_rows(runs)}


def recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    by_stage = {(r["gpu"], r["stage"]): r for r in doc["floors"]}
    for i, r in enumerate(doc["floors"]):
        q, path = r["set_by"], f"$.floors[{i}]"
        if r["rule"] == "borrowed":
            src = r["borrowed_from"] or {}
            lender = by_stage.get((src.get("gpu"), src.get("stage")))
            want = max(doc["min_floor"], lender["floor"]) if lender else doc["min_floor"]
        else:
            want = max(doc["min_floor"], q["spread"]) if q else None
            if q and (r["rule"] == "minimum") != (q["spread"] < doc["min_floor"]):
                problems.append((f"{path}.rule", f"{r['rule']!r}, but the spread {q['spread']} is "
                                 f"{'below' if q['spread'] < doc['min_floor'] else 'at least'} {doc['min_floor']}"))
        if want is None or not close(r["floor"], want):
            problems.append((f"{path}.floor", f"{r['floor']}, its {r['rule']} derivation gives {want}"))
    named = [*doc["sources"], *(e["path"] for e in doc["excluded"])]
    odd = [p for p in named if PurePosixPath(p).is_absolute() or ".." in PurePosixPath(p).parts or "\\" in p]
    if odd:  # 'results/raw/../raw/x.json' moved the root the completeness check reads to '/' (an attacker, 2026-12-06)
        problems.append(("$.sources", f"{odd[0]}: a source is a repository-relative path without '..' (as "
                         "noise-table records it)"))
        add("noise_table_recompute", problems)
        return
    found = [read_source(ctx, p, SOURCE_KINDS) for p in doc["sources"]]
    missing = [p for p, (_, d) in zip(doc["sources"], found, strict=True) if d is None]
    if missing:
        ctx.unverifiable("$.floors", f"unverified (source not found or not a result): {', '.join(missing[:5])}"
                         + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
                         + "; only each floor against its set_by spread is checked")
        add("noise_table_recompute", problems)
        return
    located = [s for s in found if s[1] is not None]  # every source (none is missing)
    first = located[0][0]
    root = first.resolve().parents[len(Path(doc["sources"][0]).parts) - 1]
    committed, as_in_tree = _committed_version(doc)
    # outside it, only the repository's table as it stands (committed, or in an image without git its file): an older
    # version copied into a tree of its own escaped the rule that a compare is judged by the table of its day (a
    # re-attacker, 2026-12-06; compare.table_as_read)
    ours = root == Path(REPO_ROOT).resolve() or (
        as_in_tree and (committed or tracked_files(Path(REPO_ROOT)) is None))
    # Which results are committed is known only in this repository (REPO_ROOT, the checkout the code runs from):
    # elsewhere every file there counted (a table of four chosen runs in a folder of their own, and a compare judged
    # by it, PASSed --strict with every dK/dV verdict flipped), and a tree's own git too (`git init` and `git add`
    # made the same folder a checkout: a reviewer, 2026-12-06). Outside it a table must be this repository's own.
    if not ours:
        problems.append(("$.sources", f"the table's sources lie under {root}, not in this repository ({REPO_ROOT}), "
                         f"and it is not this repository's {NOISE_TABLE}: which results are committed there "
                         "cannot be known, so its completeness cannot be (run python -m nsa_exp from the checkout "
                         "that holds your results to validate a table of your own)"))
    elsewhere = [(p, where) for p, (where, _) in zip(doc["sources"], located, strict=True)
                 if where.resolve() != root / p]
    if elsewhere:  # one root: a first source found in the repository must not vouch for the others' tree
        problems.append(("$.sources", f"{elsewhere[0][0]} is found at {elsewhere[0][1]}, outside {root}, where the "
                         "first source lies: a table's sources are one tree's"))
    problems += _copies(doc["sources"], [d for _, d in located])
    # a source that differs from the checkout's HEAD is validated in full even under a committed table: a forged source
    # whose statistics agree with its own observations, in a tree whose committed table was rebuilt from it, gave the
    # compare door other floors (an attacker, 2026-12-06, once the door read the table as a source)
    changed = changed_files(root) if ctx.depth and committed else frozenset()
    for i, (p, (where, d)) in enumerate(zip(doc["sources"], located, strict=True)):
        # the floors are only as good as their sources (every floor of a forged table rebuilt from a repeat whose
        # medians were x1.6 matched, and a compare judged by it PASSed: an attacker, 2026-12-06). Validated here,
        # every check; as another document's source (a compare's floors) too, unless the table is a version this
        # repository committed, whose rebuild from the sources' statistics (below) must then give its floors: checking
        # only the statistics of a table rebuilt with an H100 run relabelled H200 let a compare PASS --strict beside
        # the FAILing table (an attacker, 2026-12-06). Each source is validated once per process (validate_path).
        if ctx.depth == 0 or not committed or changed is None or p in changed:
            problems += source_problems(ctx, f"$.sources[{i}]", p, (where, d), SOURCE_KINDS)
        else:
            problems += [(f"$.sources[{i}]", f"{p}: {at} {what}") for name, cell in d["patterns"].items()
                         for stage, s in cell["stages"].items()
                         for at, what in stats_problems(s, f"{name}.{stage}")][:1]
    excluded = {e["path"]: e["why"] for e in doc["excluded"]}
    for p in committed_sources(root):
        if p not in excluded and p not in doc["sources"]:
            problems.append(("$.sources", f"{p} is committed under {root} but neither a source nor excluded "
                             "(regenerate with `python -m nsa_exp noise-table --publish --overwrite`)"))
    for p in excluded:
        there = root / p
        if not there.is_file():
            problems.append(("$.excluded", f"{p}: no such file under {root}"))
        elif ctx.revalidate is not None and ctx.revalidate(str(there))["passed"]:
            problems.append(("$.excluded", f"{p} passes validate; it belongs among the sources"))
    runs = [(p, (BenchResult if d["kind"] == "bench_result" else SweepPoint).from_json(d))
            for p, (_, d) in zip(doc["sources"], located, strict=True)]
    rebuilt: Problems = []
    deep_diff(doc, build(runs, excluded), "$", rebuilt)
    said = {where for where, _ in problems}  # a forged floor is said once, by its derivation above
    add("noise_table_recompute", problems + [(where, what) for where, what in rebuilt if where not in said])


def _copies(paths: list[str], docs: list[dict[str, Any]]) -> Problems:
    """Sources that hold one run twice: two of one experiment (GPU, shape, patterns) sharing at least
    :data:`~nsa_exp.analysis.noise.SHARED_LIMIT` of a stage's timed observations (:func:`shared_observations`). A
    copy of e1_h100.json planted beside it set the H100 selection_fwd floor to the 0.5 % minimum as a "repeat" (an
    attacker, 2026-12-06); compare refuses such a --noise-from pair."""
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for p, d in zip(paths, docs, strict=True):
        gpu = ((d.get("metadata") or {}).get("gpu") or {}).get("name")
        key = json.dumps([gpu, d.get("shape"), (d.get("config") or {}).get("patterns")], sort_keys=True)
        groups.setdefault(key, []).append((p, d))
    return [("$.sources", f"{q} holds the run {p} (its timed observations, one for one): a floor needs a result and "
             "its independent repeat") for members in groups.values() for (p, a), (q, b) in combinations(members, 2)
            if shared_observations(a, b) >= SHARED_LIMIT]


def _committed_version(doc: dict[str, Any]) -> tuple[bool, bool]:
    """Whether ``doc`` is, as parsed, a version of this repository's :data:`~nsa_exp.analysis.noise_table.NOISE_TABLE`
    that its git history holds (:func:`nsa_exp.io.metadata.file_versions`), and whether it is the file in its tree."""
    def same(data: bytes) -> bool:
        try:
            return bool(json.loads(data) == doc)
        except ValueError:
            return False

    on_disk = Path(REPO_ROOT) / NOISE_TABLE
    return (any(same(data) for _, data in file_versions(NOISE_TABLE, REPO_ROOT)),
            on_disk.is_file() and same(read_bounded(on_disk, NOISE_TABLE, MAX_BYTES)))


checks = one_check("noise_table_recompute", recompute)
