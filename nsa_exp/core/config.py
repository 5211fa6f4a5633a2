"""The experiment config as typed values: a shape, the routings, seeds, timing, tolerances.

These are the records :func:`nsa_exp.io.config_files.load_config` builds once every rule has passed
(schema, then semantics); everything downstream reads them, never the raw JSON. The rules of a config's values
live here too (:func:`check_shape`, :func:`check_routings_differ`, :func:`check_fits_machine`, the packing's
documents :func:`cu_seqlens`), beside the stage table's launch limits (:func:`nsa_exp.core.stages.check_launch_limits`)
and the family table's pattern rules (:func:`nsa_exp.core.families.pattern_from_entry`).

>>> Shape(B=1, T=32768, HQ=64, H=4, K=192, V=128, S=16, block_size=64, dtype="bfloat16").num_blocks
512
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import UserError

#: The largest T a config may name (``schemas/config.schema.json``'s bound on ``shape.T``).
MAX_T = 1 << 20


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

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Shape:
        """The shape a document records (:meth:`to_dict`'s inverse, e.g. a run's ``shape``); no rule checked."""
        return cls(**d)


@dataclass(frozen=True, init=False)
class Pattern:
    """One routing: ``name`` plus its parameters (e.g. ``sinks`` for sink-heavy, ``exponent`` for zipf).

    Parameters are read as attributes; their schemas and defaults live in the family table
    (:mod:`nsa_exp.core.families`), which also validates config entries.

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


@dataclass(frozen=True)
class StopRule:
    """``timing.stop``: stop timing rounds once every timed median is known well enough; the criterion is
    :mod:`nsa_exp.analysis.stop_rule` (absent = no stop rule: every configured round is timed)."""

    min_rounds: int          # timed rounds before the CI criterion may stop the run
    min_seconds: float       # accumulated timed GPU seconds (every cell x stage) before it may
    ci_rel: float            # a median's CI half-width target, relative to the median ...
    ci_abs_ms: float         # ... or absolute (ms), whichever is larger
    timeout_seconds: float   # host seconds of the round loop (warm-up included) after which it stops anyway
    confidence: float        # of the distribution-free CI of each median (0.95)
    #: the verdict rule (issue 30): each target is this fraction of the GPU x stage's noise floor (ci_rel unused)
    #: and a routing whose stages have all converged stops being timed; None: the ci_rel rule, every routing timed
    #: in every round (every result recorded before issue 30)
    floor_fraction: float | None = None
    #: under the verdict rule, what converges and leaves later rounds (:data:`nsa_exp.core.protocol.STOP_DROPS`):
    #: a ``routing`` once all its stages have (absent: every run recorded before 2026-12-05), or each ``stage`` of a
    #: routing on its own, the routing once all have
    drop: str = "routing"

    def to_dict(self) -> dict[str, Any]:
        """The ``timing.stop`` block: the six fields, ``floor_fraction`` when set and ``drop`` when not
        ``routing`` (so every block recorded before the field reads back unchanged)."""
        out = asdict(self)
        if self.floor_fraction is None:
            out.pop("floor_fraction")
        if self.drop == "routing":
            out.pop("drop")
        return out


@dataclass(frozen=True)
class TimingConfig:
    warmup_rounds: int
    repetitions: int
    l2_flush_bytes: int
    order: str
    #: L2 sweep before each timed stage (:data:`nsa_exp.core.protocol.FLUSH_POLICIES`); absent in a config = "write",
    #: the method every result recorded before the field existed used.
    flush: str = "write"
    #: ``timing.stop``: None = time every configured round (the formal protocol).
    stop: StopRule | None = None
    #: where ``stop`` came from (:data:`nsa_exp.core.protocol.STOP_SOURCES`): the config, or the command line
    #: folded in by :meth:`Config.overridden`
    stop_source: str = "config"

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> TimingConfig:
        """``config.timing`` (schema-valid); a ``stop`` block whose ``min_rounds`` exceeds ``repetitions`` is refused
        (it could never stop on its CI), and so is a ``drop`` of the verdict rule without its ``floor_fraction``."""
        stop = raw.get("stop")
        if stop is not None and stop["min_rounds"] > raw["repetitions"]:
            raise UserError(f"config.timing.stop.min_rounds: {stop['min_rounds']} exceeds timing.repetitions "
                            f"{raw['repetitions']} (the most rounds a run times); lower it")
        if stop is not None and stop.get("drop", "routing") != "routing" and stop.get("floor_fraction") is None:
            raise UserError(f"config.timing.stop.drop: {stop['drop']!r} is the verdict rule's; give floor_fraction "
                            "too (or leave drop out)")
        return cls(**{**raw, "stop": None if stop is None else StopRule(**stop)})


