"""The CUPTI cross-check (issue 14), pure: profiler events -> per-stage kernel time, and its agreement rule.

After the timed rounds, ``bench`` runs a short pass under ``torch.profiler`` (:mod:`nsa_exp.gpu.cupti`):
each stage call sits in a ``record_function`` range named :func:`range_label`. With CUDA activities on,
torch reports each range twice: the CPU-side ``user_annotation`` (its ``device_time_total`` sums only the
kernels CUPTI correlates to a CPU op under it: ATen's kernels, e.g. ``dq.sum(0)``, but not Triton's, which
Triton launches through the driver API without a CPU op) and the GPU-side ``gpu_user_annotation``
(``device_type`` CUDA; ``device_time_total`` = its span on the GPU, from the first kernel's start to the
last kernel's end). The kernel time is the GPU-side span only (summing both counted ATen's kernels twice:
the first H200 run, never committed, showed ``wrapper_extra`` at 2x its event time). So it excludes the
launch latency before the first kernel and the GPU spin, which the CUDA-event pair around the call
includes, and includes the gaps between a multi-launch stage's kernels.

**Device busy time, sized by need** (issue 27; :data:`METHOD_BUSY`): each call's kernel time is the **time the
device is busy with the activities (kernels, memsets, memcpys) inside its range's GPU-side span**, the union of
their intervals (:func:`kernel_busy_ms`; for a one-launch stage the same as the span), so the gaps between a
multi-launch stage's launches, which grow under the profiler, do not count. The pass is **sized by need**
(:func:`sizing`): enough rounds that the shortest multi-launch stage's profiled calls add up to
:data:`SIZING` ``target_ms`` of event time (at least ``min_rounds``, at most ``max_rounds``), computed from the
timed medians and recorded as ``cupti.sizing``, which ``validate`` recomputes from the document's own medians. A
result without ``sizing`` (recorded before) is held to its recorded ``rounds``.

**Calls per stage** (issue 30; bench since then, ``cupti.sizing.calls``): the rounds are what the shortest
multi-launch stage needs, but a stage needs only its own: each multi-launch stage ``ceil(target_ms / its median)``
calls within the bounds, every other stage ``min_rounds``, and a stage whose intermediates a later stage of the
same round consumes (:func:`nsa_exp.core.stages.prerequisites`) at least that stage's count. Round ``r`` of the
pass calls, per pattern, the stages with ``calls > r`` (in their order), so on the H200 rounds 5-20 call only
the 0.24-0.48 ms CSR transpose instead of every stage (15.9 s of a warm formal bench's 126 s before). ``validate``
recomputes the map from the timed medians and holds each stage's profiled calls to its count. A block whose
sizing has no ``calls`` (recorded before, or the peer arm's) calls every stage in every round.

**Paired events** (issue 28, :data:`METHOD_PAIRED`): the profiled calls keep the timed loop's CUDA-event pair
around each range, so each profiled call has both its event time and its kernel time (``event_ms`` beside
``kernel_ms``). The cross-check then compares the **same calls**: a stage that the profiler itself slows (the
events of its profiled calls longer than those of the timed rounds) no longer reads as a disagreement between
events and kernels, and that slowdown is kept as data (:func:`profiler_shift`), never judged. A block without
``event_ms`` (recorded before) is held against the timed medians, as before.

Agreement rule (``validate``'s ``cupti_agreement``), per pattern x stage, with ``e`` the stage's
CUDA-event median (over the profiled calls when the block pairs them, else over the timed rounds) and ``k`` its
kernel-time median over the profiled calls:

- single-launch stages: ``|e - k| <= max(5% of e, 20 µs)``;
- stages of several launches with host work between them (the Stage table's ``cupti="loose"`` rows,
  :data:`nsa_exp.core.stages.LOOSE_CUPTI_STAGES`: the CSR transpose, the wrapper's allocations + reductions,
  the official wrapper): ``-5% of e - 20 µs <= e - k <= 15% of e
  + 50 µs`` — the events also time the gaps between launches and the allocator's host work, so ``e``
  may exceed ``k`` by more; a kernel time far above the event time is still an error.

>>> range_label("sink-heavy", "dkv_core", 3)
'nsa_cupti/sink-heavy/dkv_core/3'
>>> class E:  # a FunctionEvent's three fields this module reads
...     def __init__(self, name, us, dev="CUDA"): self.name, self.device_time_total, self.device_type = name, us, dev
>>> kernel_ms([E("nsa_cupti/local/csr/0", 300.0), E("aten::fill_", 9.0), E("nsa_cupti/local/csr/1", 310.0),
...            E("nsa_cupti/local/csr/1", 12.0, dev="CPU")])
{'local': {'csr': [0.3, 0.31]}}
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..core.stages import LOOSE_CUPTI_STAGES, STAGE_NAMES, prerequisites

PREFIX = "nsa_cupti"
ROUNDS = 5
TIGHT = {"rel": 0.05, "abs_ms": 0.020}
LOOSE = {"rel_below": 0.05, "abs_below_ms": 0.020, "rel_above": 0.15, "abs_above_ms": 0.050}
#: How many rounds a pass sized by need runs (:func:`sizing`): the shortest multi-launch stage's calls add
#: up to ``target_ms`` of its event median (0.24 ms uniform CSR on the H200 -> 21 rounds), within the bounds.
SIZING = {"target_ms": 5.0, "min_rounds": ROUNDS, "max_rounds": 40}
#: Profiler timestamps are whole-ns values rendered in µs: allow rounding at a range's edges.
SLACK_US = 0.5
METHOD_BUSY = ("torch.profiler (CPU + CUDA activities): one record_function range per stage call, L2 flushed and a "
              "GPU spin queued before each call outside the range; kernel time = the union of the intervals of the "
              "device activities (kernels, memsets, memcpys) inside the range's GPU-side span (overlaps counted "
              "once, gaps between launches excluded); rounds sized by need (cupti.sizing)")
METHOD_PAIRED = METHOD_BUSY + ("; each profiled call keeps its CUDA-event pair (event_ms), and the agreement "
                              "rule compares the same calls' event and kernel medians")
METHOD_MARKED = METHOD_PAIRED + ("; an empty GPU spin launched from the calling thread opens and closes each range, "
                                  "so its GPU-side span holds the kernels other threads launch inside it (autograd "
                                  "runs a backward on its device thread), the spins inside the event pair too")
METHOD = ("torch.profiler (CPU + CUDA activities): one record_function range per stage call, L2 flushed and a "
          "GPU spin queued before each call outside the range; kernel time = the range's GPU-side span "
          "(gpu_user_annotation device_time_total; the CPU-side range is ignored)")


def range_label(pattern: str, stage: str, call: int) -> str:
    """The ``record_function`` name of one profiled stage call."""
    return f"{PREFIX}/{pattern}/{stage}/{call}"


def kernel_ms(events: Iterable[Any]) -> dict[str, dict[str, list[float]]]:
    """``{pattern: {stage: [ms per call, in call order]}}`` from profiler events carrying ``name`` and
    ``device_time_total`` (µs, a ``torch.autograd.profiler_util.FunctionEvent``) and ``device_type``; only
    the GPU-side annotation of each range counts (CPU-side ones and other events are ignored)."""
    calls: dict[tuple[str, str], dict[int, float]] = {}
    for e in events:
        parts = e.name.split("/")
        if len(parts) != 4 or parts[0] != PREFIX or str(getattr(e, "device_type", "")).rsplit(".", 1)[-1] == "CPU":
            continue
        _, pattern, stage, call = parts
        by_call = calls.setdefault((pattern, stage), {})
        by_call[int(call)] = by_call.get(int(call), 0.0) + float(e.device_time_total) / 1000.0
    out: dict[str, dict[str, list[float]]] = {}
    for (pattern, stage), by_call in calls.items():
        out.setdefault(pattern, {})[stage] = [round(by_call[c], 6) for c in sorted(by_call)]
    return out


def _is_device(e: Any) -> bool:
    return str(getattr(e, "device_type", "")).rsplit(".", 1)[-1] != "CPU"


def kernel_busy_ms(events: Iterable[Any]) -> dict[str, dict[str, list[float]]]:
    """``{pattern: {stage: [ms per call, in call order]}}``: per profiled call, the time the device was busy with
    the device events (``device_type`` not CPU, ``time_range.start/.end`` in µs) lying inside its range's GPU-side
    span (within :data:`SLACK_US`): the length of the union of their intervals, so activities that overlap (or a
    kernel the profiler lists twice) count once and the gaps between launches not at all; the ranges themselves
    and CPU events are not activities. (Uniform CSR's 0.28 ms of kernels against its 0.24 ms timed median on the
    H200 was the profiler slowing that stage, not this aggregation: the same calls' events agree, docs/METHOD.md.)

    >>> class R:
    ...     def __init__(self, a, b): self.start, self.end = a, b
    >>> class E:
    ...     def __init__(self, name, a, b, dev="CUDA"):
    ...         self.name, self.time_range, self.device_type = name, R(a, b), dev
    >>> kernel_busy_ms([E("spin", 0.0, 99.0), E("nsa_cupti/local/csr/0", 100.0, 400.0), E("fill", 100.0, 102.0),
    ...                E("count", 150.0, 250.0), E("scatter", 300.0, 400.0), E("nsa_cupti/local/csr/0", 90.0, 410.0,
    ...                dev="CPU"), E("spin", 401.0, 900.0)])
    {'local': {'csr': [0.202]}}
    >>> kernel_busy_ms([E("nsa_cupti/local/csr/0", 100.0, 400.0), E("a", 100.0, 300.0), E("b", 200.0, 400.0),
    ...                E("b", 200.0, 400.0)])  # overlapping and duplicated: the union, 300 us
    {'local': {'csr': [0.3]}}
    """
    ranges, device = [], []
    for e in events:
        if not _is_device(e):
            continue
        parts = e.name.split("/")
        span = (float(e.time_range.start), float(e.time_range.end))
        if len(parts) == 4 and parts[0] == PREFIX:
            ranges.append((parts[1], parts[2], int(parts[3]), *span))
        else:
            device.append(span)
    device.sort()
    starts = [a for a, _ in device]
    calls: dict[tuple[str, str], dict[int, float]] = {}
    for pattern, stage, call, lo, hi in ranges:
        total, i, covered = 0.0, bisect_left(starts, lo - SLACK_US), lo - SLACK_US
        while i < len(device) and device[i][0] <= hi + SLACK_US:
            a, z = device[i]
            if z <= hi + SLACK_US and z > covered:  # the union: an overlap or a duplicate counts once
                total += z - max(a, covered)
                covered = z
            i += 1
        by_call = calls.setdefault((pattern, stage), {})
        by_call[call] = by_call.get(call, 0.0) + total / 1000.0
    out: dict[str, dict[str, list[float]]] = {}
    for (pattern, stage), by_call in calls.items():
        out.setdefault(pattern, {})[stage] = [round(by_call[c], 6) for c in sorted(by_call)]
    return out


def _need(rule: Mapping[str, float], stage: str, ms: float) -> int:
    """The calls one stage of median ``ms`` needs: a multi-launch stage enough to add up to ``target_ms`` within
    ``[min_rounds, max_rounds]``, any other ``min_rounds``."""
    if stage not in LOOSE_CUPTI_STAGES:
        return int(rule["min_rounds"])
    need = math.ceil(rule["target_ms"] / ms) if ms > 0 else rule["max_rounds"]
    return int(min(rule["max_rounds"], max(rule["min_rounds"], need)))


def stage_calls(event_medians: Mapping[str, Mapping[str, float]],
                rule: Mapping[str, float] | None = None) -> dict[str, dict[str, int]]:
    """``{pattern: {stage: profiled calls}}`` of a pass sized per stage (module docstring, "Calls per stage"): each
    stage's own need, raised to that of any stage of the pattern that consumes its intermediates.

    >>> stage_calls({"uniform": {"selection_fwd": 14.8, "csr": 0.2438, "dkv_core": 18.4, "full_bwd": 45.3}})
    {'uniform': {'selection_fwd': 5, 'csr': 21, 'dkv_core': 5, 'full_bwd': 5}}
    """
    rule = dict(SIZING if rule is None else rule)
    out: dict[str, dict[str, int]] = {}
    for p, st in event_medians.items():
        calls = {s: _need(rule, s, ms) for s, ms in st.items()}
        for consumer in [s for s in STAGE_NAMES if s in calls][::-1]:  # a consumer's count reaches its producers
            for producer in prerequisites(consumer):
                if producer in calls:
                    calls[producer] = max(calls[producer], calls[consumer])
        out[p] = calls
    return out


def sizing(event_medians: Mapping[str, Mapping[str, float]], rule: Mapping[str, float] | None = None,
           per_stage: bool = False) -> dict[str, Any]:
    """The ``cupti.sizing`` record of a pass sized by need from the timed ``{pattern: {stage: median ms}}``: the
    rule (:data:`SIZING`), the shortest multi-launch stage and the rounds it needs; ``per_stage``: also each
    stage's own count, ``calls`` (:func:`stage_calls`; the rounds are their largest).

    >>> sizing({"local": {"csr": 0.35, "dkv_core": 15.3}, "uniform": {"csr": 0.2438}})["rounds"]
    21
    >>> sizing({"local": {"dkv_core": 15.3}})["rounds"], sizing({"local": {"csr": 0.01}})["rounds"]
    (5, 40)
    >>> sizing({"local": {"csr": 0.35, "dkv_core": 15.3}}, per_stage=True)["calls"]
    {'local': {'csr': 15, 'dkv_core': 5}}
    """
    rule = dict(SIZING if rule is None else rule)
    calls = {"calls": stage_calls(event_medians, rule)} if per_stage else {}
    loose = [(ms, p, s) for p, st in event_medians.items() for s, ms in st.items() if s in LOOSE_CUPTI_STAGES]
    if not loose:
        return {**rule, "shortest": None, "rounds": int(rule["min_rounds"]), **calls}
    ms, p, s = min(loose)
    return {**rule, "shortest": {"pattern": p, "stage": s, "median_ms": ms}, "rounds": _need(rule, s, ms), **calls}


def calls_of(block: Mapping[str, Any], pattern: str, stage: str) -> int | None:
    """How many profiled calls a ``cupti`` block holds for one cell: its sizing's ``calls`` when sized per stage
    (None where that map lacks the cell), else one per round."""
    per_stage = (block.get("sizing") or {}).get("calls")
    return int(block["rounds"]) if per_stage is None else per_stage.get(pattern, {}).get(stage)


def tolerance_record() -> dict[str, Any]:
    """The agreement rule as a block records it (``cupti.tolerance``); ``validate`` holds every block to it."""
    return {"tight": TIGHT, "loose": LOOSE, "loose_stages": list(LOOSE_CUPTI_STAGES)}


def _medians(per_call: Mapping[str, Mapping[str, list[float]]]) -> dict[str, dict[str, float]]:
    return {p: {s: float(np.median(v)) for s, v in st.items()} for p, st in per_call.items()}


def cupti_block(per_call: dict[str, dict[str, list[float]]], rounds: int, sized: dict[str, Any] | None = None,
                method: str = METHOD, event_ms: dict[str, dict[str, list[float]]] | None = None) -> dict[str, Any]:
    """The result's optional ``cupti`` block: every profiled call's kernel time (ms), and the medians; ``sized``
    (a pass sized by need) is recorded as ``sizing``; ``event_ms`` (the same calls' CUDA-event times, ms, same
    shape as ``per_call``) as ``event_ms`` with its ``median_event_ms``."""
    paired = {} if event_ms is None else {"event_ms": event_ms, "median_event_ms": _medians(event_ms)}
    return {"method": method, "rounds": rounds, **({"sizing": sized} if sized is not None else {}),
            "kernel_ms": per_call, "median_kernel_ms": _medians(per_call), **paired,
            "tolerance": tolerance_record()}


def event_ms_of(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """``{pattern: {stage: [event ms per call, in round order]}}`` from the round loop's records
    (:func:`nsa_exp.gpu.timing.run_rounds`: ``{"round", "pattern", "ms": {stage: ms}}``), the profiled calls'
    CUDA-event times beside their kernel times.

    >>> event_ms_of([{"round": 1, "pattern": "local", "ms": {"csr": 0.31}},
    ...              {"round": 0, "pattern": "local", "ms": {"csr": 0.30}}])
    {'local': {'csr': [0.3, 0.31]}}
    """
    out: dict[str, dict[str, list[float]]] = {}
    for rec in sorted(records, key=lambda r: r["round"]):
        for stage, ms in rec["ms"].items():
            out.setdefault(rec["pattern"], {}).setdefault(stage, []).append(round(float(ms), 6))
    return out


def profiler_shift(doc: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """``{pattern: {stage: profiled-call event median / timed-round event median}}`` of a result whose ``cupti``
    block pairs events (empty otherwise): how much the profiler itself slows each stage, kept as data (> 1: the
    profiled calls ran longer) and judged only against wide physical bounds (:func:`shift_problems`)."""
    block = doc.get("cupti") or {}
    out: dict[str, dict[str, float]] = {}
    for p, stages in block.get("median_event_ms", {}).items():
        for s, e in stages.items():
            timed = doc["patterns"].get(p, {}).get("stages", {}).get(s, {}).get("median_ms")
            if timed:
                out.setdefault(p, {})[s] = e / timed
    return out


def shift_problems(doc: Mapping[str, Any], bounds: tuple[float, float], timed_path: str) -> list[tuple[str, str]]:
    """Each paired cell's :func:`profiler_shift` within ``bounds`` (least, most): the profiled calls rerun the timed
    loop (flush, guard, events) on the same GPU in the same process, so their event median can exceed the timed
    median by the profiler's own overhead but cannot fall far below it, nor exceed it by more than that overhead;
    outside, the timed median is not the one this stage's calls ran at (a forger's trial of 2026-12-05: zipf's
    selection-fwd and dQ observations swapped passed, 0.61x). ``timed_path``: the timed median's JSON path with
    ``{cell}`` and ``{stage}`` to fill."""
    lo, hi = bounds
    problems: list[tuple[str, str]] = []
    for cell, by in profiler_shift(doc).items():
        for stage, shift in by.items():
            if shift < lo:
                problems.append((f"$.cupti.median_event_ms.{cell}.{stage}", f"{shift:.3f} of the timed median: the "
                                 f"profiled calls ran faster than the timed ones (at least {lo})"))
            elif shift > hi:
                problems.append((timed_path.format(cell=cell, stage=stage), f"the profiled calls' event median is "
                                 f"{shift:.3f} x this timed median (at most {hi}: the profiler's overhead): timed "
                                 "faster than its own kernels ran"))
    return problems


def disagreement(stage: str, event_ms: float, kernel_median_ms: float) -> str | None:
    """Why a stage's CUDA-event and kernel-time medians disagree under the module's rule, or None."""
    gap = event_ms - kernel_median_ms
    if kernel_median_ms <= 0:
        return "no kernel time attributed to the stage's range (profiler saw no kernels)"
    loose = stage in LOOSE_CUPTI_STAGES
    if loose:
        lo = -(LOOSE["rel_below"] * event_ms + LOOSE["abs_below_ms"])
        hi = LOOSE["rel_above"] * event_ms + LOOSE["abs_above_ms"]
        ok = lo <= gap <= hi
    else:
        ok = abs(gap) <= max(TIGHT["rel"] * event_ms, TIGHT["abs_ms"])
    return None if ok else (f"CUDA-event median {event_ms:.4f} ms vs kernel-time median {kernel_median_ms:.4f} ms "
                            f"(gap {gap:+.4f} ms) outside the {'loose' if loose else 'tight'} rule")


def cupti_problems(doc: dict[str, Any], paired_method: str = METHOD_PAIRED) -> list[tuple[str, str]]:
    """``(json path, message)`` for every stage whose medians disagree, or whose recorded kernel-time
    median does not recompute from its calls; empty for a result without a ``cupti`` block. ``paired_method``: the
    method a pass with paired events records (bench's :data:`METHOD_PAIRED`; the peer arm's :data:`METHOD_MARKED`)."""
    block = doc.get("cupti")
    if block is None:
        return []
    problems = []
    paired = "event_ms" in block or "median_event_ms" in block
    # The method each pass recorded (the aggregation changed twice; a block names the one it was computed by) and
    # the rule it was judged by: both are this module's, never the document's own.
    methods = (paired_method,) if paired else (METHOD_BUSY,) if "sizing" in block else (METHOD,)
    if block.get("method") not in methods:
        problems.append(("$.cupti.method", f"{block.get('method')!r}: a pass "
                         f"{'with paired events' if paired else 'sized by need' if 'sizing' in block else 'of before'}"
                         f" records {methods[0]!r}"))
    if block.get("tolerance") != tolerance_record():
        problems.append(("$.cupti.tolerance", f"{block.get('tolerance')}: the agreement rule is {tolerance_record()} "
                         "(nsa_exp.analysis.cupti), whatever a document records"))

    def cells(key: str) -> set[tuple[str, str]]:
        return {(p, s) for p, st in (block.get(key) or {}).items() for s in st}

    timed = {(p, s) for p, v in doc["patterns"].items() for s in v.get("stages", {})}
    profiled = cells("kernel_ms")
    if missing := sorted(timed - profiled):  # the pass profiles every timed cell: none may be left out unseen
        problems.append(("$.cupti.kernel_ms", f"{len(missing)} timed cell(s) not profiled, e.g. "
                         f"{missing[0][0]}.{missing[0][1]}: the pass times every pattern x stage the rounds timed"))
    if "sizing" in block:  # a pass sized by need: its rounds recompute from the document's own timed medians
        medians = {p: {s: st["median_ms"] for s, st in v.get("stages", {}).items()} for p, v in doc["patterns"].items()}
        sized = block["sizing"]
        want = sizing(medians, SIZING, "calls" in sized)  # the code's rule, never the document's (a forger's trial
        # of 2026-12-04 set min_rounds = max_rounds = 1 and kept the one call per stage that agreed)
        if len(want) != len(sized) or want != sized or block["rounds"] != want["rounds"]:
            problems.append(("$.cupti.sizing", f"recorded {sized} (rounds {block['rounds']}), but the timed medians "
                             f"give {want} under the code's rule {SIZING}"))
        if "calls" in sized and not paired:
            problems.append(("$.cupti.sizing.calls", "a pass sized per stage (issue 30) pairs each call's events "
                             "(event_ms); this block has none"))
    before = len(problems)
    for key in ("median_kernel_ms", *(("event_ms", "median_event_ms") if paired else ())):
        if cells(key) != profiled:  # every map of the block covers the same pattern x stage cells
            extra, lacking = sorted(cells(key) - profiled), sorted(profiled - cells(key))
            problems.append((f"$.cupti.{key}", f"cells differ from kernel_ms's: {len(extra)} extra "
                             f"{'.'.join(extra[0]) if extra else ''}, {len(lacking)} missing "
                             f"{'.'.join(lacking[0]) if lacking else ''}: every map covers the same calls"))
    if len(problems) > before:
        return problems
    for pattern, stages in block["kernel_ms"].items():
        for stage, calls in stages.items():
            path = f"$.cupti.median_kernel_ms.{pattern}.{stage}"
            if len(calls) != (want_calls := calls_of(block, pattern, stage)):  # one per round (or its sizing's)
                problems.append((f"$.cupti.kernel_ms.{pattern}.{stage}", f"{len(calls)} calls, but "
                                 + (f"cupti.sizing.calls.{pattern}.{stage} = {want_calls}"
                                    if "calls" in block.get("sizing", {}) else f"cupti.rounds = {block['rounds']}")))
                continue
            recorded = block["median_kernel_ms"].get(pattern, {}).get(stage)
            if recorded is None or abs(recorded - float(np.median(calls))) > 1e-9:
                problems.append((path, f"recorded {recorded}, the calls give {float(np.median(calls))}"))
                continue
            st = doc["patterns"].get(pattern, {}).get("stages", {}).get(stage)
            if st is None:
                problems.append((path, "no timed stage of that name"))
                continue
            event = st["median_ms"]
            if paired:  # the same calls' events (every map covers the same cells, above): their count and median
                ev = block["event_ms"][pattern][stage]  # recompute, then the rule holds on them
                if len(ev) != len(calls):
                    problems.append((f"$.cupti.event_ms.{pattern}.{stage}", f"{len(ev)} event times for "
                                     f"{len(calls)} profiled calls"))
                    continue
                event = block["median_event_ms"][pattern][stage]
                if abs(event - float(np.median(ev))) > 1e-9:
                    problems.append((f"$.cupti.median_event_ms.{pattern}.{stage}", f"recorded {event}, the calls give "
                                     f"{float(np.median(ev))}"))
                    continue
            why = disagreement(stage, event, recorded)
            if why:
                problems.append((path, why.replace("CUDA-event median", "profiled calls' CUDA-event median")
                                 if paired else why))
    return problems
