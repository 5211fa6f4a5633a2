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
- ``timing_recompute``: repetitions == every stage's observations; warm-up counts (plus the warm-up rounds a
  resumed run re-ran, flagged ``rewarm`` in its samples); round orders
  regenerated from order mode + seed; flush bytes, flush policy (absent = "write"), order, stage list
  as the config says.
- ``telemetry_recompute``: one sample per (round, pattern) in round order; ``throttled_samples``
  recounted. Policy: throttled samples > 0 is a WARNING (listed, not a failure; see docs/SCHEMAS.md).
- ``metadata_plausible``: a known GPU family with its SM count and compute capability, versions and
  the driver parse, NVML and CUDA names agree.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import UserError
from ..routing.config import Pattern, Shape, config_from_dict
from ..routing.edges import effective_edges
from ..routing.fanin import routing_statistics
from ..routing.packing import generate_packed_routing, packed_closed_form_edges, packing_record
from ..routing.stages import BACKWARD_STAGES, LEGACY_STAGE_NAMES
from ..routing.stages import STAGE_NAMES as STAGES
from .latency import LAUNCH_GUARD_CYCLES, round_orders
from .recompute_records import (
    Add,
    Problems,
    _close,
    _first_difference,
    _gates,
    _guarded,
    _memory,
    _metadata,
    _reproduction,
    _same,
    _telemetry,
)


@lru_cache(maxsize=32)
def _routing_stats(pattern_json: str, shape_json: str, seed: int, generate: Callable[..., np.ndarray],
                   cu: tuple[int, ...] | None = None) -> dict:
    """Regenerate one routing and its statistics (cached: the corpus validates the same config often);
    packed (``cu`` = the config's ``cu_seqlens``): per document, statistics over the varlen CSR rows."""

    shape = Shape(**json.loads(shape_json))
    pattern = Pattern(**json.loads(pattern_json))
    if cu is None:
        bi = generate(pattern, shape, seed)
        return {"edges": effective_edges(bi, shape.block_size), **routing_statistics(bi, shape.block_size)}
    cu_arr = np.asarray(cu, dtype=np.int32)
    bi = generate_packed_routing(pattern, shape, seed, cu_arr)
    return {"edges": effective_edges(bi, shape.block_size, cu_arr),
            **routing_statistics(bi, shape.block_size, cu_arr)}


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
        _guarded("packing_recompute", add, _packing, doc, config, add)
    _guarded("memory_recompute", add, _memory, doc, add)
    _guarded("gates_consistent", add, _gates, doc, add)
    _guarded("ratio_recompute", add, _ratios, doc, add)
    _guarded("metadata_plausible", add, _metadata, doc, add)
    unverified += _always_unverified(doc)
    return {"unverified": unverified, "warnings": warnings}


def sweep_point_recompute(doc: dict[str, Any], add: Add, generate: Callable[..., np.ndarray] | None) -> dict[str, list]:
    """The checks of a sweep point (a bench-shaped document with a stage subset and no reproduction,
    memory or telemetry sections): ``config_semantics``, ``pattern_set``, ``routing_recompute``."""
    unverified: list[dict[str, str]] = []
    try:
        config = config_from_dict(doc["config"], source="$.config")
    except UserError as exc:
        add("config_semantics", [("$.config", str(exc))])
        return {"unverified": unverified, "warnings": []}
    add("config_semantics", [])
    _guarded("pattern_set", add, _pattern_set, doc, config, add)
    _guarded("routing_recompute", add, _routings, doc, config, add, generate, unverified)
    _guarded("packing_recompute", add, _packing, doc, config, add)
    return {"unverified": unverified, "warnings": []}


