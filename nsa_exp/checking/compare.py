"""The ``compare`` kind: is B faster, slower or the same as A, per pattern x stage (``compare``; the rule, the
floors and what is refused: :mod:`nsa_exp.analysis.compare`). Its builder (:func:`build`: the rows and floors from
:func:`~nsa_exp.analysis.compare.bench_comparison` or, when a side is a release result,
:func:`~nsa_exp.analysis.compare.release_comparison`; the ``compare`` command, ``report`` and ``reproduce`` call it)
and its check (:func:`recompute`), in one module.

- ``compare_recompute``: with A and B (and the repeat pair or the noise table of the floors) at hand, the whole
  document rebuilt by :func:`build` with its recorded resamples, floor, space and ``fail_on`` (rows, ratios, CIs,
  verdicts, floors, counts, ``failed``, the sources' names, GPUs, dates, shas), and a noise table that does not
  itself validate named; without them: ratio = b_median / a_median, each verdict from its CI and floor, each
  floor the recorded stage floor, counts from the verdicts, ``failed`` from ``fail_on``; with A and B at hand but
  not the floors' source, also the sides and each row's medians, ratio and CI rebuilt from A and B.
"""

from __future__ import annotations

import json
import tempfile
from datetime import timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import REPO_ROOT
from ..analysis.bootstrap import CI_LEVEL, METHOD, RESAMPLES, SEED
from ..analysis.compare import (
    DEFAULT_FLOOR,
    MAX_RESAMPLES,
    MIN_RESAMPLES,
    VERDICT_RULE,
    bench_comparison,
    check_compare_arguments,
    peer_comparison,
    release_comparison,
    tally,
    verdict,
)
from ..analysis.noise import SHARED_LIMIT, shared_observations
from ..analysis.noise_table import compare_floors, floors_of
from ..analysis.peer_compare import gpu_of
from ..analysis.release_compare import Side
from ..core.kinds import schema_version
from ..core.records import BenchResult, ReleaseResult
from ..errors import UserError
from ..io.metadata import commit_time, file_versions
from ..io.paths import recorded_path, tracked_files
from ..io.reader import read_bounded, same_file
from ..io.store import load_document
from ..io.strict_json import MAX_BYTES, _Rejected, parse_strict
from .checks import Add, Context, Problems, close, fixed_field_problems, one_check
from .record_checks import parse_utc
from .sources import deep_diff, failed_checks, read_source, rebuilt_from, source_problems

KIND = "compare"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def _side(path: str | Path, doc: Side | dict[str, Any]) -> dict[str, Any]:
    if isinstance(doc, dict):  # a peer result (no typed record)
        return {"path": recorded_path(path), "name": doc["name"], "gpu": gpu_of(doc),
                "created_utc": doc["metadata"]["created_utc"], "git_sha": doc["metadata"]["git"]["sha"]}
    return {"path": recorded_path(path), "name": doc.name, "gpu": doc.gpu_name,
            "created_utc": doc.metadata["created_utc"], "git_sha": doc.metadata["git"]["sha"]}


def _record(doc: dict[str, Any], label: str) -> Side:
    """A bench or release result's document as its typed record (one UserError line naming ``label``)."""
    try:
        return (BenchResult if doc["kind"] == "bench_result" else ReleaseResult).from_json(doc)
    except ValueError as exc:
        raise UserError(f"{label}: {exc}") from None


#: The kinds ``compare`` reads.
SIDES = ("bench_result", "release_result", "peer_result")


