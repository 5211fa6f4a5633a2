"""Calibration files and predictions of the dK/dV makespan model.

A calibration file (schema ``model_calibration``, ``results/model/<gpu>_<config>.json``) holds, for
one GPU and one dK/dV autotune config: the compiled kernel's resources and the slots they give
(:mod:`.occupancy`, cross-checked against ncu's theoretical occupancy), the fitted ``(a, c, gamma)``
(:mod:`.fit`), and every calibration point — a *designed* routing named in the calibration-set
config, with its measured median, the result file (+ sha256) it came from, the fitted ms and error.

:func:`predict` turns per-row fan-in into a prediction: predicted ms, the two lower bounds, when
the heaviest row starts and ends, the slots' busy fraction, and the break-even ``B*H`` at which the heaviest
row stops deciding the makespan; at another group size G, with the per-query cost scaled by ``G / G_cal``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.protocol import DISPATCH_ORDERS
from ..errors import UserError
from ..io.store import file_sha256, load_document, read_strict
from .fit import Params, error_table, fit_params
from .makespan import break_even, heaviest_first, lower_bounds, program_work, simulate
from .occupancy import HOPPER, SmLimits, slots_per_sm, theoretical_occupancy_pct


def config_label(autotune_config: Mapping[str, Any]) -> str:
    """``BQ1_w4_s2`` for ``{"kwargs": {"BQ": 1}, "num_warps": 4, "num_stages": 2}``.

    >>> config_label({"kwargs": {"BQ": 1}, "num_warps": 4, "num_stages": 2})
    'BQ1_w4_s2'
    """
    kw = "_".join(f"{k}{v}" for k, v in sorted(autotune_config["kwargs"].items()))
    return f"{kw}_w{autotune_config['num_warps']}_s{autotune_config['num_stages']}".lstrip("_")


def limits_from_device(device: Mapping[str, Any] | None) -> SmLimits:
    """:class:`SmLimits` from torch's device properties as recorded (``kernels.device`` of a study);
    the Hopper table's allocation units and block cap; :data:`HOPPER` when ``device`` is None."""
    if not device:
        return HOPPER
    return SmLimits(registers=int(device["regs_per_multiprocessor"]),
                    max_warps=int(device["max_threads_per_multi_processor"]) // 32,
                    max_blocks=HOPPER.max_blocks, shared_bytes=int(device["shared_memory_per_multiprocessor"]),
                    reserved_shared_per_block=HOPPER.reserved_shared_per_block,
                    register_unit=HOPPER.register_unit, shared_unit=HOPPER.shared_unit)


def occupancy_section(resources: Mapping[str, Any], limits: SmLimits, sm_count: int,
                      ncu: Mapping[str, Any] | None) -> dict[str, Any]:
    """The calibration's ``occupancy``: slots per SM from ``resources`` (``n_regs``, ``shared``,
    ``num_warps``), the binding limit, theoretical occupancy, and the ncu cross-check (``ncu`` =
    ``{"source", "theoretical_occupancy_pct"}`` or None)."""
    by = slots_per_sm(int(resources["n_regs"]), int(resources["num_warps"]), int(resources["shared"]), limits)
    pct = theoretical_occupancy_pct(by["slots"], int(resources["num_warps"]), limits)
    out = {"sm_count": sm_count, "slots_per_sm": by["slots"], "limited_by": by["limited_by"],
           "programs_allowed_by": {k: by[k] for k in ("registers", "shared_memory", "warps", "blocks")},
           "theoretical_occupancy_pct": pct, "ncu_cross_check": None}
    if ncu is not None:
        out["ncu_cross_check"] = {**ncu, "agrees": abs(ncu["theoretical_occupancy_pct"] - pct) < 0.01}
    return out


def fit_calibration(points: Sequence[Any], fanins: Sequence[np.ndarray], sm_count: int, slots: int,
                    bq: int) -> tuple[Params, list[dict[str, Any]]]:
    """Fit ``(a, c, gamma)`` to the calibration points; rows ``{name, measured_ms, fitted_ms, error_pct}``."""
    params, fitted = fit_params(list(zip(fanins, [p.measured_ms for p in points], strict=True)), sm_count, slots, bq)
    rows = error_table([p.name for p in points], [p.measured_ms for p in points], fitted)
    return params, [{**r, "fitted_ms": r.pop("predicted_ms")} for r in rows]


def params_of(calibration: Mapping[str, Any]) -> Params:
    """The fitted parameters of a calibration document."""
    p = calibration["model"]["parameters"]
    return Params(a_ms=p["a_ms"], c_ms=p["c_ms"], gamma=p["gamma"])


def group_size(shape: Mapping[str, Any]) -> int:
    """G = HQ / H of a shape dict (query heads per KV head).

    >>> group_size({"HQ": 64, "H": 4})
    16
    """
    return int(shape["HQ"]) // int(shape["H"])


