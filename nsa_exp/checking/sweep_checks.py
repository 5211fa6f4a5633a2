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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..analysis.sweep_rows import table_rows
from ..core.families import point_id, shape_label
from ..errors import UserError
from ..io.reader import read_bounded
from ..io.schemas import schema_errors
from ..io.strict_csv import typed_rows
from ..io.strict_json import MAX_BYTES, _Rejected, parse_strict
from .checks import Add, Context, Problems, close, schema_problems
from .sources import rebuilt_from

# --- the sweep table -------------------------------------------------------------------------------

#: the points a sweep's config plans, by sweep name: ``{point_id: [the configs its point may record]}`` (as planned,
#: under ``--stop-rule``; None: no config of that name loads); the sweep tier knows the grid, and the doors register
#: it here (:func:`register_planned`), so no module of this tier names one above it
_planned: Callable[[str], dict[str, list[dict[str, Any]]] | None] | None = None


def register_planned(planned: Callable[[str], dict[str, list[dict[str, Any]]] | None]) -> None:
    """Give the sweep checks the grid of a sweep (``nsa_exp/cli.py`` registers the sweep tier's)."""
    global _planned
    _planned = planned


def _grid(sweep: str) -> dict[str, list[dict[str, Any]]] | None:
    return None if _planned is None else _planned(sweep)


def _no_grid(sweep: str) -> str:
    return (f"unverified (sweep config not found): configs/{sweep}.json does not load here (or no grid is registered), "
            "so which points its grid plans, and with which config, cannot be told")


def unmeasured_points(sweep: str, measured: set[str]) -> tuple[str, list[str]] | None:
    """``(why, point ids)`` of the points ``sweep``'s config plans that have no point file among ``measured``: a
    table rebuilt only from the files present let a forger remove an unflattering point with its row (an attacker,
    2026-12-07); None when every planned point is there."""
    planned = _grid(sweep)
    if planned is None:
        return _no_grid(sweep), []
    missing = [p for p in planned if p not in measured]
    if not missing:
        return None
    return (f"unverified (points not found): {len(missing)} of the {len(planned)} points configs/{sweep}.json plans "
            f"have no file (not measured, or removed): {', '.join(missing)}", missing)


def planned_config_problems(doc: dict[str, Any], ctx: Context) -> Problems:
    """A point's config is the one its sweep's config plans for its id (a point of another sweep, its ``sweep``
    renamed, took a planned point's place and PASSed: an attacker, 2026-12-07). A point of a routing file the command
    line added (``sweep --routing-file``) is planned by no config and passes here."""
    if str(doc["point"]["pattern"].get("name", "")).startswith("file:"):
        return []
    planned = _grid(doc["sweep"])
    if planned is None:
        ctx.unverifiable("$.config (the sweep's plan)", _no_grid(doc["sweep"]))
        return []
    wants = planned.get(doc["point_id"])
    if wants is None:
        return [("$.point_id", f"{doc['point_id']!r} is no point configs/{doc['sweep']}.json plans")]
    if doc["config"] in wants:
        return []
    keys = sorted(k for k in set(doc["config"]) | set(wants[0]) if doc["config"].get(k) != wants[0].get(k))
    return [("$.config", f"differs in {keys} from the config configs/{doc['sweep']}.json plans for "
             f"{doc['point_id']} (with or without --stop-rule)")]


def _cell_equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and close(float(a), float(b))
    return a == b