def build(path_a: str | Path, path_b: str | Path, noise_from: list[str] | None = None, floor: float | None = None,
          cycles: bool = False, fail_on: str | None = None, resamples: int = RESAMPLES,
          noise_table: str | Path | None = None) -> dict[str, Any]:
    """The ``compare`` document of B against A (bench, release or peer results); nothing is written here.

    The floors: ``noise_from`` (a repeat pair), else ``floor`` (one fraction for every stage), else the noise
    table at ``noise_table`` (default: the committed one). Raises UserError (exit 2, one line) for bad arguments
    (:func:`~nsa_exp.analysis.compare.check_compare_arguments`), an unreadable or invalid result, and every refusal of
    :func:`~nsa_exp.analysis.compare.bench_comparison` / :func:`~nsa_exp.analysis.compare.release_comparison` /
    :func:`~nsa_exp.analysis.compare.peer_comparison`.
    """
    check_compare_arguments(noise_from, floor, fail_on, resamples)
    da, db = load_document(path_a, SIDES, f"A {path_a}"), load_document(path_b, SIDES, f"B {path_b}")
    extra: dict[str, Any] = {}
    a: Side | dict[str, Any]
    b: Side | dict[str, Any]
    if "peer_result" in (da["kind"], db["kind"]):
        a, b = da, db
        source, floors, rows, extra["peers"] = peer_comparison(path_a, da, path_b, db, noise_from, floor, cycles,
                                                              resamples, noise_table)
    else:
        ra, rb = _record(da, f"A {path_a}"), _record(db, f"B {path_b}")
        a, b = ra, rb
        if isinstance(ra, BenchResult) and isinstance(rb, BenchResult):
            source, floors, rows = bench_comparison(path_a, ra, path_b, rb, noise_from, floor, cycles, resamples,
                                                    noise_table)
        else:
            source, floors, rows, extra["release"] = release_comparison(path_a, ra, path_b, rb, noise_from, floor,
                                                                        cycles, resamples, noise_table)
    counts, failed = tally(rows, fail_on)
    doc = {"schema_version": schema_version("compare"), "kind": "compare", "a": _side(path_a, a),
           "b": _side(path_b, b), "space": "cycles" if cycles else "time", "unit": "kcycles" if cycles else "ms",
           "bootstrap": {"resamples": resamples, "seed": SEED, "level": CI_LEVEL, "method": METHOD, "paired": False},
           "rule": VERDICT_RULE, "noise_floor": {**source, "per_stage": floors}, "rows": rows,
           "counts": counts, "fail_on": fail_on, "failed": failed}
    return {**doc, **extra}


def recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    floors = doc["noise_floor"]["per_stage"]
    for i, r in enumerate(doc["rows"]):
        path = f"$.rows[{i}]"
        if not close(r["ratio"], r["b_median"] / r["a_median"]):
            problems.append((f"{path}.ratio", f"{r['ratio']}, b_median / a_median = {r['b_median'] / r['a_median']}"))
        if r["floor"] != floors.get(r["stage"]):
            problems.append((f"{path}.floor", f"{r['floor']}, the recorded floor of {r['stage']} is "
                             f"{floors.get(r['stage'])}"))
        if r["verdict"] != verdict(tuple(r["ci95"]), r["floor"]):
            problems.append((f"{path}.verdict", f"{r['verdict']!r}, CI {r['ci95']} with floor {r['floor']} reads "
                             f"{verdict(tuple(r['ci95']), r['floor'])!r}"))
        if not r["ci95"][0] <= r["ci95"][1]:
            problems.append((f"{path}.ci95", "low above high"))
    # compare's own bootstrap (analysis/bootstrap.py): a level of 0.5 or another seed, beside sides found nowhere,
    # PASSed (an attacker, 2026-12-07); the resamples are the command line's, within its bounds
    problems += fixed_field_problems(doc["bootstrap"], {"seed": SEED, "level": CI_LEVEL, "method": METHOD,
                                                        "paired": False}, "$.bootstrap", "compare always records")
    if not MIN_RESAMPLES <= doc["bootstrap"].get("resamples", 0) <= MAX_RESAMPLES:
        problems.append(("$.bootstrap.resamples", f"{doc['bootstrap'].get('resamples')}, compare takes "
                         f"{MIN_RESAMPLES}..{MAX_RESAMPLES}"))
    counts, failed = tally(doc["rows"], doc["fail_on"])
    if doc["counts"] != counts:
        problems.append(("$.counts", f"{doc['counts']}, the rows give {counts}"))
    if doc["failed"] != failed:
        problems.append(("$.failed", f"{doc['failed']}, but fail_on {doc['fail_on']!r} and the verdicts give {failed}"))
    nf = doc["noise_floor"]
    if nf["kind"] == "default" and len(set(floors.values())) > 1:
        problems.append(("$.noise_floor.per_stage", "a default floor is one value for every stage"))
    if "peers" in doc and nf["kind"] == "repeat":
        problems.append(("$.noise_floor.kind", "a comparison with a peer result takes no repeat pair (compare "
                         "refuses --noise-from there)"))
    a, b = (read_source(ctx, doc[k]["path"], SIDES) for k in ("a", "b"))
    if a[0] is not None and b[0] is not None and same_file(a[0], b[0]) and doc["a"]["path"] != doc["b"]["path"]:
        # two recorded paths found as one file (a submission folder's run by its name): B against itself proves nothing
        problems.append(("$.b.path", f"{doc['b']['path']} and A's {doc['a']['path']} are found as one file, {a[0]}: "
                         "a comparison needs both runs at hand"))
        add("compare_recompute", problems)
        return
    for side, source in (("a", a), ("b", b)):  # the sides must hold too: a forged source rebuilds a forged comparison
        problems += source_problems(ctx, f"$.{side}.path", doc[side]["path"], source, SIDES)
    kinds = ("noise_table",) if nf["kind"] == "table" else ("bench_result",)
    pair = [read_source(ctx, p, kinds) for p in nf["paths"]]
    if nf["kind"] == "repeat":  # the repeat pair's runs are sources too (a table is revalidated below)
        problems += [x for i, (p, source) in enumerate(zip(nf["paths"], pair, strict=True))
                     for x in source_problems(ctx, f"$.noise_floor.paths[{i}]", p, source, kinds)]
    if a[1] is None or b[1] is None or any(d is None for _, d in pair):
        missing = [p for p, (_, d) in zip([doc["a"]["path"], doc["b"]["path"], *nf["paths"]], (a, b, *pair),
                                          strict=True) if d is None]
        if a[1] is not None and b[1] is not None:  # only the floors' source is missing: the rows still recompute
            ctx.unverifiable("$.noise_floor, $.rows[*].floor", f"unverified (source not found): {', '.join(missing)}; "
                             "the rows' medians, ratios and CIs are recomputed from A and B, each verdict from its CI "
                             "and the recorded floor")
            _rebuild_rows(doc, a, b, problems)
        else:
            ctx.unverifiable("$.rows[*] (medians, CIs), $.noise_floor, $.a, $.b", f"unverified (source not found): "
                             f"{', '.join(missing)}; only the internal rules are checked")
        add("compare_recompute", problems)
        return
    floor = next(iter(floors.values()), 0.02) if nf["kind"] == "default" else None
    table = pair[0][0] if nf["kind"] == "table" else None
    with tempfile.TemporaryDirectory(prefix="nsa-exp-floors-") as scratch:
        at_hand = pair[0][1] if table is not None else None  # the noise table as read_source parsed it
        found = table_as_read(doc, nf["paths"][0], at_hand, [a[1], b[1]], Path(scratch)) if at_hand else None
        then = found[0] if found else None
        if found is not None:
            ctx.warnings.append({"check": "compare_recompute", "path": "$.noise_floor", "message": "its floors are "
                                 f"those of an earlier committed {nf['paths'][0]} (commit {found[0].stem}), not of the "
                                 "one at hand: its verdicts are recomputed with those; compare again for today's"})
            if not found[1]:
                ctx.unverifiable("$.noise_floor", "unverified (source not found): its floors are chosen by a side's "
                                 "creation time, which validate cannot check, and this repository commits no copy of "
                                 "that run to date it (commit the run, or compare again for today's floors)")
        _rebuild(doc, ctx, a, b, pair, floor, then or table, then is None, problems)
    add("compare_recompute", problems)


