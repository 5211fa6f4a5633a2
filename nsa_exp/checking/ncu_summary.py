"""The ``ncu_summary`` kind: Nsight Compute's per-kernel metrics of one profiled stage (results/ncu/<name>.json), made
from ncu's raw export beside it (``<name>.raw.csv``, the kind ``ncu_raw_csv``). Its builder (:func:`build`;
``gpu/ncu.export_csv_text`` calls it), its check (:func:`ncu_recompute`) and the raw CSV's
(:func:`ncu_raw_csv_checks`, which :mod:`.validate` runs on the CSV), in one module: the summary is recomputed from
the raw CSV.

- ``ncu_recompute`` (summary): the raw CSV it names (``raw_csv``, beside it) re-parsed
  (:func:`nsa_exp.io.ncu_csv.parse_raw_csv`) and its kernels re-labelled by launch order
  (:func:`nsa_exp.io.ncu_csv.assign_patterns`): every kernel row, metric, unit (``value_units`` where the
  summary records it: older exports lack it), grid, device and pattern compared; ``patterns_in_launch_order``
  and ``nvtx_range`` from ``pattern`` and ``stage``
  (:mod:`nsa_exp.core.nvtx`); a re-export names this summary and its CSV and is dated after the profile;
  each kernel's device and SM count against the GPU table and, when at hand, the benchmark result's GPU.
  Every kernel's percentages (:func:`metric_bound_problems`, on the summary and on the raw CSV alike): within
  0..100, achieved occupancy no more than theoretical, min <= avg <= max. Without the CSV the metrics are
  unverified.
- ``created_after_sources`` (summary, with the benchmark result at hand): not dated before the bench whose
  autotune configs it profiled.
- ``ncu_raw_csv`` (raw CSV): an ``ID`` header, a units row, one complete row per kernel, IDs 0..n-1, every
  metric the export reads a number in ncu's dialect with a known unit; ``ncu_recompute`` then runs from
  the summary beside it that names this CSV (``<name>.json``), else the CSV's figures stay unverified.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.environment import REQUIRED_ENV, SYNCHRONOUS_LAUNCHES, synchronous
from ..core.gpus import gpu_spec
from ..core.kinds import schema_version
from ..core.nvtx import parse_patterns, range_name
from ..errors import UserError
from ..io.ncu_csv import METRICS, TO_HZ, TO_NS, assign_patterns, parse_raw_csv
from ..io.reader import read_bounded
from ..io.strict_csv import decode_csv, parse_ncu_number
from ..io.strict_json import MAX_BYTES
from . import record_checks
from .checks import Add, Context, Problems, one_check
from .record_checks import PRINTABLE_ASCII, host_problems, parse_utc
from .sources import created_after_sources, deep_diff, read_source, source_problems

KIND = "ncu_summary"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS

#: What ``ncu --set full`` (gpu/ncu.py) writes in every kernel row that ties its duration to the device's clocks:
#: SM cycles elapsed (average over SMs) and their rate, the cycles an SM was active, and the device's own
#: attributes (CUDA's ``cudaDevAttr*``: clocks in kHz, L2 in bytes, SM count).
PHYSICS_METRICS = {"cycles": "sm__cycles_elapsed.avg", "rate": "sm__cycles_elapsed.avg.per_second",
                   "active": "sm__cycles_active.avg", "clock_khz": "device__attribute_clock_rate",
                   "mem_clock_khz": "device__attribute_memory_clock_rate",
                   "l2_bytes": "device__attribute_l2_cache_size", "sms": "device__attribute_multiprocessor_count"}
#: ``cycles / duration`` against ncu's own rate of the same cycles (the committed exports agree to 1e-5); the
#: rate against the device's maximum SM clock (a clock no SM exceeds).
RATE_REL_TOL = 0.01
#: A profiled kernel's duration over the bench median of its stage and pattern, the bench whose configs it
#: replayed: the committed H100 and H200 profiles give 1.003-1.039 (ncu replays one launch with its caches
#: flushed, at the clocks the bench ran; docs/NSIGHT.md). A duration outside these bounds is another kernel's.
NCU_VS_BENCH = (0.95, 1.2)
#: Slack on the percentage bounds below: ncu prints 6 decimals, and rounding keeps order and 0..100.
PCT_TOL = 1e-6


def metric_bound_problems(kernels: Any, path: Callable[[int, str], str]) -> Problems:
    """What every kernel's percentages say against themselves (``kernels``: a summary's, or the parsed rows of a raw
    CSV; ``path(i, key)``: where kernel ``i``'s metric ``key`` sits): a percentage (unit ``%`` or a ``_pct`` key) is
    within 0..100 (:data:`PCT_TOL`), achieved occupancy no more than the theoretical one (the resident warps its
    launch allows), and ``X_min_pct <= X_pct <= X_max_pct`` for each family the metrics hold (today
    ``sm_throughput``: min and max over SMs). No committed profile exceeds 100 (the highest, ``l2_hit_rate_pct``
    97.455; ``memory_throughput_pct`` 80.42), so no ``pct_of_peak`` metric is spared. Achieved occupancy 60 against
    a theoretical 12.5, an L2 hit rate of 150 %, SM throughput 180 % with its min 190 %, written into the raw CSV and
    its summary together, PASSed (an attacker)."""
    def named(key: str) -> str:
        return f"{key} ({METRICS[key]})" if key in METRICS else key

    problems: Problems = []
    for i, k in enumerate(kernels if isinstance(kernels, list) else []):
        metrics = k.get("metrics") if isinstance(k, dict) else None
        if not isinstance(metrics, dict):
            continue
        units = k.get("units") if isinstance(k.get("units"), dict) else {}
        v = {key: float(x) for key, x in metrics.items()
             if isinstance(x, (int, float)) and not isinstance(x, bool)}
        for key, x in v.items():
            if (key.endswith("_pct") or units.get(key) == "%") and not -PCT_TOL <= x <= 100 + PCT_TOL:
                problems.append((path(i, key), f"{named(key)} {x:g}%: a percentage is within 0..100"))
        achieved, theoretical = v.get("achieved_occupancy_pct"), v.get("theoretical_occupancy_pct")
        if achieved is not None and theoretical is not None and achieved > theoretical + PCT_TOL:
            problems.append((path(i, "achieved_occupancy_pct"), f"{named('achieved_occupancy_pct')} {achieved:g}%, "
                             f"above the kernel's theoretical occupancy {theoretical:g}% (the warps its launch can "
                             "keep resident)"))
        families = sorted({key.removesuffix(end) for key in v for end in ("_min_pct", "_max_pct") if key.endswith(end)})
        for family in families:
            chain = [key for key in (f"{family}_min_pct", f"{family}_pct", f"{family}_max_pct") if key in v]
            problems += [(path(i, b), f"{named(a)} {v[a]:g}% above {named(b)} {v[b]:g}%: min <= avg <= max")
                         for a, b in zip(chain, chain[1:], strict=False) if v[a] > v[b] + PCT_TOL]
        # ncu's Memory Throughput is the highest of its memory units' (DRAM's among them): a DRAM throughput of 60%
        # beside a memory throughput of 12.7% PASSed (an attacker, 2026-12-07)
        memory, dram = v.get("memory_throughput_pct"), v.get("dram_throughput_pct")
        if memory is not None and dram is not None and dram > memory + PCT_TOL:
            problems.append((path(i, "dram_throughput_pct"), f"{named('dram_throughput_pct')} {dram:g}% above "
                             f"{named('memory_throughput_pct')} {memory:g}%, the highest of the memory units'"))
        most = register_occupancy_bound(v.get("registers_per_thread"), v.get("block_size"), k.get("device"),
                                        v.get("shared_mem_static_bytes", 0.0) + v.get("shared_mem_dynamic_bytes", 0.0))
        if theoretical is not None and most is not None and theoretical > most + PCT_TOL:
            problems.append((path(i, "theoretical_occupancy_pct"), f"{named('theoretical_occupancy_pct')} "
                             f"{theoretical:g}%, above the {most:g}% its registers per thread, block size and "
                             "shared memory allow"))
    return problems


#: Compute capability 9.0 (Hopper): 64 K 32-bit registers, at most 64 resident warps and 32 resident blocks, and 228 KB
#: of shared memory per SM (CUDA C++ Programming Guide, Technical Specifications per Compute Capability)
HOPPER_REGISTERS_PER_SM, HOPPER_WARPS_PER_SM, HOPPER_BLOCKS_PER_SM = 65536, 64, 32
HOPPER_SHARED_BYTES_PER_SM = 228 * 1024


def register_occupancy_bound(registers: float | None, block: float | None, device: Any,
                             shared_bytes: float = 0.0) -> float | None:
    """The most theoretical occupancy (%) a launch of ``block`` threads using ``registers`` per thread and
    ``shared_bytes`` of shared memory per block can have on a compute-capability-9.0 GPU (``device``: its CUDA name, a
    row of the GPU table): whole blocks within the SM's registers, shared memory, resident blocks and warps, nothing
    rounded up to its allocation unit (so an upper bound); None elsewhere.

    >>> register_occupancy_bound(255, 128, "NVIDIA H200")  # 2 blocks of 4 warps, 8 of 64 warps
    12.5
    >>> register_occupancy_bound(32, 32, "NVIDIA H200"), register_occupancy_bound(128, 128, "NVIDIA H200", 73920)
    (50.0, 18.75)
    """
    spec = gpu_spec(device) if isinstance(device, str) else None
    if spec is None or spec.compute_capability != "9.0" or registers is None or block is None:
        return None
    if not (math.isfinite(registers) and math.isfinite(block) and registers > 0 and block > 0):
        return None
    warps = math.ceil(block / 32)
    blocks = min(int(HOPPER_REGISTERS_PER_SM // (registers * 32 * warps)), HOPPER_BLOCKS_PER_SM)
    if math.isfinite(shared_bytes) and shared_bytes > 0:
        blocks = min(blocks, int(HOPPER_SHARED_BYTES_PER_SM // shared_bytes))
    return 100 * min(HOPPER_WARPS_PER_SM, blocks * warps) / HOPPER_WARPS_PER_SM


def build(text: str, context: dict[str, Any], metadata: dict[str, Any], raw_csv_name: str | None) -> dict[str, Any]:
    """The summary of ncu's raw CSV ``text`` (named ``raw_csv_name``, None when not kept), its kernels labelled by
    ``context``'s ``patterns_in_launch_order``; ``context``: the profile's (config, pattern, stage, command ...)."""
    kernels = parse_raw_csv(text)
    assign_patterns(kernels, context.get("patterns_in_launch_order") or [])
    return {"schema_version": schema_version("ncu_summary"), "kind": "ncu_summary", **context, "raw_csv": raw_csv_name,
            "kernels": kernels, "metadata": metadata}


def kernels_of(rows: list[list[str]], patterns: list[str]) -> list[dict[str, Any]]:
    """The summary kernels ``ncu-export`` makes of a raw CSV's rows (UserError when it is not one)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    kernels = parse_raw_csv(out.getvalue())
    assign_patterns(kernels, patterns)
    return kernels