@dataclass(frozen=True)
class Tolerances:
    naive_rel_l2: float
    naive_max_abs_rel: float
    dkv_rel_l2: float
    dkv_max_ulp: float
    full_shape_dkv_rel_l2: float

    def loosened(self, pinned: Tolerances | None = None) -> list[tuple[str, float, float]]:
        """``(field, value, pinned value)`` of each tolerance looser (larger) than :data:`PINNED_TOLERANCES`."""
        pinned = PINNED_TOLERANCES if pinned is None else pinned
        return [(k, v, getattr(pinned, k)) for k, v in asdict(self).items() if v > getattr(pinned, k)]


#: The tolerances every gate of the bundle is judged at (those of configs/e1_h100.json, the formal config,
#: with which every committed run was gated). A config may ask stricter ones, never looser: a looser one is
#: refused when the config is read, and ``validate`` judges a recorded run at these whatever its file says.
PINNED_TOLERANCES = Tolerances(naive_rel_l2=0.02, naive_max_abs_rel=0.05, dkv_rel_l2=0.001, dkv_max_ulp=2,
                               full_shape_dkv_rel_l2=0.01)


@dataclass(frozen=True)
class Config:
    name: str
    shape: Shape
    patterns: tuple[Pattern, ...]
    seeds: Seeds
    timing: TimingConfig
    tolerances: Tolerances
    smoke_naive: Shape
    smoke_staged: Shape
    required_gpu: str
    source: str
    raw: dict[str, Any]
    #: ``smoke.oracle``: every routing vs FLA's naive oracle at M > S (absent = :data:`DEFAULT_ORACLE`).
    smoke_oracle: Shape | None = None
    #: ``packing``: int32 ``cu_seqlens`` ``[N+1]`` of the packed documents (None = dense); see :func:`cu_seqlens`.
    cu_seqlens: Any = None

    def overridden(self, repetitions: int | None = None, stop: StopRule | None = None,
                   stop_source: str = "--stop-rule", where: str | None = None) -> Config:
        """This config with the command line's overrides folded in, once, at the entry point: ``repetitions``
        (``--repetitions``) replaces ``timing.repetitions``; ``stop`` (``--stop-rule``: the default rule of
        :mod:`nsa_exp.analysis.stop_rule`) becomes ``timing.stop`` from ``stop_source`` unless the config has its own
        (the config's rule wins). ``where`` (the command that asked, ``"bench --stop-rule"``): UserError naming it
        when the run times fewer rounds than that rule's ``min_rounds`` (it could never stop the run early). ``raw``
        stays the file's: a result records the config as given (``tests/core/test_measurement.py`` pins it).
        """
        timing = self.timing
        if repetitions is not None:
            if timing.stop is not None and repetitions < timing.stop.min_rounds:  # as the config's own check
                raise UserError(f"--repetitions {repetitions}: fewer than the config's timing.stop.min_rounds "
                                f"{timing.stop.min_rounds} (its stop rule could never stop the run); raise it")
            timing = replace(timing, repetitions=repetitions)
        if stop is not None and timing.stop is None:
            if where is not None and timing.repetitions < stop.min_rounds:
                rounds = f"{timing.repetitions} round{'' if timing.repetitions == 1 else 's'}"
                raise UserError(f"{where}: the run times {rounds}, fewer than the default rule's min_rounds "
                                f"{stop.min_rounds}; raise " + ("--repetitions" if repetitions is not None else
                                                                "timing.repetitions (the most rounds the rule may "
                                                                "time) or give a timing.stop block"))
            timing = replace(timing, stop=stop, stop_source=stop_source)
        return replace(self, timing=timing)

    def pattern(self, name: str) -> Pattern:
        for p in self.patterns:
            if p.name == name:
                return p
        raise UserError(f"pattern {name!r} is not in config {self.name!r}; choose one of "
                        f"{', '.join(p.name for p in self.patterns)}")


