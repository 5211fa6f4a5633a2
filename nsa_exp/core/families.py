"""The routing families: one declarative row per family (name, parameters with their rules and
defaults, shape rules, figure marker, one-line description), and the check of a config entry.

This table is the one registry of family names: the config check, ``--help``, figures, the profiler's
pattern specs and the schemas' pattern enums (``python -m nsa_exp schemas``) all read it. The generators
live in the routing tier (:mod:`nsa_exp.routing.patterns` binds one to each row by name); a family whose
routing is computed on the GPU tier says what computes it in ``external`` instead (fla-topk), and that tier
registers the function (:func:`nsa_exp.routing.patterns.register_external`): no tier names a module above it.

Config forms (one entry of ``config.patterns``):

- ``{"name": "local"}``: the ``n(t)`` most recent causal blocks; ``{"name": "uniform"}``: ``n(t)`` distinct
  causal blocks, uniformly without replacement.
- ``{"name": "zipf", "exponent": s}``: successive sampling with weight ``(b + 1) ** -s``; ``s = 0`` is
  uniform, ``0 <= s <= 64`` (at ``s >= 8`` it already selects the lowest blocks almost surely).
- ``{"name": "sink-heavy", "sinks": k}``: blocks ``0 .. min(n, k) - 1`` plus the most recent; ``1 <= k < S``.
- ``{"name": "hot-block", "block": b}``: every query that can see block ``b`` (``t // BS >= b``) selects
  it, its other slots the most recent blocks; ``0 <= b < M``.
- placement, on the skew families: ``"heads": [h, ...]`` (distinct KV heads ``0 <= h < H``): those heads
  carry the family, the others are ``local``. Absent = every head.
- ``{"name": "fla-topk", "salience": x}``: FLA's own ``parallel_nsa_topk`` (GPU tier, :mod:`nsa_exp.gpu.topk`).
- the tile-shared variants ``tile-local``, ``tile-uniform``, ``tile-sink-heavy``, ``tile-zipf`` (issue 31), each
  with its base's parameters: every query of a ``block_size``-query tile (``t // BS``, its diagonal block) shares
  one selection, that block plus ``n - 1`` earlier blocks drawn once by the base family's rule — how block-sparse
  attention is usually routed (:func:`tile_shared_family`). ``tile-local`` and ``tile-sink-heavy`` equal their bases.

>>> [name for name, row in FAMILIES.items() if row.tile_base is None]
['local', 'uniform', 'sink-heavy', 'zipf', 'hot-block', 'fla-topk']
>>> [name for name, row in FAMILIES.items() if row.tile_base is not None]
['tile-local', 'tile-uniform', 'tile-sink-heavy', 'tile-zipf']
>>> pattern_from_entry({"name": "zipf"}, "config.patterns[3]")
Pattern(name='zipf', params=(('exponent', 1.0),))
>>> pattern_from_entry({"name": "local", "sinks": 2}, "config.patterns[0]")
Traceback (most recent call last):
...
nsa_exp.errors.UserError: config.patterns[0].sinks: only the sink-heavy and tile-sink-heavy patterns take 'sinks'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UserError
from .config import Pattern, Shape

MAX_ZIPF_EXPONENT = 64.0
BASELINE_PATTERN = "local"   # the ratio denominator everywhere
TUNE_PATTERN = "local"       # bench's default autotune pattern
HEADS_SCHEMA = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "uniqueItems": True,
                "description": "KV heads carrying the family (others local); absent = every head"}
ShapeRule = Callable[[Mapping[str, Any], Shape, str], None]


@dataclass(frozen=True)
class Family:
    """One routing family: its parameters (``params``: JSON-Schema ``properties``) and everything said of it."""

    name: str                     # e.g. "zipf"
    params: Mapping[str, Any]     # JSON-Schema "properties" for the family's parameters
    defaults: Mapping[str, Any]   # e.g. {"exponent": 1.0}
    marker: str                   # matplotlib marker for figures
    description: str              # one line, for README/--help
    label_offset: tuple[int, int] = field(default=(7, 6))  # figure label offset in points
    # shape-dependent rules (e.g. sinks < S): raises UserError naming ``where.<param>``
    check_shape: ShapeRule | None = None
    # what computes the routing above the routing tier (fla-topk: FLA's own top-k), for messages; the function
    # (pattern, shape, seed) -> int32 [B,T,H,S] is registered by that tier (routing.patterns.register_external)
    external: str | None = None
    # False: the routing's edges may differ from the closed form (not generated to n(t) valid slots);
    # the equal-edge gate counts and records them instead of failing
    equal_edges: bool = True
    # the per-token family whose selection this one draws once per query tile (tile_shared_family; e.g. "zipf")
    tile_base: str | None = None


def _check_heads(params: Mapping[str, Any], shape: Shape, where: str) -> None:
    bad = [h for h in params.get("heads") or () if not 0 <= h < shape.H]
    if bad:
        raise UserError(f"{where}.heads: head {bad[0]} is outside 0..H-1 = 0..{shape.H - 1}")


def _check_sinks(params: Mapping[str, Any], shape: Shape, where: str) -> None:
    _check_heads(params, shape, where)
    if params["sinks"] >= shape.S:
        raise UserError(f"{where}.sinks: {params['sinks']} must be below S={shape.S} (1 <= sinks < S); "
                        f"with sinks >= S every query keeps only sinks")


def _check_block(params: Mapping[str, Any], shape: Shape, where: str) -> None:
    _check_heads(params, shape, where)
    if params["block"] >= shape.num_blocks:
        raise UserError(f"{where}.block: {params['block']} is outside 0..M-1 = 0..{shape.num_blocks - 1}")


def _check_topk(params: Mapping[str, Any], shape: Shape, where: str) -> None:
    """FLA's parallel_nsa_topk writes next_power_of_2(S) slots and asserts block_size >= 2 * that."""
    if shape.S & (shape.S - 1):
        raise UserError(f"{where}.name: fla-topk needs S a power of two (FLA's top-k writes next_power_of_2(S) "
                        f"slots); S={shape.S}")
    if shape.block_size < 2 * shape.S:
        raise UserError(f"{where}.name: fla-topk needs block_size >= 2*S (FLA's top-k asserts BC >= 2*S); "
                        f"block_size={shape.block_size}, S={shape.S}")


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("local", {}, {}, "o", "the n(t) most recent causal blocks"),
    Family("uniform", {}, {}, "s", "n(t) distinct causal blocks, uniformly"),
    Family("sink-heavy", {"sinks": {"type": "integer", "minimum": 1,
                                    "description": "leading blocks every query takes; 1 <= sinks < S"},
                          "heads": HEADS_SCHEMA},
           {"sinks": 4}, "^", "blocks 0..sinks-1 plus the most recent blocks", label_offset=(-12, 10),
           check_shape=_check_sinks),
    Family("zipf", {"exponent": {"type": "number", "minimum": 0, "maximum": MAX_ZIPF_EXPONENT,
                                 "description": "weight (b+1)^-s; 0 = uniform"},
                    "heads": HEADS_SCHEMA},
           {"exponent": 1.0}, "D", "distinct causal blocks by successive sampling with weight (b+1)^-exponent",
           label_offset=(8, -13), check_shape=_check_heads),
    Family("hot-block", {"block": {"type": "integer", "minimum": 0,
                                   "description": "the block every query that can see it selects; < M"},
                         "heads": HEADS_SCHEMA},
           {"block": 0}, "*", "every query that can see block b selects it, the other slots the most recent",
           check_shape=_check_block),
    Family("fla-topk", {"salience": {"type": "number", "minimum": 0, "maximum": 1e6,
                                     "description": "planted query-block alignment (nsa_exp.gpu.topk); 0 = random q"}},
           {"salience": 0.0}, "P",
           "FLA's own parallel_nsa_topk on seeded q and mean-pooled k (GPU, or TRITON_INTERPRET=1)",
           check_shape=_check_topk, external="FLA's parallel_nsa_topk", equal_edges=False),
)}


