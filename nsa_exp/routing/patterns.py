"""Routing generators: which KV blocks each (query, KV head) selects.

Every pattern gives query ``t`` exactly ``n(t) = min(S, t // BS + 1)`` valid slots holding distinct
causal blocks (``0 <= b <= t // BS``), written in descending block order, and ``-1`` in the
remaining slots. The output is int32 ``[B, T, H, S]``, deterministic from the routing seed and the
pattern name, and each KV head (and batch row) is drawn independently. Slot order is fixed
(descending) for every pattern so that patterns differ only in *which* blocks they select.

Worked example (T=8, BS=2, S=2: blocks 0..3, query t may use blocks <= t // 2)::

    >>> from nsa_exp.routing.config import Pattern, Shape
    >>> shape = Shape(B=1, T=8, HQ=16, H=1, K=16, V=16, S=2, block_size=2, dtype="float16")
    >>> generate_routing(Pattern("local"), shape, seed=0)[0, :, 0].tolist()
    [[0, -1], [0, -1], [1, 0], [1, 0], [2, 1], [2, 1], [3, 2], [3, 2]]
    >>> generate_routing(Pattern("sink-heavy", sinks=1), shape, seed=0)[0, :, 0].tolist()
    [[0, -1], [0, -1], [1, 0], [1, 0], [2, 0], [2, 0], [3, 0], [3, 0]]

Patterns (the registry :data:`PATTERNS`; adding one = one generator + one :func:`register_pattern`):

- ``local``: the ``n(t)`` most recent causal blocks ``t//BS, t//BS - 1, ...``.
- ``uniform``: ``n(t)`` distinct causal blocks, uniformly without replacement.
- the skew families ``sink-heavy``, ``zipf`` and ``hot-block`` (with placement on KV heads):
  :mod:`nsa_exp.routing.families`, registered when the package is imported.

Generators are vectorised over (batch, query, head) rows; the sampler (:mod:`.sampler`) loops over slots.
"""

from __future__ import annotations

import importlib
import math
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import numpy as np

from ..errors import UserError
from .config import Pattern, Shape
from .sampler import sample_distinct


def valid_slot_counts(T: int, block_size: int, S: int) -> np.ndarray:
    """``n(t) = min(S, t // block_size + 1)`` for t in ``0..T-1``.

    >>> valid_slot_counts(8, 2, 2).tolist()
    [1, 1, 2, 2, 2, 2, 2, 2]
    """
    return np.minimum(S, np.arange(T, dtype=np.int64) // block_size + 1)


def pattern_rng(seed: int, pattern_name: str) -> np.random.Generator:
    """A generator that depends on the routing seed and the pattern *name* only (not list position)."""
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(pattern_name.encode())]))


def _most_recent(cur: np.ndarray, n: np.ndarray, S: int, offset: np.ndarray | int = 0) -> np.ndarray:
    """Slots ``j`` in ``[offset, n)`` hold ``cur - (j - offset)``; the others -1."""
    j = np.arange(S, dtype=np.int64)[None, :]
    off = np.asarray(offset)[..., None] if np.ndim(offset) else offset
    valid = (j >= off) & (j < n[:, None])
    return np.where(valid, cur[:, None] - (j - off), -1)


@dataclass(frozen=True)
class Rows:
    """Flattened (b, t, h) rows of one routing, row r = (b*T + t)*H + h (C order of [B,T,H])."""

    cur: np.ndarray    # int64 [rows]: newest causal block t // block_size
    n: np.ndarray      # int64 [rows]: valid slots min(S, t // block_size + 1)
    head: np.ndarray   # int64 [rows]: KV head h of the row
    t: np.ndarray      # int64 [rows]: query position t
    B: int
    T: int
    H: int
    S: int
    M: int
    block_size: int

    @classmethod
    def for_shape(cls, shape: Shape) -> Rows:
        """The rows of ``shape`` (``M`` = KV blocks per head)."""
        grid = (shape.B, shape.T, shape.H)
        t = np.broadcast_to(np.arange(shape.T, dtype=np.int64)[None, :, None], grid).reshape(-1)
        head = np.broadcast_to(np.arange(shape.H, dtype=np.int64)[None, None, :], grid).reshape(-1)
        cur = t // shape.block_size
        return cls(cur=cur, n=np.minimum(shape.S, cur + 1), head=head, t=t, B=shape.B, T=shape.T, H=shape.H,
                   S=shape.S, M=shape.num_blocks, block_size=shape.block_size)


