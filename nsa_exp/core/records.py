"""Typed records: what a run measured, as frozen dataclasses whose JSON is the documents' own, key for key
and in order (``to_json`` of ``from_json`` of a committed document dumps to the same bytes; a test holds
every committed result and sweep point to that).

A record's fields are its JSON keys, in document order; an optional field (default None) is left out of
the JSON when None; a field typed as a record (or a ``dict`` or ``tuple`` of records) is converted both ways; tuples
are JSON lists. Blocks no reader needs typed (config, gates, telemetry, metadata ...) stay JSON values.
``from_json`` refuses a key the record does not know (nothing is dropped silently).

The measurement engine fills these (``checking/bench_result.build`` is bench's path through them):
:meth:`StageStats.of` per pattern x stage from the timed and warm-up observations, :meth:`StageSum.of`
from the stage medians, one :class:`PatternRun` per routing, one :class:`Timing`, then
:class:`BenchResult` (or :class:`SweepPoint`, :class:`ReleaseResult`), written with
``nsa_exp.io.store.write_record``.

>>> s = StageStats.of([1.0, 2.0, 3.0, 4.0], [9.0])
>>> s.median_ms, s.n_obs, StageStats.from_json(s.to_json()) == s
(2.5, 4, True)
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, reduce
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from .kinds import KINDS
from .protocol import summarize
from .stages import BACKWARD_STAGES, STAGE_NAMES

JSON = Any
T = TypeVar("T", bound="Record")


class Record:
    """The JSON side of a record dataclass (see the module docstring)."""

    if TYPE_CHECKING:  # every subclass is a dataclass: this makes ``dataclasses.fields(cls)`` type-check
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    @cache
    def _fields(cls) -> tuple[tuple[str, type[Record] | tuple[str, type[Record]] | None, bool], ...]:
        """``(name, record type | ("dict" or "tuple", record type) | None, optional)`` per field, in order (a
        ``dict[str, R]`` or ``tuple[R, ...]`` of records ``R``)."""
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            kind: type[Record] | tuple[str, type[Record]] | None = None
            for arg in typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,):
                origin, args = typing.get_origin(arg), typing.get_args(arg)
                value = args[1] if origin is dict else args[0] if origin is tuple and args[1:] == (Ellipsis,) else None
                if isinstance(arg, type) and issubclass(arg, Record):
                    kind = arg
                elif isinstance(value, type) and issubclass(value, Record):
                    kind = ("dict" if origin is dict else "tuple", value)
            out.append((f.name, kind, f.default is None))
        return tuple(out)

    @classmethod
    def from_json(cls: type[T], doc: Mapping[str, JSON]) -> T:
        names = {name for name, _, _ in cls._fields()}
        unknown = [k for k in doc if k not in names]
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown key(s) {unknown}")
        values: dict[str, JSON] = {}
        for name, kind, _ in cls._fields():
            if name not in doc:
                continue
            value = doc[name]
            if isinstance(kind, tuple) and value is not None:
                container, record = kind
                value = ({k: record.from_json(v) for k, v in value.items()} if container == "dict" else
                         tuple(record.from_json(v) for v in value))
            elif isinstance(kind, type) and value is not None:
                value = kind.from_json(value)
            values[name] = value
        return cls(**values)

    @classmethod
    def coerce(cls: type[T], value: Any) -> T:
        """``value`` itself when it is already this record, else :meth:`from_json` of it (a document)."""
        return value if isinstance(value, cls) else cls.from_json(value)

    #: The JSON key order when it is not the field order (optional keys sit among required ones).
    ORDER: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {}
        for name, _, optional in self._fields():
            value = getattr(self, name)
            if value is None and optional:
                continue
            out[name] = _json(value)
        return {k: out[k] for k in self.ORDER if k in out} if self.ORDER else out


def _json(value: Any) -> JSON:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


class Keywords:
    """JSON Schema keywords that a field's ``Annotated[X, Keywords(...)]`` adds to the schema generated for X
    (:func:`json_schema`): a bound, a description, an ``x-vocabulary`` list (:mod:`nsa_exp.io.schema_sync`).
    Hashed by identity, as ``Annotated`` metadata inside a union must be hashable.

    >>> json_schema(typing.Annotated[int, Keywords(minimum=1)])
    {'type': 'integer', 'minimum': 1}
    """

    def __init__(self, **keywords: JSON) -> None:
        self.keywords = keywords

    def __repr__(self) -> str:
        return f"Keywords({', '.join(f'{k}={v!r}' for k, v in self.keywords.items())})"


#: JSON Schema's type of each scalar a record field may hold.
_SCALAR_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def json_schema(hint: Any) -> dict[str, JSON]:
    """The JSON Schema (draft 2020-12) of what :meth:`Record.to_json` writes for a value of type ``hint``: a
    dataclass is an object of its fields, closed (``additionalProperties: false``), every field required but an
    optional one (default None: left out of the JSON when None); ``str`` / ``int`` / ``float`` / ``bool`` their
    JSON types; ``Literal`` an enum; ``X | Y`` anyOf (None: ``null``); ``tuple[X, ...]`` and ``list[X]`` arrays,
    ``tuple[X, Y]`` a fixed-length array; ``dict[str, X]`` an object of X; ``Any`` (``JSON``) anything;
    ``Annotated[X, Keywords(...)]`` X's schema with those keywords added (bounds, ``x-vocabulary``). A kind whose module
    declares its record has its schema file generated from it (:mod:`nsa_exp.io.schema_sync`). TypeError for a
    hint with no JSON form.

    >>> json_schema(tuple[int, ...])
    {'type': 'array', 'items': {'type': 'integer'}}
    >>> json_schema(dict[str, float | None])
    {'type': 'object', 'additionalProperties': {'anyOf': [{'type': 'number'}, {'type': 'null'}]}}
    >>> json_schema(StageSum)["required"]
    ['stage_sum_median_ms', 'full_bwd_median_ms', 'ratio']
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        extra = {k: v for a in args[1:] if isinstance(a, Keywords) for k, v in a.keywords.items()}
        return {**json_schema(args[0]), **extra}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint, include_extras=True)
        fields = dataclasses.fields(hint)
        required = [f.name for f in fields if f.default is not None]
        return {"type": "object", "additionalProperties": False, "required": required,
                "properties": {f.name: json_schema(_without_none(hints[f.name]) if f.default is None
                                                   else hints[f.name]) for f in fields}}
    if hint is Any:
        return {}
    if hint is type(None):
        return {"type": "null"}
    if hint in _SCALAR_TYPES:
        return {"type": _SCALAR_TYPES[hint]}
    if origin is typing.Literal:
        return {"const": args[0]} if len(args) == 1 else {"enum": list(args)}
    if origin in (types.UnionType, typing.Union):
        return {"anyOf": [json_schema(a) for a in args]}
    if origin in (list, tuple) and (origin is list or args[1:] == (Ellipsis,)):
        return {"type": "array", "items": json_schema(args[0])}
    if origin is tuple:
        return {"type": "array", "prefixItems": [json_schema(a) for a in args], "minItems": len(args),
                "maxItems": len(args)}
    if origin is dict and args[0] is str:
        return {"type": "object", "additionalProperties": json_schema(args[1])}
    raise TypeError(f"json_schema: {hint!r} has no JSON form (a record field holds a dataclass, str, int, float, "
                    "bool, a Literal, a union, a tuple, a list, a dict with str keys, or Any)")


