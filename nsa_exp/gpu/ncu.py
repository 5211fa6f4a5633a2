"""``invoke ncu``: run Nsight Compute on one stage, then export per-kernel metrics to JSON.

The export reads ncu's own CSV of the report's raw page (``ncu --import R --csv --page raw``),
never its screen output (parsed by :mod:`nsa_exp.io.ncu_csv`). Per profiled kernel: duration, grid and
block, registers per thread, shared memory, theoretical and achieved occupancy, waves per SM, SM / DRAM /
memory throughput, L2 hit rate, and the top warp-stall reasons (cycles per issued instruction).

>>> ncu_command("rep", "nsa_local_dkv_core", ["python", "x.py"])[:6]
['ncu', '--set', 'full', '--nvtx', '--nvtx-include', 'nsa_local_dkv_core/']
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from ..checking import ncu_summary
from ..checking.validate import load_validated
from ..core.nvtx import parse_patterns, range_name
from ..errors import UserError
from ..io.metadata import base_metadata, utc_now
from ..io.paths import recorded_argv, recorded_path
from ..io.reader import read_bounded, same_file, show_path
from ..io.store import OutputPolicy, write_json, write_text_atomic
from ..io.strict_json import MAX_BYTES


def ncu_command(report: str, nvtx_range: str, program: list[str], clock_control: str = "none") -> list[str]:
    """The ncu command line (``--clock-control none``: leave the GPU's clocks as they are)."""
    return ["ncu", "--set", "full", "--nvtx", "--nvtx-include", f"{nvtx_range}/", "--clock-control",
            clock_control, "-f", "-o", report, *program]


def export_report(report: str | Path, output: str | Path, context: dict[str, Any]) -> dict[str, Any]:
    """``ncu --import REPORT --csv --page raw`` -> schema-valid summary JSON at ``output``."""
    if shutil.which("ncu") is None:
        raise UserError("ncu is not on PATH; install Nsight Compute (it ships with the CUDA toolkit)")
    proc = subprocess.run(["ncu", "--import", str(report), "--csv", "--page", "raw"], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        raise UserError(f"ncu --import {report} failed: {proc.stderr.strip().splitlines()[-1:]}")
    raw_csv = Path(output).with_suffix(".raw.csv")
    return export_csv_text(proc.stdout, output, context, base_metadata(), raw_csv_name=raw_csv.name, keep_raw=raw_csv)


def export_csv_text(text: str, output: str | Path, context: dict[str, Any], metadata: dict[str, Any],
                    raw_csv_name: str | None = None, keep_raw: Path | None = None) -> dict[str, Any]:
    """The summary of ncu's raw CSV ``text`` written to ``output``; ``keep_raw``: where the CSV is kept too, written
    only once the summary is built (a CSV of no kernel rows left its copy behind: an attacker, 2026-12-07)."""
    doc = ncu_summary.build(text, context, metadata, raw_csv_name)
    if keep_raw is not None:
        write_text_atomic(keep_raw, text)
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
    # paths as every result records them (repository-relative), as the command line below is recorded
    context = {"config_path": recorded_path(config_path), "pattern": pattern_spec, "stage": stage,
               "patterns_in_launch_order": parse_patterns(pattern_spec), "nvtx_range": range_name(pattern_spec, stage),
               "benchmark_result": recorded_path(benchmark_result) if benchmark_result else None,
               "ncu_command": recorded_argv(cmd),
               "report": recorded_path(f"{report}.ncu-rep")}
    return export_report(f"{report}.ncu-rep", Path(results_dir) / f"{name}.json", context)


def _require_pattern(context: dict, csv: bool) -> None:
    """A summary names the pattern spec its launch ran (``--pattern``, or for a raw CSV the earlier summary
    ``--reuse-context`` read): one without it FAILed its own validate with a KeyError (a new user, 2026-12-06)."""
    if "pattern" not in context:
        raise UserError("--pattern: required (the profiled pattern spec, e.g. local-vs-sink-heavy, as `invoke ncu` "
                        "records it)" + (", or --reuse-context OLD.json to take it from an earlier summary" if csv
                                       else ""))


def export_command(args: Any) -> int:
    """``ncu-export``: a .ncu-rep (or its raw CSV) -> summary JSON; ``--reuse-context`` keeps an earlier
    summary's profile context and GPU-host metadata (read through the strict loader)."""
    if not Path(args.report).is_file():
        raise UserError(f"{args.report}: no such file" if not Path(args.report).exists() else
                        f"{args.report}: is not a file")
    policy = OutputPolicy.of(args, ("REPORT", args.report), ("--reuse-context", args.reuse_context))
    policy.claim(args.output, named=True)
    # a raw CSV is kept beside the summary as <summary stem>.raw.csv (as the export of a report keeps it), where
    # validate looks for it; a CSV already there is read in place
    beside = Path(args.output).with_suffix(".raw.csv")
    copy_csv = args.report.endswith(".csv") and not same_file(args.report, beside)
    if copy_csv:
        policy.claim(beside, named=True, option="--output")
    context: dict = {"report": recorded_path(args.report)}
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
            # the summary this re-export is and the CSV beside it (validate holds a re-export to its own file name)
            context["reexported_from"] = {"summary": Path(args.output).name, "raw_csv": beside.name,
                                          "utc": utc_now()}
            metadata = old["metadata"]
        _require_pattern(context, csv=True)
        export_csv_text(text, args.output, context, metadata, raw_csv_name=beside.name,
                        keep_raw=beside if copy_csv else None)
    else:
        _require_pattern(context, csv=False)
        export_report(args.report, args.output, context)
    print(f"wrote {args.output}" + (f" and {beside}" if copy_csv else ""))
    return 0