def tile_shared_family(base: Family, marker: str) -> Family:
    """The tile-shared variant ``tile-<base>`` of a generated family: ``base``'s parameters, defaults and shape
    rules; every query of a tile shares one selection, the tile's own block plus ``n - 1`` earlier blocks drawn
    once by ``base``'s rule (the routing tier binds that generator to every row with a ``tile_base``).

    >>> row = tile_shared_family(FAMILIES["zipf"], "d")
    >>> row.name, row.tile_base, dict(row.defaults)
    ('tile-zipf', 'zipf', {'exponent': 1.0})
    """
    if base.external is not None or base.tile_base is not None:
        raise ValueError(f"pattern {base.name!r} has no tile-shared variant (computed externally or tile-shared)")
    return Family(f"tile-{base.name}", base.params, base.defaults, marker,
                  f"one selection per query tile: its diagonal block + n(t)-1 earlier blocks as {base.name}",
                  check_shape=base.check_shape, tile_base=base.name)


FAMILIES.update((row.name, row) for row in (tile_shared_family(FAMILIES[name], marker) for name, marker in (
    ("local", "h"), ("uniform", "p"), ("sink-heavy", "v"), ("zipf", "d"))))


def register_family(family: Family) -> Family:
    """Add ``family`` to :data:`FAMILIES` (its name must be new); returns it."""
    if family.name in FAMILIES:
        raise ValueError(f"pattern {family.name!r} is already registered")
    FAMILIES[family.name] = family
    return family