#: The experiment's primary shape (README: q [1,32768,64,192], k [1,T,4,192], v [1,T,4,128], BF16,
#: block_indices [1,T,4,16], block size 64); a calibration set's routings are designed at it (T aside).
PRIMARY_SHAPE = Shape(B=1, T=32768, HQ=64, H=4, K=192, V=128, S=16, block_size=64, dtype="bfloat16")

#: The allocator headroom over the buffers a run of the pinned launcher allocates (fragmentation, FLA's transient
#: buffers): a sweep point's (:func:`bytes_needed`) and a what-if's (model/split.py's ``whatif_bytes``).
HEADROOM = 1.2


def bytes_needed(shape: Shape, n_patterns: int, l2_flush_bytes: int, shared_allocated: bool = False) -> int:
    """Device bytes a sweep point allocates: shared q, k, v, dO; per pattern o, dq, dk, dv, lse, delta,
    block_indices and the CSR; the L2-flush buffer; times :data:`HEADROOM`. ``shared_allocated``: the
    inputs (and flush buffer) are already on the device (cached from the previous point at this shape).

    >>> bytes_needed(Shape(1, 131072, 64, 4, 192, 128, 16, 64, "bfloat16"), 2, 2**28) / 2**30 < 32
    True
    """
    e = 4 if shape.dtype == "float32" else 2
    B, T, HQ, H, K, V, S = shape.B, shape.T, shape.HQ, shape.H, shape.K, shape.V, shape.S
    shared = B * T * (HQ * K + H * K + H * V + HQ * V) * e
    per = (B * T * HQ * V * e + B * T * HQ * K * 4 + B * T * H * (K + V) * 4 + 2 * B * T * HQ * 4
           + 3 * B * T * H * S * 4)
    return int(HEADROOM * ((0 if shared_allocated else shared + l2_flush_bytes) + n_patterns * per))


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


# A config's ``packing`` section -> its documents (routing/packing.py's docstring gives the section's forms).
MAX_DOCUMENTS = 1 << 20


def _int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise UserError(f"{field}: {value!r} is not an integer")
    return int(value)


def _check_lengths(lengths: npt.NDArray[np.int64], T: int, block_size: int, field: str) -> None:
    bad = np.flatnonzero((lengths <= 0) | (lengths % block_size != 0))
    if bad.size:
        i = int(bad[0])
        raise UserError(f"{field}[{i}]: {int(lengths[i])} is not a positive multiple of block_size {block_size}")
    if int(lengths.sum()) != T:
        raise UserError(f"{field}: the lengths sum to {int(lengths.sum())}, not T={T}")


MAX_SIGMA = 10.0  #: beyond it exp(N(mu, sigma)) overflows float64 for a useful share of draws


def _positive(entry: Mapping[str, Any], key: str, where: str) -> float:
    """``entry[key]``, a finite number > 0 (an int stays an int); UserError naming ``where.key`` otherwise."""
    v = entry.get(key)
    if v is None:
        raise UserError(f"{where}.{key}: missing; a lognormal packing needs mean, sigma and seed")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v <= 0:
        raise UserError(f"{where}.{key}: {v!r} must be a finite number > 0")
    return v