def _kernels_diff(recorded: Any, want: list[dict[str, Any]], where: str, problems: Problems) -> None:
    """The recorded kernels against the recomputed ones; a summary exported before ``value_units`` existed
    (the schema: its values in the same units) is not held to that field."""
    for k, w in zip(recorded, want, strict=False):
        if isinstance(k, dict) and "value_units" not in k:
            w.pop("value_units", None)
    deep_diff(recorded, want, where, problems)


def _rows(path: Path) -> list[list[str]]:
    # a FIFO, a device, too large, binary or non-UTF-8: a one-line UserError
    return decode_csv(read_bounded(path, str(path), MAX_BYTES), str(path))[0]


def physics_problems(rows: list[list[str]], where: str = "$") -> Problems:
    """What the clocks of a raw export (``rows``: header, units, one row per kernel) say against its durations and
    its device: each kernel's SM cycles over its duration is ncu's own rate of those cycles (within
    :data:`RATE_REL_TOL`), no faster than the device's maximum SM clock; active cycles no more than elapsed ones;
    the device's SM count, L2 and clocks those of the GPU table's row for its name (``nsa_exp.core.gpus``), a name in
    printable ASCII. A duration halved in the CSV and its summary together PASSed (an attacker, 2026-12-06): its
    cycles then ran at 3.7 GHz; an H200 export relabelled H100 kept the H200's L2 and memory clock."""
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None or len(rows) < start + 3:
        return []  # not a raw export: the table checks say so
    header, units = rows[start], rows[start + 1]
    missing = [m for m in (*PHYSICS_METRICS.values(), METRICS["duration_ns"]) if m not in header]
    if missing:
        return [(where, f"the export lacks {', '.join(missing)} (ncu --set full writes them): its durations "
                        "cannot be held to its clocks")]
    col = {key: header.index(name) for key, name in {**PHYSICS_METRICS, "duration": METRICS["duration_ns"]}.items()}
    ns, hz = TO_NS.get(units[col["duration"]]), TO_HZ.get(units[col["rate"]])
    problems: Problems = []
    for values in rows[start + 2:]:
        if len(values) != len(header):
            continue
        at = f"{where}[kernel ID {values[0]}]"
        try:
            read = {key: parse_ncu_number(values[i] or "") for key, i in col.items()}
        except ValueError:
            continue  # the table checks name the cell
        v = {key: x for key, x in read.items() if x is not None}
        if len(v) < len(read) or ns is None or hz is None or v["duration"] <= 0:
            problems.append((at, "its duration, cycles, clocks or their units are missing or unknown"))
            continue
        seconds, rate = v["duration"] * ns * 1e-9, v["rate"] * hz
        implied = v["cycles"] / seconds
        if abs(implied - rate) > RATE_REL_TOL * rate:
            problems.append((at, f"{v['cycles']:.0f} SM cycles in {seconds * 1e3:.6g} ms run at {implied / 1e9:.4f} "
                                 f"GHz, but ncu measured {rate / 1e9:.4f} GHz"))
        if rate > v["clock_khz"] * 1e3 * (1 + RATE_REL_TOL):
            problems.append((at, f"SM cycles at {rate / 1e9:.4f} GHz, over the device's maximum SM clock "
                                 f"{v['clock_khz'] / 1e3:.0f} MHz"))
        if v["active"] > v["cycles"] * (1 + RATE_REL_TOL):
            problems.append((at, f"{v['active']:.0f} active SM cycles, more than the {v['cycles']:.0f} elapsed"))
        name = (values[header.index("device__attribute_display_name")]
            if "device__attribute_display_name" in header else "")
        if not PRINTABLE_ASCII.fullmatch(name):
            problems.append((at, f"device {name!r}: a CUDA device name is printable ASCII"))
        spec = gpu_spec(name)
        facts = (("SM count", v["sms"], spec.sm_counts if spec else None),
                 ("L2 bytes", v["l2_bytes"], (spec.l2_bytes,) if spec and spec.l2_bytes else None),
                 ("max SM clock (MHz)", v["clock_khz"] / 1e3,
                  (spec.max_sm_clock_mhz,) if spec and spec.max_sm_clock_mhz else None),
                 ("max memory clock (MHz)", v["mem_clock_khz"] / 1e3,
                  (spec.max_mem_clock_mhz,) if spec and spec.max_mem_clock_mhz else None))
        problems += [(at, f"{name}: {what} {value:g}, the GPU table's {spec.name if spec else ''} has "
                          f"{', '.join(map(str, allowed))}") for what, value, allowed in facts
                     if allowed is not None and value not in allowed]
    return problems