# returns int64 [rows, S]: exactly n[r] distinct blocks in 0..cur[r] then -1, any slot order.
Generator = Callable[[Rows, Mapping[str, Any], np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class PatternSpec:
    """One registered routing pattern."""

    name: str                     # e.g. "zipf"
    generate: Generator
    params_schema: dict           # JSON-Schema "properties" for the pattern's parameters
    defaults: Mapping[str, Any]   # e.g. {"exponent": 1.0}
    marker: str                   # matplotlib marker for figures
    description: str              # one line, for README/--help
    label_offset: tuple[int, int] = field(default=(7, 6))  # figure label offset in points
    # shape-dependent rules (e.g. sinks < S): raises UserError naming ``where.<param>``
    check_shape: Callable[[Mapping[str, Any], Shape, str], None] | None = None
    # "module:function" (pattern, shape, seed) -> int32 [B,T,H,S], imported only when generated (a
    # routing computed on the GPU tier, e.g. fla-topk); ``generate`` is then unused
    external: str | None = None
    # False: the routing's edges may differ from the closed form (not generated to n(t) valid slots);
    # the equal-edge gate counts and records them instead of failing
    equal_edges: bool = True


PATTERNS: dict[str, PatternSpec] = {}
BASELINE_PATTERN = "local"   # the ratio denominator everywhere
TUNE_PATTERN = "local"       # bench's default autotune pattern


def register_pattern(spec: PatternSpec) -> PatternSpec:
    """Add ``spec`` to :data:`PATTERNS` (its name must be new); returns it."""
    if spec.name in PATTERNS:
        raise ValueError(f"pattern {spec.name!r} is already registered")
    jsonschema.Draft202012Validator.check_schema({"type": "object", "properties": spec.params_schema})
    PATTERNS[spec.name] = spec
    return spec


def pattern_spec(name: str, where: str = "pattern") -> PatternSpec:
    """The registered spec of ``name``; a one-line UserError naming ``where`` and the choices otherwise."""
    spec = PATTERNS.get(name)
    if spec is None:
        raise UserError(f"{where}: unknown pattern {name!r}; choose one of {', '.join(PATTERNS)}")
    return spec


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_param(field: str, value: Any, rule: Mapping[str, Any]) -> Any:
    """One parameter against its ``params_schema`` rule (integer, finite number, or a list of distinct
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

    Each parameter is checked against the pattern's ``params_schema`` (integers are ints, numbers
    finite — a dict built in Python may carry NaN/inf that JSON cannot — bounds, head lists), then,
    given ``shape``, against the pattern's shape rules (``check_shape``, e.g. ``sinks < S``). Every
    problem is one :class:`UserError` line naming ``where.<param>``.

    >>> pattern_from_entry({"name": "zipf"}, "config.patterns[3]")
    Pattern(name='zipf', params=(('exponent', 1.0),))
    >>> pattern_from_entry({"name": "local", "sinks": 2}, "config.patterns[0]")
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: config.patterns[0].sinks: only the sink-heavy pattern takes 'sinks'
    """
    spec = pattern_spec(entry["name"], f"{where}.name")
    params = {k: v for k, v in entry.items() if k != "name"}
    for key in params:
        if key not in spec.params_schema:
            owners = [s.name for s in PATTERNS.values() if key in s.params_schema]
            hint = f"only the {' / '.join(owners)} pattern takes {key!r}" if len(owners) == 1 else \
                f"pattern {spec.name!r} takes no parameter {key!r}"
            raise UserError(f"{where}.{key}: {hint}")
    merged = {**spec.defaults, **{k: _check_param(f"{where}.{k}", v, spec.params_schema[k]) for k, v in params.items()}}
    if shape is not None and spec.check_shape is not None:
        spec.check_shape(merged, shape, where)
    return Pattern(spec.name, **merged)


def generate_routing(pattern: Pattern, shape: Shape, seed: int) -> np.ndarray:
    """block_indices int32 ``[B, T, H, S]`` for ``pattern`` (see the module docstring); an ``external``
    pattern (fla-topk) is computed by its GPU-tier function, which raises UserError without a GPU."""
    spec = pattern_spec(pattern.name)
    if spec.external is not None:
        module, _, fn = spec.external.partition(":")
        return getattr(importlib.import_module(module), fn)(pattern, shape, seed)
    rows = Rows.for_shape(shape)
    out = spec.generate(rows, {**spec.defaults, **dict(pattern.params)}, pattern_rng(seed, pattern.name))
    out = -np.sort(-out, axis=1)  # descending block order; -1 padding lands in the last slots
    return out.reshape(shape.B, shape.T, shape.H, shape.S).astype(np.int32)


def _local(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    return _most_recent(rows.cur, rows.n, rows.S)


def _uniform(rows: Rows, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    return sample_distinct(rng, rows.cur, rows.n, rows.S, np.ones(rows.M, dtype=np.float64))


register_pattern(PatternSpec("local", _local, {}, {}, "o", "the n(t) most recent causal blocks"))
register_pattern(PatternSpec("uniform", _uniform, {}, {}, "s", "n(t) distinct causal blocks, uniformly"))

def routing_violations(block_indices: np.ndarray, shape: Shape, limit: int = 5) -> list[str]:
    """Every invariant a routing must meet, as messages (empty list = valid).

    Checks dtype int32, shape ``[B,T,H,S]``, exactly ``n(t)`` valid slots first then ``-1``,
    valid blocks causal (``0 <= b <= t // BS``) and distinct within each (query, head).
    """
    want = (shape.B, shape.T, shape.H, shape.S)
    if block_indices.dtype != np.int32:
        return [f"dtype is {block_indices.dtype}, expected int32"]
    if tuple(block_indices.shape) != want:
        return [f"shape is {list(block_indices.shape)}, expected {list(want)} ([B,T,H,S])"]
    problems: list[str] = []
    n = valid_slot_counts(shape.T, shape.block_size, shape.S)[None, :, None, None]
    slot = np.arange(shape.S)[None, None, None, :]
    cur = (np.arange(shape.T) // shape.block_size)[None, :, None, None]
    b = block_indices.astype(np.int64)
    in_valid = slot < n

    def report(mask: np.ndarray, what: str) -> None:
        if mask.any():
            where = np.argwhere(mask)[:limit].tolist()
            problems.append(f"{int(mask.sum())} slots {what}, first at [b,t,h,s]={where}")

    report(in_valid & ((b < 0) | (b > cur)), "hold a block outside 0..t//block_size")
    report(~in_valid & (b != -1), "past n(t)=min(S, t//block_size+1) are not -1")
    s = np.sort(np.where(in_valid, b, -1 - slot), axis=-1)  # padding made unique so it never collides
    dup = (np.diff(s, axis=-1) == 0).any(axis=-1)
    report(dup, "rows select the same block twice")
    return problems