def _without_none(hint: Any) -> Any:
    """``X | None`` -> ``X`` (an optional field's value when it is written)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return reduce(operator.or_, args) if args else hint


@dataclass(frozen=True)
class StageStats(Record):
    """One pattern x stage: every timed observation (ms), the warm-up ones, and their summary."""

    raw_ms: tuple[float, ...]
    warmup_ms: tuple[float, ...]
    median_ms: float
    p10_ms: float
    p90_ms: float
    p95_ms: float
    min_ms: float
    mean_ms: float
    n_obs: int

    @classmethod
    def of(cls, raw_ms: Sequence[float], warmup_ms: Sequence[float] = ()) -> StageStats:
        """The record of these observations (:func:`nsa_exp.core.protocol.summarize`)."""
        s = summarize(raw_ms)
        return cls(tuple(raw_ms), tuple(warmup_ms), s["median_ms"], s["p10_ms"], s["p90_ms"], s["p95_ms"],
                   s["min_ms"], s["mean_ms"], int(s["n_obs"]))

    @classmethod
    def from_json(cls, doc: Mapping[str, JSON]) -> StageStats:
        out = super().from_json(doc)
        return dataclasses.replace(out, raw_ms=tuple(out.raw_ms), warmup_ms=tuple(out.warmup_ms))


#: The summary fields of a :class:`StageStats` (the summary table's statistics columns), in order.
STAT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(StageStats) if not f.name.endswith("raw_ms")
                                     and f.name != "warmup_ms")


@dataclass(frozen=True)
class StageSum(Record):
    """The backward stages' medians summed against the official wrapper's (``stage_sum_vs_full_bwd``)."""

    stage_sum_median_ms: float
    full_bwd_median_ms: float
    ratio: float
    wrapper_extra_median_ms: float | None = None
    itemised_ratio: float | None = None

    @classmethod
    def of(cls, medians: Mapping[str, float]) -> StageSum:
        """From each stage's median; itemised with ``wrapper_extra`` when it was timed."""
        stage_sum, full = sum(medians[k] for k in BACKWARD_STAGES), medians["full_bwd"]
        extra = medians.get("wrapper_extra")
        return cls(stage_sum, full, stage_sum / full, extra, None if extra is None else (stage_sum + extra) / full)