def _same_path(a: Any, b: Any) -> bool:
    """Two recorded paths naming one file as recorded (``./configs/x.json`` is ``configs/x.json``)."""
    return a is not None and b is not None and os.path.normpath(str(a)) == os.path.normpath(str(b))


def _ncu_command(doc: dict[str, Any]) -> list[str]:
    """The recorded ncu command line (``ncu_command``) as strings; empty when none is recorded."""
    return [str(a) for a in doc.get("ncu_command") or []]


def bench_problems(doc: dict[str, Any], bench: dict[str, Any]) -> Problems:
    """The bench result whose configs the profile replayed is the one its recorded ncu command line names, of the
    profile's own config; each profiled kernel's duration against the median of its stage and pattern there
    (:data:`NCU_VS_BENCH`). A dK/dV duration cut to 23.5 ms with its cycles PASSed by naming a packed-documents run
    whose median is 23.1 ms (an attacker, 2026-12-06)."""
    problems: Problems = []
    command = _ncu_command(doc)
    named = command[command.index("--benchmark-result") + 1] if "--benchmark-result" in command[:-1] else None
    if named is not None and not _same_path(named, doc.get("benchmark_result")):
        problems.append(("$.benchmark_result", f"{doc.get('benchmark_result')!r}, but its ncu command replayed "
                         f"{named!r}"))
    if (doc.get("config_path") is not None and bench.get("config_path") is not None and
            not _same_path(bench["config_path"], doc["config_path"])):
        problems.append(("$.benchmark_result", f"{doc['benchmark_result']} ran {bench['config_path']}, the profile "
                         f"{doc['config_path']}: the configs it replayed are another experiment's"))
    lo, hi = NCU_VS_BENCH
    for i, k in enumerate(doc["kernels"]):
        stage = ((bench.get("patterns") or {}).get(k.get("pattern")) or {}).get("stages", {}).get(doc.get("stage"))
        duration = (k.get("metrics") or {}).get("duration_ns")
        if not isinstance(stage, dict) or not isinstance(duration, (int, float)) or not stage.get("median_ms"):
            continue
        ratio = duration / 1e6 / stage["median_ms"]
        if not lo <= ratio <= hi:
            problems.append((f"$.kernels[{i}].metrics.duration_ns", f"{duration / 1e6:.6g} ms, {ratio:.3f}x the "
                             f"{doc['benchmark_result']} median of {k.get('pattern')} {doc.get('stage')} "
                             f"({stage['median_ms']:.6g} ms): a profile replays that bench's kernels within "
                             f"{lo}-{hi}x"))
    return problems


