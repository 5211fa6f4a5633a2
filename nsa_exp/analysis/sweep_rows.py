"""A sweep point's tidy row (schema ``sweep_row``): what ``sweep --table-only`` writes per point and what
``validate`` rebuilds a sweep table from (:mod:`nsa_exp.sweeps.table`, :mod:`nsa_exp.checking.sweep_checks`).

Columns: the point's sweep, id, family, parameters (JSON, sorted keys), T, edges, the routing's fan-in
mean/max/p99/cv/gini, its dK/dV median/p10/p90 and CSR median (ms), the baseline's dK/dV median and
``ratio_vs_local`` = dK/dV median / the baseline's; a packed sweep adds ``packing`` and ``documents``; a
sweep with a shapes axis adds ``B``, ``H``, ``G`` and ``dkv_excess_ms`` (dK/dV median minus its local's); a sweep
timing ``full_bwd`` adds its median, its local's, their ratio and their difference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.records import SweepPoint
from ..io.schemas import load_schema


def point_rows(doc: SweepPoint | Mapping[str, Any]) -> dict[str, Any]:
    """One tidy row (schema ``sweep_row``) from a ``sweep_point`` document."""
    point = SweepPoint.coerce(doc)
    p, routing = point.routing, point.point["pattern"]["name"]
    f, dkv, csr = p.fanin, p.stages.get("dkv_core"), p.stages.get("csr")
    base = point.baseline.stages.get("dkv_core")
    base_dkv = base.median_ms if base else None
    params = {k: v for k, v in point.point["pattern"].items() if k != "name"}
    packed = ({"packing": point.point["packing"], "documents": (point.packing or {}).get("documents", 1)}
        if "packing" in point.point else {})
    shaped = ({**point.point["shape"], "dkv_excess_ms": dkv.median_ms - base_dkv if dkv and base_dkv else None}
        if "shape" in point.point else {})
    full, base_full = p.stages.get("full_bwd"), point.baseline.stages.get("full_bwd")
    full_ms, base_full_ms = full and full.median_ms, base_full and base_full.median_ms
    full_cols = ({"full_bwd_median_ms": full_ms, "local_full_bwd_median_ms": base_full_ms,
                 "full_bwd_ratio_vs_local": full_ms / base_full_ms if full_ms and base_full_ms else None,
                 "full_bwd_excess_ms": full_ms - base_full_ms if full_ms and base_full_ms else None}
        if "full_bwd" in point.timing.stages else {})
    return {**packed, "sweep": point.sweep, "point_id": point.point_id, "family": routing,
            "params": json.dumps(params, sort_keys=True), "T": point.point["T"], "edges": p.edges,
            "fanin_mean": f["mean"], "fanin_max": f["max"], "fanin_p99": f["p99"], "fanin_cv": f["cv"],
            "fanin_gini": f["gini"], "dkv_median_ms": dkv and dkv.median_ms, "dkv_p10_ms": dkv and dkv.p10_ms,
            "dkv_p90_ms": dkv and dkv.p90_ms, "csr_median_ms": csr and csr.median_ms,
            "local_dkv_median_ms": base_dkv,
            "ratio_vs_local": dkv.median_ms / base_dkv if dkv and base_dkv else None, **shaped, **full_cols}


SWEEP_COLUMNS: tuple[str, ...] = tuple(load_schema("sweep_row")["required"])
#: a shapes axis's columns: batch, KV heads, group size and dK/dV's excess over its local (ms)
SHAPE_COLUMNS: tuple[str, ...] = ("B", "H", "G", "dkv_excess_ms")
#: the full backward's columns, in sweeps that time ``full_bwd``
FULL_BWD_COLUMNS: tuple[str, ...] = ("full_bwd_median_ms", "local_full_bwd_median_ms", "full_bwd_ratio_vs_local",
                                     "full_bwd_excess_ms")


def table_rows(docs: Sequence[SweepPoint | Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The sweep table of ``docs`` (every point's :func:`point_rows`, sorted by family, T, point id, stable)
    and its columns (:data:`SWEEP_COLUMNS`, plus ``packing`` and ``documents`` when a point is packed, the
    :data:`SHAPE_COLUMNS` when a point is on a shapes axis, the :data:`FULL_BWD_COLUMNS` when one timed
    ``full_bwd``)."""
    rows = sorted((point_rows(d) for d in docs), key=lambda r: (r["family"], r["T"], r["point_id"]))
    extra = [cols for cols, key in ((("packing", "documents"), "packing"), (SHAPE_COLUMNS, "B"),
                                   (FULL_BWD_COLUMNS, "full_bwd_median_ms")) if any(key in r for r in rows)]
    return rows, list(SWEEP_COLUMNS) + [c for cols in extra for c in cols]