@dataclass(frozen=True)
class PatternRun(Record):
    """One routing of a run: its parameters, edges, CSR-row statistics, every stage, and (bench) the
    stage sum, the reproduction of the official wrapper and the memory accounting."""

    params: dict[str, JSON]
    edges: int
    fanin: dict[str, JSON]
    stages: dict[str, StageStats]
    query_span: dict[str, JSON] | None = None
    adjacent_gap: dict[str, JSON] | None = None
    stage_sum_vs_full_bwd: StageSum | None = None
    reproduces_official: dict[str, JSON] | None = None
    memory: dict[str, JSON] | None = None
    routing_sha256: str | None = None        # release results: the routing handed to the release, hashed

    ORDER = ("params", "edges", "routing_sha256", "fanin", "query_span", "adjacent_gap", "stages",
             "stage_sum_vs_full_bwd", "reproduces_official", "memory")

    def median(self, stage: str) -> float:
        return self.stages[stage].median_ms

    def stage_sum(self) -> StageSum:
        """:attr:`stage_sum_vs_full_bwd`, which every routing of a bench result carries (schema ``result``);
        ValueError when this routing (a sweep point's, a release result's) has none."""
        if self.stage_sum_vs_full_bwd is None:
            raise ValueError("stage_sum_vs_full_bwd: absent (only a bench result's routings are sure to carry it)")
        return self.stage_sum_vs_full_bwd


@dataclass(frozen=True)
class Timing(Record):
    """How a run's rounds were timed: method, rounds, orders, flush, spin, stages."""

    method: str
    warmup_rounds: int
    repetitions: int
    round_orders: list[list[str]]
    l2_flush_bytes: int
    launch_guard_cycles: int
    percentile_method: str
    stages: list[str]
    order_mode: str | None = None            # every bench result (a sweep point may omit it)
    order_seed: int | None = None
    flush_policy: str | None = None          # bench results after the field existed
    resumed: bool | None = None              # bench results
    untimed_prerequisites: list[str] | None = None  # sweep points
    stop: dict[str, JSON] | None = None      # a run under the stop rule (nsa_exp.analysis.stop_rule)
    timer: str | None = None                 # release results: "cuda-events", or "host-clock" (CPU interpreter)

    ORDER = ("method", "timer", "warmup_rounds", "repetitions", "order_mode", "order_seed", "round_orders",
             "l2_flush_bytes", "flush_policy", "launch_guard_cycles", "percentile_method", "stages", "resumed",
             "untimed_prerequisites", "stop")


