"""Recompute every derived number of a bench result from its source, or list it as unverifiable.

Called by ``validate`` once the schema passed (``bench_recompute``). Each check is named; a failure
carries the JSON path. Checks (what each recomputes):

- ``config_semantics``: the embedded config loads with the config rules (group size legal, S <= M,
  sinks < S, integers as integers, the shape fits the machine).
- ``pattern_set``: the result's patterns == the config's patterns, with the config's parameters.
- ``routing_recompute``: each routing regenerated from config shape + ``seeds.routing`` + pattern
  parameters -> edges, fan-in, query-span and adjacent-gap statistics, compared value by value (a
  swapped or renamed pattern fails here).
- ``memory_recompute``: every buffer size from the shape; peaks >= baselines; allocated <= reserved;
  peak - baseline recomputed; nothing above the GPU's memory.
- ``reproduction_flags``: ``bit_exact`` <=> ``n_different == 0`` <=> ``max_abs == 0``; numel from the
  shape; ``max_abs_rel`` = max_abs / ref_max_abs; dQ bit-exact and dK/dV rel-L2 within the config's
  ``full_shape_dkv_rel_l2`` (the gate bench applies).
- ``gates_consistent``: each recorded gate's detail agrees with the document (edges, FLA, GPU, versions).
- ``ratio_recompute``: each ``stage_sum_vs_full_bwd.ratio`` = stage sum / full_bwd.
- ``timing_recompute``: repetitions == every stage's observations; warm-up counts; round orders
  regenerated from order mode + seed; flush bytes, order, stage list as the config says.
- ``telemetry_recompute``: one sample per (round, pattern) in round order; ``throttled_samples``
  recounted. Policy: throttled samples > 0 is a WARNING (listed, not a failure; see docs/SCHEMAS.md).
- ``metadata_plausible``: a known GPU family with its SM count and compute capability, versions and
  the driver parse, NVML and CUDA names agree.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import UserError
from ..routing.config import Pattern, Shape, config_from_dict
from ..routing.edges import effective_edges
from ..routing.fanin import routing_statistics
from ..routing.stages import BACKWARD_STAGES
from ..routing.stages import STAGE_NAMES as STAGES
from .latency import LAUNCH_GUARD_CYCLES, round_orders

Problems = list[tuple[str, str]]
Add = Callable[[str, Problems], bool]

REL_TOL = 1e-12
# NVML clocks-event reasons counted as throttling (gpu/telemetry.py flags samples with this mask too).
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# GPU families we know: name fragment -> (allowed SM counts, compute capability).
GPU_FAMILIES: dict[str, tuple[frozenset[int], str]] = {
    "H100": (frozenset({114, 132}), "9.0"),
    "H200": (frozenset({132}), "9.0"),
    "H800": (frozenset({114, 132}), "9.0"),
    "H20": (frozenset({78}), "9.0"),
    "GH200": (frozenset({132}), "9.0"),
    "A100": (frozenset({108}), "8.0"),
    "A800": (frozenset({108}), "8.0"),
    "B200": (frozenset({148}), "10.0"),
    "B100": (frozenset({132}), "10.0"),
    "L40S": (frozenset({142}), "8.9"),
}
SM_RANGE = (1, 1024)
VERSION_RE = re.compile(r"^\d+(\.\d+){1,3}([a-z]+\d*)?(\.(dev|post)\d+)?(\+[\w.]+)?$")
DRIVER_RE = re.compile(r"^\d{3}\.\d{2,3}(\.\d{1,3})?$")
CC_RE = re.compile(r"^\d{1,2}\.\d$")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b), 1e-12)


def _same(recorded: Any, expected: Any) -> bool:
    if isinstance(expected, float) or isinstance(recorded, float):
        return isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and _close(recorded, expected)
    return recorded == expected


@lru_cache(maxsize=32)
def _routing_stats(pattern_json: str, shape_json: str, seed: int, generate: Callable[..., np.ndarray]) -> dict:
    """Regenerate one routing and its statistics (cached: the corpus validates the same config often)."""

    shape = Shape(**json.loads(shape_json))
    pattern = Pattern(**json.loads(pattern_json))
    bi = generate(pattern, shape, seed)
    return {"edges": effective_edges(bi, shape.block_size), **routing_statistics(bi, shape.block_size)}


def bench_recompute(doc: dict[str, Any], add: Add, generate: Callable[..., np.ndarray] | None) -> dict[str, list]:
    """Run every recompute check on a schema-valid bench result; returns ``{"unverified", "warnings"}``.

    ``generate`` is ``generate_routing(pattern, shape, seed)`` (passed in so this module needs no import
    of the routing tier); without it the routing statistics are listed as unverified.
    """
    unverified: list[dict[str, str]] = []
    warnings: list[dict[str, str]] = []
    try:
        config = config_from_dict(doc["config"], source="$.config")
    except UserError as exc:
        where = str(exc).split(":", 1)[0]
        path = "$." + where if where.startswith("config.") or where == "config" else "$.config"
        add("config_semantics", [(path, str(exc))])
        config = None
    except (TypeError, KeyError, ValueError) as exc:
        add("config_semantics", [("$.config", f"cannot be read as a config: {exc}")])
        config = None
    else:
        add("config_semantics", [])
    if config is not None:
        _guarded("pattern_set", add, _pattern_set, doc, config, add)
        _guarded("routing_recompute", add, _routings, doc, config, add, generate, unverified)
        _guarded("reproduction_flags", add, _reproduction, doc, config, add)
        _guarded("timing_recompute", add, _timing, doc, config, add)
        _guarded("telemetry_recompute", add, _telemetry, doc, add, warnings, unverified)
    _guarded("memory_recompute", add, _memory, doc, add)
    _guarded("gates_consistent", add, _gates, doc, add)
    _guarded("ratio_recompute", add, _ratios, doc, add)
    _guarded("metadata_plausible", add, _metadata, doc, add)
    unverified += _always_unverified(doc)
    return {"unverified": unverified, "warnings": warnings}


def _guarded(name: str, add: Add, check: Callable[..., None], *args: Any) -> None:
    """Run one check; a document the schema let through but the check cannot read fails that check."""
    try:
        check(*args)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError, OverflowError) as exc:
        add(name, [("$", f"cannot be recomputed: {type(exc).__name__}: {exc}")])


def _pattern_set(doc: dict[str, Any], config: Any, add: Add) -> None:
    want = {p.name: p.to_dict() for p in config.patterns}
    got = doc["patterns"]
    problems: Problems = []
    for name in sorted(set(want) - set(got)):
        problems.append((f"$.patterns.{name}", f"pattern {name!r} is in the config but not in the result"))
    for name in sorted(set(got) - set(want)):
        problems.append((f"$.patterns.{name}", f"pattern {name!r} is in the result but not in its config"))
    if list(got) != [n for n in want if n in got]:
        problems.append(("$.patterns", f"order {list(got)} differs from the config's {list(want)}"))
    for name in sorted(set(got) & set(want)):
        if got[name]["params"] != want[name]:
            problems.append((f"$.patterns.{name}.params", f"{got[name]['params']} != the config's {want[name]}"))
    add("pattern_set", problems)


def _routings(doc: dict[str, Any], config: Any, add: Add, generate: Any, unverified: list) -> None:
    if generate is None:
        unverified.append({"path": "$.patterns.*.fanin|query_span|adjacent_gap",
                           "why": "no routing generator given to the validator"})
        return
    problems: Problems = []
    shape_json = json.dumps(config.shape.to_dict(), sort_keys=True)
    for p in config.patterns:
        rec = doc["patterns"].get(p.name)
        if rec is None:
            continue
        stats = _routing_stats(json.dumps(p.to_dict(), sort_keys=True), shape_json, config.seeds.routing, generate)
        path = f"$.patterns.{p.name}"
        if rec["edges"] != stats["edges"]:
            problems.append((f"{path}.edges", f"recorded {rec['edges']}, the regenerated routing has {stats['edges']}"))
        for section in ("fanin", "query_span", "adjacent_gap"):
            for key, value in stats[section].items():
                got = rec[section].get(key)
                if not _same(got, value):
                    problems.append((f"{path}.{section}.{key}", f"recorded {got}, the routing regenerated from "
                                     f"the config, seed {config.seeds.routing} and {p.to_dict()} gives {value}"))
    add("routing_recompute", problems)


def _memory(doc: dict[str, Any], add: Add) -> None:
    s = doc["shape"]
    B, T, HQ, H, K, V, S, BS = (s[k] for k in ("B", "T", "HQ", "H", "K", "V", "S", "block_size"))
    M = T // BS
    e = DTYPE_BYTES.get(s["dtype"], 2)
    grads = (B * T * HQ * K + B * T * H * K + B * T * H * V) * e
    expect = {
        "delta_bytes": B * T * HQ * 4,
        "csr_indices_bytes": B * T * H * S * 4,
        "csr_offsets_bytes": (B * H * M + 1) * 4,
        "csr_transient_cursor_bytes": B * H * M * 4,
        "aux_persistent_bytes": B * T * HQ * 4 + B * T * H * S * 4 + (B * H * M + 1) * 4,
        "preallocated_gradient_bytes": grads,
        "official_outputs_bytes": grads,
    }
    total = doc["metadata"].get("gpu", {}).get("total_memory_bytes")
    problems: Problems = []
    for name, p in doc["patterns"].items():
        m, path = p["memory"], f"$.patterns.{name}.memory"
        for key, value in expect.items():
            if key in m and m[key] != value:
                problems.append((f"{path}.{key}", f"recorded {m.get(key)}, the shape gives {value}"))
        pa, pr = m["official_peak_allocated_bytes"], m["official_peak_reserved_bytes"]
        if pa > pr:
            problems.append((f"{path}.official_peak_allocated_bytes", f"allocated peak {pa} > reserved peak {pr}"))
        if isinstance(total, int) and pr > total:
            problems.append((f"{path}.official_peak_reserved_bytes", f"{pr} > the GPU's memory {total}"))
        if m["official_peak_minus_baseline_bytes"] < m.get("official_outputs_bytes", 0):
            problems.append((f"{path}.official_peak_minus_baseline_bytes",
                             f"{m['official_peak_minus_baseline_bytes']} is below the wrapper's own outputs "
                             f"({m.get('official_outputs_bytes')} bytes)"))
        if "official_baseline_allocated_bytes" not in m or "official_baseline_reserved_bytes" not in m:
            continue  # baselines not recorded (optional in the schema): only the checks above apply
        ba, br = m["official_baseline_allocated_bytes"], m["official_baseline_reserved_bytes"]
        if pa < ba:
            problems.append((f"{path}.official_peak_allocated_bytes", f"peak {pa} < baseline {ba}"))
        if pr < br:
            problems.append((f"{path}.official_peak_reserved_bytes", f"peak {pr} < baseline {br}"))
        if m["official_peak_minus_baseline_bytes"] != pa - ba:
            problems.append((f"{path}.official_peak_minus_baseline_bytes",
                             f"recorded {m['official_peak_minus_baseline_bytes']}, peak - baseline = {pa - ba}"))
        if ba > br:
            problems.append((f"{path}.official_baseline_allocated_bytes", f"allocated {ba} > reserved {br}"))
    add("memory_recompute", problems)


def _reproduction(doc: dict[str, Any], config: Any, add: Add) -> None:
    s = doc["shape"]
    numel = {"dq": s["B"] * s["T"] * s["HQ"] * s["K"], "dk": s["B"] * s["T"] * s["H"] * s["K"],
             "dv": s["B"] * s["T"] * s["H"] * s["V"]}
    tol = config.tolerances.full_shape_dkv_rel_l2
    problems: Problems = []
    for name, p in doc["patterns"].items():
        for g, m in p["reproduces_official"].items():
            path = f"$.patterns.{name}.reproduces_official.{g}"
            if m["numel"] != numel.get(g):
                problems.append((f"{path}.numel", f"recorded {m['numel']}, the shape gives {numel.get(g)}"))
            if m["n_different"] > m["numel"]:
                problems.append((f"{path}.n_different", f"{m['n_different']} > numel {m['numel']}"))
            exact = m["n_different"] == 0
            if m["bit_exact"] != exact:
                problems.append((f"{path}.bit_exact", f"{m['bit_exact']} but n_different = {m['n_different']}"))
            for key in ("max_abs", "max_ulp", "rel_l2", "max_abs_rel"):
                if (m[key] == 0) != exact:
                    problems.append((f"{path}.{key}", f"{key} = {m[key]} contradicts n_different = {m['n_different']}"))
            want = m["max_abs"] / m["ref_max_abs"] if m["ref_max_abs"] else 0.0
            if not _same(m["max_abs_rel"], want):
                problems.append((f"{path}.max_abs_rel", f"recorded {m['max_abs_rel']}, max_abs / ref_max_abs = {want}"))
            if g == "dq" and not m["bit_exact"]:
                problems.append((f"{path}.bit_exact", "dQ must reproduce the official wrapper bit for bit "
                                 "(bench's reproduction gate); the timings are void"))
            if g in ("dk", "dv") and m["rel_l2"] > tol:
                problems.append((f"{path}.rel_l2", f"{m['rel_l2']} > config.tolerances.full_shape_dkv_rel_l2 {tol}: "
                                 "the reproduction gate cannot have passed"))
    add("reproduction_flags", problems)


def _gates(doc: dict[str, Any], add: Add) -> None:
    problems: Problems = []
    meta = doc["metadata"]
    for i, gate in enumerate(doc["gates"]):
        d, path = gate.get("detail", {}), f"$.gates[{i}].detail"
        if gate["name"] == "equal_edges" and d != doc["edges"]:
            problems.append((path, "the equal_edges gate's detail differs from $.edges"))
        if gate["name"] == "fla_sources" and d != doc["fla"]:
            problems.append((path, "the fla_sources gate's detail differs from $.fla"))
        if gate["name"] == "gpu":
            name = meta.get("gpu", {}).get("name")
            if d.get("name") != name:
                problems.append((f"{path}.name", f"{d.get('name')!r} differs from $.metadata.gpu.name {name!r}"))
            if d.get("required") != doc["config"]["gpu"]["required_name"]:
                problems.append((f"{path}.required", "differs from $.config.gpu.required_name"))
            matches = str(d.get("required", "")) in str(d.get("name", ""))
            if d.get("matches_required") != matches:
                problems.append((f"{path}.matches_required", f"{d.get('matches_required')} but the name test gives "
                                 f"{matches}"))
            if not matches and d.get("allow_gpu") is not True:
                problems.append((f"{path}.allow_gpu", "a GPU other than the required one without --allow-gpu"))
        if gate["name"] == "versions":
            for k, v in d.items():
                if meta.get("versions", {}).get(k) != v:
                    problems.append((f"{path}.{k}", f"{v!r} differs from $.metadata.versions.{k}"))
    per = doc["edges"]["per_pattern"]
    if set(per) != set(doc["patterns"]):
        problems.append(("$.edges.per_pattern", "names differ from $.patterns"))
    if doc["edges"]["equal"] != (len(set(per.values())) <= 1 and all(v == doc["edges"]["closed_form"]
                                                                      for v in per.values())):
        problems.append(("$.edges.equal", "does not follow from the counts"))
    add("gates_consistent", problems)


def _ratios(doc: dict[str, Any], add: Add) -> None:
    problems: Problems = []
    for name, p in doc["patterns"].items():
        rec, st = p["stage_sum_vs_full_bwd"], p["stages"]
        stage_sum = sum(st[k]["median_ms"] for k in BACKWARD_STAGES if k in st)
        full = st["full_bwd"]["median_ms"] if "full_bwd" in st else float("nan")
        ratio = stage_sum / full if full else float("nan")
        if not (math.isfinite(ratio) and _close(rec["ratio"], ratio)):
            problems.append((f"$.patterns.{name}.stage_sum_vs_full_bwd.ratio",
                             f"recorded {rec['ratio']}, stage sum / full_bwd median = {ratio}"))
    add("ratio_recompute", problems)


def _timing(doc: dict[str, Any], config: Any, add: Add) -> None:
    t, ct = doc["timing"], config.timing
    problems: Problems = []
    reps, warm = t["repetitions"], t["warmup_rounds"]
    for key, want in (("warmup_rounds", ct.warmup_rounds), ("order_mode", ct.order), ("order_seed", config.seeds.order),
                      ("l2_flush_bytes", ct.l2_flush_bytes), ("stages", list(STAGES)),
                      ("launch_guard_cycles", LAUNCH_GUARD_CYCLES)):
        if t[key] != want:
            problems.append((f"$.timing.{key}", f"recorded {t[key]!r}, the config/code says {want!r}"))
    names = list(doc["patterns"])
    orders = t["round_orders"]
    if len(orders) != warm + reps:
        problems.append(("$.timing.round_orders", f"{len(orders)} rounds != warmup_rounds {warm} + repetitions {reps}"))
    for r, order in enumerate(orders):
        if sorted(order) != sorted(names):
            problems.append((f"$.timing.round_orders[{r}]", f"{order} is not one of each pattern {names}"))
            break
    if t["order_mode"] in ("fixed-rounds", "shuffled-rounds"):
        want_orders = round_orders(names, warm + reps, t["order_mode"], t["order_seed"])
        if orders != want_orders:
            first = _first_difference(orders, want_orders)
            problems.append((f"$.timing.round_orders[{first}]", f"differs from the {t['order_mode']} order of seed "
                             f"{t['order_seed']} ({want_orders[first] if first < len(want_orders) else 'none'})"))
    for name, p in doc["patterns"].items():
        if list(p["stages"]) != [s for s in STAGES if s in p["stages"]]:
            problems.append((f"$.patterns.{name}.stages", "stages are not in the recorded stage order"))
        for stage, s in p["stages"].items():
            path = f"$.patterns.{name}.stages.{stage}"
            if len(s["raw_ms"]) != reps:
                problems.append((f"{path}.raw_ms", f"{len(s['raw_ms'])} observations != timing.repetitions {reps}"))
            if len(s["warmup_ms"]) != warm:
                problems.append((f"{path}.warmup_ms", f"{len(s['warmup_ms'])} warm-up values != warmup_rounds {warm}"))
    add("timing_recompute", problems)


def _first_difference(a: list, b: list) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _telemetry(doc: dict[str, Any], add: Add, warnings: list, unverified: list) -> None:
    tel, t = doc["telemetry"], doc["timing"]
    samples = tel["samples"]
    problems: Problems = []
    expected = [(r, p) for r, order in enumerate(t["round_orders"]) for p in order]
    got = [(s.get("round"), s.get("pattern")) for s in samples if not s.get("rewarm")]
    if got != expected:
        first = _first_difference(got, expected)
        problems.append((f"$.telemetry.samples[{first}]", f"{len(got)} samples do not follow the round orders "
                         f"({len(expected)} (round, pattern) pairs expected)"))
    for i, s in enumerate(samples):
        if s.get("warmup") is not (bool(s.get("rewarm")) or s.get("round", -1) < t["warmup_rounds"]):
            problems.append((f"$.telemetry.samples[{i}].warmup", "does not match round < warmup_rounds"))
            break
    with_reasons = [s for s in samples if "throttle_reasons" in s]
    if tel["available"] and len(with_reasons) != len(samples):
        problems.append(("$.telemetry.samples", f"telemetry available but {len(samples) - len(with_reasons)} "
                         "samples lack a reading"))
    count = sum(1 for s in samples if int(s.get("throttle_reasons", 0)) & THROTTLE_MASK)
    if tel["throttled_samples"] != count:
        problems.append(("$.telemetry.throttled_samples", f"recorded {tel['throttled_samples']}, the samples' "
                         f"throttle reasons give {count}"))
    if count:
        warnings.append({"check": "telemetry_recompute", "path": "$.telemetry.throttled_samples",
                         "message": f"{count} of {len(samples)} samples were taken while the GPU throttled "
                                    "(power/thermal); the latencies of those rounds may be slow"})
    if not tel["available"]:
        unverified.append({"path": "$.telemetry", "why": "no NVML on the host: clocks and throttling unknown"})
    add("telemetry_recompute", problems)


def _metadata(doc: dict[str, Any], add: Add) -> None:
    meta = doc["metadata"]
    gpu, versions = meta.get("gpu", {}), meta.get("versions", {})
    problems: Problems = []
    name = str(gpu.get("name", ""))
    family = next((f for f in sorted(GPU_FAMILIES, key=len, reverse=True) if re.search(rf"\b{f}\b", name)), None)
    sm = gpu.get("sm_count")
    if family is None:
        problems.append(("$.metadata.gpu.name", f"{name!r} is not a known GPU family ({', '.join(GPU_FAMILIES)})"))
    if not isinstance(sm, int) or not SM_RANGE[0] <= sm <= SM_RANGE[1]:
        problems.append(("$.metadata.gpu.sm_count", f"{sm!r} is not an SM count in {SM_RANGE}"))
    elif family is not None and sm not in GPU_FAMILIES[family][0]:
        problems.append(("$.metadata.gpu.sm_count", f"{sm} SMs is not a {family} ({sorted(GPU_FAMILIES[family][0])})"))
    cc = gpu.get("compute_capability")
    if cc is not None and (not CC_RE.match(str(cc)) or (family is not None and cc != GPU_FAMILIES[family][1])):
        problems.append(("$.metadata.gpu.compute_capability", f"{cc!r} is not the compute capability of a {family}"))
    if gpu.get("nvml_name") is not None and gpu["nvml_name"] != name:
        problems.append(("$.metadata.gpu.nvml_name", f"{gpu['nvml_name']!r} differs from the CUDA name {name!r}"))
    if not DRIVER_RE.match(str(gpu.get("driver", ""))):
        problems.append(("$.metadata.gpu.driver", f"{gpu.get('driver')!r} does not parse as a driver version"))
    for key in ("python", "numpy", "torch", "triton", "cuda", "fla_core"):
        if key in versions and not VERSION_RE.match(str(versions[key])):
            problems.append((f"$.metadata.versions.{key}", f"{versions[key]!r} does not parse as a version"))
    add("metadata_plausible", problems)


def _always_unverified(doc: dict[str, Any]) -> list[dict[str, str]]:
    """What no CPU can recompute: measured on the GPU host, only bounded or cross-checked above."""
    out = [
        {"path": "$.patterns.*.stages.*.raw_ms", "why": "measured CUDA-event latencies (statistics are recomputed "
                                                       "from them; the observations themselves cannot be)"},
        {"path": "$.patterns.*.stages.*.warmup_ms", "why": "measured warm-up latencies; count checked, feed no "
                                                          "statistic"},
        {"path": "$.patterns.*.memory.official_*_allocated|reserved_bytes",
         "why": "allocator readings on the GPU; only ordering (peak >= baseline, allocated <= reserved) is checked"},
        {"path": "$.patterns.*.reproduces_official.*.{rel_l2,max_abs,ref_max_abs,max_ulp,n_different}",
         "why": "needs the GPU tensors; only mutual consistency and the tolerances are checked"},
        {"path": "$.autotune", "why": "autotune choices and tune_seconds come from the GPU run"},
        {"path": "$.telemetry.samples[*] clocks/temperature/power", "why": "NVML readings (throttle count is "
                                                                           "recomputed from them)"},
        {"path": "$.wall_seconds", "why": "host wall clock"},
        {"path": "$.fla.files_verified", "why": "counted on the GPU host's FLA install"},
        {"path": "$.metadata (created_utc, git, hostname, platform, env, packages, gpu clocks/power)",
         "why": "facts about the host; versions, driver, GPU family and SM count are checked for plausibility only"},
    ]
    if doc["timing"].get("resumed"):
        out.append({"path": "$.timing.resumed", "why": "a resumed run re-ran its warm-up; which rounds ran in which "
                                                       "process is not recorded"})
    return out