def clock_control_problems(doc: dict[str, Any]) -> Problems:
    """A profile ``ncu`` took records the ncu command it ran (``gpu/ncu.py``), and that command leaves the clocks as
    they are: ``--clock-control none`` among ncu's own options (before the profiled program), no other clock
    control. ncu's default locks the clocks to base (docs/NSIGHT.md). The option deleted, the command deleted, or
    the option moved after the program PASSed (an attacker and a re-attacker, 2026-12-07); an ``ncu-export`` of a
    report records none."""
    argv = record_checks.recorded_cli_argv(doc)
    command = _ncu_command(doc)
    if not command:
        return [("$.ncu_command", "absent, but the recorded argv ran ncu, which records the command it ran")] if (
            argv is not None and argv[1:2] == ["ncu"]) else []
    program = next((i for i, a in enumerate(command) if Path(a).name.startswith("python")), len(command))
    options = command[:program]
    controls = [(i, a) for i, a in enumerate(options) if a == "--clock-control" or a.startswith("--clock-control=")]
    if [options[i + 1:i + 2] if a == "--clock-control" else [a.split("=", 1)[1]] for i, a in controls] != [["none"]]:
        return [("$.ncu_command", f"ncu's options {options[1:][:12]} hold no single --clock-control none (before "
                 "the profiled program): ncu's default locks the clocks to base, and the GPU task always passes none "
                 "(docs/NSIGHT.md)")]
    return []


