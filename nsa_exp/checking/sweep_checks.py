"""Checks of a sweep's documents: a point's own record, the sweep table, the autotune configs a sweep pins.

- ``point_consistent`` (sweep point): ``point.T`` = the shape's T; ``point.pattern`` = the config's routing
  (with its defaults); ``point.baseline`` = the baseline pattern, timed beside it; ``point.packing`` = the
  config's packing token; ``point.shape`` (a shapes axis) = the shape's B, H and G = HQ / H; ``point_id``
  regenerated from T, the packing, the shape and the pattern
  (:func:`nsa_exp.core.families.point_id`); ``name`` = the config's name = the id (64 characters at most);
  the file is named ``<point_id>.json`` (under a ``sweeps/`` folder: in ``sweeps/<sweep>/``); a point whose
  config packs documents records its ``point.packing``.
- ``timing_recompute`` (sweep point): repetitions and warm-up as the config asks, one observation per
  round, round orders regenerated from the seed, flush bytes, launch guard, percentile method, the timed
  stages (sweepable ones, in table order) and the untimed prerequisites.
- ``memory_recompute`` (sweep point): ``estimated_bytes`` = :func:`nsa_exp.core.config.bytes_needed` for the
  shape and the patterns timed (inputs shared with the previous point or not); at most the free bytes;
  free <= total = the GPU's recorded memory.
- ``sweep_csv_rows`` / ``sweep_csv_recompute`` (a sweep table, ``results/sweeps/<sweep>.csv``): every cell
  strict and against ``sweep_row``; with its points folder (``<sweep>/`` beside it) the table is rebuilt
  from the point files (:func:`nsa_exp.analysis.sweep_rows.table_rows`) and compared cell by cell; without
  it: one sweep, unique ids, ``ratio_vs_local`` = dK/dV / baseline dK/dV, ``params``/``point_id``/``T``
  agree, the table sorted as written — the values themselves listed unverified.
- ``sweep_autotune_configs`` (``_autotune.json``): each stage's config one of FLA's (the Stage table's
  ``autotune_space``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..analysis.sweep_rows import table_rows
from ..core.config import Shape, bytes_needed
from ..core.families import BASELINE_PATTERN, pattern_from_entry, point_id, shape_label
from ..core.protocol import LAUNCH_GUARD_CYCLES, PERCENTILE_METHOD, TIMING_METHOD, round_orders
from ..core.stages import PREPARING_STAGES, STAGE_NAMES
from ..errors import UserError
from ..io.reader import read_bounded
from ..io.schemas import schema_errors
from ..io.strict_csv import typed_rows
from ..io.strict_json import MAX_BYTES, _Rejected, parse_strict
from ..routing.packing import packing_token
from .checks import Add, Context, Problems, close, first_difference, schema_problems


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
        want = [p for p in config.get("patterns", []) if p.get("name") != BASELINE_PATTERN] or \
            [p for p in config.get("patterns", []) if p.get("name") == BASELINE_PATTERN]
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
    if t["round_orders"] != orders:
        first = first_difference(t["round_orders"], orders)
        problems.append((f"$.timing.round_orders[{first}]", f"differs from the {t['order_mode']} order of seed "
                         f"{t['order_seed']} over {rounds} rounds"))
    for name, p in doc["patterns"].items():
        if list(p["stages"]) != stages:
            problems.append((f"$.patterns.{name}.stages", f"{list(p['stages'])} != the timed stages {stages}"))
        for stage, s in p["stages"].items():
            if len(s["raw_ms"]) != t["repetitions"]:
                problems.append((f"$.patterns.{name}.stages.{stage}.raw_ms", f"{len(s['raw_ms'])} observations != "
                                 f"{t['repetitions']} repetitions"))
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
    total = doc.get("metadata", {}).get("gpu", {}).get("total_memory_bytes")
    if total is not None and m["total_bytes"] != total:
        problems.append(("$.memory.total_bytes", f"{m['total_bytes']} differs from the GPU's {total}"))
    add("memory_recompute", problems)


# --- the sweep table -------------------------------------------------------------------------------

def _cell_equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and close(float(a), float(b))
    return a == b


def _points(folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The point documents of a sweep folder (finished points: kind sweep_point), and the unreadable ones."""
    docs, bad = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = parse_strict(read_bounded(path, str(path), MAX_BYTES))
        except (OSError, _Rejected, UserError):
            bad.append(path.name)
            continue
        if isinstance(doc, dict) and doc.get("kind") == "sweep_point":
            docs.append(doc)
    return docs, bad