def _points(folder: Path) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The point documents of a sweep folder (finished points: kind sweep_point), and the files that are no point,
    ``(file name, why)``: not readable JSON, or a point against its schema (a row cannot be built from it)."""
    docs, bad = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = parse_strict(read_bounded(path, str(path), MAX_BYTES))
        except (OSError, _Rejected, UserError):
            bad.append((path.name, "is not readable JSON"))
            continue
        if isinstance(doc, dict) and doc.get("kind") == "sweep_point":
            errors = schema_errors(doc, "sweep_point", path.name)  # a point of no pattern fields was an internal error
            if errors:
                bad.append((path.name, f"fails its schema ({errors[0]})"))
                continue
            docs.append(doc)
    return docs, bad


def _params_entry(family: str, params: str) -> dict[str, Any] | None:
    """A row's family entry, ``{"name": family, **params}``, or None where its ``params`` cell is no JSON object
    (a point id then cannot be formed, which the row's check reports)."""
    try:
        values = json.loads(params)
    except ValueError:
        return None
    return {"name": family, **values} if isinstance(values, dict) else None


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
        problems = [("$", f"point file {name} {why} (in {folder.name}/)") for name, why in bad]
        unusable = {Path(name).stem for name, _ in bad}
        if header != columns:
            problems.append(("$", f"columns {header} != the table's {columns}"))
        have = {r["point_id"]: (i, r) for i, r in enumerate(rows)}
        ids = {w["point_id"] for w in want}
        # each row's place among the rows of a usable point (a point failing its schema, reported above, shifts none)
        place = {pid: k for k, pid in enumerate(r["point_id"] for r in rows if r["point_id"] in ids)}
        for j, w in enumerate(want):
            got = have.get(w["point_id"])
            if got is None:
                problems.append(("$", f"point {w['point_id']} ({folder.name}/{w['point_id']}.json) has no row"))
                continue
            i, r = got
            if place[w["point_id"]] != j:
                problems.append((f"$[{i}]", f"row {i + 2} ({w['point_id']}) is out of the table's order "
                                 "(family, T, point id)"))
            problems += [(f"$[{i}].{c}", f"row {i + 2} ({w['point_id']}) column {c}: CSV {r.get(c)!r} but the point "
                          f"file gives {w[c]!r}") for c in columns if c in w and not _cell_equal(r.get(c), w[c])]
        problems += [(f"$[{i}]", f"row {i + 2}: no point file {folder.name}/{r['point_id']}.json")
                     for i, r in enumerate(rows) if r["point_id"] not in ids and r["point_id"] not in unusable]
        # the rows are only as good as the points (a point whose dK/dV medians were set to 20 ms with its
        # observations at 65-68 ms, and its row with it, PASSed: an attacker, 2026-12-06)
        problems += [x for p in sorted(folder.glob("*.json"))
                     for x in rebuilt_from(ctx, "$", f"point file {folder.name}/{p.name}", p)]
        sweeps = {r["sweep"] for r in rows} | {d["sweep"] for d in docs}
        if len(sweeps) != 1:  # a point renamed to another sweep switched the grid check off
            problems.append(("$", f"more than one sweep among the rows and points: {sorted(sweeps)}"))
        elif gap := unmeasured_points(sweeps.pop(), ids):
            ctx.unverifiable("$ (the sweep's grid)", gap[0])
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
        entry = _params_entry(r["family"], r["params"])
        axes = (r.get("packing") or None, shape_label(r["B"], r["H"], r["G"]) if r.get("B") is not None else None)
        pid = None if entry is None else point_id(r["T"], entry, *axes)
        if pid != r["point_id"]:
            problems.append((f"$[{i}].point_id", f"row {i + 2}: {r['point_id']!r}, but family, params and T give "
                             f"{pid!r}"))
        ratio = (r["dkv_median_ms"] / r["local_dkv_median_ms"] if r["dkv_median_ms"] and r["local_dkv_median_ms"]
            else None)
        if not _cell_equal(r["ratio_vs_local"], ratio):
            problems.append((f"$[{i}].ratio_vs_local", f"row {i + 2}: {r['ratio_vs_local']}, dkv_median_ms / "
                             f"local_dkv_median_ms = {ratio}"))
        spread = (r["dkv_p10_ms"], r["dkv_median_ms"], r["dkv_p90_ms"])
        if any(v is not None for v in spread) and (None in spread or not spread[0] <= spread[1] <= spread[2]):
            problems.append((f"$[{i}].dkv_median_ms", f"row {i + 2}: median {spread[1]} outside [p10, p90] = "
                             f"[{spread[0]}, {spread[2]}]"))
    add("sweep_csv_recompute", problems)