def ncu_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = host_problems(doc.get("metadata", {}))
    # the profile ran under the GPU tasks' environment (scripts/run_h100.sh; the gates refuse another): a summary
    # recording TRITON_F32_DEFAULT=tf32 PASSed --strict (an attacker, 2026-12-06)
    env = (doc.get("metadata") or {}).get("env") or {}
    # (a key absent says nothing: ncu-export of a raw CSV records the exporting process's environment, which on a CPU
    # box need not be the GPU tasks')
    problems += [(f"$.metadata.env.{k}", f"{env[k]!r}, the GPU tasks require {v!r} (scripts/run_h100.sh sets it)")
                 for k, v in REQUIRED_ENV.items() if k in env and env[k] != v]
    if synchronous(env):
        problems.append((f"$.metadata.env.{SYNCHRONOUS_LAUNCHES}", f"{env[SYNCHRONOUS_LAUNCHES]!r}: launches were "
                         "synchronous, which the GPU tasks' environment gate refuses"))
    if "pattern" not in doc:
        add("ncu_recompute", problems + [("$.pattern", "missing: the profiled pattern spec (ncu-export --pattern)")])
        return
    try:
        launch = parse_patterns(doc["pattern"])
    except UserError as exc:
        launch = None
        problems.append(("$.pattern", str(exc)))
    if launch is not None and doc["patterns_in_launch_order"] != launch:
        problems.append(("$.patterns_in_launch_order", f"{doc['patterns_in_launch_order']}, the pattern spec "
                         f"{doc['pattern']!r} launches {launch}"))
    if doc.get("stage") and doc.get("nvtx_range") not in (None, range_name(doc["pattern"], doc["stage"])):
        problems.append(("$.nvtx_range", f"{doc['nvtx_range']!r}, pattern and stage give "
                         f"{range_name(doc['pattern'], doc['stage'])!r}"))
    re_export = doc.get("reexported_from")
    if re_export:
        if re_export.get("raw_csv") != doc.get("raw_csv"):
            problems.append(("$.reexported_from.raw_csv", f"{re_export.get('raw_csv')!r} != raw_csv "
                             f"{doc.get('raw_csv')!r}"))
        if ctx.path != "<bytes>" and re_export.get("summary") != Path(ctx.path).name:
            problems.append(("$.reexported_from.summary", f"{re_export.get('summary')!r}, but this file is "
                             f"{Path(ctx.path).name}"))
        made, profiled = parse_utc(re_export.get("utc")), parse_utc(doc.get("metadata", {}).get("created_utc"))
        if made is not None and profiled is not None and made < profiled:
            problems.append(("$.reexported_from.utc", "re-exported before the profile was taken"))
    problems += metric_bound_problems(doc["kernels"], lambda i, key: f"$.kernels[{i}].metrics.{key}")
    for i, k in enumerate(doc["kernels"]):
        spec = gpu_spec(k.get("device"))
        sm = k.get("metrics", {}).get("sm_count")
        if spec is not None and sm is not None and int(sm) not in spec.sm_counts:
            problems.append((f"$.kernels[{i}].metrics.sm_count", f"{sm}: {k['device']} has {list(spec.sm_counts)}"))
    problems += clock_control_problems(doc)
    if doc.get("benchmark_result") is None or doc.get("stage") is None:
        # an ncu-export of a report names no bench run: its durations are held to none (a summary with its sink-heavy
        # dK/dV halved PASSed --strict once this key was deleted: an attacker, 2026-12-07)
        ctx.unverifiable("$.kernels[*].metrics.duration_ns", "unverified (source not found): no benchmark_result "
                         "and stage recorded, so the durations are held to no bench run's medians")
    bench_source = read_source(ctx, doc.get("benchmark_result"), ("bench_result",))
    problems += source_problems(ctx, "$.benchmark_result", doc.get("benchmark_result"), bench_source,
                                ("bench_result",))
    bench = bench_source[1]
    if bench is not None:
        name = bench["metadata"]["gpu"]["name"]
        problems += [(f"$.kernels[{i}].device", f"{k.get('device')!r}, but {doc['benchmark_result']} ran on "
                      f"{name!r}") for i, k in enumerate(doc["kernels"]) if k.get("device") != name]
        problems += bench_problems(doc, bench)
    found = ctx.locate(doc.get("raw_csv"))
    if found is None:
        ctx.unverifiable("$.kernels", f"unverified (raw CSV not found): {doc.get('raw_csv')}")
    else:
        try:
            rows = _rows(found)
            want = kernels_of(rows, doc["patterns_in_launch_order"])
        except UserError as exc:
            problems.append(("$.raw_csv", f"{doc['raw_csv']}: {exc}"))
        else:
            _kernels_diff(doc["kernels"], want, "$.kernels", problems)
            problems += physics_problems(rows, f"{doc['raw_csv']} $")
    add("ncu_recompute", problems)
    if bench is not None:
        created_after_sources(doc, [bench], add)