def sweep_csv_checks(header: list[str], body: list[list[str]], add: Add, ctx: Context) -> None:
    """``sweep_csv_rows`` then ``sweep_csv_recompute`` of a sweep table (see the module docstring)."""
    try:
        rows = typed_rows(header, body, "sweep_row", Path(ctx.path).name)
    except UserError as exc:
        add("sweep_csv_rows", [("$", str(exc))])
        return
    problems = schema_problems(e for i, r in enumerate(rows) for e in schema_errors(r, "sweep_row", f"$[{i}]"))
    if not rows:
        problems.append(("$", "no rows"))
    if not add("sweep_csv_rows", problems):
        return
    folder = Path(ctx.path).with_suffix("") if ctx.path != "<bytes>" else None
    if folder is not None and folder.is_dir():
        docs, bad = _points(folder)
        want, columns = table_rows(docs)
        problems = [("$", f"point file {b} in {folder.name}/ is not readable JSON") for b in bad]
        if header != columns:
            problems.append(("$", f"columns {header} != the table's {columns}"))
        have = {r["point_id"]: (i, r) for i, r in enumerate(rows)}
        for j, w in enumerate(want):
            got = have.get(w["point_id"])
            if got is None:
                problems.append(("$", f"point {w['point_id']} ({folder.name}/{w['point_id']}.json) has no row"))
                continue
            i, r = got
            if i != j:
                problems.append((f"$[{i}]", f"row {i + 2} ({w['point_id']}) is out of the table's order "
                                 "(family, T, point id)"))
            problems += [(f"$[{i}].{c}", f"row {i + 2} ({w['point_id']}) column {c}: CSV {r.get(c)!r} but the point "
                          f"file gives {w[c]!r}") for c in columns if c in w and not _cell_equal(r.get(c), w[c])]
        ids = {w["point_id"] for w in want}
        problems += [(f"$[{i}]", f"row {i + 2}: no point file {folder.name}/{r['point_id']}.json")
                     for i, r in enumerate(rows) if r["point_id"] not in ids]
        add("sweep_csv_recompute", problems)
        return
    ctx.unverifiable("$[*] (every value)", f"unverified (points folder not found): {folder}: the table is checked for "
                     "internal consistency only")
    problems = []
    if len({r["sweep"] for r in rows}) != 1:
        problems.append(("$", f"more than one sweep: {sorted({r['sweep'] for r in rows})}"))
    listed = [r["point_id"] for r in rows]
    problems += [("$", f"point {p} is listed twice") for p in sorted({p for p in listed if listed.count(p) > 1})]
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["family"], rows[i]["T"], rows[i]["point_id"]))
    if order != list(range(len(rows))):
        problems.append(("$", "rows are not in the table's order (family, T, point id)"))
    for i, r in enumerate(rows):
        entry = {"name": r["family"], **json.loads(r["params"])} if r["params"].startswith("{") else None
        axes = (r.get("packing") or None, shape_label(r["B"], r["H"], r["G"]) if r.get("B") is not None else None)
        pid = None if entry is None else point_id(r["T"], entry, *axes)
        if pid != r["point_id"]:
            problems.append((f"$[{i}].point_id", f"row {i + 2}: {r['point_id']!r}, but family, params and T give "
                             f"{pid!r}"))
        ratio = r["dkv_median_ms"] / r["local_dkv_median_ms"] if r["dkv_median_ms"] and r["local_dkv_median_ms"] \
            else None
        if not _cell_equal(r["ratio_vs_local"], ratio):
            problems.append((f"$[{i}].ratio_vs_local", f"row {i + 2}: {r['ratio_vs_local']}, dkv_median_ms / "
                             f"local_dkv_median_ms = {ratio}"))
        if r["dkv_p10_ms"] is not None and not r["dkv_p10_ms"] <= r["dkv_median_ms"] <= r["dkv_p90_ms"]:
            problems.append((f"$[{i}].dkv_median_ms", f"row {i + 2}: median outside [p10, p90]"))
    add("sweep_csv_recompute", problems)
