"""Routing families: skew as a continuum (zipf exponent, sink count), placement on KV heads, a hot block.

Each family is a generator against the Pattern registry contract (docs: /work/CONTRACT.md): it gets the
flattened ``(b, t, h)`` rows of a shape (:class:`Rows`), the pattern's parameters and a seeded generator,
and returns int64 ``[rows, S]`` holding exactly ``n[r] = min(S, t // BS + 1)`` distinct causal blocks of
``0..cur[r]`` and then ``-1`` (any slot order). So every family has the equal-edge property: any two
members have the closed-form edge count and are comparable at equal edges.

Config forms (one entry of ``config.patterns``):

- ``{"name": "zipf", "exponent": s}``: successive sampling with weight ``(b + 1) ** -s``; ``s = 0`` is
  uniform, ``0 <= s <= 64`` (at ``s >= 8`` it already selects the lowest blocks almost surely).
- ``{"name": "sink-heavy", "sinks": k}``: blocks ``0 .. min(n, k) - 1`` plus the most recent; ``1 <= k < S``.
- ``{"name": "hot-block", "block": b}``: every query that can see block ``b`` (``t // BS >= b``) selects
  it, its other slots the most recent blocks; ``0 <= b < M``.
- placement, on any of them: ``"heads": [h, ...]`` (distinct KV heads ``0 <= h < H``): those heads carry
  the family, the others are ``local``. Absent = every head. FLA's dK/dV programs run in program-id order
  ``(b * H + h) * M + block``, so ``heads`` decides where the heavy CSR rows sit in that queue.

>>> from nsa_exp.config import Shape
>>> shape = Shape(B=1, T=8, HQ=16, H=1, K=16, V=16, S=2, block_size=2, dtype="float16")
>>> generate(FAMILIES["hot-block"], {"block": 1}, shape, seed=0)[0, :, 0].tolist()
[[0, -1], [0, -1], [1, 0], [1, 0], [2, 1], [2, 1], [3, 1], [3, 1]]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .config import Shape
from .errors import UserError
from .routing import pattern_rng  # -> from .patterns import pattern_rng after the refactor
from .sampler import sample_distinct

MAX_ZIPF_EXPONENT = 64.0


@dataclass(frozen=True)
class Rows:
    """Flattened (b, t, h) rows of one routing, row r = (b*T + t)*H + h (C order of [B,T,H])."""

    cur: np.ndarray  # int64 [rows]: newest causal block t // block_size
    n: np.ndarray  # int64 [rows]: valid slots min(S, t // block_size + 1)
    head: np.ndarray  # int64 [rows]: KV head h of the row
    t: np.ndarray  # int64 [rows]: query position t
    B: int
    T: int
    H: int
    S: int
    M: int
    block_size: int


Generator = Callable[[Rows, Mapping[str, Any], np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class PatternSpec:
    name: str  # e.g. "zipf"
    generate: Generator
    params_schema: dict  # JSON-Schema "properties" for the pattern's parameters
    defaults: Mapping[str, Any]  # e.g. {"exponent": 1.0}
    marker: str  # matplotlib marker for figures
    description: str  # one line, for README/--help


def build_rows(shape: Shape) -> Rows:
    """The :class:`Rows` of ``shape`` (``B * T * H`` rows)."""
    B, T, H = shape.B, shape.T, shape.H
    t = np.broadcast_to(np.arange(T, dtype=np.int64)[None, :, None], (B, T, H)).reshape(-1)
    head = np.broadcast_to(np.arange(H, dtype=np.int64)[None, None, :], (B, T, H)).reshape(-1)
    cur = t // shape.block_size
    return Rows(cur=cur, n=np.minimum(shape.S, cur + 1), head=head, t=t, B=B, T=T, H=H, S=shape.S,
                M=shape.num_blocks, block_size=shape.block_size)


def local_rows(cur: np.ndarray, n: np.ndarray, S: int) -> np.ndarray:
    """The ``n`` most recent causal blocks ``cur, cur - 1, ...`` then -1."""
    j = np.arange(S, dtype=np.int64)[None, :]
    return np.where(j < n[:, None], cur[:, None] - j, -1)


def _placed(rows: Rows, params: Mapping[str, Any]) -> np.ndarray | None:
    """Row mask of the heads carrying the family, or None for every head."""
    heads = params.get("heads")
    if heads is None:
        return None
    return np.isin(rows.head, np.asarray(list(heads), dtype=np.int64))


def _with_placement(rows: Rows, params: Mapping[str, Any],
                    family: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """``family(cur, n, t)`` on the placed rows, ``local`` on the others."""
    mask = _placed(rows, params)
    if mask is None:
        return family(rows.cur, rows.n, rows.t)
    out = local_rows(rows.cur, rows.n, rows.S)
    if mask.any():
        out[mask] = family(rows.cur[mask], rows.n[mask], rows.t[mask])
    return out


def zipf_generator(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    s = float(params.get("exponent", 1.0))
    weights = (np.arange(rows.M, dtype=np.float64) + 1.0) ** -s  # s = 0: exactly 1.0 (uniform)
    return _with_placement(rows, params, lambda cur, n, _t: sample_distinct(rng, cur, n, rows.S, weights))


def sink_heavy_generator(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    k = int(params.get("sinks", 4))
    j = np.arange(rows.S, dtype=np.int64)[None, :]

    def family(cur: np.ndarray, n: np.ndarray, _t: np.ndarray) -> np.ndarray:
        sinks = np.minimum(n, k)[:, None]
        recent = np.where((j >= sinks) & (j < n[:, None]), cur[:, None] - (j - sinks), -1)
        return np.where(j < sinks, j, recent)

    return _with_placement(rows, params, family)


def hot_block_generator(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    b = int(params["block"])

    def family(cur: np.ndarray, n: np.ndarray, _t: np.ndarray) -> np.ndarray:
        out = local_rows(cur, n, rows.S)
        # queries that see b but whose n most recent blocks miss it: b replaces the oldest of them
        need = np.flatnonzero((cur >= b) & (cur - b >= n))
        out[need, n[need] - 1] = b
        return out

    return _with_placement(rows, params, family)


HEADS_SCHEMA = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "uniqueItems": True,
                "description": "KV heads carrying the family (others local); absent = every head"}

FAMILIES: dict[str, PatternSpec] = {
    spec.name: spec for spec in (
        PatternSpec(
            name="zipf", generate=zipf_generator,
            params_schema={"exponent": {"type": "number", "minimum": 0, "maximum": MAX_ZIPF_EXPONENT,
                                        "description": "weight (b+1)^-s; 0 = uniform"},
                           "heads": HEADS_SCHEMA},
            defaults={"exponent": 1.0}, marker="D",
            description="distinct causal blocks by successive sampling with weight (b+1)^-exponent"),
        PatternSpec(
            name="sink-heavy", generate=sink_heavy_generator,
            params_schema={"sinks": {"type": "integer", "minimum": 1,
                                     "description": "leading blocks every query takes; 1 <= sinks < S"},
                           "heads": HEADS_SCHEMA},
            defaults={"sinks": 4}, marker="^",
            description="blocks 0..sinks-1 plus the most recent blocks"),
        PatternSpec(
            name="hot-block", generate=hot_block_generator,
            params_schema={"block": {"type": "integer", "minimum": 0,
                                     "description": "the block every query that can see it selects; < M"},
                           "heads": HEADS_SCHEMA},
            defaults={"block": 0}, marker="*",
            description="every query that can see block b selects it, the other slots the most recent"),
    )
}


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def validate_params(spec: PatternSpec, params: Mapping[str, Any], shape: Shape,
                    where: str = "pattern") -> dict[str, Any]:
    """``params`` (a config entry, ``name`` allowed) checked against the schema and the shape; defaults filled.

    Every problem is a one-line :class:`UserError` naming ``<where>.<param>`` (the registry passes
    ``where="config.patterns[i]"``).
    """
    out = dict(spec.defaults)
    for key, value in params.items():
        if key == "name":
            continue
        field = f"{where}.{key}"
        rule = spec.params_schema.get(key)
        if rule is None:
            allowed = ", ".join(spec.params_schema)
            raise UserError(f"{field}: {spec.name} takes no parameter {key!r}; its parameters are {allowed}")
        if rule["type"] == "integer" and not _is_int(value):
            raise UserError(f"{field}: {value!r} is not an integer")
        if rule["type"] == "number":
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise UserError(f"{field}: {value!r} is not a number")
            if not math.isfinite(float(value)):
                raise UserError(f"{field}: {value!r} is not finite; use a finite number >= {rule['minimum']}")
        if rule["type"] == "array":
            if not isinstance(value, (list, tuple)) or not value:
                raise UserError(f"{field}: {value!r} must be a non-empty list of KV head indices")
            if not all(_is_int(h) for h in value):
                raise UserError(f"{field}: {value!r} must hold integers (KV head indices)")
            if len(set(value)) != len(value):
                raise UserError(f"{field}: {list(value)} lists a head twice")
            bad = [h for h in value if not 0 <= h < shape.H]
            if bad:
                raise UserError(f"{field}: head {bad[0]} is outside 0..H-1 = 0..{shape.H - 1}")
            out[key] = [int(h) for h in value]
            continue
        if "minimum" in rule and value < rule["minimum"]:
            raise UserError(f"{field}: {value!r} is below the minimum {rule['minimum']}")
        if "maximum" in rule and value > rule["maximum"]:
            raise UserError(f"{field}: {value!r} is above the maximum {rule['maximum']}")
        out[key] = value
    if spec.name == "sink-heavy" and out["sinks"] >= shape.S:
        raise UserError(f"{where}.sinks: {out['sinks']} must be below S={shape.S} (1 <= sinks < S); "
                        f"with sinks >= S every query keeps only sinks")
    if spec.name == "hot-block" and out["block"] >= shape.num_blocks:
        raise UserError(f"{where}.block: {out['block']} is outside 0..M-1 = 0..{shape.num_blocks - 1}")
    return out


def generate(spec: PatternSpec, params: Mapping[str, Any], shape: Shape, seed: int,
             where: str = "pattern") -> np.ndarray:
    """int32 ``[B, T, H, S]``, descending slot order, -1 last: ``generate_routing``'s post-processing.

    The rng is ``pattern_rng(seed, spec.name)``, as for the built-in patterns.
    """
    resolved = validate_params(spec, params, shape, where)
    out = spec.generate(build_rows(shape), resolved, pattern_rng(seed, spec.name))
    out = -np.sort(-out, axis=1)
    return out.reshape(shape.B, shape.T, shape.H, shape.S).astype(np.int32)
