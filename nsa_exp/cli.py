"""Command line: ``python -m nsa_exp {routing,check,smoke,bench} --config configs/e1_h100.json``.

Every user error is one line on stderr and exit code 2 (``--debug`` shows the traceback).

>>> build_parser().parse_args(["bench", "--config", "c.json", "--name", "dev"]).name
'dev'
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from . import REPO_ROOT
from .config import STAGES
from .errors import UserError

DEFAULT_CONFIG = "configs/e1_h100.json"
RESULTS = REPO_ROOT / "results"


def _add_common(p: argparse.ArgumentParser, gpu: bool) -> None:
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"experiment config (default {DEFAULT_CONFIG})")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    if gpu:
        p.add_argument("--allow-gpu", action="store_true",
                       help="run on a GPU other than the config's (recorded in the report)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nsa_exp", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("routing", help="CPU only: edges and fan-in statistics of every pattern")
    _add_common(p, gpu=False)
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema routing_report)")
    p.add_argument("--save", metavar="DIR", help="write each pattern's block_indices as DIR/<pattern>.npy")
    p.add_argument("--output", metavar="PATH", help="also write the JSON report to PATH")
    p.add_argument("--routing-file", action="append", default=[], metavar="PATH",
                   help="also validate and summarise your own block_indices (.npy/.npz/.pt, int32/int64 "
                        "[B,T,H,S], -1 padding); repeatable")
    p.add_argument("--require-equal-edges", action="store_true",
                   help="fail unless every --routing-file has the same edge count")

    p = sub.add_parser("check", help="gates: H100, versions, FLA sources, env vars, equal edges")
    _add_common(p, gpu=True)
    p.add_argument("--output", metavar="PATH", help="report path (default results/reports/<config>_check.json)")

    p = sub.add_parser("smoke", help="correctness: FLA vs naive (T=256); staged vs official (T=2048)")
    _add_common(p, gpu=True)
    p.add_argument("--output", metavar="PATH", help="report path (default results/reports/<config>_smoke.json)")

    p = sub.add_parser("bench", help="time every stage x pattern at the primary shape")
    _add_common(p, gpu=True)
    p.add_argument("--name", help="result name (default: the config's name)")
    p.add_argument("--output", metavar="PATH", help="raw JSON path (default results/raw/<name>.json)")
    p.add_argument("--summary", metavar="PATH", help="CSV path (default results/summaries/<name>.csv)")
    p.add_argument("--repetitions", type=int, help="override the config's timed rounds")
    p.add_argument("--resume", action="store_true", help="continue an interrupted bench from its journal")
    p.add_argument("--discard-journal", action="store_true", help="delete an interrupted bench's journal first")
    p = sub.add_parser("profile-stage", help="launch one stage inside NVTX range nsa_<pattern>_<stage> (for ncu)")
    _add_common(p, gpu=True)
    p.add_argument("--pattern", required=True, help="a pattern, or A-vs-B (e.g. local-vs-sink-heavy)")
    p.add_argument("--stage", required=True, choices=STAGES)
    p.add_argument("--benchmark-result", help="replay the autotune configs this bench result recorded")

    p = sub.add_parser("ncu", help="run Nsight Compute on one stage and export its metrics to JSON")
    _add_common(p, gpu=True)
    p.add_argument("--pattern", default="local-vs-sink-heavy", help="a pattern or A-vs-B")
    p.add_argument("--stage", required=True, choices=STAGES)
    p.add_argument("--benchmark-result", help="bench result whose autotune configs to replay "
                   "(default results/raw/<config>.json when it exists)")
    p.add_argument("--name", help="report name (default <config>_<pattern>_<stage>)")

    p = sub.add_parser("ncu-export", help="export an existing .ncu-rep (or its raw CSV) to summary JSON")
    p.add_argument("report", help="a .ncu-rep file, or a CSV from `ncu --import R --csv --page raw`")
    p.add_argument("--output", required=True, help="summary JSON path")
    p.add_argument("--reuse-context", metavar="SUMMARY", help="re-parse a raw CSV, keeping this earlier summary's "
                   "profile context and GPU-host metadata (recorded as reexported_from)")
    p.add_argument("--pattern", help="the profiled pattern spec (e.g. local-vs-sink-heavy), recorded")
    p.add_argument("--stage", choices=STAGES, help="the profiled stage, recorded")
    p.add_argument("--debug", action="store_true", help="show tracebacks")

    p = sub.add_parser("report", help="docs/RESULTS.md + results/analysis/<name>.json from committed results")
    p.add_argument("--result", default="results/raw/e1_h100.json", help="the formal raw result")
    p.add_argument("--repeat", default="results/raw/e1_h100_repeat.json", help="an independent repeat ('' for none)")
    p.add_argument("--ncu", nargs="*", default=None, help="ncu summaries to cite (default results/ncu/e1_h100_*.json)")
    p.add_argument("--output", default="docs/RESULTS.md")
    p.add_argument("--analysis", help="analysis JSON path (default results/analysis/<result stem>.json)")
    p.add_argument("--no-readme", action="store_true", help="do not rewrite README's results block")
    p.add_argument("--debug", action="store_true", help="show tracebacks")

    p = sub.add_parser("lock", help="requirements-lock.txt from the versions a real bench run recorded")
    p.add_argument("--from", dest="source", required=True, metavar="RESULT", help="results/raw/<name>.json")
    p.add_argument("--output", default="requirements-lock.txt")
    p.add_argument("--debug", action="store_true", help="show tracebacks")

    p = sub.add_parser("validate", help="validate result files (ours or a third party's): schema + invariants")
    p.add_argument("paths", nargs="+", metavar="PATH", help="JSON results/reports or summary CSVs")
    p.add_argument("--json", action="store_true", help="print one validation report per file as a JSON list")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _validate(args: argparse.Namespace) -> int:
    from .schema import schema_errors
    from .validate import format_report, validate_path

    reports = [validate_path(path) for path in args.paths]
    for report in reports:
        assert not schema_errors(report, "validation_report", "report"), "validation report off-schema"
    if args.json:
        print(json.dumps(reports, indent=1))
    else:
        for report in reports:
            print(format_report(report))
    return 0 if all(r["passed"] for r in reports) else 1


def _run(args: argparse.Namespace) -> int:
    if args.command == "validate":
        return _validate(args)
    if args.command == "ncu-export":
        return _ncu_export(args)
    if args.command == "report":
        from .report import build_report

        ncu = args.ncu if args.ncu is not None else sorted(
            str(p.relative_to(REPO_ROOT)) for p in (RESULTS / "ncu").glob(f"{Path(args.result).stem}_*.json"))
        analysis = args.analysis or f"results/analysis/{Path(args.result).stem}.json"
        command = "python -m nsa_exp report" + (f" --result {args.result}" if args.result != "results/raw/e1_h100.json"
                                                else "")
        build_report(args.result, args.repeat or None, ncu, args.output, analysis, command,
                     readme=None if args.no_readme else str(REPO_ROOT / "README.md"))
        print(f"wrote {args.output} and {analysis}")
        return 0
    if args.command == "lock":
        from .lock import write_lock

        lines = write_lock(args.source, args.output)
        print(f"wrote {args.output} ({lines} pins)")
        return 0
    from .config import load_config

    config = load_config(args.config)
    if args.command == "routing":
        from .routing_files import format_files_table
        from .routing_report import (
            format_table,
            routing_files_section,
            routing_report,
            save_routings,
            write_routing_report,
        )

        files = routing_files_section(config.shape, args.routing_file, args.require_equal_edges)
        report, routings = routing_report(config)
        if files:
            report["routing_files"] = files
        if args.output:
            write_routing_report(report, args.output)
        if args.save:
            for path in save_routings(routings, args.save):
                print(f"wrote {path}", file=sys.stderr)
        table = format_table(report) + ("\n" + format_files_table(files) if files else "")
        print(json.dumps(report, indent=1) if args.json else table)
        return 0
    if args.command == "check":
        from .check import run_check

        out = args.output or RESULTS / "reports" / f"{config.name}_check.json"
        run_check(config, args.allow_gpu, out)
        print(f"check passed; report {out}")
        return 0
    if args.command == "smoke":
        from .smoke import run_smoke

        out = args.output or RESULTS / "reports" / f"{config.name}_smoke.json"
        report = run_smoke(config, args.allow_gpu, out)
        for name, m in report["naive"]["metrics"].items():
            print(f"naive  {name}: rel_l2 {m['rel_l2']:.2e} max_abs/max|ref| {m['max_abs_rel']:.2e}")
        for pattern, ms in report["staged_vs_official"]["patterns"].items():
            cells = [f"{g} rel_l2 {m['rel_l2']:.1e} max_ulp {m['max_ulp']} ({m['n_different']} differ)"
                     for g, m in ms.items()]
            print(f"staged {pattern}: " + ", ".join(cells))
        print(f"smoke passed; report {out}")
        return 0
    if args.command == "bench":
        from .bench import format_summary, run_bench

        if args.repetitions is not None and args.repetitions < 1:
            raise UserError("--repetitions: must be a positive integer")
        name = args.name or config.name
        out = Path(args.output) if args.output else RESULTS / "raw" / f"{name}.json"
        summary = Path(args.summary) if args.summary else RESULTS / "summaries" / f"{out.stem}.csv"
        result = run_bench(config, args.allow_gpu, out, summary, args.repetitions, args.resume, args.discard_journal)
        print(format_summary(result))
        print(f"wrote {out} and {summary}")
        return 0
    if args.command == "profile-stage":
        from .profile import profile_stage

        info = profile_stage(config, args.pattern, args.stage, args.benchmark_result, args.allow_gpu)
        print(json.dumps(info))
        return 0
    if args.command == "ncu":
        from .ncu import run_ncu

        bench = args.benchmark_result
        if bench is None and (RESULTS / "raw" / f"{config.name}.json").is_file():
            bench = str((RESULTS / "raw" / f"{config.name}.json").relative_to(REPO_ROOT))
        name = args.name or f"{config.name}_{args.pattern}_{args.stage}"
        doc = run_ncu(args.config, args.pattern, args.stage, bench, name, REPO_ROOT / "profiles",
                      RESULTS / "ncu", args.allow_gpu, sys.executable)
        for k in doc["kernels"]:
            m = k["metrics"]
            print(f"{k['pattern']}: {k['kernel']} {m['duration_ns']} ns, occupancy {m['achieved_occupancy_pct']}%, "
                  f"waves {m['waves_per_sm']}, top stall {k['top_stalls'][:1]}")
        print(f"wrote {RESULTS / 'ncu' / (name + '.json')}")
        return 0
    raise UserError(f"unknown command {args.command!r}")


def _ncu_export(args: argparse.Namespace) -> int:
    from .metadata import base_metadata
    from .ncu import export_csv_text, export_report
    from .profile import parse_patterns, range_name

    context: dict = {"report": args.report}
    if args.pattern:
        context |= {"pattern": args.pattern, "patterns_in_launch_order": parse_patterns(args.pattern)}
    if args.stage:
        context["stage"] = args.stage
    if args.pattern and args.stage:
        context["nvtx_range"] = range_name(args.pattern, args.stage)
    if args.report.endswith(".csv"):
        try:
            text = Path(args.report).read_text()
        except OSError as exc:
            raise UserError(f"{args.report}: cannot be read: {exc.strerror}") from None
        metadata = base_metadata()
        if args.reuse_context:
            from .metadata import utc_now

            old = json.loads(Path(args.reuse_context).read_text())
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except UserError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted; no partial output was written", file=sys.stderr)
        return 130
    except Exception as exc:  # an internal error: still one line unless --debug
        if args.debug:
            traceback.print_exc()
        print(f"error: internal error {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
