"""Sweeps: a grid of routing points (pattern parameters x T), each measured and written on its own.

A sweep config (``schemas/sweep_config.schema.json``) names a base experiment config (shape, seeds,
tolerances), the lengths ``T``, the stages to time and the patterns; a pattern entry may carry
``"sweep": {"<param>": [values...]}``, expanded to one point per value. Each point is one
:class:`Point`: a full experiment config at that ``T`` whose patterns are the baseline ``local`` and
the point's routing (just ``local`` for the baseline's own points), so every point carries its own
baseline measured in the same interleaved rounds.

Each point is written atomically to ``results/sweeps/<sweep>/<point_id>.json`` (schema
``sweep_point``) by :func:`run_point`, which calls an injectable measurement function (the real one,
:func:`nsa_exp.gpu.sweep_point.measure_point`, is resolved by name so this module never imports
torch). :func:`run_sweep` skips points whose file is already there and schema-valid (resume: a killed
sweep loses at most the points in flight) and hands the rest to an executor: ``inline`` (this
process, sequential), or submitit's ``debug``, ``local`` (one job per GPU on this host) or ``slurm``
(a job array). :func:`sweep_table` turns the point files into the tidy CSV (schema ``sweep_row``).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import submitit

from . import REPO_ROOT, RESULTS_DIR
from . import SWEEP_EXECUTORS as EXECUTORS
from .errors import UserError
from .results.schema import load_schema, schema_errors, validate_or_raise
from .results.stop_rule import default_rule
from .results.store import write_frame, write_json
from .routing.config import config_from_dict, load_config, parse_config_bytes
from .routing.packing import packing_token
from .routing.patterns import BASELINE_PATTERN
from .sweep_files import file_points

MEASURE = "nsa_exp.gpu.sweep_point:measure_point"
AUTOTUNE_FILE = "_autotune.json"  # in results/sweeps/<sweep>/: the configs the first point tuned
# measure(point, allow_gpu, out_dir) -> the point's sweep_point document (written by run_point)
Measure = Callable[["Point", bool, Path], dict[str, Any]]


@dataclass(frozen=True)
class Point:
    """One sweep point: ``config`` (the experiment config dict at this T, patterns ``[local, routing]``)."""

    sweep: str
    point_id: str
    T: int
    pattern: dict[str, Any]
    stages: tuple[str, ...]
    config: dict[str, Any]
    autotune_from: str | None
    #: the point's ``packing`` section (None = dense); only sweeps with a ``packings`` axis label it
    packing: dict[str, Any] | None = None
    packing_label: str | None = None
    routing_file: str | None = None     # a routing-file point: the file as given (sweep_files.FilePoint.path)
    routing_sha256: str | None = None   # ... and the sha256 of its bytes when the sweep was loaded

    @property
    def routing_name(self) -> str:
        return self.pattern["name"]


def _param_token(key: str, value: Any) -> str:
    text = ".".join(str(v) for v in value) if isinstance(value, (list, tuple)) else f"{value:g}" if isinstance(
        value, float) else str(value)
    return f"{key}{text}"


def point_id(T: int, pattern: dict[str, Any]) -> str:
    """A file-name-safe id, e.g. ``T32768-sink-heavy-heads0.1-sinks4``.

    >>> point_id(32768, {"name": "zipf", "exponent": 0.25})
    'T32768-zipf-exponent0.25'
    """
    parts = [f"T{T}", pattern["name"], *(_param_token(k, pattern[k]) for k in sorted(pattern) if k != "name")]
    return "-".join(parts)


def expand_patterns(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each entry's ``sweep`` list expanded into one pattern entry per value.

    >>> expand_patterns([{"name": "zipf", "sweep": {"exponent": [0, 1]}}, {"name": "local"}])
    [{'name': 'zipf', 'exponent': 0}, {'name': 'zipf', 'exponent': 1}, {'name': 'local'}]
    """
    out = []
    for entry in entries:
        fixed = {k: v for k, v in entry.items() if k != "sweep"}
        for key, values in entry.get("sweep", {}).items():
            out.extend({**fixed, key: v} for v in values)
        if "sweep" not in entry:
            out.append(fixed)
    return out


