"""Experiment config: JSON -> schema check -> semantic checks -> frozen dataclasses.

>>> cfg = load_config("configs/e1_h100.json")
>>> cfg.shape.T, cfg.shape.num_blocks, cfg.shape.group_size
(32768, 512, 16)
>>> [p.name for p in cfg.patterns]
['local', 'uniform', 'sink-heavy', 'zipf']
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..results.schema import validate_or_raise
from ..results.strict_json import parse_strict
from .grids import check_launch_limits


@dataclass(frozen=True)
class Shape:
    """Problem shape. q [B,T,HQ,K], k [B,T,H,K], v [B,T,H,V], block_indices [B,T,H,S]."""

    B: int
    T: int
    HQ: int
    H: int
    K: int
    V: int
    S: int
    block_size: int
    dtype: str

    @property
    def num_blocks(self) -> int:
        """M = T / block_size, the KV blocks per (batch, KV head)."""
        return self.T // self.block_size

    @property
    def group_size(self) -> int:
        """G = HQ / H, query heads per KV head."""
        return self.HQ // self.H

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, init=False)
class Pattern:
    """One routing: ``name`` plus its parameters (e.g. ``sinks`` for sink-heavy, ``exponent`` for zipf).

    Parameters are read as attributes; their schemas and defaults live in the Pattern registry
    (:mod:`nsa_exp.routing.patterns`), which also validates config entries.

    >>> p = Pattern("sink-heavy", sinks=2)
    >>> p.sinks, p.to_dict()
    (2, {'name': 'sink-heavy', 'sinks': 2})
    """

    name: str
    params: tuple[tuple[str, Any], ...]

    def __init__(self, name: str, **params: Any) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "params", tuple(sorted(params.items())))

    def __getattr__(self, key: str) -> Any:
        for k, v in self.__dict__.get("params", ()):
            if k == key:
                return v
        raise AttributeError(f"pattern {self.__dict__.get('name')!r} has no parameter {key!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **dict(self.params)}


@dataclass(frozen=True)
class Seeds:
    routing: int
    inputs: int
    order: int


# --- stop rule (issue 21, engine branch): the config's optional timing.stop block -------------------------
@dataclass(frozen=True)
class StopRule:
    """``timing.stop``: stop timing rounds once every timed median is known well enough; the criterion is
    :mod:`nsa_exp.results.stop_rule` (absent = no stop rule: every configured round is timed)."""

    min_rounds: int          # timed rounds before the CI criterion may stop the run
    min_seconds: float       # accumulated timed GPU seconds (every cell x stage) before it may
    ci_rel: float            # a median's CI half-width target, relative to the median ...
    ci_abs_ms: float         # ... or absolute (ms), whichever is larger
    timeout_seconds: float   # host seconds of the round loop (warm-up included) after which it stops anyway
    confidence: float        # of the distribution-free CI of each median (0.95)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Timing:
    warmup_rounds: int
    repetitions: int
    l2_flush_bytes: int
    order: str
    #: L2 sweep before each timed stage (nsa_exp.gpu.timing.FLUSH_POLICIES); absent in a config = "write",
    #: the method every result recorded before the field existed used.
    flush: str = "write"
    #: ``timing.stop`` (issue 21): None = time every configured round (the formal protocol).
    stop: StopRule | None = None


def _timing(raw: dict[str, Any]) -> Timing:
    """``config.timing``; a ``stop`` block whose ``min_rounds`` exceeds ``repetitions`` is refused (it could
    never stop on its CI)."""
    stop = raw.get("stop")
    if stop is not None and stop["min_rounds"] > raw["repetitions"]:
        raise UserError(f"config.timing.stop.min_rounds: {stop['min_rounds']} exceeds timing.repetitions "
                        f"{raw['repetitions']} (the most rounds a run times); lower it")
    return Timing(**{**raw, "stop": None if stop is None else StopRule(**stop)})
# --- end stop rule -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tolerances:
    naive_rel_l2: float
    naive_max_abs_rel: float
    dkv_rel_l2: float
    dkv_max_ulp: float
    full_shape_dkv_rel_l2: float


@dataclass(frozen=True)
class Config:
    name: str
    shape: Shape
    patterns: tuple[Pattern, ...]
    seeds: Seeds
    timing: Timing
    tolerances: Tolerances
    smoke_naive: Shape
    smoke_staged: Shape
    required_gpu: str
    source: str
    raw: dict[str, Any]
    #: ``smoke.oracle``: every routing vs FLA's naive oracle at M > S (absent = :data:`DEFAULT_ORACLE`).
    smoke_oracle: Shape | None = None
    #: ``packing``: int32 ``cu_seqlens`` ``[N+1]`` of the packed documents (None = dense); see routing/packing.py.
    cu_seqlens: Any = None

    def pattern(self, name: str) -> Pattern:
        for p in self.patterns:
            if p.name == name:
                return p
        raise UserError(f"pattern {name!r} is not in config {self.name!r}; choose one of "
                        f"{', '.join(p.name for p in self.patterns)}")


#: smoke's all-routings oracle shape when a config names none (configs recorded before the field): M = 16 > S = 8,
#: so the routings select different blocks (at smoke.naive's M = S = 4 all four are identical).
DEFAULT_ORACLE = {"B": 1, "T": 1024, "HQ": 64, "H": 4, "K": 192, "V": 128, "S": 8, "block_size": 64,
                  "dtype": "bfloat16"}


def check_routings_differ(shape: Shape, where: str) -> None:
    """The oracle shape must have more KV blocks than slots (M > S), else every routing is the same."""
    if shape.num_blocks <= shape.S:
        raise UserError(f"{where}.S: S={shape.S} must be below M=T/block_size={shape.num_blocks} so the routings "
                        f"differ (at M <= S every routing selects every causal block); raise T or lower S")


def check_shape(shape: Shape, where: str) -> None:
    """Semantic rules FLA's NSA kernels need, each failing with the field and the fix.

    >>> check_shape(Shape(1, 100, 64, 4, 192, 128, 16, 64, "bfloat16"), "config.shape")
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: config.shape.T: 100 is not a multiple of block_size 64; use a multiple of 64
    """
    if shape.T % shape.block_size:
        raise UserError(f"{where}.T: {shape.T} is not a multiple of block_size {shape.block_size}; "
                        f"use a multiple of {shape.block_size}")
    if shape.num_blocks < shape.S:
        raise UserError(f"{where}.S: S={shape.S} exceeds the number of KV blocks M=T/block_size="
                        f"{shape.num_blocks}; lower S or raise T")
    if shape.HQ % shape.H:
        raise UserError(f"{where}.HQ: HQ={shape.HQ} is not a multiple of H={shape.H}")
    g = shape.group_size
    if g < 16 or g & (g - 1):
        raise UserError(f"{where}.HQ: group size G=HQ/H={g} must be a power of two >= 16 "
                        f"(FLA NSA requirement); e.g. HQ={16 * shape.H}")
    if shape.block_size & (shape.block_size - 1):
        raise UserError(f"{where}.block_size: {shape.block_size} must be a power of two")


# The routing of a shape is regenerated on the CPU (int64 working arrays of ~12 words per entry).
ROUTING_BYTES_PER_ENTRY = 96


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits_machine(shape: Shape, where: str) -> None:
    """A shape whose routing cannot be generated in this machine's memory is one line, not a MemoryError."""
    entries = shape.B * shape.T * shape.H * shape.S
    need, have = entries * ROUTING_BYTES_PER_ENTRY, _memory_bytes()
    if have is not None and need > have:
        raise UserError(f"{where}: B*T*H*S = {entries} routing entries need ~{need / 2**30:.1f} GiB to generate, "
                        f"more than this machine's {have / 2**30:.1f} GiB; lower B, T, H or S")


