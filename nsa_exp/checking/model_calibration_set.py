"""The ``model_calibration_set`` kind: the routings a calibration of the dK/dV makespan model is fitted to
(``configs/model_calibration*.json``, an input ``calibrate --set`` reads; docs/MODEL.md). Its check
(:func:`calibration_set_semantics`), in one module.

- ``calibration_set_semantics``: every routing a valid pattern at the experiment's primary shape
  (:data:`nsa_exp.core.config.PRIMARY_SHAPE`) at its T (a positive multiple of the block size, under the config's
  shape rules and CUDA's launch limits), names unique, no routing listed twice.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.config import PRIMARY_SHAPE, Shape, check_shape
from ..core.families import pattern_from_entry
from ..core.stages import check_launch_limits
from ..errors import UserError
from ..model.points import point_name
from .checks import Add, Context, Problems, one_check

KIND = "model_calibration_set"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def calibration_set_semantics(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    names, routings = [], []
    for i, r in enumerate(doc["routings"]):
        where = f"$.routings[{i}]"
        T = r["T"]
        if T < 1 or T % PRIMARY_SHAPE.block_size:
            problems.append((f"{where}.T", f"{T} is not a positive multiple of block_size {PRIMARY_SHAPE.block_size}"))
            continue
        shape = Shape(**{**PRIMARY_SHAPE.to_dict(), "T": T})
        try:  # the config's rules at this T: T=64 (one block, under S=16) and T=2**62 PASSed (an attacker, 2026-12-07)
            check_shape(shape, f"routing at T={T}: shape")
            check_launch_limits(shape, f"routing at T={T}: shape")
        except UserError as exc:
            problems.append((f"{where}.T", str(exc)))
            continue
        try:
            pattern = pattern_from_entry(r["pattern"], f"{where}.pattern", shape)
        except UserError as exc:
            problems.append((f"{where}.pattern", str(exc)))
            continue
        # one routing, however its heads are spelled: absent, every head, or in another order (a re-attacker,
        # 2026-12-07: sink-heavy with heads [0, 1, 2, 3] beside the same without heads, fitted twice)
        params = pattern.to_dict()
        if "heads" in params and sorted(params["heads"]) == list(range(shape.H)):
            del params["heads"]
        elif "heads" in params:
            params["heads"] = sorted(params["heads"])
        key = json.dumps([params, T], sort_keys=True)
        if key in routings:
            problems.append((where, f"{point_name(pattern.to_dict(), T)} is listed twice"))
        routings.append(key)
        if r["name"] in names:
            problems.append((f"{where}.name", f"{r['name']!r} names two routings"))
        names.append(r["name"])
    add("calibration_set_semantics", problems)


checks = one_check("calibration_set_semantics", calibration_set_semantics)
