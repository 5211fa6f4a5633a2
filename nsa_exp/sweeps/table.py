"""The sweep table: every valid point file as one tidy row (schema ``sweep_row``), written and read back."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd

from ..checking.validate import load_validated
from ..core.records import SweepPoint
from ..errors import UserError
from ..io.reader import read_csv_table, show_path
from ..io.schemas import load_schema, schema_errors
from ..io.store import write_frame
from .plan import point_done


def point_rows(doc: SweepPoint | dict[str, Any]) -> dict[str, Any]:
    """One tidy row (schema ``sweep_row``) from a ``sweep_point`` document."""
    point = SweepPoint.coerce(doc)
    p, routing = point.routing, point.point["pattern"]["name"]
    f, dkv, csr = p.fanin, p.stages.get("dkv_core"), p.stages.get("csr")
    base = point.baseline.stages.get("dkv_core")
    base_dkv = base.median_ms if base else None
    params = {k: v for k, v in point.point["pattern"].items() if k != "name"}
    packed = {"packing": point.point["packing"], "documents": (point.packing or {}).get("documents", 1)} \
        if "packing" in point.point else {}
    return {**packed, "sweep": point.sweep, "point_id": point.point_id, "family": routing,
            "params": json.dumps(params, sort_keys=True), "T": point.point["T"], "edges": p.edges,
            "fanin_mean": f["mean"], "fanin_max": f["max"], "fanin_p99": f["p99"], "fanin_cv": f["cv"],
            "fanin_gini": f["gini"], "dkv_median_ms": dkv and dkv.median_ms, "dkv_p10_ms": dkv and dkv.p10_ms,
            "dkv_p90_ms": dkv and dkv.p90_ms, "csr_median_ms": csr and csr.median_ms,
            "local_dkv_median_ms": base_dkv,
            "ratio_vs_local": dkv.median_ms / base_dkv if dkv and base_dkv else None}


SWEEP_COLUMNS: tuple[str, ...] = tuple(load_schema("sweep_row")["required"])


def sweep_table(out_dir: str | Path, csv_path: str | Path | None = None) -> pd.DataFrame:
    """Every measured point under ``out_dir`` as one tidy row (sorted by family, T, point id); written to
    ``csv_path`` (schema ``sweep_row`` per row) when given.

    A point file (a schema-valid ``sweep_point``; anything else is an unfinished point and skipped) must pass
    every check of ``validate`` (:func:`nsa_exp.checking.validate.load_validated`): a forged or poisoned point
    is refused in one line naming it, never tabulated; a folder without one is refused (no 0-row table)."""
    docs = []
    for path in sorted(Path(out_dir).glob("*.json")):
        if point_done(path):
            docs.append(load_validated(path, ("sweep_point",), hint="rerun the point, or remove the file"))
    if not docs:
        raise UserError(f"{out_dir}: no measured point file (run the sweep on a GPU first); no table written")
    packed = any("packing" in d["point"] for d in docs)
    frame = pd.DataFrame([point_rows(d) for d in docs], columns=list(SWEEP_COLUMNS) + (
        ["packing", "documents"] if packed else []))
    frame = frame.sort_values(["family", "T", "point_id"], kind="stable").reset_index(drop=True)
    if csv_path is not None:
        write_frame(csv_path, frame, "sweep_row")
    return frame


def read_sweep_table(path: Path) -> pd.DataFrame:
    """A sweep table, each row checked against the ``sweep_row`` schema (UserError naming the row)."""
    text = read_csv_table(path, show_path(path), "sweep_row", "a sweep table")
    frame = pd.read_csv(io.StringIO(text), dtype={"params": str})
    for i, row in enumerate(frame.to_dict("records")):
        clean = {k: (int(v) if k in ("T", "edges") else v) for k, v in row.items()}
        errors = schema_errors(clean, "sweep_row", f"{path.name} row {i + 2}")
        if errors:
            raise UserError(errors[0])
    return frame