def _lognormal(entry: Mapping[str, Any], T: int, block_size: int, where: str) -> npt.NDArray[np.int64]:
    if entry.get("distribution") != "lognormal":
        raise UserError(f"{where}.distribution: {entry.get('distribution')!r}; only 'lognormal' is supported")
    mean, sigma = _positive(entry, "mean", where), _positive(entry, "sigma", where)
    if mean > T:  # documents are clipped to [block_size, T]: a larger mean is one document of T, say so
        raise UserError(f"{where}.mean: {mean!r} exceeds T={T}; documents are clipped to [block_size, T]")
    if sigma > MAX_SIGMA:
        raise UserError(f"{where}.sigma: {sigma!r} exceeds {MAX_SIGMA} (log-normal draws overflow; lengths are "
                        "clipped to [block_size, T] anyway)")
    seed = _int(entry.get("seed"), f"{where}.seed")
    if seed < 0:
        raise UserError(f"{where}.seed: {seed} must be >= 0")
    rng = np.random.default_rng(seed)
    mu = np.log(float(mean)) - float(sigma) ** 2 / 2
    draws = rng.lognormal(mu, float(sigma), size=T // block_size)  # at most T/BS documents of >= BS tokens
    lengths = np.clip(np.rint(draws / block_size).astype(np.int64) * block_size, block_size, T)
    ends = np.cumsum(lengths)
    n = int(np.searchsorted(ends, T)) + 1
    lengths = lengths[:n]
    lengths[-1] -= int(ends[n - 1]) - T
    return lengths


def document_lengths(entry: Mapping[str, Any], T: int, block_size: int,
                     where: str = "config.packing") -> npt.NDArray[np.int64]:
    """int64 document lengths of a ``packing`` section (its forms: routing/packing.py's docstring); UserError naming
    the field."""
    if not isinstance(entry, Mapping):
        raise UserError(f"{where}: {entry!r} must be an object (documents, lengths or distribution)")
    kinds = [k for k in ("documents", "lengths", "distribution") if k in entry]
    if len(kinds) != 1:
        raise UserError(f"{where}: give exactly one of documents, lengths, distribution (got {sorted(entry)})")
    allowed = {"documents": {"documents"}, "lengths": {"lengths"},
               "distribution": {"distribution", "mean", "sigma", "seed"}}[kinds[0]]
    extra = sorted(set(entry) - allowed)
    if extra:
        raise UserError(f"{where}.{extra[0]}: not a field of a {kinds[0]!r} packing")
    if kinds[0] == "documents":
        L = _int(entry["documents"], f"{where}.documents")
        if L <= 0 or L % block_size or T % L:
            raise UserError(f"{where}.documents: {L} must be a positive multiple of block_size {block_size} "
                            f"that divides T={T}")
        return np.full(T // L, L, dtype=np.int64)
    if kinds[0] == "lengths":
        raw = entry["lengths"]
        if not isinstance(raw, (list, tuple)) or not raw or len(raw) > MAX_DOCUMENTS:
            raise UserError(f"{where}.lengths: must be a non-empty list of document lengths")
        values = [_int(v, f"{where}.lengths[{i}]") for i, v in enumerate(raw)]
        for i, v in enumerate(values):  # as Python ints, before numpy: 10**30 cannot overflow, 4 x 2**62 cannot wrap
            if not 0 < v <= T:
                raise UserError(f"{where}.lengths[{i}]: {v} is not a document length in 1..T={T}")
        if sum(values) != T:
            raise UserError(f"{where}.lengths: the lengths sum to {sum(values)}, not T={T}")
        lengths = np.array(values, dtype=np.int64)
        _check_lengths(lengths, T, block_size, f"{where}.lengths")
        return lengths
    lengths = _lognormal(entry, T, block_size, where)
    _check_lengths(lengths, T, block_size, f"{where}.lengths")
    return lengths


def cu_seqlens(entry: Mapping[str, Any], T: int, block_size: int,
               where: str = "config.packing") -> npt.NDArray[np.int32]:
    """int32 ``[N + 1]`` document boundaries (0, ..., T; strictly increasing) of a ``packing`` section.

    >>> cu_seqlens({"documents": 64}, T=256, block_size=32).tolist()
    [0, 64, 128, 192, 256]
    """
    return np.concatenate([[0], np.cumsum(document_lengths(entry, T, block_size, where))]).astype(np.int32)