def table_as_read(doc: dict[str, Any], recorded: str, at_hand: dict[str, Any], sides: list[dict[str, Any]],
                  scratch: Path) -> tuple[Path, bool] | None:
    """The noise table the comparison read, when it is not the one at hand but the version this repository had
    committed when the later of its ``sides`` was created (in git's history, :func:`nsa_exp.io.metadata.file_versions`:
    committed before, replaced after), if its floors for the comparison's stages and the sides' GPUs are the recorded
    ones, written into ``scratch``; None when the table at hand (``at_hand``, parsed) gives them, or that version does
    not (the table at hand is read, and its floors disagree). A reproduce submission's compare, judged by the floors
    of its day, FAILed against floors committed since (a new user, 2026-12-06); a version replaced before B was
    measured cannot have judged it, and one committed after is not the one of its day (re-attackers flipped 4
    verdicts with each, 2026-12-06). A committed version needs no revalidation: it is this repository's own."""
    stages, want = list(doc["noise_floor"]["per_stage"]), doc["noise_floor"]["per_stage"]
    gpus = [gpu_of(s) for s in sides]

    def floors(table: dict[str, Any]) -> dict[str, float] | None:
        try:
            return compare_floors(floors_of(table), stages, gpus, DEFAULT_FLOOR)[0]
        except (KeyError, TypeError):
            return None

    def version_floors(data: bytes) -> dict[str, float] | None:
        try:
            return floors(json.loads(data))
        except ValueError:
            return None

    if floors(at_hand) == want:
        return None
    # a side's creation time as this repository committed the run (its twin), else as the side records it; read only
    # here, where the table at hand does not give the floors (it parses every committed bench result)
    twins = [committed_twin(s) for s in sides]
    made = [parse_utc(((t or s).get("metadata") or {}).get("created_utc")) for s, t in zip(sides, twins, strict=True)]
    if None in made:
        return None
    measured = max(m.replace(tzinfo=timezone.utc).timestamp() for m in made if m is not None)
    versions = file_versions(recorded, REPO_ROOT)  # newest first: each replaced when the one before it was committed
    since = [commit_time(sha, REPO_ROOT) or 0 for sha, _ in versions]
    replaced = [float("inf"), *since[:-1]]
    # the one version in force when the later side was measured (committed before, replaced after): any version
    # replaced after it let a compare made today pick among six tables, 4 dK/dV verdicts flipped (a re-attacker,
    # 2026-12-06)
    found = next(((sha, data) for (sha, data), start, until in zip(versions, since, replaced, strict=True)
                  if start <= measured < until), None)
    if found is None or version_floors(found[1]) != want:
        return None
    out = scratch / f"{found[0][:12]}.json"  # named by its commit (the warning names it)
    out.write_bytes(found[1])
    return out, None not in twins


def committed_twin(side: dict[str, Any]) -> dict[str, Any] | None:
    """The bench result this repository commits (``results/raw/``, ``docs/logs/``; as git tracks them) that holds the
    run ``side`` holds (:func:`~nsa_exp.analysis.noise.shared_observations`), or None. Its creation time is committed
    evidence; a side's own is not: a copy of a committed run with only ``created_utc`` moved chose an older noise
    table and hid 8 slowdowns under --strict (a re-attacker, 2026-12-06)."""
    for twin in _committed_runs():
        if gpu_of(twin) == gpu_of(side) and shared_observations(side, twin) >= SHARED_LIMIT:
            return twin
    return None


@lru_cache(maxsize=1)
def _committed_runs() -> tuple[dict[str, Any], ...]:
    """Every committed bench result under results/raw/ and docs/logs/ (git's files; every file there without git),
    as much of it as :func:`committed_twin` reads."""
    tracked = tracked_files(Path(REPO_ROOT))
    runs = []
    for folder in ("results/raw", "docs/logs"):
        for path in sorted((Path(REPO_ROOT) / folder).rglob("*.json")):
            rel = path.relative_to(REPO_ROOT).as_posix()
            if tracked is not None and rel not in tracked:
                continue
            try:
                d = parse_strict(read_bounded(path, rel, MAX_BYTES))
            except (OSError, UserError, _Rejected):
                continue
            if isinstance(d, dict) and d.get("kind") == "bench_result":
                runs.append({"metadata": d.get("metadata"), "patterns": {
                    n: {"stages": {st: {"raw_ms": s.get("raw_ms")} for st, s in (c.get("stages") or {}).items()}}
                    for n, c in (d.get("patterns") or {}).items()}})
    return tuple(runs)