def load_sweep(path: str | Path, routing_files: Sequence[str] = (), stop_rule: bool = False) -> list[Point]:
    """The points of a sweep config, checked (schema, registry, shape rules) before any GPU time; each routing file
    (the config's, ``routing_files``) adds one (:mod:`.sweep_files`); ``stop_rule``: the default unless timing.stop."""
    path = Path(path)
    try:
        raw = parse_config_bytes(path.read_bytes(), str(path))
    except FileNotFoundError:
        raise UserError(f"sweep config {path} does not exist; e.g. --config configs/sweep_skew_h200.json") from None
    validate_or_raise(raw, "sweep_config", label="sweep")
    base = load_config(REPO_ROOT / raw["base_config"]).raw
    timing = {**base["timing"], **raw.get("timing", {})}
    if stop_rule and "stop" not in timing:  # issue 21: the stop rule, recorded in each point's config
        timing["stop"] = default_rule(timing["repetitions"], f"{path}: sweep --stop-rule").to_dict()
    points, seen = [], set()
    packings = raw.get("packings", [None])
    grid = [(T, entry, None, packing, f"sweep.patterns[{i}]") for T in raw["lengths"] for packing in packings
            for i, entry in enumerate(expand_patterns(raw["patterns"]))]
    files = file_points([*raw.get("routing_files", []), *routing_files], base["shape"])
    grid += [(f.T, f.pattern, f, None, f"sweep.routing_files {f.path}") for f in files]
    for T, entry, file, packing, where in grid:
        pid = file.point_id if file else point_id(T, entry)
        if "packings" in raw and not file:  # T32768-docs8192-sink-heavy-sinks4; sweeps without the axis keep their ids
            pid = pid.replace(f"T{T}-", f"T{T}-{packing_token(packing)}-", 1)
        if pid in seen:
            raise UserError(f"{where}: point {pid} is listed twice")
        seen.add(pid)
        routings = [{"name": BASELINE_PATTERN}] + ([entry] if entry["name"] != BASELINE_PATTERN and not file else [])
        cfg = {**base, "name": pid[:64], "description": f"sweep {raw['name']} point {pid}",
               "shape": {**base["shape"], "T": T}, "patterns": routings, "timing": timing, "gpu": dict(raw["gpu"])}
        if packing is not None:
            cfg["packing"] = packing
        try:
            config_from_dict(cfg, source=str(path))
        except UserError as exc:
            raise UserError(f"sweep point {pid}: {exc}") from None
        points.append(Point(raw["name"], pid, T, entry, tuple(raw["stages"]), cfg, raw.get("autotune_from"),
                            packing, packing_token(packing) if "packings" in raw and not file else None,
                            file.path if file else None, file.sha256 if file else None))
    return points


def point_path(out_dir: Path, point: Point) -> Path:
    return out_dir / f"{point.point_id}.json"


def point_done(path: Path, point: Point | None = None) -> bool:
    """The point's file exists, is JSON and is a schema-valid ``sweep_point`` (else it is re-run); for a
    routing-file ``point``, measured on a file with the same sha256."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if point is not None and point.routing_file and doc.get("routing_files", {}).get(
            point.routing_name, {}).get("sha256") != point.routing_sha256:
        return False
    return not schema_errors(doc, "sweep_point", "$")


def resolve_measure(spec: str) -> Measure:
    """``"module:function"`` -> the function (the measurement is injectable by name or by object)."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def run_point(point: Point, out_dir: str, allow_gpu: bool, measure: Measure | str = MEASURE) -> str:
    """Measure one point and write it atomically (schema ``sweep_point``); returns its path."""
    fn = resolve_measure(measure) if isinstance(measure, str) else measure
    doc = fn(point, allow_gpu, Path(out_dir))
    path = point_path(Path(out_dir), point)
    write_json(path, doc, "sweep_point")
    return str(path)


def run_points(points: Sequence[Point], out_dir: str, allow_gpu: bool, measure: Measure | str = MEASURE) -> list[str]:
    """Several points in one process, in order (one submitit job of ``--points-per-job`` points)."""
    return [run_point(p, out_dir, allow_gpu, measure) for p in points]


def make_executor(kind: str, log_dir: Path, slurm: dict[str, Any] | None = None) -> submitit.Executor:
    """submitit's executor of ``kind``: ``debug`` (in-process), ``local`` (one job per GPU), ``slurm``."""
    if kind == "debug":
        return submitit.DebugExecutor(folder=str(log_dir))
    if kind == "local":
        executor = submitit.LocalExecutor(folder=str(log_dir))
        executor.update_parameters(gpus_per_node=1, timeout_min=60)
        return executor
    executor = submitit.AutoExecutor(folder=str(log_dir), cluster="slurm")
    executor.update_parameters(gpus_per_node=1, tasks_per_node=1, timeout_min=60, **(slurm or {}))
    return executor


