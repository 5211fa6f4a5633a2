"""``invoke ncu``: run Nsight Compute on one stage, then export per-kernel metrics to JSON.

The export reads ncu's own CSV of the report's raw page (``ncu --import R --csv --page raw``),
never its screen output. Per profiled kernel: duration, grid and block, registers per thread, shared
memory, theoretical and achieved occupancy, waves per SM, SM / DRAM / memory throughput, L2 hit
rate, and the top warp-stall reasons (cycles per issued instruction).

>>> _normalise_units({"duration_ns": 15.4, "shared_mem_static_bytes": 0.0, "shared_mem_dynamic_bytes": 73.92},
...                  {"duration_ns": "ms", "shared_mem_static_bytes": "byte/block",
...                   "shared_mem_dynamic_bytes": "Kbyte/block"})
{'duration_ns': 15400000.0, 'shared_mem_static_bytes': 0.0, 'shared_mem_dynamic_bytes': 73920.0}
>>> ncu_command("rep", "nsa_local_dkv_core", ["python", "x.py"])[:6]
['ncu', '--set', 'full', '--nvtx', '--nvtx-include', 'nsa_local_dkv_core/']
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ..checking.validate import load_validated
from ..core.kinds import schema_version
from ..errors import UserError
from ..io.metadata import base_metadata, utc_now
from ..io.reader import read_bounded, show_path
from ..io.store import OutputPolicy, write_json, write_text_atomic
from ..io.strict_json import MAX_BYTES
from .nvtx import parse_patterns, range_name

METRICS = {
    "duration_ns": "gpu__time_duration.sum",  # converted to ns from the report's unit
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_static_bytes": "launch__shared_mem_per_block_static",
    "shared_mem_dynamic_bytes": "launch__shared_mem_per_block_dynamic",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    # min/max over SMs: a wide gap is SM load imbalance (a few long CTAs, the rest idle)
    "sm_throughput_min_pct": "sm__throughput.min.pct_of_peak_sustained_elapsed",
    "sm_throughput_max_pct": "sm__throughput.max.pct_of_peak_sustained_elapsed",
    "dram_throughput_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "sm_count": "device__attribute_multiprocessor_count",
}
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(.+)_per_issue_active\.ratio$")
NOT_A_STALL = {"selected"}  # 'selected' counts the issuing warp itself (always 1 per issue)
# ncu prints quantities in SI-prefixed units; these bring durations to ns and sizes to bytes.
TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
TO_BYTES = {"byte": 1.0, "byte/block": 1.0, "Kbyte": 1e3, "Kbyte/block": 1e3, "KB/block": 1e3,
            "Mbyte": 1e6, "Mbyte/block": 1e6, "KiB/block": 1024.0}
TOP_STALLS = 6
SCHEMA_VERSION = schema_version("ncu_summary")


def ncu_command(report: str, nvtx_range: str, program: list[str], clock_control: str = "none") -> list[str]:
    """The ncu command line (``--clock-control none``: leave the GPU's clocks as they are)."""
    return ["ncu", "--set", "full", "--nvtx", "--nvtx-include", f"{nvtx_range}/", "--clock-control",
            clock_control, "-f", "-o", report, *program]


def _number(text: str) -> float | None:
    text = (text or "").strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


#: The unit of a stored value that :func:`_normalise_units` converted (``units`` keeps what ncu printed).
VALUE_UNITS = {"duration_ns": "ns", "shared_mem_static_bytes": "byte/block", "shared_mem_dynamic_bytes": "byte/block"}


def _normalise_units(metrics: dict[str, float | None], units: dict[str, str]) -> dict[str, float | None]:
    """Duration to ns, shared memory to bytes, whatever prefix ncu printed; unknown units are refused."""
    out = dict(metrics)
    for key, table in (("duration_ns", TO_NS), ("shared_mem_static_bytes", TO_BYTES),
                       ("shared_mem_dynamic_bytes", TO_BYTES)):
        if out[key] is None:
            continue
        if units[key] not in table:
            raise UserError(f"ncu export: unexpected unit {units[key]!r} for {METRICS[key]}")
        out[key] = out[key] * table[units[key]]
    return out


def parse_raw_csv(text: str) -> list[dict[str, Any]]:
    """Rows of ``ncu --csv --page raw``: header row, units row, one row per profiled kernel."""
    rows = list(csv.reader(io.StringIO(text)))
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None or len(rows) < start + 2:
        raise UserError("ncu export: no kernel rows in the report (did the NVTX range match any launch?)")
    header, units = rows[start], rows[start + 1]
    kernels = []
    for values in rows[start + 2:]:
        if len(values) != len(header):
            continue
        raw = dict(zip(header, values, strict=True))
        unit = dict(zip(header, units, strict=True))
        metrics = {key: _number(raw.get(name, "")) for key, name in METRICS.items()}
        metrics = _normalise_units(metrics, {key: unit.get(name, "") for key, name in METRICS.items()})
        stalls = []
        for name, value in raw.items():
            m = STALL.match(name)
            if m and m.group(1) not in NOT_A_STALL and _number(value) is not None:
                stalls.append({"reason": m.group(1), "cycles_per_issue": _number(value)})
        stalls.sort(key=lambda s: -s["cycles_per_issue"])
        kernels.append({
            "id": int(_number(raw.get("ID", "")) or 0),
            "kernel": raw.get("Kernel Name", ""),
            "device": raw.get("device__attribute_display_name") or raw.get("Device", ""),
            "grid": raw.get("Grid Size", ""),
            "block": raw.get("Block Size", ""),
            "metrics": metrics,
            "units": {key: unit.get(name, "") for key, name in METRICS.items()},
            "value_units": {key: VALUE_UNITS.get(key, unit.get(name, "")) for key, name in METRICS.items()},
            "metric_names": dict(METRICS),
            "top_stalls": stalls[:TOP_STALLS],
        })
    if not kernels:
        raise UserError("ncu export: the report holds no complete kernel rows")
    return kernels


def export_report(report: str | Path, output: str | Path, context: dict[str, Any]) -> dict[str, Any]:
    """``ncu --import REPORT --csv --page raw`` -> schema-valid summary JSON at ``output``."""
    if shutil.which("ncu") is None:
        raise UserError("ncu is not on PATH; install Nsight Compute (it ships with the CUDA toolkit)")
    proc = subprocess.run(["ncu", "--import", str(report), "--csv", "--page", "raw"], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        raise UserError(f"ncu --import {report} failed: {proc.stderr.strip().splitlines()[-1:]}")
    raw_csv = Path(output).with_suffix(".raw.csv")
    write_text_atomic(raw_csv, proc.stdout)
    return export_csv_text(proc.stdout, output, context, base_metadata(), raw_csv_name=raw_csv.name)


def assign_patterns(kernels: list[dict[str, Any]], names: list[str]) -> None:
    """Label each kernel row (in ncu's launch order) with the pattern whose stage launched it, in place.

    ``profile_stage`` launches pattern A's stage, then pattern B's, ... inside one NVTX range
    (:mod:`nsa_exp.gpu.profiler`), so a stage of k kernels per pattern (``csr``: fills, the two
    ``prepare_block_csr_kernel`` passes, the cumsum; ``full_bwd``: every kernel of the wrapper) gives
    k x len(names) rows: rows [i*k, (i+1)*k) are pattern i's. The split is accepted only when every
    pattern's block holds the same kernel names in the same order; otherwise every pattern is None.
    """
    k, rest = divmod(len(kernels), len(names)) if names else (0, 1)
    blocks = [[r["kernel"] for r in kernels[i * k:(i + 1) * k]] for i in range(len(names))] if k and not rest else []
    same = bool(blocks) and all(b == blocks[0] for b in blocks)
    for i, row in enumerate(kernels):
        row["pattern"] = names[i // k] if same else None


def export_csv_text(text: str, output: str | Path, context: dict[str, Any], metadata: dict[str, Any],
                    raw_csv_name: str | None = None) -> dict[str, Any]:
    kernels = parse_raw_csv(text)
    assign_patterns(kernels, context.get("patterns_in_launch_order") or [])
    doc = {"schema_version": SCHEMA_VERSION, "kind": "ncu_summary", **context, "raw_csv": raw_csv_name,
           "kernels": kernels, "metadata": metadata}
    write_json(output, doc, "ncu_summary")
    return doc


def run_ncu(config_path: str, pattern_spec: str, stage: str, benchmark_result: str | None, name: str,
            profiles_dir: str | Path, results_dir: str | Path, allow_gpu: bool, python: str) -> dict[str, Any]:
    """Run the profiler on ``scripts/profile_stage.py`` and export the report; returns the summary."""
    parse_patterns(pattern_spec)
    if shutil.which("ncu") is None:
        raise UserError("ncu is not on PATH; install Nsight Compute (it ships with the CUDA toolkit)")
    report = Path(profiles_dir) / name
    report.parent.mkdir(parents=True, exist_ok=True)
    program = [python, "scripts/profile_stage.py", "--config", config_path, "--pattern", pattern_spec,
               "--stage", stage]
    program += ["--benchmark-result", benchmark_result] if benchmark_result else []
    program += ["--allow-gpu"] if allow_gpu else []
    cmd = ncu_command(str(report), range_name(pattern_spec, stage), program)
    proc = subprocess.run(cmd, text=True)
    if proc.returncode != 0:
        raise UserError(f"ncu exited {proc.returncode}: {' '.join(cmd)} (ncu needs GPU performance-counter "
                        f"access: run as root or set NVreg_RestrictProfilingToAdminUsers=0; see docs/NSIGHT.md)")
    context = {"config_path": config_path, "pattern": pattern_spec, "stage": stage,
               "patterns_in_launch_order": parse_patterns(pattern_spec), "nvtx_range": range_name(pattern_spec, stage),
               "benchmark_result": benchmark_result, "ncu_command": cmd, "report": f"{report}.ncu-rep"}
    return export_report(f"{report}.ncu-rep", Path(results_dir) / f"{name}.json", context)


def export_command(args: Any) -> int:
    """``ncu-export``: a .ncu-rep (or its raw CSV) -> summary JSON; ``--reuse-context`` keeps an earlier
    summary's profile context and GPU-host metadata (read through the strict loader)."""
    if not Path(args.report).is_file():
        raise UserError(f"{args.report}: no such file" if not Path(args.report).exists() else
                        f"{args.report}: is not a file")
    OutputPolicy((("REPORT", args.report), ("--reuse-context", args.reuse_context))).claim(args.output, named=True)
    context: dict = {"report": args.report}
    if args.pattern:
        context |= {"pattern": args.pattern, "patterns_in_launch_order": parse_patterns(args.pattern)}
    if args.stage:
        context["stage"] = args.stage
    if args.pattern and args.stage:
        context["nvtx_range"] = range_name(args.pattern, args.stage)
    if args.report.endswith(".csv"):
        try:
            text = read_bounded(args.report, show_path(args.report), MAX_BYTES).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise UserError(f"{args.report}: not UTF-8 text (bad byte at offset {exc.start}); give the CSV "
                            "from `ncu --import R --csv --page raw`") from None
        metadata = base_metadata()
        if args.reuse_context:
            old = load_validated(args.reuse_context, ("ncu_summary",), f"--reuse-context {args.reuse_context}")
            keep = ("config_path", "pattern", "stage", "patterns_in_launch_order", "nvtx_range", "benchmark_result",
                    "ncu_command", "report")
            context = {k: old[k] for k in keep if k in old}
            context["reexported_from"] = {"summary": Path(args.reuse_context).name, "raw_csv": Path(args.report).name,
                                          "utc": utc_now()}
            metadata = old["metadata"]
        export_csv_text(text, args.output, context, metadata, raw_csv_name=Path(args.report).name)
    else:
        export_report(args.report, args.output, context)
    print(f"wrote {args.output}")
    return 0