checks = one_check("ncu_recompute", ncu_recompute)


def ncu_raw_csv_checks(rows: list[list[str]], add: Add, ctx: Context) -> None:
    path = ctx.path
    try:
        kernels = kernels_of(rows, [])
    except UserError as exc:
        add("ncu_raw_csv", [("$", str(exc))])
        return
    problems = [(f"$[{i}].ID", f"kernel row {i} has ID {k['id']}: rows are IDs 0..n-1 in launch order")
                for i, k in enumerate(kernels) if k["id"] != i] + physics_problems(rows)
    problems += metric_bound_problems(kernels, lambda i, key: f"$[kernel ID {kernels[i]['id']}].{METRICS[key]}")
    if not add("ncu_raw_csv", problems):
        return
    summary = Path(path).with_name(Path(path).name.removesuffix(".raw.csv") + ".json")
    _, doc = read_source(Context(path=str(path)), summary.name, ("ncu_summary",))
    if doc is None or doc.get("raw_csv") != Path(path).name:
        ctx.unverifiable("$ (every metric)", f"unverified (summary not found): no summary beside it names this CSV "
                         f"({summary.name}): the export is "
                         "checked as a table only")
        return
    want = kernels_of(rows, doc["patterns_in_launch_order"])
    problems = []
    _kernels_diff(doc["kernels"], want, f"{summary.name} $.kernels", problems)
    add("ncu_recompute", problems)
