"""Model what-ifs of a scheduling fix for FLA's dK/dV kernel (predicted, not measured).

- heaviest-first: the same programs dispatched longest-first (LPT, Graham 1969: within 4/3 of optimal
  for identical machines);
- split: rows longer than ``F`` queries cut into ``ceil(len/F)`` programs, laid out exactly as the
  measured what-if arm launches them (:func:`.split.split_routing`, layout ``split-heavy-first``: B'
  batches, empty programs included, in FLA's program-id order), plus the reduction
  ``dK = sum_b dK_b``, ``dV = sum_b dV_b``, priced as a memory-bound pass at HBM bandwidth.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..io.memo import memoised
from .calibration import group_size, predict
from .points import pattern_fanin, pattern_split_fanin

# H200 HBM3e bandwidth, 4.8 TB/s (NVIDIA H200 datasheet); the reduction reads B' partials and writes one.
HBM_BYTES_PER_MS = 4.8e12 / 1e3


def reduction_ms(batches: int, shape: Mapping[str, Any], T: int) -> float:
    """Estimated ms of summing ``batches`` partial dK ``[NV, B', T, H, K]`` and dV ``[B', T, H, V]`` (2-byte
    bf16/fp16; ``NV = 1`` since FLA's ``BV = next_pow2(V) >= V``): read once, the sums written once.
    0 for one batch (no reduction)."""
    if batches <= 1:
        return 0.0
    nv = 1
    elems = T * shape["H"] * (nv * shape["K"] + shape["V"])
    return (batches + 1) * elems * 2 / HBM_BYTES_PER_MS


def model_whatif(cal: Mapping[str, Any], pattern: Mapping[str, Any], shape: Mapping[str, Any], T: int, seed: int,
                 max_fanin: int | None) -> dict[str, Any]:
    """``{"heaviest_first_ms", "split_ms" (None without ``max_fanin``), "split_batches", "reduction_ms"}`` for one
    generated routing (``pattern`` at ``shape`` and ``T``, routing seed ``seed``; ``c`` scaled to the shape's G,
    :func:`.calibration.predict`). The split launch is priced from its per-program fan-in
    (:func:`.points.pattern_split_fanin`, from the routing's cached fan-in; one batch, ``B = 1``): the B'-batch
    routing itself is never built."""
    fanin = pattern_fanin(pattern, shape, T, seed)
    out = {"heaviest_first_ms": predict(cal, fanin, "heaviest-first", shape)["predicted_ms"],
           "split_ms": None, "split_batches": 1, "reduction_ms": 0.0}
    if max_fanin:
        programs = pattern_split_fanin(pattern, shape, T, seed, max_fanin, "split-heavy-first")
        batches = len(programs) // (shape["H"] * -(-T // shape["block_size"]))
        red = reduction_ms(batches, shape, T)
        out.update(split_ms=predict(cal, programs, shape=shape)["predicted_ms"] + red, split_batches=batches,
                   reduction_ms=red)
    return out


#: model-validate's accuracy target (docs/MODEL.md): |error| mean <= 5 %, max <= 10 % over the predictions.
TARGET = {"mean_abs_pct": 5.0, "max_abs_pct": 10.0}


def shape_fields(cal: Mapping[str, Any], shape: Mapping[str, Any]) -> dict[str, int]:
    """A validation row's ``{"B", "H", "G"}`` of a point whose B, H or G = HQ/H differs from the calibration's;
    ``{}`` at the calibration's (so rows at its shape keep their bytes).

    >>> cal = {"shape": {"B": 1, "H": 4, "HQ": 64}}
    >>> shape_fields(cal, {"B": 1, "H": 4, "HQ": 64}), shape_fields(cal, {"B": 2, "H": 4, "HQ": 64})
    ({}, {'B': 2, 'H': 4, 'G': 16})
    """
    mine = {"B": int(shape["B"]), "H": int(shape["H"]), "G": group_size(shape)}
    base = {"B": int(cal["shape"]["B"]), "H": int(cal["shape"]["H"]), "G": group_size(cal["shape"])}
    return {} if mine == base else mine


def held_out(cal: Mapping[str, Any], points: Sequence[Any]) -> tuple[list[Any], list[str]]:
    """``model-validate``'s split of ``points`` (:class:`.points.MeasuredPoint`) against the calibration ``cal``: (the
    points it validates on, in order; the names it excludes, sorted). A calibration routing is excluded at the
    calibration's shape only; at another B, H or G (:func:`shape_fields`) it is held out."""
    used = {p["label"] for p in cal["points"]}
    calibrating = [p.name in used and not shape_fields(cal, p.shape) for p in points]
    return ([p for p, c in zip(points, calibrating, strict=True) if not c],
            sorted({p.name for p, c in zip(points, calibrating, strict=True) if c}))


def validation_row(cal: Mapping[str, Any], point: Any, max_fanin: int | None,
                   cache: dict | None = None) -> dict[str, Any]:
    """One ``model_validation`` row: the measured point (:class:`.points.MeasuredPoint`) against the calibration's
    prediction at the point's own shape (B, H, G: :func:`.calibration.predict`), its busy fraction and lower
    bound, and the heaviest-first and split what-ifs (the split is modelled on the dense one-batch layout only; a
    packed point or one at ``B > 1`` keeps heaviest-first alone), plus :func:`shape_fields`. ``cache``: a dict
    kept across the rows of one calibration, so a routing measured in several files is modelled once."""
    p = point
    key = json.dumps([dict(p.pattern), dict(p.shape), p.T, p.seed, p.packing, max_fanin], sort_keys=True, default=str)
    if cache is None or key not in cache:
        if cache is None:
            cache = {}
        cache[key] = _modelled(dict(cal), dict(p.pattern), dict(p.shape), int(p.T), int(p.seed),
                               None if p.packing is None else dict(p.packing), max_fanin)
    m = cache[key]
    return {"name": p.name, "source": p.source, "sha256": p.sha256, "pattern": dict(p.pattern), "T": p.T,
            "measured_ms": p.measured_ms, "predicted_ms": m["predicted_ms"],
            "error_pct": 100.0 * (m["predicted_ms"] / p.measured_ms - 1.0),
            "busy_fraction": m["busy_fraction"], "lower_bound_ms": m["lower_bound_ms"],
            "heaviest_first_ms": m["heaviest_first_ms"], "split_ms": m["split_ms"],
            **shape_fields(cal, p.shape)}


@memoised  # validate, report and model-validate children model the same committed rows again (io/memo.py)
def _modelled(cal: dict[str, Any], pattern: dict[str, Any], shape: dict[str, Any], T: int, seed: int,
              packing: dict[str, Any] | None, max_fanin: int | None) -> dict[str, float | None]:
    """:func:`validation_row`'s model numbers for one generated routing: ``predicted_ms``, ``busy_fraction``,
    ``lower_bound_ms`` (the largest of :func:`.calibration.predict`'s lower bounds), ``heaviest_first_ms`` and
    ``split_ms`` (None off the dense one-batch layout or without ``max_fanin``), as Python floats (a JSON value, so
    the opt-in memo keeps it; ``float`` of a float64 is exact)."""
    fanin = pattern_fanin(pattern, shape, T, seed, packing)
    pred = predict(cal, fanin, shape=shape)
    what = (model_whatif(cal, pattern, shape, T, seed, max_fanin) if packing is None and shape["B"] == 1 else
        {"heaviest_first_ms": predict(cal, fanin, "heaviest-first", shape)["predicted_ms"], "split_ms": None})
    return {"predicted_ms": float(pred["predicted_ms"]), "busy_fraction": float(pred["busy_fraction"]),
            "lower_bound_ms": float(max(pred["lower_bounds"].values())),
            "heaviest_first_ms": float(what["heaviest_first_ms"]),
            "split_ms": None if what["split_ms"] is None else float(what["split_ms"])}


def validation_summary(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], bool]:
    """``({n, mean_abs_pct, max_abs_pct}, meets_target)`` of the rows' ``error_pct`` against :data:`TARGET`."""
    errs = np.abs([r["error_pct"] for r in rows])
    summary = {"n": len(rows), "mean_abs_pct": float(errs.mean()), "max_abs_pct": float(errs.max())}
    meets = summary["mean_abs_pct"] <= TARGET["mean_abs_pct"] and summary["max_abs_pct"] <= TARGET["max_abs_pct"]
    return summary, meets
