"""Sweep plans: a grid of routing points (pattern parameters x T [x packings] [x shapes]), each point a full
experiment config.

A sweep config (``schemas/sweep_config.schema.json``) names a base experiment config (shape, seeds,
tolerances), the lengths ``T``, the stages to time and the patterns; a pattern entry may carry
``"sweep": {"<param>": [values...]}``, expanded to one point per value. Each point is one
:class:`Point`: a full experiment config at that ``T`` whose patterns are the baseline ``local`` and
the point's routing (just ``local`` for the baseline's own points), so every point carries its own
baseline measured in the same interleaved rounds. A ``packings`` axis packs documents, a ``shapes`` axis sets
batch, KV heads and group size (:func:`expand_shapes`); each adds its label to the point's id. Each point's file is
``results/sweeps/<sweep>/<point_id>.json`` (schema ``sweep_point``); :mod:`.run` measures and writes
them, :mod:`.table` turns them into the tidy CSV.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import REPO_ROOT, RESULTS_DIR
from ..analysis.stop_rule import STAGE_RULE, SWEEP_ROUND_CEILING
from ..core.config import Shape, bytes_needed
from ..core.families import BASELINE_PATTERN, point_id, shape_label
from ..core.gpus import MEMORY_REPORTED, gpu_spec
from ..errors import UserError
from ..io.config_files import config_from_dict, load_config, read_config_file
from ..io.schemas import schema_errors, validate_or_raise
from ..io.store import read_strict
from ..routing.packing import packing_token
from .files import FilePoint, file_points


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
    routing_file: str | None = None     # a routing-file point: the file as given (files.FilePoint.path)
    routing_sha256: str | None = None   # ... and the sha256 of its bytes when the sweep was loaded
    #: the point's shape on a ``shapes`` axis (``{"B", "H", "G"}``; None: the sweep has no such axis)
    shape: dict[str, int] | None = None
    #: why the point is not attempted (its buffers exceed the GPU's memory; :func:`memory_refusal`), else None
    refused: str | None = None

    @property
    def routing_name(self) -> str:
        return self.pattern["name"]


def expand_patterns(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each entry's ``sweep`` list expanded into one pattern entry per value.

    >>> expand_patterns([{"name": "zipf", "sweep": {"exponent": [0, 1]}}, {"name": "local"}])
    [{'name': 'zipf', 'exponent': 0}, {'name': 'zipf', 'exponent': 1}, {'name': 'local'}]
    """
    out: list[dict[str, Any]] = []
    for entry in entries:
        fixed = {k: v for k, v in entry.items() if k != "sweep"}
        for key, values in entry.get("sweep", {}).items():
            out.extend({**fixed, key: v} for v in values)
        if "sweep" not in entry:
            out.append(fixed)
    return out