@dataclass(frozen=True)
class GpuIdentity:
    """``metadata.gpu``: the GPU a run recorded, the one home of its keys. :func:`nsa_exp.gpu.telemetry.gpu_identity`
    writes them (torch's device properties, then what NVML can tell: a host without NVML records no clocks), the
    readers read this record (:meth:`read`); None: not recorded. ``validate`` holds :data:`TABLE_FACTS` to the GPU
    table row the name picks and :data:`COUNTS` to integers (:func:`nsa_exp.checking.record_checks.metadata_plausible`).

    >>> gpu = GpuIdentity.read({"name": "NVIDIA H200", "sm_count": 132, "pci_bus_id": "0000:19:00"})
    >>> gpu.name, gpu.sm_count, gpu.l2_cache_bytes
    ('NVIDIA H200', 132, None)
    """

    name: str | None = None
    sm_count: int | None = None
    total_memory_bytes: int | None = None
    compute_capability: str | None = None  # "9.0"
    l2_cache_bytes: int | None = None
    driver: str | None = None
    nvml_name: str | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    power_limit_w: float | None = None
    applications_sm_clock_mhz: int | None = None

    #: the facts the GPU table holds (:mod:`nsa_exp.core.gpus`)
    TABLE_FACTS: ClassVar[tuple[str, ...]] = ("sm_count", "total_memory_bytes", "l2_cache_bytes", "compute_capability")
    #: the counts a device reports: integers where recorded (a float or string escaped the table's comparisons)
    COUNTS: ClassVar[tuple[str, ...]] = ("sm_count", "total_memory_bytes", "l2_cache_bytes", "max_sm_clock_mhz",
                                         "max_mem_clock_mhz", "applications_sm_clock_mhz")

    @classmethod
    def read(cls, facts: Mapping[str, Any] | None) -> GpuIdentity:
        """The recorded facts, by key (a key of no field is passed over: hosts differ in what they report; the
        values as recorded, unchecked: ``validate`` checks them)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in (facts or {}).items() if k in known})


@dataclass(frozen=True)
class RunRecord(Record):
    """What every measured run records: its config and shape, gates, edges, autotune configs, timing,
    every routing's stages, wall time and host metadata."""

    KIND: ClassVar[str] = ""
    schema_version: str
    kind: str
    name: str
    config: dict[str, JSON]
    shape: dict[str, int | str]
    gates: list[dict[str, JSON]]
    edges: dict[str, JSON]
    autotune: dict[str, JSON]
    timing: Timing
    patterns: dict[str, PatternRun]
    wall_seconds: float
    metadata: dict[str, JSON]

    @property
    def gpu(self) -> GpuIdentity:
        """The GPU the run recorded (``metadata.gpu``)."""
        return GpuIdentity.read(self.metadata.get("gpu"))

    @property
    def gpu_name(self) -> str | None:
        return self.gpu.name


@dataclass(frozen=True)
class BenchResult(RunRecord):
    """A bench run (kind ``bench_result``, schema ``result``): every observation of every pattern x stage."""

    KIND: ClassVar[str] = "bench_result"
    ORDER = ("schema_version", "kind", "name", "config", "config_path", "shape", "gates", "fla", "edges", "autotune",
             "timing", "patterns", "telemetry", "wall_seconds", "phases", "metadata", "routing_files", "packing",
             "cupti")
    config_path: str
    fla: dict[str, JSON]
    telemetry: dict[str, JSON]
    routing_files: dict[str, JSON] | None = None
    packing: dict[str, JSON] | None = None
    cupti: dict[str, JSON] | None = None
    #: host seconds per phase (:data:`nsa_exp.core.measurement.PHASES`); absent in results before issue 30
    phases: dict[str, float] | None = None

    def best_configs(self) -> dict[str, JSON]:
        """``{stage: best_config}`` of the autotuned kernels the run launched."""
        return {k: v["best_config"] for k, v in self.autotune["kernels"].items()}


