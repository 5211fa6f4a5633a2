"""The ``sweep_point`` kind (record :class:`~nsa_exp.core.records.SweepPoint`): one sweep point, a routing and its
baseline at one T (results/sweeps/<sweep>/<point_id>.json). Its builder (:func:`build`, from the engine's
measurement; the sweep point arm, :mod:`nsa_exp.gpu.sweep_point`, calls it) and its checks (:func:`checks`), in
one module:

- ``point_consistent``: ``point.T`` = the shape's T; ``point.pattern`` = the config's routing (with its
  defaults); ``point.baseline`` = the baseline pattern, timed beside it; ``point.packing`` = the config's
  packing token; ``point.shape`` (a shapes axis) = the shape's B, H and G = HQ / H; ``point_id`` regenerated
  from T, the packing, the shape and the pattern (:func:`nsa_exp.core.families.point_id`); ``name`` = the
  config's name = the id (64 characters at most); the file is named ``<point_id>.json`` (under a ``sweeps/``
  folder: in ``sweeps/<sweep>/``); a point whose config packs documents records its ``point.packing``.
- ``timing_recompute``: repetitions and warm-up as the config asks, one observation per round, round orders
  regenerated from the seed, flush bytes, launch guard, percentile method, the timed stages (sweepable ones,
  in table order) and the untimed prerequisites.
- ``memory_recompute``: ``estimated_bytes`` = :func:`nsa_exp.core.config.bytes_needed` for the shape and the
  patterns timed (inputs shared with the previous point or not); at most the free bytes; free <= total = the
  GPU's recorded memory.
- the statistics, shape, edges, config, routings, packing and run-record checks every GPU run gets.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import REPO_ROOT
from ..analysis.run_cost import timed_ms
from ..analysis.stop_rule import rerun
from ..core.config import Config, Shape, bytes_needed
from ..core.families import BASELINE_PATTERN, pattern_from_entry, point_id, shape_label
from ..core.kinds import AUTOTUNE_FILE, schema_version
from ..core.measurement import Measurement
from ..core.protocol import LAUNCH_GUARD_CYCLES, PERCENTILE_METHOD, TIMING_METHOD, round_orders
from ..core.records import GpuIdentity, PatternRun, SweepPoint
from ..core.stages import PREPARING_STAGES, STAGE_NAMES
from ..errors import UserError
from ..io.config_files import read_config_file
from ..routing.fanin import routing_statistics
from ..routing.packing import packing_record, packing_token
from . import record_checks
from .autotune_checks import autotune_configs
from .checks import Add, Context, Problems, first_difference, guarded
from .record_checks import run_record
from .routing_checks import (
    config_rule_checks,
    edge_problems,
    routing_file_recompute,
    routing_files_consistent,
)
from .run_checks import shape_problems
from .sources import read_source, source_problems
from .stats_checks import stats_checks, stop_rule_check, timed_rounds
from .sweep_checks import planned_config_problems

KIND = "sweep_point"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def _pattern(entry: dict[str, Any], shape: Shape | None) -> dict[str, Any] | None:
    try:
        return json.loads(json.dumps(pattern_from_entry(entry, "point.pattern", shape).to_dict()))
    except (UserError, KeyError, TypeError):
        return None


def point_consistent(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    point, config = doc["point"], doc["config"]
    T = doc["shape"]["T"]
    if point["T"] != T:
        problems.append(("$.point.T", f"{point['T']}, but the point's shape has T={T}"))
    names = list(doc["patterns"])
    if point["baseline"] != BASELINE_PATTERN or point["baseline"] not in names:
        problems.append(("$.point.baseline", f"{point['baseline']!r}, but the point timed {names} beside the "
                         f"baseline {BASELINE_PATTERN!r}"))
    routing = point["pattern"]
    if not routing["name"].startswith("file:"):
        shape = Shape(**doc["shape"])
        want = ([p for p in config.get("patterns", []) if p.get("name") != BASELINE_PATTERN] or
            [p for p in config.get("patterns", []) if p.get("name") == BASELINE_PATTERN])
        if len(want) != 1 or _pattern(routing, shape) != _pattern(want[0], shape):
            problems.append(("$.point.pattern", f"{routing}, but the config's routing is "
                             f"{want[0] if len(want) == 1 else [p.get('name') for p in want]}"))
    if "packing" not in point and config.get("packing") is not None:
        problems.append(("$.point.packing", f"missing, but the config packs documents "
                         f"({packing_token(config['packing'])!r}): a point of a packings sweep records its packing"))
    if "packing" in point:
        token = packing_token(config.get("packing"))
        if point["packing"] != token:
            problems.append(("$.point.packing", f"{point['packing']!r}, but the config's packing is {token!r}"))
    dims = doc["shape"]
    if "shape" in point:
        have = {"B": dims["B"], "H": dims["H"], "G": dims["HQ"] // dims["H"] if dims["HQ"] % dims["H"] == 0 else None}
        if point["shape"] != have:
            problems.append(("$.point.shape", f"{point['shape']}, but the point's shape has {have}"))
    pid = point_id(point["T"], routing, point.get("packing"),
                   shape_label(**point["shape"]) if "shape" in point else None)
    if doc["point_id"] != pid:
        problems.append(("$.point_id", f"{doc['point_id']!r}, but T, packing, shape and pattern give {pid!r}"))
    for where, value in (("$.name", doc["name"]), ("$.config.name", config.get("name"))):
        if value != doc["point_id"][:64]:
            problems.append((where, f"{value!r}, but a point is named by its id {doc['point_id'][:64]!r}"))
    if ctx.path != "<bytes>" and Path(ctx.path).stem != doc["point_id"]:
        problems.append(("$.point_id", f"{doc['point_id']!r}, but the file is {Path(ctx.path).name} (a sweep "
                         "writes <point_id>.json)"))
    folder = Path(ctx.path).parent if ctx.path != "<bytes>" else None
    if folder is not None and folder.parent.name == "sweeps" and folder.name != doc["sweep"]:
        problems.append(("$.sweep", f"{doc['sweep']!r}, but the point lies in sweeps/{folder.name}/ (a sweep writes "
                         "results/sweeps/<sweep>/<point_id>.json)"))
    problems += planned_config_problems(doc, ctx)
    add("point_consistent", problems)


def point_timing_recompute(doc: dict[str, Any], add: Add) -> None:
    t, ct = doc["timing"], doc["config"]["timing"]
    names = list(doc["patterns"])
    stages = t["stages"]
    want = {"method": TIMING_METHOD, "warmup_rounds": ct["warmup_rounds"], "repetitions": ct["repetitions"],
            "order_mode": ct["order"], "order_seed": doc["config"]["seeds"]["order"],
            "l2_flush_bytes": ct["l2_flush_bytes"], "launch_guard_cycles": LAUNCH_GUARD_CYCLES,
            "percentile_method": PERCENTILE_METHOD, "stages": [s for s in STAGE_NAMES if s in stages],
            "untimed_prerequisites": [s for s in PREPARING_STAGES if s not in stages]}
    if t.get("stop") is not None:  # under the stop rule: the rounds it ran, at most the config's (``stop_rule``)
        want.pop("repetitions")
    problems: Problems = [(f"$.timing.{k}", f"recorded {t.get(k)!r}, the config/code says {v!r}")
                          for k, v in want.items() if t.get(k) != v]
    if t["repetitions"] > ct["repetitions"]:
        problems.append(("$.timing.repetitions", f"{t['repetitions']} rounds > the config's {ct['repetitions']}"))
    rounds = t["warmup_rounds"] + t["repetitions"]
    orders = round_orders(names, rounds, t["order_mode"], t["order_seed"])
    timed = timed_rounds(doc)  # the verdict rule: converged routings (or stages) leave later rounds; its rerun says
    if timed is not None:     # which, on the point's own observations (stop_rule recomputes the trace)
        orders = orders[:t["warmup_rounds"]] + rerun(doc)[1]
    if t["round_orders"] != orders:
        first = first_difference(t["round_orders"], orders)
        problems.append((f"$.timing.round_orders[{first}]", f"differs from the {t['order_mode']} order of seed "
                         f"{t['order_seed']} over {rounds} rounds"
                         + ("" if timed is None else ", cut to the routings the stop rule still timed")))
    for name, p in doc["patterns"].items():
        if list(p["stages"]) != stages:
            problems.append((f"$.patterns.{name}.stages", f"{list(p['stages'])} != the timed stages {stages}"))
        for stage, s in p["stages"].items():
            n = t["repetitions"] if timed is None else timed.get(name, {}).get(stage, 0)
            if len(s["raw_ms"]) != n:
                problems.append((f"$.patterns.{name}.stages.{stage}.raw_ms", f"{len(s['raw_ms'])} observations != "
                                 + (f"{n} repetitions" if timed is None else f"the {n} rounds the stop rule timed it")))
    add("timing_recompute", problems)


def point_memory_recompute(doc: dict[str, Any], add: Add) -> None:
    m, shape = doc["memory"], Shape(**doc["shape"])
    n, flush = len(doc["patterns"]), doc["timing"]["l2_flush_bytes"]
    options = {bytes_needed(shape, n, flush, shared) for shared in (False, True)}
    problems: Problems = []
    if m["estimated_bytes"] not in options:
        problems.append(("$.memory.estimated_bytes", f"{m['estimated_bytes']}, but {n} patterns at the shape need "
                         f"{sorted(options)} bytes (inputs shared with the previous point or not)"))
    if m["estimated_bytes"] > m["free_bytes_before"]:
        problems.append(("$.memory.estimated_bytes", "above the free bytes: the point would have been refused"))
    if m["free_bytes_before"] > m["total_bytes"]:
        problems.append(("$.memory.free_bytes_before", f"{m['free_bytes_before']} > total {m['total_bytes']}"))
    total = GpuIdentity.read(doc.get("metadata", {}).get("gpu")).total_memory_bytes
    if total is not None and m["total_bytes"] != total:
        problems.append(("$.memory.total_bytes", f"{m['total_bytes']} differs from the GPU's {total}"))
    add("memory_recompute", problems)


@lru_cache(maxsize=64)  # every point of a sweep reads its one config (as sweeps/plan's grid is cached)
def _planned_autotune_from(sweep: str) -> tuple[bool, str | None]:
    """``(found, autotune_from)`` of ``configs/<sweep>.json``: the bench result every point of the sweep pins, None
    where the sweep tunes at its first point and stores the configs as ``_autotune.json`` (sweeps/plan.py)."""
    try:
        raw = read_config_file(REPO_ROOT / "configs" / f"{sweep}.json", "sweep config")
    except UserError:
        return False, None
    value = raw.get("autotune_from")
    return True, value if isinstance(value, str) else None


def autotune_source(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """A point's ``autotune.source`` is the one its sweep config gives (``gpu/sweep_point._pins``): its
    ``autotune_from`` bench result, else the sweep folder's ``_autotune.json`` (``tuned`` at the point that made
    it), and the point records that source's configs (a bench result's kernels and configs; the stored file's
    configs; the kernel names are held to the Stage table by ``autotune_configs``). A dK/dV config rewritten to
    BQ=4, 8 warps PASSed ``--strict``, and then again with ``source`` pointed at another bench result, at a forged
    ``_autotune.json`` elsewhere or at ``tuned`` (an attacker and a re-attacker, 2026-12-07). Unverified (a source
    not found) where a file is not at hand."""
    source, kernels = doc["autotune"]["source"], doc["autotune"]["kernels"]
    problems: Problems = []
    if str(doc["point"]["pattern"].get("name", "")).startswith("file:"):
        found, planned = False, None  # a routing file's point: the command line's, planned by no config
    else:
        found, planned = _planned_autotune_from(doc["sweep"])
    if not found:
        ctx.unverifiable("$.autotune.source", f"unverified (sweep config not found): configs/{doc['sweep']}.json")
    elif planned is not None and not Path(str(source)).as_posix().endswith(planned):
        problems.append(("$.autotune.source", f"{source!r}, but configs/{doc['sweep']}.json pins {planned}"))
    elif planned is None and source != "tuned" and (Path(str(source)).name != AUTOTUNE_FILE
                                                    or Path(str(source)).parent.name != doc["sweep"]):
        problems.append(("$.autotune.source", f"{source!r}, but configs/{doc['sweep']}.json pins no bench result: "
                         f"its points pin results/sweeps/{doc['sweep']}/{AUTOTUNE_FILE}, or tune (tuned)"))
    if source != "tuned":
        kinds = ("bench_result", "sweep_autotune")
        pinned_from = read_source(ctx, source, kinds)
        problems += source_problems(ctx, "$.autotune.source", source, pinned_from, kinds)
        pinned = pinned_from[1]
        if pinned is None:
            ctx.unverifiable("$.autotune.kernels (against its source)", f"unverified (source not found): {source}")
        else:
            want = (pinned["autotune"]["kernels"] if pinned["kind"] == "bench_result" else
                    {k: {"best_config": v} for k, v in pinned["best_config"].items()})
            problems += [(f"$.autotune.kernels.{stage}.{key}", f"{k.get(key)}, but {source} records "
                          f"{want[stage].get(key)}") for stage, k in kernels.items() if stage in want
                         for key in ("kernel", "best_config") if key in want[stage] and k.get(key) != want[stage][key]]
    add("autotune_source", problems)


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """A sweep point: a bench-shaped document with a stage subset, no reproduction or telemetry."""
    stats_checks(doc, add)
    add("shape_matches_config", shape_problems(doc))
    add("edges_equal", edge_problems(doc))
    autotune_configs(doc, add)
    guarded("autotune_source", add, autotune_source, doc, add, ctx)
    config_rule_checks(doc, add, ctx)
    guarded("point_consistent", add, point_consistent, doc, add, ctx)
    guarded("timing_recompute", add, point_timing_recompute, doc, add)
    guarded("memory_recompute", add, point_memory_recompute, doc, add)
    guarded("routing_files_consistent", add, routing_files_consistent, doc, add)
    run_record(doc, add, ctx)
    record_checks.wall_plausible(doc["wall_seconds"], timed_ms(doc), "$.wall_seconds", "its own latencies", add, doc)
    ctx.unverifiable("$.patterns.*.stages.*.raw_ms, $.memory.free_bytes_before, $.autotune, $.placement, "
                     "$.wall_seconds, $.metadata", "measured on the GPU host; statistics recomputed from the "
                     "observations, the rest bounded only")
    ctx.unverified += routing_file_recompute(doc, ctx.routing_files, add)
    guarded("stop_rule", add, stop_rule_check, doc, add, ctx)


def build(*, config: Config, sweep: str, point_id: str, point: Mapping[str, Any], stages: Sequence[str],
          names: Sequence[str], gates: list[dict[str, Any]], routings: Mapping[str, Any], files: Mapping[str, Any],
          file_reports: Mapping[str, Any], measurement: Measurement, untimed: Sequence[str],
          autotune: Mapping[str, Any], memory: Mapping[str, Any] | None,
          host: Callable[[], tuple[Mapping[str, Any], Mapping[str, Any], float]]) -> SweepPoint:
    """The :class:`~nsa_exp.core.records.SweepPoint` of one measured point (pure).

    ``point``: the ``point`` block (``T``, ``pattern``, ``baseline``; ``packing``, ``shape`` on those axes);
    ``stages``: the stages timed (``untimed``: the prerequisites run but not timed); ``names``: the routings
    timed (the config's patterns, then the ``file:<stem>`` s of ``files``, whose reports are ``file_reports``),
    each ``routings[name]`` ``[B, T, H, S]`` int32; ``measurement``: the engine's (its records give every
    stage's statistics, its ``timing`` the block, written without a flush policy: a sweep point always flushes
    with ``write``); ``host()``: the host's metadata, the point's placement and its wall seconds, read once the
    routings' statistics are computed (the point's wall time includes them)."""
    edges = next(g["detail"] for g in gates if g["name"] == "equal_edges")
    stats = measurement.stage_stats(names, stages)
    params = {n: {"name": n} if n in files else config.pattern(n).to_dict() for n in names}
    rows = {n: routing_statistics(routings[n], config.shape.block_size, config.cu_seqlens) for n in names}
    patterns = {n: PatternRun(params=params[n], edges=int(edges["per_pattern"][n]), stages=stats[n],
                              fanin=rows[n]["fanin"], query_span=rows[n]["query_span"],
                              adjacent_gap=rows[n]["adjacent_gap"])
                for n in names}
    metadata, placement, wall_seconds = host()
    return SweepPoint(
        schema_version=schema_version(SweepPoint.KIND), kind=SweepPoint.KIND, name=config.name, sweep=sweep,
        point_id=point_id, point=dict(point), config=config.raw, shape=config.shape.to_dict(), gates=gates,
        edges=edges, autotune=dict(autotune),
        timing=measurement.timing(stages, flush_recorded=False, untimed_prerequisites=untimed),
        patterns=patterns, memory=None if memory is None else dict(memory), placement=dict(placement),
        wall_seconds=wall_seconds, metadata=dict(metadata), routing_files=dict(file_reports) or None,
        packing=None if config.cu_seqlens is None else packing_record(config.cu_seqlens, edges["closed_form"]))
