"""``validate``: check a result file, ours or a third party's, beyond what a schema can say.

Each check has a name and, when it fails, a message with the JSON path it concerns. Order:

1. ``file_size`` (<= 64 MiB, before parsing) and ``json_syntax`` (strict: no duplicate keys, no
   NaN/Infinity tokens, no non-finite or over-long numbers, nesting <= 64).
2. ``kind`` (a known document kind), ``schema_version`` (one we can read) and ``schema``.
3. For a sweep point (``kind: sweep_point``): ``stats_recompute``, ``min_observations``,
   ``latencies_positive_finite`` over the stages it timed, then ``recompute.sweep_point_recompute``
   (``config_semantics``, ``pattern_set``, ``routing_recompute``).
   For a bench result (``kind: bench_result``), once the schema passes:
   ``shape_matches_config``, ``edges_equal`` (equal across patterns, to the per-pattern record and to
   the closed form for the recorded shape), ``stats_recompute`` (every median/percentile/min/mean/n
   from its raw observations), ``min_observations`` (each stage has at least the run's recorded
   repetitions), ``latencies_positive_finite``, ``fla_commit`` (the pinned commit, verification
   passed), ``environment_recorded`` (GPU, driver, versions), ``stage_sum_plausible`` (stage-sum over
   full_bwd recomputes and lies in [0.75, 1.25]), ``cupti_agreement`` (with a ``cupti`` block).

4. Then ``recompute.bench_recompute``: every other derived number recomputed from its source, or listed
   under ``unverified`` (``config_semantics``, ``pattern_set``, ``routing_recompute``,
   ``reproduction_flags``, ``timing_recompute``, ``telemetry_recompute``, ``memory_recompute``,
   ``gates_consistent``, ``ratio_recompute``, ``metadata_plausible``; see that module).

A CSV summary is validated row by row against ``summary_row``, then as a table and, given with its
JSON, cell by cell (``csv_checks``).

>>> report = validate_bytes(b'{"a": 1, "a": 2}', "x.json")
>>> [(c["name"], c["passed"]) for c in report["checks"]]
[('file_size', True), ('json_syntax', False)]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import PINNED_COMMIT
from ..errors import UserError
from ..routing.patterns import generate_routing
from ..routing.stages import BACKWARD_STAGES
from .autotune_checks import autotune_arm_problems, matrix_checks
from .csv_checks import json_problems, read_csv, table_problems, typed_value
from .cupti import cupti_problems
from .file_checks import NOT_SUPPLIED, edge_problems, routing_file_recompute
from .latency import PERCENTILES
from .recompute import bench_recompute, sweep_point_recompute
from .release import release_recompute
from .schema import KINDS, SUMMARY_COLUMNS, schema_errors, schema_version
from .strict_json import MAX_BYTES, _Rejected, parse_strict

SUPPORTED_VERSIONS = {"1.0"}
STAGE_SUM_BOUNDS = (0.75, 1.25)
# JSON floats round-trip exactly (Python writes repr), so a recorded statistic recomputes bit for bit
# with the same numpy call; only a different summation order (another tool's mean) may move it, by at
# most ~n * 2**-53 (< 1e-13 for n <= 1000). 1e-12 leaves that room yet still sees a one-observation
# change of ~n * 1e-12 relative through the mean (a 1e-8 change was invisible at the old 1e-9).
REL_TOL = 1e-12
SCHEMA_VERSION = schema_version("validation_report")


class _Checks:
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


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b), 1e-12)


def _stats_checks(doc: dict[str, Any], checks: _Checks) -> None:
    """``stats_recompute``, ``min_observations``, ``latencies_positive_finite`` over every recorded stage
    (a bench result's six, or the stages a sweep point timed)."""
    stats_p, obs_p, lat_p = [], [], []
    # The run's own rounds (``bench --repetitions`` may shorten a run; timing_recompute pins that every
    # stage has exactly these, and the report names a run shorter than its config's as such).
    want_n = doc["timing"]["repetitions"]
    for name, p in doc["patterns"].items():
        for stage, s in p["stages"].items():
            path = f"$.patterns.{name}.stages.{stage}"
            raw = np.asarray(s["raw_ms"], dtype=np.float64)
            if not np.all(np.isfinite(raw)) or np.any(raw <= 0):
                lat_p.append((f"{path}.raw_ms", "non-positive or non-finite latency"))
                continue
            recomputed = {"median_ms": float(np.median(raw)), "min_ms": float(raw.min()), "mean_ms": float(raw.mean())}
            recomputed |= {k: float(np.percentile(raw, q, method="linear")) for k, q in PERCENTILES.items()}
            for key, value in recomputed.items():
                if not _close(s[key], value):
                    stats_p.append((f"{path}.{key}", f"recorded {s[key]} but the raw observations give {value}"))
            if s["n_obs"] != raw.size:
                stats_p.append((f"{path}.n_obs", f"recorded {s['n_obs']} but raw_ms has {raw.size}"))
            if raw.size < want_n:
                obs_p.append((f"{path}.raw_ms", f"{raw.size} observations < the run's {want_n} repetitions"))
    checks.add("stats_recompute", stats_p)
    checks.add("min_observations", obs_p)
    checks.add("latencies_positive_finite", lat_p)


def _bench_checks(doc: dict[str, Any], checks: _Checks) -> None:
    shape_d, config = doc["shape"], doc["config"]
    checks.add("shape_matches_config", [] if shape_d == config["shape"] else
               [("$.shape", f"shape {shape_d} differs from config.shape {config['shape']}")])

    checks.add("edges_equal", edge_problems(doc))

    _stats_checks(doc, checks)

    fla = doc["fla"]
    fla_p = []
    if fla["commit"] != PINNED_COMMIT:
        fla_p.append(("$.fla.commit", f"{fla['commit']} is not the pinned commit {PINNED_COMMIT}"))
    if fla["verified"] is not True:
        fla_p.append(("$.fla.verified", "FLA source verification did not pass"))
    for i, gate in enumerate(doc["gates"]):
        if gate["name"] == "fla_sources" and gate.get("detail", {}).get("commit") != PINNED_COMMIT:
            fla_p.append((f"$.gates[{i}].detail.commit", "the fla_sources gate did not verify the pinned commit"))
    checks.add("fla_commit", fla_p)

    meta = doc["metadata"]
    env_p = [(f"$.metadata.gpu.{k}", "missing") for k in ("name", "driver", "sm_count") if not meta["gpu"].get(k)]
    env_p += [(f"$.metadata.versions.{k}", "missing") for k in ("torch", "triton", "cuda")
              if not meta["versions"].get(k)]
    checks.add("environment_recorded", env_p)

    sum_p = []
    lo, hi = STAGE_SUM_BOUNDS
    for name, p in doc["patterns"].items():
        st = p["stages"]
        stage_sum = sum(st[k]["median_ms"] for k in BACKWARD_STAGES)
        rec = p["stage_sum_vs_full_bwd"]
        path = f"$.patterns.{name}.stage_sum_vs_full_bwd"
        if not _close(rec["stage_sum_median_ms"], stage_sum) or not _close(rec["full_bwd_median_ms"],
                                                                            st["full_bwd"]["median_ms"]):
            sum_p.append((path, "does not recompute from the stage medians"))
        ratio = stage_sum / st["full_bwd"]["median_ms"]
        if not lo <= ratio <= hi:
            sum_p.append((f"{path}.ratio", f"stage-sum / full_bwd = {ratio:.3f} outside [{lo}, {hi}]"))
    checks.add("stage_sum_plausible", sum_p)


def _validate_csv(data: bytes, checks: _Checks, name: str = "<csv>",
                  companion: tuple[str, dict[str, Any]] | None = None) -> list[dict[str, str]]:
    """Row schema (``csv_rows``), the table (``csv_table``) and, with its JSON, ``csv_matches_json``."""
    header, rows, notes = read_csv(data, name)
    warnings = [{"check": "csv_encoding", "path": "$", "message": n} for n in notes]
    if not rows:
        checks.add("csv_rows", [("$", "no rows")])
        return warnings
    problems = []
    for i, row in enumerate(rows):
        typed: dict[str, Any] = {}
        for key, value in row.items():
            try:
                typed[key] = typed_value(key, value)
            except (ValueError, TypeError):
                problems.append((f"$[{i}].{key}", f"{value!r} is not a number"))
        problems += [tuple(e.split(": ", 1)) for e in schema_errors(typed, "summary_row", f"$[{i}]")]
    missing = [c for c in SUMMARY_COLUMNS if c not in header]
    problems += [("$", f"missing column {c}") for c in missing]
    checks.add("csv_rows", problems)
    checks.add("csv_table", table_problems(header, rows))
    if companion is not None:
        checks.add("csv_matches_json", json_problems(rows, companion[1], companion[0]))
    return warnings


def validate_bytes(data: bytes, name: str, companion: tuple[str, dict[str, Any]] | None = None,
                   routing_files: Sequence[str] = (), release_dirs: Sequence[str] = ()) -> dict[str, Any]:
    """Validate one file's bytes; returns the validation report (schema ``validation_report``).

    ``companion`` = (path, parsed bench result) cross-checks a summary CSV against its JSON;
    ``routing_files``: files a result timed, re-checked (:mod:`.file_checks`); ``release_dirs``: see release.py.
    """
    checks = _Checks()
    report = {"schema_version": SCHEMA_VERSION, "kind": "validation_report", "path": name}
    if not checks.add("file_size", [] if len(data) <= MAX_BYTES else
                      [("$", f"{len(data)} bytes > {MAX_BYTES} (refused before parsing)")]):
        return {**report, "passed": False, "checks": checks.items}
    if name.endswith(".csv"):
        warnings = _validate_csv(data, checks, name, companion)
        unverified = [] if companion else [{"path": "$", "why": "no JSON result given with the CSV (validate "
                                            "X.json X.csv, or --also X.json): values not cross-checked"}]
        return {**report, "passed": all(c["passed"] for c in checks.items), "checks": checks.items,
                "unverified": unverified, "warnings": warnings}
    try:
        doc = parse_strict(data)
    except _Rejected as exc:
        checks.add("json_syntax", [("$", str(exc))])
        return {**report, "passed": False, "checks": checks.items}
    checks.add("json_syntax")
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if not checks.add("kind", [] if kind in KINDS else [("$.kind", f"unknown document kind {kind!r}; expected one "
                                                                    f"of {', '.join(KINDS)}")]):
        return {**report, "passed": False, "checks": checks.items}
    version = doc.get("schema_version")
    if not checks.add("schema_version", [] if version in SUPPORTED_VERSIONS else
                      [("$.schema_version", f"{version!r} is not a supported schema version "
                                            f"({', '.join(sorted(SUPPORTED_VERSIONS))})")]):
        return {**report, "passed": False, "checks": checks.items}
    errors = schema_errors(doc, KINDS[kind], "$")
    extra: dict[str, Any] = {}
    schema_ok = checks.add("schema", [tuple(e.split(": ", 1)) for e in errors])
    if schema_ok and kind == "bench_result":
        _bench_checks(doc, checks)
        checks.add("autotune_arm", autotune_arm_problems(doc))
        if "cupti" in doc:  # issue 14: CUDA-event vs kernel-time medians (nsa_exp.results.cupti states the rule)
            checks.add("cupti_agreement", cupti_problems(doc))
        extra = bench_recompute(doc, checks.add, generate_routing)
        extra["unverified"] += routing_file_recompute(doc, routing_files, checks.add)
    elif schema_ok and kind == "autotune_matrix":
        matrix_checks(doc, checks.add)
    elif schema_ok and kind in ("sweep_point", "release_result"):  # release_result: issue 22 (results/release.py)
        _stats_checks(doc, checks)
        extra = release_recompute(doc, checks.add, generate_routing, release_dirs) if kind == "release_result" \
            else sweep_point_recompute(doc, checks.add, generate_routing)
        extra["unverified"] += routing_file_recompute(doc, routing_files, checks.add)
    return {**report, "document_kind": kind, "passed": all(c["passed"] for c in checks.items),
            "checks": checks.items, **extra}


def bench_document(path: str | Path) -> dict[str, Any] | None:
    """The parsed bench result at ``path`` when it is one that passes its schema (for CSV cross-checks)."""
    try:
        data = Path(path).read_bytes()
        doc = parse_strict(data) if len(data) <= MAX_BYTES else None
    except (OSError, _Rejected):
        return None
    if isinstance(doc, dict) and doc.get("kind") == "bench_result" and not schema_errors(doc, "result", "$"):
        return doc
    return None


def validate_paths(paths: list[str], also: list[str] | None = None,
                   routing_files: Sequence[str] = (), release_dirs: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Validate every path; a summary CSV is cross-checked against its JSON result: the bench result
    (among ``paths`` + ``also``) with the same file stem, else the only one given. ``routing_files``
    (``--routing-file``) re-check the routing files the results timed."""
    for p in also or []:  # a companion named on purpose must be usable, or the CSV would go unchecked silently
        if bench_document(p) is None:
            raise UserError(f"--also {p}: not a readable, schema-valid bench result; the CSV cannot be "
                            "cross-checked against it")
    results = {p: doc for p in [*paths, *(also or [])] if not p.endswith(".csv")
               for doc in [bench_document(p)] if doc is not None}
    reports = []
    for path in paths:
        companion = None
        if path.endswith(".csv"):
            same = [p for p in results if Path(p).stem == Path(path).stem]
            pick = same[0] if same else next(iter(results)) if len(results) == 1 else None
            companion = (pick, results[pick]) if pick else None
        reports.append(validate_path(path, companion, routing_files, release_dirs))
    return reports


def validate_path(path: str | Path, companion: tuple[str, dict[str, Any]] | None = None,
                  routing_files: Sequence[str] = (), release_dirs: Sequence[str] = ()) -> dict[str, Any]:
    """Validate a file on disk (size checked with stat before reading)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    if size > MAX_BYTES:
        (checks := _Checks()).add("file_size", [("$", f"{size} bytes > {MAX_BYTES} (refused before parsing)")])
        return {"schema_version": SCHEMA_VERSION, "kind": "validation_report", "path": str(path), "passed": False,
                "checks": checks.items}
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot be read: {exc.strerror}") from None
    return validate_bytes(data, str(path), companion, routing_files, release_dirs)


def format_report(report: dict[str, Any]) -> str:
    lines = [f"{report['path']}: {'PASS' if report['passed'] else 'FAIL'}"]
    for c in report["checks"]:
        if c["passed"]:
            continue
        for f in c["failures"]:
            lines.append(f"  [{c['name']}] {f['path']}: {f['message']}")
        if c["n_failures"] > len(c["failures"]):
            lines.append(f"  [{c['name']}] ... {c['n_failures'] - len(c['failures'])} more")
    for w in report.get("warnings", []):
        lines.append(f"  warning [{w['check']}] {w['path']}: {w['message']}")
    lines += [f"  {u['path']}: {u['why']}" for u in report.get("unverified", []) if u["why"] == NOT_SUPPLIED]
    if report.get("unverified"):
        lines.append(f"  {len(report['unverified'])} value group(s) listed as unverifiable (--json shows them)")
    return "\n".join(lines)