def _packing(doc: dict[str, Any], config: Any, add: Add) -> None:
    """The ``packing`` record recomputed from the config's packing section: ``cu_seqlens``, its sha256, the
    document count and lengths, the packed closed-form edges and the program order, field by field."""
    got = doc.get("packing")
    if config.cu_seqlens is None:
        add("packing_recompute", [] if got is None else [("$.packing", "recorded, but the config has no packing")])
        return
    if got is None:
        add("packing_recompute", [("$.packing", "missing, but the config packs documents")])
        return
    S, BS = config.shape.S, config.shape.block_size
    want = packing_record(config.cu_seqlens, packed_closed_form_edges(config.shape.H, S, BS, config.cu_seqlens))
    add("packing_recompute", [(f"$.packing.{k}", f"recorded {got.get(k)!r}, the config's packing gives {v!r}")
                              for k, v in want.items() if got.get(k) != v])


def _pattern_set(doc: dict[str, Any], config: Any, add: Add) -> None:
    want = {p.name: json.loads(json.dumps(p.to_dict())) for p in config.patterns}  # tuples (heads) as lists
    files = doc.get("routing_files") or {}  # timed beside the config's patterns (--routing-file)
    got = {n: p for n, p in doc["patterns"].items() if n not in files}
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
        try:
            stats = _routing_stats(json.dumps(p.to_dict(), sort_keys=True), shape_json, config.seeds.routing, generate,
                                   None if config.cu_seqlens is None else tuple(int(x) for x in config.cu_seqlens))
        except (UserError, ImportError) as exc:  # fla-topk is FLA's top-k: it regenerates only on a GPU
            unverified.append({"path": f"$.patterns.{p.name}.edges|fanin|query_span|adjacent_gap", "why": str(exc)})
            continue
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
        if ("itemised_ratio" in rec) != ("wrapper_extra" in st):
            problems.append((f"$.patterns.{name}.stage_sum_vs_full_bwd", "itemised_ratio and the wrapper_extra "
                             "stage must be recorded together"))
        elif "itemised_ratio" in rec:
            extra = st["wrapper_extra"]["median_ms"]
            itemised = (stage_sum + extra) / full if full else float("nan")
            if not (_close(rec["wrapper_extra_median_ms"], extra) and math.isfinite(itemised)
                    and _close(rec["itemised_ratio"], itemised)):
                problems.append((f"$.patterns.{name}.stage_sum_vs_full_bwd.itemised_ratio",
                                 f"recorded {rec['itemised_ratio']}, (stage sum + wrapper_extra) / full_bwd "
                                 f"median = {itemised}"))
    add("ratio_recompute", problems)


def _timing(doc: dict[str, Any], config: Any, add: Add) -> None:
    t, ct = doc["timing"], config.timing
    problems: Problems = []
    reps, warm = t["repetitions"], t["warmup_rounds"]
    stages = list(STAGES) if "wrapper_extra" in t["stages"] else list(LEGACY_STAGE_NAMES)  # older: no wrapper_extra
    for key, want in (("warmup_rounds", ct.warmup_rounds), ("order_mode", ct.order), ("order_seed", config.seeds.order),
                      ("l2_flush_bytes", ct.l2_flush_bytes), ("stages", stages),
                      ("launch_guard_cycles", LAUNCH_GUARD_CYCLES), ("flush_policy", ct.flush)):
        got = t.get(key, "write") if key == "flush_policy" else t[key]  # absent = recorded before the field
        if got != want:
            problems.append((f"$.timing.{key}", f"recorded {got!r}, the config/code says {want!r}"))
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
        # engine branch: a resumed run keeps the warm-up rounds it re-ran (its samples flag them rewarm)
        rewarm = sum(1 for x in doc["telemetry"]["samples"] if x["pattern"] == name and x.get("rewarm"))
        for stage, s in p["stages"].items():
            path = f"$.patterns.{name}.stages.{stage}"
            if len(s["raw_ms"]) != reps:
                problems.append((f"{path}.raw_ms", f"{len(s['raw_ms'])} observations != timing.repetitions {reps}"))
            if len(s["warmup_ms"]) != warm + rewarm:
                problems.append((f"{path}.warmup_ms", f"{len(s['warmup_ms'])} warm-up values != warmup_rounds {warm}"
                                 + (f" + {rewarm} re-run on resume" if rewarm else "")))
    add("timing_recompute", problems)


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
