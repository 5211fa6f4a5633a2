"""Measured dK/dV points for calibration and validation, read from bench results and sweep points.

A *point* is one routing of one result file: ``(pattern name + parameters, T)`` with its measured
``patterns.<p>.stages.dkv_core.median_ms``, the file's GPU, SM count, shape, routing seed and dK/dV
autotune config (``autotune.kernels.dkv_core.best_config``). Its per-row fan-in is recomputed by
regenerating the routing from the embedded config (the same generator and seed the GPU run used).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..core.config import Shape, cu_seqlens
from ..core.families import FAMILIES, pattern_from_entry
from ..errors import UserError
from ..io.reader import read_bounded, show_path
from ..io.strict_json import MAX_BYTES, parse_strict
from ..routing.facts import regenerate
from ..routing.packing import packing_token
from .split import split_fanin

#: The documents that hold measured points.
POINT_KINDS = ("bench_result", "sweep_point")
# Shape fields a point records; a calibration fixes them all, T (and with it the number of CSR rows) aside.
SHAPE_KEYS = ("B", "HQ", "H", "K", "V", "S", "block_size", "dtype")
#: The shape fields ``model-validate`` lets a point change besides T: B and H add (b, h) copies of the CSR rows,
#: HQ = H*G scales the per-query cost c by G / G_cal (:func:`nsa_exp.model.calibration.predict`, docs/MODEL.md).
FREE_SHAPE_KEYS = ("B", "HQ", "H")


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured routing. ``measured_ms`` is the dK/dV core median (ms)."""

    name: str
    pattern: Mapping[str, Any]
    T: int
    measured_ms: float
    source: str
    sha256: str
    gpu: str
    sm_count: int
    shape: Mapping[str, Any]
    seed: int
    autotune_config: Mapping[str, Any]
    #: the result's ``config.packing`` section (None = dense): varlen program order, per-document routing
    packing: Mapping[str, Any] | None = None


def point_name(pattern: Mapping[str, Any], T: int) -> str:
    """``sink-heavy(sinks=4)@T=32768``: the routing's identity in every model document.

    >>> point_name({"name": "zipf", "exponent": 1.0}, 32768)
    'zipf(exponent=1.0)@T=32768'
    """
    params = ",".join(f"{k}={pattern[k]}" for k in sorted(pattern) if k != "name")
    return f"{pattern['name']}" + (f"({params})" if params else "") + f"@T={T}"


def _has_patterns(path: Path) -> bool:
    try:
        return isinstance(parse_strict(read_bounded(path, show_path(path), MAX_BYTES)).get("patterns"), dict)
    except (UserError, ValueError, AttributeError):
        return False