def _rebuild(doc: dict[str, Any], ctx: Context, a: Any, b: Any, pair: list[Any], floor: float | None,
             table: Path | None, revalidate: bool, problems: Problems) -> None:
    """The comparison rebuilt from its sides and floors (``table``: the noise table read; ``revalidate``: whether
    it must pass validate, not for a table of this repository's history) and diffed against ``doc``."""
    nf = doc["noise_floor"]
    # the floors' own source must hold too (a forged table)
    if table is not None and revalidate:
        if bad := ", ".join(failed_checks(ctx, table)):
            problems.append(("$.noise_floor.paths[0]", f"{nf['paths'][0]}: the noise table these floors come from "
                             f"does not validate ({bad}); the verdicts rest on floors no committed result backs"))
        else:  # a table that passes with its floors unverified (a source of its found nowhere) leaves them so here
            rebuilt_from(ctx, "$.noise_floor.paths[0]", nf["paths"][0], table)
    want = _built(doc, a, b, problems, noise_from=[str(p) for p, _ in pair] if nf["kind"] == "repeat" else None,
                  floor=floor, noise_table=table)
    if want is not None:
        if nf["kind"] in ("repeat", "table"):
            want["noise_floor"]["paths"] = nf["paths"]
            want["noise_floor"]["rule"] = (want["noise_floor"]["rule"].replace(str(table), nf["paths"][0])
                if table is not None else want["noise_floor"]["rule"])
        deep_diff(doc, want, "$", problems)


def _rebuild_rows(doc: dict[str, Any], a: Any, b: Any, problems: Problems) -> None:
    """The sides, a peer or release comparison's own block, and every row but its floor and verdict rebuilt from A
    and B at hand, when the floors' source is not (the recorded floors and the verdicts they give are held to the
    rules in :func:`recompute`). A compare whose noise table was renamed to a missing file, its A and B at hand,
    carried a median forged 38% lower with its CI and verdict, and passed (an attacker, 2026-12-07); so did its peer
    and release blocks edited (a re-attacker, the same day)."""
    want = _built(doc, a, b, problems, floor=DEFAULT_FLOOR)
    if want is None:
        return
    rows = [{**w, "floor": d.get("floor"), "verdict": d.get("verdict")} if isinstance(d, dict) else w
            for w, d in zip(want["rows"], doc["rows"], strict=False)] + want["rows"][len(doc["rows"]):]
    keys = ("a", "b", "space", "unit", *(k for k in ("peers", "release") if k in want or k in doc))
    deep_diff({**{k: doc.get(k) for k in keys}, "rows": doc["rows"]},
              {**{k: want[k] for k in keys}, "rows": rows}, "$", problems)


def _built(doc: dict[str, Any], a: Any, b: Any, problems: Problems, **floors: Any) -> dict[str, Any] | None:
    """The comparison :func:`build` makes of the sides at hand (``a``, ``b``: (path found, document)) with
    ``doc``'s space, ``fail_on`` and resamples and the given floors' source (``noise_from``, ``floor`` or
    ``noise_table``), its sides' paths as ``doc`` gives them; None, with the refusal in ``problems``, when it cannot
    be built."""
    try:
        want = build(a[0], b[0], cycles=doc["space"] == "cycles", fail_on=doc["fail_on"],
                     resamples=doc["bootstrap"]["resamples"], **floors)
    except UserError as exc:
        problems.append(("$", f"cannot be recomputed from its sources: {exc}"))
        return None
    want["a"]["path"], want["b"]["path"] = doc["a"]["path"], doc["b"]["path"]  # as given, not as located
    return want


checks = one_check("compare_recompute", recompute)