def expand_shapes(items: Sequence[dict[str, Any]] | None, base: dict[str, Any]) -> list[dict[str, int] | None]:
    """A ``shapes`` axis as ``{"B", "H", "G"}`` dicts: each item's product (a key unset: the base shape's value;
    ``G = HQ / H``), in order, a shape listed again dropped; ``[None]`` for a sweep without the axis.

    >>> expand_shapes([{"B": [1, 2]}, {"B": 1, "H": [4, 8], "G": 4}], {"B": 1, "H": 4, "HQ": 64})
    [{'B': 1, 'H': 4, 'G': 16}, {'B': 2, 'H': 4, 'G': 16}, {'B': 1, 'H': 4, 'G': 4}, {'B': 1, 'H': 8, 'G': 4}]
    """
    if items is None:
        return [None]
    default = {"B": base["B"], "H": base["H"], "G": base["HQ"] // base["H"]}
    out: list[dict[str, int] | None] = []
    for item in items:
        axes = {k: item.get(k, default[k]) for k in ("B", "H", "G")}
        lists = {k: v if isinstance(v, list) else [v] for k, v in axes.items()}
        for B in lists["B"]:
            for H in lists["H"]:
                for G in lists["G"]:
                    shape = {"B": B, "H": H, "G": G}
                    if shape not in out:
                        out.append(shape)
    return out


def memory_refusal(shape: Shape, n_patterns: int, l2_flush_bytes: int, gpu_name: str) -> str | None:
    """Why a point whose buffers (:func:`nsa_exp.core.config.bytes_needed`, ``n_patterns`` timed) cannot fit the
    memory the GPU named ``gpu_name`` reports (its nominal memory x the lowest reported share,
    :data:`~nsa_exp.core.gpus.MEMORY_REPORTED`) is not attempted, in one line; None when it fits or the GPU's
    memory is unknown (then the point's own check against the free memory, on the GPU, decides)."""
    spec = gpu_spec(gpu_name)
    if spec is None or spec.memory_gib is None:
        return None
    need, have = bytes_needed(shape, n_patterns, l2_flush_bytes), MEMORY_REPORTED[0] * spec.memory_gib
    if need <= have * 2**30:
        return None
    return (f"needs ~{need / 2**30:.1f} GiB of GPU memory, more than the {have:.0f} GiB an {spec.name} reports; "
            "not attempted")


def load_sweep(path: str | Path, routing_files: Sequence[str] = (), stop_rule: bool = False) -> list[Point]:
    """The points of a sweep config, each checked (schema, registry, shape rules) before any GPU time;
    each of the config's ``routing_files`` and of ``routing_files`` adds a point (:mod:`.files`);
    a ``shapes`` axis (:func:`expand_shapes`) sets B, H and HQ of each point's shape; a point that cannot fit the
    GPU's memory is kept with its ``refused`` line (the sweep lists it and never attempts it);
    ``stop_rule`` (``sweep --stop-rule``): each point's config gets the default stop rule unless the sweep's
    timing names one (:mod:`nsa_exp.analysis.stop_rule`); a sweep timing fewer rounds than the rule's
    ``min_rounds`` gets the rule's own ceiling, :data:`~nsa_exp.analysis.stop_rule.SWEEP_ROUND_CEILING`."""
    path = Path(path)
    raw = read_config_file(path, "sweep config", "e.g. --config configs/sweep_skew_h200.json")
    validate_or_raise(raw, "sweep_config", label="sweep")
    base = load_config(REPO_ROOT / raw["base_config"]).raw
    timing = {**base["timing"], **raw.get("timing", {})}
    if stop_rule and "stop" not in timing:  # recorded in each point's config: bench's rule (issue 30)
        if timing["repetitions"] < STAGE_RULE.min_rounds:  # the rule sets its own ceiling (docs/METHOD.md)
            timing["repetitions"] = SWEEP_ROUND_CEILING
        timing["stop"] = STAGE_RULE.to_dict()
    points, seen = [], set()
    packings = raw.get("packings", [None])
    #: (T, pattern entry, its routing file, packing section, where it is written)
    grid: list[tuple[int, dict[str, Any], FilePoint | None, dict[str, Any] | None, dict[str, int] | None, str]]
    grid = [(T, entry, None, packing, shape, f"sweep.patterns[{i}]") for T in raw["lengths"] for packing in packings
            for shape in expand_shapes(raw.get("shapes"), base["shape"])
            for i, entry in enumerate(expand_patterns(raw["patterns"]))]
    files = file_points([*raw.get("routing_files", []), *routing_files], base["shape"])
    grid += [(f.T, f.pattern, f, None, None, f"sweep.routing_files {f.path}") for f in files]
    for T, entry, file, packing, shape, where in grid:
        # T32768-docs8192-sink-heavy-sinks4, T32768-B2-H4-G16-local: each axis the sweep has adds its label
        pid = file.point_id if file else point_id(
            T, entry, packing_token(packing) if "packings" in raw else None,
            shape_label(**shape) if shape else None)
        if pid in seen:
            raise UserError(f"{where}: point {pid} is listed twice")
        seen.add(pid)
        routings = [{"name": BASELINE_PATTERN}] + ([entry] if entry["name"] != BASELINE_PATTERN and not file else [])
        dims = {} if shape is None else {"B": shape["B"], "H": shape["H"], "HQ": shape["H"] * shape["G"]}
        cfg = {**base, "name": pid[:64], "description": f"sweep {raw['name']} point {pid}",
               "shape": {**base["shape"], "T": T, **dims}, "patterns": routings, "timing": timing,
               "gpu": dict(raw["gpu"])}
        if packing is not None:
            cfg["packing"] = packing
        try:
            config = config_from_dict(cfg, source=str(path))
        except UserError as exc:
            raise UserError(f"sweep point {pid}: {exc}") from None
        points.append(Point(raw["name"], pid, T, entry, tuple(raw["stages"]), cfg, raw.get("autotune_from"),
                            packing, packing_token(packing) if "packings" in raw and not file else None,
                            file.path if file else None, file.sha256 if file else None, shape,
                            memory_refusal(config.shape, len(routings), config.timing.l2_flush_bytes,
                                           raw["gpu"]["required_name"])))
    return points


def point_path(out_dir: Path, point: Point) -> Path:
    return out_dir / f"{point.point_id}.json"


def point_done(path: Path, point: Point | None = None) -> bool:
    """The point's file exists, is JSON and is a schema-valid ``sweep_point`` (else it is re-run); for a
    routing-file ``point``, measured on a file with the same sha256."""
    try:
        _, doc = read_strict(path)
    except UserError:
        return False
    if not isinstance(doc, dict):
        return False
    if point is not None and point.routing_file and doc.get("routing_files", {}).get(
            point.routing_name, {}).get("sha256") != point.routing_sha256:
        return False
    return not schema_errors(doc, "sweep_point", "$")


def sweep_dirs(name: str) -> tuple[Path, Path]:
    """``(results/sweeps/<name>/, results/sweeps/<name>.csv)``."""
    return RESULTS_DIR / "sweeps" / name, RESULTS_DIR / "sweeps" / f"{name}.csv"


def planned_points(sweep: str) -> dict[str, list[dict[str, Any]]] | None:
    """The points ``configs/<sweep>.json`` plans (its grid and the routing files it names), each id with the configs
    its point may record (as planned, and under ``sweep --stop-rule``), or None where no sweep config of that name
    loads (a user's sweep named otherwise: validate then lists the grid as unverified). Read once per process and
    version of the file (validate asks it for every point of a sweep)."""
    path = REPO_ROOT / "configs" / f"{sweep}.json"
    if not path.is_file():
        return None
    stat = path.stat()
    return _planned(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _planned(path: str, mtime_ns: int, size: int) -> dict[str, list[dict[str, Any]]] | None:
    try:
        plain, ruled = load_sweep(path, []), load_sweep(path, [], stop_rule=True)
    except UserError:
        return None
    ruled_by_id = {p.point_id: p.config for p in ruled}
    return {p.point_id: [p.config, ruled_by_id.get(p.point_id, p.config)] for p in plain}