def _shape(d: dict[str, Any], where: str) -> Shape:
    shape = Shape(**d)
    check_shape(shape, where)
    check_launch_limits(shape, where)
    check_fits_machine(shape, where)
    return shape


def _oracle_shape(d: dict[str, Any]) -> Shape:
    shape = _shape(d, "config.smoke.oracle")
    check_routings_differ(shape, "config.smoke.oracle")
    return shape


def config_from_dict(raw: dict[str, Any], source: str = "<dict>") -> Config:
    """Validate ``raw`` (schema, then semantics) and build a :class:`Config`."""
    # Deferred on purpose: patterns.py imports this module's Shape/Pattern (the registry validates params).
    from .packing import cu_seqlens  # noqa: PLC0415
    from .patterns import pattern_from_entry  # noqa: PLC0415

    validate_or_raise(raw, "config", label="config")
    shape = _shape(raw["shape"], "config.shape")
    patterns = tuple(pattern_from_entry(p, f"config.patterns[{i}]", shape) for i, p in enumerate(raw["patterns"]))
    names = [p.name for p in patterns]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"config.patterns: pattern {dup[0]!r} is listed twice; list each pattern once")
    packing = raw.get("packing")
    if packing is not None and shape.B != 1:
        raise UserError(f"config.shape.B: a packing needs B=1 (one packed row, FLA's cu_seqlens path), got {shape.B}")
    return Config(
        name=raw["name"],
        shape=shape,
        patterns=patterns,
        seeds=Seeds(**raw["seeds"]),
        timing=_timing(raw["timing"]),
        tolerances=Tolerances(**raw["tolerances"]),
        smoke_naive=_shape(raw["smoke"]["naive"], "config.smoke.naive"),
        smoke_staged=_shape(raw["smoke"]["staged"], "config.smoke.staged"),
        required_gpu=raw["gpu"]["required_name"],
        source=source,
        raw=raw,
        smoke_oracle=_oracle_shape(raw["smoke"].get("oracle", DEFAULT_ORACLE)),
        cu_seqlens=None if packing is None else cu_seqlens(packing, shape.T, shape.block_size),
    )


def load_config(path: str | Path) -> Config:
    """Read and validate a config file; any problem is a one-line :class:`UserError`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"config file {path} does not exist; pass --config configs/e1_h100.json") from None
    except OSError as exc:
        raise UserError(f"config file {path} cannot be read: {exc.strerror}") from None
    raw = parse_config_bytes(data, str(path))
    return config_from_dict(raw, source=str(path))


MAX_CONFIG_BYTES = 1024 * 1024


def parse_config_bytes(data: bytes, where: str) -> dict[str, Any]:
    """Strict JSON for a config: UTF-8 text, no NUL bytes, no duplicate keys, no NaN/Infinity/overflow."""
    if len(data) > MAX_CONFIG_BYTES:
        raise UserError(f"config file {where}: {len(data)} bytes is not a config (limit {MAX_CONFIG_BYTES})")
    nul = data.find(b"\0")
    if nul >= 0:
        raise UserError(f"config file {where}: binary data (NUL byte at offset {nul}), not a JSON config")
    if data.startswith(b"\xef\xbb\xbf"):  # a byte-order mark from an editor: harmless, dropped
        data = data[3:]
    try:
        raw = parse_strict(data)  # the one strict parser (duplicate keys, NaN/Infinity, overflow, depth)
    except ValueError as exc:
        raise UserError(f"config file {where}: {exc}") from None
    if not isinstance(raw, dict):
        raise UserError(f"config file {where}: top level must be a JSON object")
    return raw