@dataclass(frozen=True)
class SweepPoint(RunRecord):
    """One sweep point (kind ``sweep_point``): a routing and the baseline at one T, the asked stages timed."""

    KIND: ClassVar[str] = "sweep_point"
    ORDER = ("packing", "schema_version", "kind", "name", "sweep", "point_id", "point", "config", "shape", "gates",
             "edges", "autotune", "timing", "patterns", "memory", "placement", "wall_seconds", "metadata",
             "routing_files")  # a packed point's record leads
    sweep: str
    point_id: str
    point: dict[str, JSON]
    memory: dict[str, JSON] | None = None
    packing: dict[str, JSON] | None = None
    placement: dict[str, JSON] | None = None
    routing_files: dict[str, JSON] | None = None

    @property
    def routing(self) -> PatternRun:
        """The point's own routing (``point.pattern``)."""
        return self.patterns[self.point["pattern"]["name"]]

    @property
    def baseline(self) -> PatternRun:
        return self.patterns[self.point["baseline"]]


@dataclass(frozen=True)
class ReleaseResult(RunRecord):
    """One point of the release arm (kind ``release_result``): another FLA release or source tree timed through
    its public API (``core.stages.RELEASE_STAGES``), NOT the pinned experiment; ``kernels`` (CUPTI, every call's
    kernels) and ``memory`` (GPU memory read before the point) are null when a run has none."""

    KIND: ClassVar[str] = "release_result"
    ORDER = ("schema_version", "kind", "name", "not_pinned", "release", "source", "config", "config_path",
             "release_config", "shape", "gates", "edges", "autotune", "timing", "patterns", "kernels", "telemetry",
             "memory", "wall_seconds", "metadata", "routing_files", "kernels_unavailable")
    not_pinned: str
    release: dict[str, JSON]
    source: dict[str, JSON]
    config_path: str
    release_config: dict[str, JSON]
    kernels: dict[str, JSON] | None
    telemetry: dict[str, JSON]
    memory: dict[str, JSON] | None
    routing_files: dict[str, JSON] | None = None
    kernels_unavailable: str | None = None


#: A bench result as a record or as its document (readers :meth:`Record.coerce` it).
BenchLike = BenchResult | Mapping[str, Any]


def record_schema(record: RunRecord) -> str:
    """The schema a record is written against (its kind's)."""
    return KINDS[type(record).KIND]


def stage_records(records: Sequence[Mapping[str, Any]], patterns: Sequence[str],
                  stages: Sequence[str] = STAGE_NAMES) -> dict[str, dict[str, StageStats]]:
    """Per pattern and stage, the :class:`StageStats` of the round loop's records (``{"pattern", "warmup",
    "ms": {stage: ms}}`` each; a record lacks the stages the stop rule no longer timed in that round)."""
    return {p: {stage: StageStats.of([r["ms"][stage] for r in records
                                      if r["pattern"] == p and not r["warmup"] and stage in r["ms"]],
                                     [r["ms"][stage] for r in records
                                      if r["pattern"] == p and r["warmup"] and stage in r["ms"]])
                for stage in stages} for p in patterns}


def stage_summaries(records: Sequence[Mapping[str, Any]], patterns: Sequence[str],
                    stages: Sequence[str] = STAGE_NAMES) -> dict[str, dict[str, JSON]]:
    """:func:`stage_records` as JSON (what a document's ``patterns.<p>.stages`` holds)."""
    return {p: {s: st.to_json() for s, st in by.items()} for p, by in stage_records(records, patterns, stages).items()}


def recorded_stages(records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The stages the records timed, in Stage-table order (results recorded before an optional stage
    existed lack it; every record of one run times the same stages).

    >>> recorded_stages([{"ms": {"full_bwd": 1.0, "csr": 0.1}}])
    ('csr', 'full_bwd')
    """
    return tuple(s for s in STAGE_NAMES if records and s in records[0]["ms"])