def result_files(paths: Iterable[str]) -> list[Path]:
    """Files named, and the ``*.json`` files (recursively, sorted) of each folder named that hold a
    ``patterns`` object (a sweep folder's manifests and logs are skipped; a file named is never skipped)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(f for f in sorted(p.rglob("*.json")) if _has_patterns(f))
        elif p.exists():
            out.append(p)
        else:
            raise UserError(f"--points: {p} does not exist")
    if not out:
        raise UserError("--points: no result files found")
    return out


def read_points(path: Path) -> list[MeasuredPoint]:
    """Every routing of one result file (a bench result or sweep point) as a :class:`MeasuredPoint`. The model's
    commands read only files that pass every check of ``validate`` first (``model_commands.py``, a door above
    ``checking/``, which itself reads the points a calibration cites through this function).

    Raises:
        UserError: the file is unreadable or lacks a field a point needs (named by JSON path).
    """
    label = show_path(path)
    data = read_bounded(path, label, MAX_BYTES)
    try:
        doc = parse_strict(data)
        config = doc.get("config", {})
        shape = doc.get("shape") or config["shape"]
        gpu = doc["metadata"]["gpu"]
        dkv = doc["autotune"]["kernels"]["dkv_core"]["best_config"]
        seed = int(config["seeds"]["routing"])
        out = []
        packing = config.get("packing")
        for name, pat in doc["patterns"].items():
            params = dict(pat.get("params") or {"name": name})
            params.setdefault("name", name)
            label = point_name(params, int(shape["T"])) + ("" if packing is None else f"-{packing_token(packing)}")
            out.append(MeasuredPoint(label, params, int(shape["T"]),
                             float(pat["stages"]["dkv_core"]["median_ms"]), str(path),
                             hashlib.sha256(data).hexdigest(), gpu["name"], int(gpu["sm_count"]),
                             {k: shape[k] for k in SHAPE_KEYS}, seed,
                             {k: dkv[k] for k in ("kwargs", "num_warps", "num_stages")}, packing))
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise UserError(f"{path}: not a result with patterns.<p>.stages.dkv_core.median_ms, shape, "
                        f"config.seeds, metadata.gpu and autotune.kernels.dkv_core ({why})") from None


def check_same_setup(points: Sequence[MeasuredPoint], ref: Mapping[str, Any], free: Sequence[str] = ()) -> None:
    """Refuse a point from another GPU, SM count, shape (all but T and the ``free`` fields), routing seed or
    autotune config.

    ``ref`` holds ``gpu``, ``sm_count``, ``shape``, ``seed``, ``autotune_config`` (a calibration's); ``free``:
    shape fields allowed to differ (``calibrate``: none; ``model-validate``: :data:`FREE_SHAPE_KEYS`).

    Raises:
        UserError: one line naming the point, the field and both values.
    """
    keys = [k for k in SHAPE_KEYS if k not in free]
    aside = ", ".join(("T", *(k for k in SHAPE_KEYS if k in free)))
    for p in points:
        mine = {"gpu": p.gpu, "sm_count": p.sm_count, "seed": p.seed, "autotune_config": dict(p.autotune_config),
                **{f"shape.{k}": p.shape[k] for k in keys}}
        want = {"gpu": ref["gpu"], "sm_count": ref["sm_count"], "seed": ref["seed"],
                "autotune_config": dict(ref["autotune_config"]), **{f"shape.{k}": ref["shape"][k] for k in keys}}
        for key, value in mine.items():
            if value != want[key]:
                raise UserError(f"{p.source} [{p.name}]: {key} is {value!r} but the calibration's is {want[key]!r}; "
                                f"a calibration holds for one GPU, shape ({aside} aside) and autotune config")


def shape_at(shape: Mapping[str, Any], T: int, *, B: int | None = None, H: int | None = None,
             HQ: int | None = None) -> Shape:
    """The :class:`Shape` of ``shape`` (a dict with :data:`SHAPE_KEYS`) at sequence length ``T``, with ``B``,
    ``H`` and ``HQ`` replaced where given (None keeps ``shape``'s); no rule checked (the caller's door does).

    >>> shape_at({"B": 1, "HQ": 64, "H": 4, "K": 192, "V": 128, "S": 16, "block_size": 64, "dtype": "bfloat16"},
    ...          8192, B=2, H=8, HQ=128).group_size
    16
    """
    given = {k: v for k, v in (("B", B), ("H", H), ("HQ", HQ)) if v is not None}
    return Shape(**{**{k: shape[k] for k in SHAPE_KEYS}, **given, "T": T})


@cache
def _fanin(pattern_json: str, shape_json: str, T: int, seed: int, packing_json: str | None = None) -> np.ndarray:
    shape = shape_at(json.loads(shape_json), T)
    pattern = pattern_from_entry(json.loads(pattern_json), "pattern", shape)
    cu = None if packing_json is None else cu_seqlens(json.loads(packing_json), T, shape.block_size, "config.packing")
    return regenerate(pattern, shape, seed, None if cu is None else tuple(cu)).row_fanin.copy()  # drawn once for
    # the model and the routing checks (nsa_exp/routing/facts.py)


def regenerable(pattern: Mapping[str, Any]) -> bool:
    """Whether the routing can be regenerated here from its name and parameters (not a ``file:<stem>``
    routing file, not a GPU-computed pattern such as fla-topk), as :func:`pattern_fanin` needs."""
    spec = FAMILIES.get(str(pattern.get("name")))
    return spec is not None and spec.external is None


def _key(pattern: Mapping[str, Any], shape: Mapping[str, Any]) -> tuple[str, str]:
    """The cache key of a pattern and a shape as JSON text (a placement's ``heads`` tuple as a list): exact, where a
    tuple key is not (``15 == 15.0 == True`` hash alike, so a forged ``sinks: 15.0`` was answered with ``sinks: 15``'s
    fan-in and never checked; an attacker's trial of 2026-12-05)."""
    return json.dumps(dict(pattern), sort_keys=True), json.dumps(dict(shape), sort_keys=True)


def pattern_split_fanin(pattern: Mapping[str, Any], shape: Mapping[str, Any], T: int, seed: int, max_fanin: int,
                        layout: str = "split-heavy-first") -> np.ndarray:
    """Per-program fan-in of the split what-if launch of a generated dense routing
    (:func:`nsa_exp.model.split.split_fanin` of :func:`pattern_fanin`; B' = ``len // (H*M)``)."""
    return split_fanin(pattern_fanin(pattern, shape, T, seed), max_fanin, layout)


def pattern_fanin(pattern: Mapping[str, Any], shape: Mapping[str, Any], T: int, seed: int,
                  packing: Mapping[str, Any] | None = None) -> np.ndarray:
    """Per-CSR-row fan-in ``int64`` (cached; kept on disk too when ``NSA_EXP_MEMO_DIR`` is set,
    :mod:`nsa_exp.io.memo`) of a generated routing in FLA's program-id order: dense ``[B*H*M]`` in
    ``(b*H + h)*M + block``; packed (``packing``, a config section), one row per (document, block, head) in the
    varlen order ``(global_block)*H + h`` (:func:`nsa_exp.routing.fanin.csr_rows`)."""
    packed = None if packing is None else json.dumps(packing, sort_keys=True)
    return _fanin(*_key(pattern, shape), T, seed, packed)
