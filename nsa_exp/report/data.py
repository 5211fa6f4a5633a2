"""Everything one report reads, loaded once: each committed input validated with every check of its kind
(:func:`nsa_exp.checking.validate.load_validated`), the formal runs of both GPUs with their bootstrap
analyses, every bench result and sweep point as a record, the repeated quantities
(:mod:`nsa_exp.analysis.noise`), the committed noise table (``results/noise/floors.json``, validated: rebuilt
from the same files) whose floors every verdict uses, and the claims guard the sections write their verdicts
through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..analysis.bootstrap import bootstrap_median_ci, bootstrap_ratio_ci
from ..analysis.compare import ratio_ci
from ..analysis.noise import Quantity, floor_of, quantities
from ..analysis.noise_table import NOISE_TABLE, committed_sources, floors_of
from ..checking.analysis import build as analysis_document
from ..checking.validate import load_validated, validate_bytes
from ..core.families import BASELINE_PATTERN
from ..core.kinds import KINDS
from ..core.records import BenchResult, RunRecord, SweepPoint
from ..errors import UserError
from ..io.progress import progress
from ..io.store import read_document
from .claims import Claims
from .manifest import KNOWN_FAILING, Inputs

ValueT = TypeVar("ValueT")


def short_gpu(name: str | None) -> str:
    """``H100`` for "NVIDIA H100 80GB HBM3", ``H200`` for "NVIDIA H200" (the name itself otherwise)."""
    m = re.search(r"\b([A-Z]\d{2,4})\b", name or "")
    return m.group(1) if m else (name or "?")


def recorded(value: ValueT | None, what: str) -> ValueT:
    """``value``, a field every validated input of its kind records; UserError (one line) naming ``what`` when the
    record lacks it."""
    if value is None:
        raise UserError(f"{what}: not recorded, and the report needs it; run `invoke validate` on the file")
    return value


@dataclass
class Formal:
    """A formal run of one GPU: its path and record, its repeat (if committed) and the analysis of both."""

    path: str
    run: BenchResult
    analysis: dict[str, Any]
    repeat_path: str | None = None
    repeat: BenchResult | None = None

    @property
    def gpu(self) -> str:
        return self.run.gpu_name or "?"

    @property
    def label(self) -> str:
        return short_gpu(self.gpu)

    def row(self, pattern: str, stage: str) -> dict[str, Any] | None:
        return next((r for r in self.analysis["rows"] if r["pattern"] == pattern and r["stage"] == stage), None)

    def stage_row(self, pattern: str, stage: str) -> dict[str, Any]:
        """:meth:`row` of a pattern and stage the run timed (UserError, one line, when its analysis has none)."""
        return recorded(self.row(pattern, stage), f"{self.path}: the analysis row of {pattern} {stage}")


@dataclass
class ReportData:
    """The loaded inputs of one report (module doc)."""

    inputs: Inputs
    claims: Claims = field(default_factory=Claims)
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    formal: list[Formal] = field(default_factory=list)
    runs: dict[str, RunRecord] = field(default_factory=dict)
    quantities: list[Quantity] = field(default_factory=list)
    #: ``{(gpu, stage): floor}`` of the committed noise table (:attr:`noise_table`), the one source of every floor
    floors: dict[tuple[str, str], float] = field(default_factory=dict)
    #: the noise table document (kind ``noise_table``): each floor's rule and the files that set it
    noise_table: dict[str, Any] = field(default_factory=dict)
    #: Bench results ``validate`` FAILs as listed in :data:`.manifest.KNOWN_FAILING`: path -> (record, the
    #: failed checks' names and messages); out of :attr:`runs`, so out of every floor.
    failing: dict[str, tuple[BenchResult, list[str]]] = field(default_factory=dict)

    def load(self, path: str | Path, kinds: tuple[str, ...] = tuple(KINDS)) -> dict[str, Any]:
        """The document at ``path`` (relative to the root unless absolute), every check of its kind passed."""
        p = Path(path) if Path(path).is_absolute() else self.inputs.root / path
        key = self.inputs.relative(p)
        if key not in self.docs:
            self.docs[key] = load_validated(p, kinds, hint=f"run `invoke validate {key}`")
        return self.docs[key]

    def known_failing(self, path: str | Path) -> tuple[BenchResult, list[str]]:
        """A bench result of :data:`.manifest.KNOWN_FAILING`: the record and its failed checks (``name: message``);
        UserError (one line) when it fails other checks than listed, or none (then it belongs in :attr:`runs`)."""
        p = Path(path) if Path(path).is_absolute() else self.inputs.root / path
        key = self.inputs.relative(p)
        expected, where = KNOWN_FAILING[key]
        raw, doc = read_document(p, (BenchResult.KIND,), key)
        failed = [c for c in validate_bytes(raw, str(p))["checks"] if not c["passed"]]
        if tuple(sorted(c["name"] for c in failed)) != tuple(sorted(expected)):
            raise UserError(f"{key}: listed in report's KNOWN_FAILING as failing {', '.join(expected)} ({where}), "
                            f"but validate fails {', '.join(c['name'] for c in failed) or 'nothing'}; update the list")
        return BenchResult.from_json(doc), [f"{c['name']} at {f['path']}: {f['message']}" for c in failed
                                            for f in c.get("failures", [])]

    def bench(self, path: str) -> BenchResult:
        return BenchResult.from_json(self.load(path, (BenchResult.KIND,)))

    def floor(self, stage: str, *gpus: str | None) -> float:
        """The noise floor of a comparison of ``stage`` on ``gpus`` (:func:`nsa_exp.analysis.noise.floor_of`); a run
        that recorded no GPU name (None) has no floor of its own, so it adds none."""
        return floor_of(self.floors, stage, *(g for g in gpus if g is not None))

    def point(self, key: str) -> SweepPoint:
        """The sweep point loaded as ``key`` (repo-relative; KeyError when none was), UserError (one line) when the
        run loaded there is not a sweep point."""
        run = self.runs[key]
        if not isinstance(run, SweepPoint):
            raise UserError(f"{key}: a {run.kind}, not a sweep point")
        return run

    def by_gpu(self, label: str) -> Formal | None:
        return next((f for f in self.formal if f.label == label), None)

    def point_ci(self, run: RunRecord, pattern: str, stage: str = "dkv_core") -> dict[str, Any]:
        """One routing's stage in one run: median with its 95% CI, and (not ``local``) its ratio to ``local``
        of the same rounds with the paired 95% CI."""
        p, base = run.patterns[pattern], run.patterns.get(BASELINE_PATTERN)
        raw = np.asarray(p.stages[stage].raw_ms)
        out = {"median": float(np.median(raw)), "ci": bootstrap_median_ci(raw), "n": int(raw.size)}
        if base is not None and pattern != BASELINE_PATTERN and stage in base.stages:
            b = np.asarray(base.stages[stage].raw_ms)
            out["ratio"] = float(np.median(raw) / np.median(b))
            out["ratio_ci"] = bootstrap_ratio_ci(raw, b) if b.size == raw.size else ratio_ci(b, raw)
        return out


def load_report_data(inputs: Inputs) -> ReportData:
    """Load every input of ``inputs`` once (module doc); a formal result must exist, its repeat must run the
    same shape (UserError, one line)."""
    data = ReportData(inputs)
    result_path = inputs.path(inputs.result)
    if result_path is None:
        raise UserError(f"--result {inputs.result}: no such file")
    benches = [*inputs.bench_results(), *([] if result_path in inputs.bench_results() else [result_path])]
    for path in progress(benches, "report: validating the committed results", unit="file"):
        if inputs.relative(path) in KNOWN_FAILING:
            data.failing[inputs.relative(path)] = data.known_failing(path)
            continue
        data.runs[inputs.relative(path)] = data.bench(str(path))
    for path in progress(inputs.sweep_points(), "report: validating the sweep points", unit="file"):
        data.runs[inputs.relative(path)] = SweepPoint.from_json(data.load(path, (SweepPoint.KIND,)))
    for result, repeat in ((inputs.result, inputs.repeat), (inputs.h200, inputs.h200_repeat)):
        result_file, repeat_file = inputs.path(result), inputs.path(repeat)
        if not result or result_file is None:  # path() is None for a dropped (None or '') input
            continue
        run = data.bench(result)
        rep = data.bench(repeat) if repeat and repeat_file is not None else None
        if rep is not None and rep.shape != run.shape:
            raise UserError(f"{repeat}: shape differs from {result}; a repeat must run the same config")
        data.formal.append(Formal(inputs.relative(result_file), run, analysis_document(run, rep),
                                  inputs.relative(repeat_file) if repeat_file is not None else None, rep))
    data.quantities = quantities(data.runs.items())
    data.noise_table = data.load(NOISE_TABLE, ("noise_table",))
    data.floors = floors_of(data.noise_table)
    return data


def noise_sources(inputs: Inputs) -> tuple[list[tuple[str, RunRecord]], dict[str, str]]:
    """The runs a noise table is derived from (every committed file of
    :data:`nsa_exp.analysis.noise_table.SOURCES`, each passing every check of ``validate``) as ``(repo-relative
    path, record)``, and the files left out (:data:`.manifest.KNOWN_FAILING`, which must fail exactly the checks
    listed there) with the reason (UserError, one line, for any other file that fails)."""
    data = ReportData(inputs)
    runs: list[tuple[str, RunRecord]] = []
    excluded: dict[str, str] = {}
    for rel in committed_sources(inputs.root):
        if rel in KNOWN_FAILING:
            data.known_failing(rel)
            checks, where = KNOWN_FAILING[rel]
            excluded[rel] = f"validate fails {', '.join(checks)} (committed as measured; {where})"
            continue
        doc = data.load(rel, (BenchResult.KIND, SweepPoint.KIND))
        runs.append((rel, (BenchResult if doc["kind"] == BenchResult.KIND else SweepPoint).from_json(doc)))
    return runs, excluded