def family(name: str, where: str = "pattern") -> Family:
    """The row of ``name``; a one-line UserError naming ``where`` and the choices otherwise."""
    row = FAMILIES.get(name)
    if row is None:
        raise UserError(f"{where}: unknown pattern {name!r}; choose one of {', '.join(FAMILIES)}")
    return row


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_param(field: str, value: Any, rule: Mapping[str, Any]) -> Any:
    """One parameter against its ``params`` rule (integer, finite number, or a list of distinct
    non-negative integers); returns the value normalised (lists become tuples)."""
    kind = rule["type"]
    if kind == "array":
        if not isinstance(value, (list, tuple)) or not value:
            raise UserError(f"{field}: {value!r} must be a non-empty list of KV head indices")
        if not all(_is_int(h) for h in value):
            raise UserError(f"{field}: {value!r} must hold integers (KV head indices)")
        if len(set(value)) != len(value):
            raise UserError(f"{field}: {list(value)} lists a head twice")
        if any(h < 0 for h in value):
            raise UserError(f"{field}: {list(value)} holds a negative head")
        return tuple(int(h) for h in value)
    if kind == "integer" and not _is_int(value):
        raise UserError(f"{field}: {value!r} is not an integer")
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise UserError(f"{field}: {value!r} is not a number")
        if not math.isfinite(float(value)):
            raise UserError(f"{field}: {value!r} is not finite; use a finite number >= {rule.get('minimum', 0)}")
    if "minimum" in rule and value < rule["minimum"]:
        raise UserError(f"{field}: {value!r} is below the minimum {rule['minimum']}")
    if "maximum" in rule and value > rule["maximum"]:
        raise UserError(f"{field}: {value!r} is above the maximum {rule['maximum']}")
    return float(value) if kind == "number" else int(value)


def pattern_from_entry(entry: Mapping[str, Any], where: str, shape: Shape | None = None) -> Pattern:
    """A config pattern entry ``{"name": ..., <params>}`` -> :class:`Pattern` with defaults filled.

    Each parameter is checked against the family's ``params`` (integers are ints, numbers finite — a
    dict built in Python may carry NaN/inf that JSON cannot — bounds, head lists), then, given ``shape``,
    against the family's shape rules (``check_shape``, e.g. ``sinks < S``). Every problem is one
    :class:`UserError` line naming ``where.<param>``.
    """
    row = family(entry["name"], f"{where}.name")
    params = {k: v for k, v in entry.items() if k != "name"}
    for key in params:
        if key not in row.params:
            owners = [f.name for f in FAMILIES.values() if key in f.params]
            if 1 <= len(owners) <= 2:  # one family, or one and its tile-shared variant (sinks, exponent)
                hint = f"only the {' and '.join(owners)} pattern{'s take' if len(owners) == 2 else ' takes'} {key!r}"
            else:
                hint = f"pattern {row.name!r} takes no parameter {key!r}"
            raise UserError(f"{where}.{key}: {hint}")
    merged = {**row.defaults, **{k: _check_param(f"{where}.{k}", v, row.params[k]) for k, v in params.items()}}
    if shape is not None and row.check_shape is not None:
        row.check_shape(merged, shape, where)
    return Pattern(row.name, **merged)


def _param_token(key: str, value: Any) -> str:
    text = ".".join(str(v) for v in value) if isinstance(value, (list, tuple)) else f"{value:g}" if isinstance(
        value, float) else str(value)
    return f"{key}{text}"


def point_id(T: int, pattern: dict[str, Any], *axes: str | None) -> str:
    """A file-name-safe id, e.g. ``T32768-sink-heavy-heads0.1-sinks4`` (a routing file's ``file:<stem>``
    gives ``T<T>-file-<stem>``); ``axes``: the labels of a sweep's other grid axes, in order (the packing's
    token, the shape's :func:`shape_label`), placed after ``T`` (None: the sweep has no such axis).

    >>> point_id(32768, {"name": "zipf", "exponent": 0.25}), point_id(1024, {"name": "file:zipf"})
    ('T32768-zipf-exponent0.25', 'T1024-file-zipf')
    >>> point_id(8192, {"name": "local"}, "docs1024", None), point_id(8192, {"name": "local"}, None, "B2-H8-G4")
    ('T8192-docs1024-local', 'T8192-B2-H8-G4-local')
    """
    params = (_param_token(k, pattern[k]) for k in sorted(pattern) if k != "name")
    parts = [f"T{T}", *(a for a in axes if a), pattern["name"].replace(":", "-"), *params]
    return "-".join(parts)


def shape_label(B: int, H: int, G: int) -> str:
    """A sweep's shape-axis token: batch, KV heads and group size (query heads per KV head, ``HQ = H * G``).

    >>> shape_label(1, 4, 16)
    'B1-H4-G16'
    """
    return f"B{B}-H{H}-G{G}"


def release_point_names(T: int, B: int, H: int, HQ: int, shaped: bool) -> tuple[str, str]:
    """A release config point's two names: the suffix of its experiment config's name (``T<T>``, and
    ``-B<B>-H<H>-HQ<HQ>`` for a point with its own ``shape``) and its key in the result's file name (``T<T>``, and
    the :func:`shape_label` for such a point).

    >>> release_point_names(8192, 1, 4, 64, False), release_point_names(32768, 2, 4, 64, True)
    (('T8192', 'T8192'), ('T32768-B2-H4-HQ64', 'T32768-B2-H4-G16'))
    """
    if not shaped:
        return f"T{T}", f"T{T}"
    return f"T{T}-B{B}-H{H}-HQ{HQ}", f"T{T}-{shape_label(B, H, HQ // H)}"