def predict(calibration: Mapping[str, Any], fanin: np.ndarray, order: str = "program-id",
            shape: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Predicted dK/dV for per-row fan-in in FLA's program-id order ``(b*H + h)*M + s``.

    Another shape than the calibration's (``shape``: its ``B``, ``H``, ``HQ``) changes two things. B and H only add
    (b, h) copies of the CSR rows, which ``fanin`` already holds. The group size ``G = HQ/H`` changes each row's
    per-query cost: a dK/dV program processes, for each query of its row, the ``G`` query heads of its KV head,
    so the model **assumes** ``c`` scales as ``G / G_cal`` (``c_scale``) and the per-program fixed cost ``a``
    (K/V load, dK/dV store: one KV head's) stays; an assumption, not yet checked against a measurement at
    another G (docs/MODEL.md, "Other shapes").

    Args:
        calibration: a validated calibration document.
        fanin: int ``[B*H*M]`` queries per CSR row (``nsa_exp.routing.fanin.csr_rows(...).fanin``) at ``shape``.
        order: ``"program-id"`` (FLA's launch) or ``"heaviest-first"`` (the LPT what-if).
        shape: the routing's shape (``B``, ``H``, ``HQ``; a :data:`.points.SHAPE_KEYS` dict); None = the
            calibration's.

    Returns:
        ``{"order", "predicted_ms", "lower_bounds": {...}, "heaviest_row": {"program_id", "fanin",
        "start_ms", "end_ms"}, "busy_fraction", "programs", "slots", "c_scale": G / G_cal, "break_even":
        {"BH", "heaviest_row_ms", "work_per_bh_ms", "regime"}}`` (times in ms; the break-even,
        :func:`.makespan.break_even`, over the ``B*H`` pairs of ``shape``).

    Raises:
        ValueError: an unknown ``order`` or an empty ``fanin``.
    """
    if order not in DISPATCH_ORDERS:
        raise ValueError(f"order must be one of {DISPATCH_ORDERS} (got {order!r})")
    fanin = np.asarray(fanin)
    if fanin.size == 0:
        raise ValueError("fanin is empty: no CSR rows")
    shape = calibration["shape"] if shape is None else shape
    params = params_of(calibration)
    c_scale = group_size(shape) / group_size(calibration["shape"])
    occ = calibration["occupancy"]
    n_sm, slots, bq = occ["sm_count"], occ["slots_per_sm"], calibration["model"]["bq"]
    work = program_work(fanin, params.a_ms, params.c_ms * c_scale, bq)
    perm = heaviest_first(work) if order == "heaviest-first" else np.arange(work.size)
    sched = simulate(work[perm], n_sm, slots, params.gamma)
    pos = int(np.argmax(work[perm]))
    return {
        "order": order,
        "predicted_ms": sched.makespan,
        "lower_bounds": lower_bounds(work, n_sm, slots, params.gamma),
        "heaviest_row": {"program_id": int(perm[pos]), "fanin": int(fanin[perm[pos]]),
                         "start_ms": float(sched.start[pos]), "end_ms": float(sched.end[pos])},
        "busy_fraction": sched.busy_fraction,
        "programs": int(work.size),
        "slots": int(n_sm * slots),
        "c_scale": c_scale,
        "break_even": break_even(work, int(shape["B"]) * int(shape["H"]), n_sm, slots, params.gamma),
    }


def _json(path: str, what: str) -> Any:
    return read_strict(path, f"{what} {path}")[1]


def kernel_resources(path: str, autotune_config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The compiled dK/dV kernel's ``{n_regs, shared, num_warps, n_spills}`` for ``autotune_config`` from a
    study's ``kernels.dkv_core`` (Triton compiled-kernel metadata) and the recorded device properties."""
    kernels = _json(path, "--kernels").get("kernels", {})
    dkv = kernels.get("dkv_core", {})
    for cfg, compiled in zip(dkv.get("configs", []), dkv.get("compiled", []), strict=False):
        if all(cfg.get(k) == autotune_config[k] for k in ("kwargs", "num_warps", "num_stages")):
            if compiled.get("n_regs") is None:
                raise UserError(f"--kernels {path}: config {config_label(autotune_config)} did not compile")
            return ({k: compiled[k] for k in ("n_regs", "shared", "num_warps", "n_spills")} | {"source": path,
                    "sha256": file_sha256(path)}, kernels.get("device"))
    raise UserError(f"--kernels {path}: no kernels.dkv_core entry for config {config_label(autotune_config)}")


def ncu_cross_check(path: str | None) -> dict[str, Any] | None:
    """``{"source", "theoretical_occupancy_pct"}`` of the dK/dV kernel in an ncu summary (None without one)."""
    if not path:
        return None
    doc = load_document(path, ("ncu_summary",), f"--ncu {path}")
    pct = next((k.get("metrics", k).get("theoretical_occupancy_pct") for k in doc["kernels"]
                if "dkv" in json.dumps(k.get("name", k.get("kernel", "")))), None)
    if pct is None:
        raise UserError(f"--ncu {path}: no dkv kernel with theoretical_occupancy_pct")
    return {"source": path, "theoretical_occupancy_pct": float(pct)}
