"""The ``bench_result`` kind (schema ``result``, record :class:`~nsa_exp.core.records.BenchResult`): a bench run,
every observation of every pattern x stage (results/raw). Its builder and its checks, in one module.

- :func:`build`: the record from the engine's measurement (``gpu/bench.BenchArm.record`` calls it; tests rebuild
  every committed result with it from :meth:`nsa_exp.core.measurement.Measurement.from_document`, byte for byte).
- :func:`checks`: its row (:data:`KIND`) of :data:`nsa_exp.checking.kinds.KIND_CHECKS`, run once the schema has
  passed: the shared checks (statistics, timing, routing, autotune, run record: :mod:`.stats_checks`,
  :mod:`.run_checks`, :mod:`.routing_checks`, :mod:`.autotune_checks`, :mod:`.record_checks`), then what stays
  unverified (:func:`unverified`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..analysis.cupti import cupti_problems, shift_problems
from ..analysis.run_cost import timed_ms
from ..core.config import Config
from ..core.kinds import schema_version
from ..core.records import BenchResult, PatternRun, StageSum, Timing, stage_records
from . import record_checks
from .autotune_checks import autotune_arm_problems, autotune_configs
from .checks import Add, Context, Problems, guarded
from .record_checks import argv_option, gpu_run, run_record
from .routing_checks import (
    config_rule_checks,
    edge_problems,
    routing_file_recompute,
    routing_files_consistent,
)
from .run_checks import (
    environment_problems,
    memory_recompute,
    reproduction_flags,
    shape_problems,
    telemetry_recompute,
)
from .stats_checks import (
    ratio_recompute,
    stage_sum_problems,
    stats_checks,
    stop_rule_check,
    timing_recompute,
)

KIND = "bench_result"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """Every check of a schema-valid bench result, in the order the report lists them."""
    add("shape_matches_config", shape_problems(doc))
    add("edges_equal", edge_problems(doc))
    stats_checks(doc, add)
    add("environment_recorded", environment_problems(doc))
    add("stage_sum_plausible", stage_sum_problems(doc))
    add("autotune_arm", autotune_arm_problems(doc))
    autotune_configs(doc, add)
    if "cupti" in doc:  # issue 14: CUDA-event vs kernel-time medians (nsa_exp.analysis.cupti states the rule)
        guarded("cupti_agreement", add, cupti_check, doc, add)
    config_rule_checks(doc, add, ctx, timing=timing_recompute)
    guarded("reproduction_flags", add, reproduction_flags, doc, add)
    guarded("telemetry_recompute", add, telemetry_recompute, doc, add, ctx.warnings, ctx.unverified)
    guarded("memory_recompute", add, memory_recompute, doc, add)
    guarded("ratio_recompute", add, ratio_recompute, doc, add)
    guarded("routing_files_consistent", add, routing_files_consistent, doc, add)
    samples = [(f"$.telemetry.samples[{i}]", s) for i, s in enumerate(doc["telemetry"]["samples"])]
    run_record(doc, add, ctx, samples)
    guarded("config_provenance", add, record_checks.config_provenance, doc, add, ctx, True)
    record_checks.wall_plausible(doc["wall_seconds"], timed_ms(doc), "$.wall_seconds",
                                 "its own raw and warm-up latencies", add, doc)
    if "phases" in doc:
        add("phases_plausible", phases_problems(doc))
    ctx.unverified += unverified(doc)
    ctx.unverified += routing_file_recompute(doc, ctx.routing_files, add)
    guarded("stop_rule", add, stop_rule_check, doc, add, ctx)


#: The bounds of a bench cell's profiled-call event median over its timed median (:func:`shift_problems`): over
#: every committed and logged H200 / H100 bench with a paired pass 0.947 (local CSR) to 1.306 (uniform CSR, a
#: sub-millisecond stage of several launches, where the profiler's overhead per call shows most).
PROFILER_SHIFT_BOUNDS = (0.9, 1.5)


def cupti_check(doc: dict[str, Any], add: Add) -> None:
    """``cupti_agreement``: the agreement rule on the pass (:func:`nsa_exp.analysis.cupti.cupti_problems`), its
    rounds against the recorded argv (:func:`cupti_size_problems`) and each cell's profiled calls against its timed
    median (:data:`PROFILER_SHIFT_BOUNDS`)."""
    add("cupti_agreement", cupti_problems(doc) + cupti_size_problems(doc)
        + shift_problems(doc, PROFILER_SHIFT_BOUNDS, "$.patterns.{cell}.stages.{stage}.median_ms"))


def cupti_size_problems(doc: dict[str, Any]) -> Problems:
    """How many rounds bench's pass ran, against the recorded argv: ``--cupti-rounds N`` gives N rounds; without it
    a pass that pairs its events (issue 28, after issue 27's sizing) was sized by need and records ``sizing``
    (a forger's trial of 2026-12-04: a paired block stripped of its sizing, cut to one call per stage, passed)."""
    block, argv = doc["cupti"], [str(a) for a in doc.get("metadata", {}).get("argv", [])]
    given, paired = argv_option(argv, "--cupti-rounds"), "event_ms" in block or "median_event_ms" in block
    if given is not None:
        return ([] if given.isdigit() and int(given) == block.get("rounds") and "sizing" not in block else
            [("$.cupti.rounds", f"{block.get('rounds')} rounds (sizing {'recorded' if 'sizing' in block else 'none'}), "
                                f"but the recorded argv gives --cupti-rounds {given}")])
    if paired and "sizing" not in block:
        return [("$.cupti.sizing", "missing: without --cupti-rounds in the recorded argv a pass with paired events "
                                   "is sized by need and records its sizing")]
    return []


#: The most of a run's wall time no phase may hold: the engine's glue between its hooks (the committed runs: at most
#: 0.3 ms; core/measurement.py PhaseClock, gpu/engine.py measure).
OTHER_SECONDS = 1.0


def phases_problems(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """``phases_plausible``: what physics allows of the host seconds per phase (each measured on the GPU host,
    so only bounded): they sum to at most ``wall_seconds`` (the phases are disjoint spans inside the run's wall
    time, read before it) and, on a GPU (:func:`~nsa_exp.checking.record_checks.gpu_run`), to at least
    ``wall_seconds`` less :data:`OTHER_SECONDS`; ``rounds`` is at least the GPU time of the observations the
    rounds timed (each stage's event pair lies inside the loop, which synchronises after every cell; not checked
    for a resumed run, whose journal holds another process's rounds); ``tune`` is at least
    ``autotune.tune_seconds`` (timed inside it); a run with a ``cupti`` block spent time in its pass."""
    phases, problems = doc["phases"], []
    total, wall = math.fsum(phases.values()), doc["wall_seconds"]
    if total > wall * (1 + 1e-9) + 1e-6:
        problems.append(("$.phases", f"the phases sum to {total:.6g} s, more than wall_seconds {wall:.6g} s"))
    elif wall - total > OTHER_SECONDS and gpu_run(doc):  # a CPU test's fake clock ticks at every read
        problems.append(("$.wall_seconds", f"{wall:.6g} s, but its phases account for {total:.6g} s: the engine "
                                           f"times every step of a run into a phase (at most {OTHER_SECONDS:g} s "
                                           "outside them)"))
    timed = timed_ms(doc) / 1000
    if not doc["timing"].get("resumed") and phases["rounds"] < timed * (1 - 1e-9) - 1e-6:
        problems.append(("$.phases.rounds", f"{phases['rounds']:.6g} s, but the rounds' own latencies sum to "
                                            f"{timed:.6g} s"))
    tune = (doc.get("autotune") or {}).get("tune_seconds")
    if isinstance(tune, (int, float)) and phases["tune"] < tune * (1 - 1e-9) - 1e-6:
        problems.append(("$.phases.tune", f"{phases['tune']:.6g} s, less than autotune.tune_seconds {tune:.6g} s "
                                          "measured inside it"))
    if "cupti" in doc and phases["cupti"] <= 0:
        problems.append(("$.phases.cupti", "0 s, but the result has a cupti block"))
    return problems


def unverified(doc: dict[str, Any]) -> list[dict[str, str]]:
    """What no CPU can recompute: measured on the GPU host, only bounded or cross-checked above."""
    out = [
        {"path": "$.patterns.*.stages.*.raw_ms", "why": "measured CUDA-event latencies (statistics are recomputed "
                                                       "from them; the observations themselves cannot be)"},
        {"path": "$.patterns.*.stages.*.warmup_ms", "why": "measured warm-up latencies; count checked, feed no "
                                                          "statistic"},
        {"path": "$.patterns.*.memory.official_*_allocated|reserved_bytes",
         "why": "allocator readings on the GPU; only ordering (peak >= baseline, allocated <= reserved) is checked"},
        {"path": "$.patterns.*.reproduces_official.*.{rel_l2,max_abs,ref_max_abs,max_ulp,n_different}",
         "why": "needs the GPU tensors; only mutual consistency and the pinned tolerances are checked"},
        {"path": "$.autotune", "why": "autotune choices and tune_seconds come from the GPU run (each config is "
                                      "checked to be one of FLA's)"},
        {"path": "$.telemetry.samples[*] clocks/temperature/power",
         "why": "NVML readings (bounded: clocks by the GPU's maximum, temperature by 5-120 °C, power by 1.25x the "
                f"recorded limit, or {record_checks.POWER_CEILING_W:g} W where none is recorded; throttle count "
                "recomputed)"},
        *([{"path": "$.cupti.kernel_ms, $.cupti.event_ms",
            "why": "the profiled calls' kernel and CUDA-event times come from the GPU run: their medians, counts, "
                   "cells, sizing, method and rule are recomputed and the agreement rule is held on them; the "
                   "readings themselves (and how far the profiler slowed each call) are not"}] if "cupti" in doc
          else []),
        {"path": "$.wall_seconds", "why": "host wall clock (bounded below by the latencies it timed)"},
        *([{"path": "$.phases", "why": "host seconds per phase (bounded: sum <= wall, rounds >= their latencies, "
                                       "tune >= autotune.tune_seconds)"}] if "phases" in doc else []),
        {"path": "$.fla.files_verified", "why": "counted on the GPU host's FLA install"},
        {"path": "$.metadata (hostname, platform, packages, driver, power)",
         "why": "facts about the host; the GPU is checked against the GPU table, versions and dates for plausibility"},
    ]
    if doc["timing"].get("resumed"):
        out.append({"path": "$.timing.resumed", "why": "a resumed run re-ran its warm-up; which rounds ran in which "
                                                       "process is not recorded"})
    return out


def build(*, name: str, config: Config, gates: list[dict[str, Any]], gate_detail: Any,
                 records: Sequence[Mapping[str, Any]], timing: Timing, per_pattern: Mapping[str, Mapping[str, Any]],
                 autotune: Mapping[str, Any], telemetry: Mapping[str, Any], metadata: Mapping[str, Any],
                 wall_seconds: float, throttled: Any,
                 routing_files: Mapping[str, Mapping[str, Any]] | None = None,
                 packing: Mapping[str, Any] | None = None, cupti: Mapping[str, Any] | None = None,
                 phases: Mapping[str, float] | None = None) -> BenchResult:
    """The :class:`BenchResult` (its JSON: schema ``result``) from the measured records and per-pattern extras.

    ``records``, ``timing``: the engine's measurement (``core.measurement.Measurement``: its records and its
    :meth:`~nsa_exp.core.measurement.Measurement.timing` block, stop record included).
    ``per_pattern[p]`` holds what was measured besides timing: ``edges``, the routing statistics
    (``fanin`` ...), ``reproduces_official`` and ``memory``. ``gate_detail(gates, name)`` reads a gate.
    ``routing_files``: the reports of the routing files timed after the config's patterns (``file:<stem>``).
    ``packing``, ``cupti``: the packed documents' and the CUPTI pass's blocks, each None when the run has none.
    ``phases``: host seconds per phase (``core.measurement.PhaseClock.seconds``; None: a result recorded before
    phases were, rebuilt).
    """
    files = dict(routing_files or {})
    names = [p.name for p in config.patterns] + list(files)
    stats = stage_records(records, names, timing.stages)
    patterns = {n: PatternRun(params={"name": n} if n in files else config.pattern(n).to_dict(), **per_pattern[n],
                              stages=stats[n], stage_sum_vs_full_bwd=StageSum.of(
                                  {k: v.median_ms for k, v in stats[n].items()})) for n in names}
    samples = [{"round": r["round"], "pattern": r["pattern"], "warmup": r["warmup"],
                **({"rewarm": True} if r.get("rewarm") else {}), **(r.get("telemetry") or {})} for r in records]
    return BenchResult(
        schema_version=schema_version(BenchResult.KIND), kind=BenchResult.KIND, name=name, config=config.raw,
        config_path=config.source, shape=config.shape.to_dict(), gates=gates, fla=gate_detail(gates, "fla_sources"),
        edges=gate_detail(gates, "equal_edges"), autotune=dict(autotune), timing=timing, patterns=patterns,
        telemetry={**telemetry, "samples": samples, "throttled_samples": sum(1 for s in samples if throttled(s))},
        wall_seconds=wall_seconds, metadata=dict(metadata), routing_files=files or None,
        packing=None if packing is None else dict(packing), cupti=None if cupti is None else dict(cupti),
        phases=None if phases is None else dict(phases))