def visible_gpus() -> list[int]:
    """This host's GPUs as ``CUDA_VISIBLE_DEVICES`` lists them (integer ids), else those ``nvidia-smi -L``
    lists, else ``[0]``."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if listed.strip():
        return [int(g) for g in listed.split(",") if g.strip().isdigit()] or [0]
    try:
        lines = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return [0]
    return list(range(sum(1 for ln in lines if ln.startswith("GPU ")))) or [0]


def _submit_per_gpu(points: Sequence[Point], out: Path, allow_gpu: bool, measure: Measure | str, log_dir: Path,
                    gpus: Sequence[int]) -> list[Any]:
    """submitit's LocalExecutor gives every job the GPUs ``0..gpus_per_node-1`` unless told otherwise, so
    we place the points ourselves: round-robin over ``gpus``, one job (one process) per GPU, pinned to
    that GPU with ``visible_gpus``; the jobs run concurrently."""
    jobs = []
    for i, gpu in enumerate(gpus):
        mine = list(points[i::len(gpus)])
        if mine:
            ex = make_executor("local", log_dir)
            ex.update_parameters(visible_gpus=[gpu])
            jobs.append(ex.submit(run_points, mine, str(out), allow_gpu, measure))
    return jobs


def must_tune(point: Point, out_dir: Path) -> bool:
    """No ``autotune_from`` and no ``_autotune.json`` yet: the first point measured tunes the kernels."""
    return point.autotune_from is None and not (out_dir / AUTOTUNE_FILE).is_file()


def run_sweep(points: Sequence[Point], out_dir: str | Path, allow_gpu: bool, executor: str = "inline",
              measure: Measure | str = MEASURE, points_per_job: int = 1,
              slurm: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """Run every point not already done; ``{"skipped": [...], "ran": [...]}`` (point ids).

    ``inline`` runs here, in order. ``local``: one submitit job per visible GPU (:func:`visible_gpus`),
    the points dealt round-robin. ``slurm`` / ``debug``: one job per ``points_per_job`` points,
    submitted as one array (``map_array``); on Slurm each array task gets one GPU.
    """
    if executor not in EXECUTORS:
        raise UserError(f"--executor: {executor!r}; choose one of {', '.join(EXECUTORS)}")
    out = Path(out_dir)
    todo = [p for p in points if not point_done(point_path(out, p), p)]
    skipped = [p.point_id for p in points if p not in todo]
    if executor == "inline":
        for p in todo:
            run_point(p, str(out), allow_gpu, measure)
    elif todo:
        log_dir = out.parent / f"{out.name}_submitit"
        # Without pinned configs the first point tunes (and stores _autotune.json) alone; the rest pin them.
        waves = [todo[:1], todo[1:]] if must_tune(todo[0], out) else [todo]
        for wave in filter(None, waves):
            if executor == "local":
                jobs = _submit_per_gpu(wave, out, allow_gpu, measure, log_dir, visible_gpus())
            else:
                chunks = [list(wave[i:i + points_per_job]) for i in range(0, len(wave), points_per_job)]
                jobs = make_executor(executor, log_dir, slurm).map_array(
                    run_points, chunks, [str(out)] * len(chunks), [allow_gpu] * len(chunks), [measure] * len(chunks))
            for job in jobs:
                job.result()
    return {"skipped": skipped, "ran": [p.point_id for p in todo]}


def point_rows(doc: dict[str, Any]) -> dict[str, Any]:
    """One tidy row (schema ``sweep_row``) from a ``sweep_point`` document."""
    routing = doc["point"]["pattern"]["name"]
    p, base = doc["patterns"][routing], doc["patterns"][doc["point"]["baseline"]]
    f, dkv = p["fanin"], p["stages"].get("dkv_core", {})
    base_dkv = base["stages"].get("dkv_core", {}).get("median_ms")
    params = {k: v for k, v in doc["point"]["pattern"].items() if k != "name"}
    packed = {"packing": doc["point"]["packing"], "documents": doc.get("packing", {}).get("documents", 1)} \
        if "packing" in doc["point"] else {}
    return {**packed, "sweep": doc["sweep"], "point_id": doc["point_id"], "family": routing,
            "params": json.dumps(params, sort_keys=True), "T": doc["point"]["T"], "edges": p["edges"],
            "fanin_mean": f["mean"], "fanin_max": f["max"], "fanin_p99": f["p99"], "fanin_cv": f["cv"],
            "fanin_gini": f["gini"], "dkv_median_ms": dkv.get("median_ms"), "dkv_p10_ms": dkv.get("p10_ms"),
            "dkv_p90_ms": dkv.get("p90_ms"), "csr_median_ms": p["stages"].get("csr", {}).get("median_ms"),
            "local_dkv_median_ms": base_dkv,
            "ratio_vs_local": dkv["median_ms"] / base_dkv if dkv and base_dkv else None}


SWEEP_COLUMNS: tuple[str, ...] = tuple(load_schema("sweep_row")["required"])


def sweep_table(out_dir: str | Path, csv_path: str | Path | None = None) -> pd.DataFrame:
    """Every valid point under ``out_dir`` as one tidy row (sorted by family, T, point id); written to
    ``csv_path`` (schema ``sweep_row`` per row) when given."""
    docs = []
    for path in sorted(Path(out_dir).glob("*.json")):
        if point_done(path):
            docs.append(json.loads(path.read_text(encoding="utf-8")))
    packed = any("packing" in d["point"] for d in docs)
    frame = pd.DataFrame([point_rows(d) for d in docs], columns=list(SWEEP_COLUMNS) + (
        ["packing", "documents"] if packed else []))
    frame = frame.sort_values(["family", "T", "point_id"], kind="stable").reset_index(drop=True)
    if csv_path is not None:
        write_frame(csv_path, frame, "sweep_row")
    return frame


def sweep_dirs(name: str) -> tuple[Path, Path]:
    """``(results/sweeps/<name>/, results/sweeps/<name>.csv)``."""
    return RESULTS_DIR / "sweeps" / name, RESULTS_DIR / "sweeps" / f"{name}.csv"
