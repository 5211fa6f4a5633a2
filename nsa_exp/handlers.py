"""The CPU commands' handlers (argparse namespace in, files written, a few lines printed, exit code out).

:mod:`nsa_exp.cli` builds the parser and binds these with ``set_defaults(func=...)``; the GPU commands'
handlers are :mod:`nsa_exp.gpu.commands` (imported only when such a command runs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import REPO_ROOT
from .analysis.compare import DEFAULT_FLOOR, check_resamples
from .analysis.compare import format_table as format_compare_table
from .analysis.flush_study import format_table as format_flush_table
from .analysis.noise_table import NOISE_TABLE
from .analysis.noise_table import format_table as format_noise_table
from .analysis.run_cost import cost_of_files
from .analysis.stop_replay import stop_replay_of_files
from .arguments import parse_slurm
from .checking import compare, flush_study, noise_table, routing_report
from .checking.checks import source_missing
from .checking.kinds import KIND_RECORDS
from .checking.validate import format_report, validate_paths
from .commands import FIGURES_DIR
from .core.environment import door_gates
from .errors import UserError
from .figures.autotune_heatmap import plot_autotune_heatmap
from .figures.fanin_latency import plot_fanin_latency
from .figures.sweep import plot_sweep
from .io.config_files import load_config
from .io.metadata import base_metadata
from .io.paths import recorded_path
from .io.progress import start
from .io.schema_sync import sync_schemas
from .io.schemas import schema_errors
from .io.store import OutputPolicy, check_writable, frame_csv, write_json, write_json_unless_same, wrote_or_kept
from .report.build import build_report
from .report.data import noise_sources
from .report.lock import LOCK_FILE, write_lock
from .report.manifest import OUTPUT, PROVENANCE, RESULT, committed_inputs
from .report.releases import release_table
from .routing.files import format_files_table
from .routing.report import (
    format_table,
    routing_files_section,
    save_routings,
    time_generation,
    write_routing_report,
)
from .sweeps.plan import Point, load_sweep, sweep_dirs
from .sweeps.run import gpu_present, points_to_run, run_sweep
from .sweeps.table import sweep_table


def _wrote(paths: list[Path]) -> int:
    """One ``wrote PATH`` line per file, relative to the working folder where it lies inside it (README.md was
    printed absolute beside relative lines: a new user, 2026-12-07)."""
    for path in paths:
        print(f"wrote {recorded_path(path, Path.cwd())}")
    return 0


def _figure_dir(args: argparse.Namespace, policy: OutputPolicy, option: str = "out_dir") -> tuple[str, bool]:
    """The figures folder and whether the user named it (an explicit folder may be written into): the named one,
    else :data:`FIGURES_DIR` with ``--publish``, else ``runs/<name>/figures`` (:meth:`OutputPolicy.target`)."""
    given = getattr(args, option)
    return (given, True) if given is not None else (str(policy.target(FIGURES_DIR)), False)


def cmd_routing(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    policy = OutputPolicy.of(args, ("--config", args.config), *(("--routing-file", f) for f in args.routing_file),
                             run=config.name)
    # --save's folder checked by the door (arguments._routing); its files and --output claimed together, so the report
    # is never one of the routings' files (--output DIR/local.npy --save DIR wrote the report, then replaced it)
    ext = "npy" if config.cu_seqlens is None else "npz"
    saved = [Path(args.save) / f"{p.name}.{ext}" for p in config.patterns] if args.save else []
    policy.claim_each(*([(args.output, True, "--output")] if args.output else []),
                      *((path, True, "--save") for path in saved))
    files = routing_files_section(config.shape, args.routing_file, args.require_equal_edges,
                                  packed=config.cu_seqlens is not None)
    report, routings = routing_report.build(config)
    if files:
        report["routing_files"] = files
    if args.output:
        write_routing_report(report, args.output)
        print(f"wrote {args.output}", file=sys.stderr)  # as --save's files are (a new user saw no sign of it)
    if args.save:
        for path in save_routings(routings, args.save, config.cu_seqlens):
            print(f"wrote {path}", file=sys.stderr)
    table = format_table(report) + ("\n" + format_files_table(files) if files else "")
    print(json.dumps(report, indent=1) if args.json else table)
    return 0


def cmd_routing_time(args: argparse.Namespace) -> int:
    rows = time_generation(load_config(args.config), tuple(args.lengths), args.repeats)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, median of {args.repeats}")
    for T in args.lengths:
        sub = [r for r in rows if r["T"] == T]
        cells = "  ".join(f"{r['pattern']} {r['median_s']:.3f}s" for r in sub)
        print(f"T={T:>7}: {cells}  all {len(sub)} {sum(r['median_s'] for r in sub):.3f}s")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    reports = validate_paths(args.paths, args.also, args.routing_file, args.release_dir)
    for report in reports:
        assert not schema_errors(report, "validation_report", "report"), "validation report off-schema"
    if args.json:
        print(json.dumps(reports, indent=1))
    else:
        for report in reports:
            print(format_report(report))
    if args.strict and (missing := [(r["path"], u["path"]) for r in reports for u in r.get("unverified", [])
                                    if source_missing(u)]):
        print(f"--strict: {len(missing)} check group(s) unverifiable (a source not found, an argv not the "
              f"CLI's, or a GPU not in the table), first {missing[0][0]}: {missing[0][1]}; exit 1", file=sys.stderr)
        return 1
    return 0 if all(r["passed"] for r in reports) else 1


def cmd_report(args: argparse.Namespace) -> int:
    inputs = committed_inputs(result=args.result, repeat=args.repeat, ncu=args.ncu,
                              autotune_matrix=args.autotune_matrix, tune_arms=args.tune_arms, h200=args.h200,
                              h200_repeat=args.h200_repeat)
    if args.publish and (untracked := inputs.uncommitted()):
        raise UserError(f"{untracked[0]}: not a committed file; --publish builds the published report from committed "
                        "results only (commit it first, or drop --publish to write runs/)")
    policy = OutputPolicy.of(args, ("--result", inputs.result), ("--repeat", inputs.repeat), ("--h200", inputs.h200),
                             ("--h200-repeat", inputs.h200_repeat),
                             ("--autotune-matrix", inputs.autotune_matrix), *(("--ncu", p) for p in inputs.ncu),
                             *(("--tune-arms", p) for p in inputs.tune_arms),
                             # every committed result it reads (the noise table, sweep points, ...), its own
                             # analyses aside: --analysis results/noise/floors.json replaced the table (an attacker)
                             *(("a committed input", p) for p in inputs.result_files()
                               if not inputs.relative(p).startswith("results/analysis/")), run=args.result)
    wanted = [(args.output or OUTPUT, args.output is not None, "--output"),
              (args.analysis or f"results/analysis/{Path(args.result).stem}.json", args.analysis is not None,
               "--analysis"),
              *([(REPO_ROOT / "README.md", False, "--update-readme")] if args.update_readme else []),
              *([(args.provenance, args.provenance != PROVENANCE, "--provenance")] if args.provenance else [])]
    output, analysis, *rest = policy.claim_each(*wanted)
    readme = rest.pop(0) if args.update_readme else None
    provenance = rest.pop(0) if args.provenance else None
    command = "python -m nsa_exp report" + (f" --result {args.result}" if args.result != RESULT else "")
    wrote_analysis = build_report(inputs, str(output), str(analysis), command,
                                  readme=str(readme) if readme else None, formal=args.formal,
                                  provenance=str(provenance) if provenance else None,
                                  readme_from=REPO_ROOT / "README.md", provenance_from=args.provenance or None)
    _wrote([output])
    if not wrote_analysis:  # a new user read "wrote" for a file left as it was
        print(wrote_or_kept(analysis, False, "analysis"))
    return _wrote([*([analysis] if wrote_analysis else []), *([readme] if readme else []),
                   *([provenance] if provenance else [])])


def cmd_compare(args: argparse.Namespace) -> int:
    request = args.compare_request  # the options checked and the output claimed before any file was read (arguments)
    output = request.output
    doc = compare.build(request.a, request.b, noise_from=list(request.noise_from) or None, floor=request.floor,
                        cycles=request.cycles, fail_on=request.fail_on, resamples=request.resamples)
    if output:
        write_json(output, doc, "compare")
    print(format_compare_table(doc))
    lacking = doc["noise_floor"].get("lacking")
    if lacking:
        peer_stages = any(":" in s for s in lacking)  # a peer result's <peer>:<stage>: bench's table has no row
        print(f"compare: the noise table has no floor for {', '.join(lacking)}; those stages use the documented "
              f"fallback {DEFAULT_FLOOR:g} (" + ("the table is built from bench results and sweep points, which time "
              "no peer stage; pass --floor to judge them at another floor)" if peer_stages else
              "regenerate the table with `python -m nsa_exp noise-table`, or pass --floor / --noise-from)"),
              file=sys.stderr)
    if output:
        print(f"wrote {output}")
    if doc["failed"]:
        hits = (sum(n for v, n in doc["counts"].items() if v != "same") if request.fail_on == "any-change"
                else doc["counts"].get(request.fail_on, 0))
        what = "other than same" if request.fail_on == "any-change" else request.fail_on
        print(f"--fail-on {request.fail_on}: {hits} verdict(s) {what}; exit 1", file=sys.stderr)
    return 1 if doc["failed"] else 0


def cmd_cost(args: argparse.Namespace) -> int:
    print(cost_of_files(args.paths))
    return 0


def cmd_stop_replay(args: argparse.Namespace) -> int:
    check_resamples(args.resamples)
    print(stop_replay_of_files(args.paths, args.resamples, args.ci_abs_ms))
    return 0


def cmd_release_table(args: argparse.Namespace) -> int:
    check_resamples(args.resamples)
    print(release_table(args.paths, args.resamples))
    return 0


def cmd_flush_study(args: argparse.Namespace) -> int:
    if args.output:
        OutputPolicy.of(args, ("RAW", args.raw)).claim(args.output, named=True)  # a named path: never moved
    study = {**flush_study.build(args.raw), "metadata": base_metadata(import_gpu=False)}  # a CPU command: no torch
    # the same study is kept: METHOD.md's regeneration of the committed file changed only its metadata
    wrote = bool(args.output) and write_json_unless_same(args.output, study, "flush_study")
    print(format_flush_table(study))
    if args.output:
        print(wrote_or_kept(args.output, wrote, "study"))
    return 0


def cmd_noise_table(args: argparse.Namespace) -> int:
    output = OutputPolicy.of(args, run="noise-table").claim(args.output or NOISE_TABLE, named=args.output is not None)
    start("noise-table: validating every committed bench result and sweep point it is derived from")
    runs, excluded = noise_sources(committed_inputs())
    doc = noise_table.build(runs, excluded)
    wrote = write_json_unless_same(output, doc, "noise_table")
    print(format_noise_table(doc))
    print(wrote_or_kept(output, wrote, "noise table"))
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    output = OutputPolicy.of(args, ("--from", args.source)).claim(args.output or LOCK_FILE,
                                                                  named=args.output is not None)
    lines = write_lock(args.source, output)
    print(f"wrote {output} ({lines} pins)")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    policy = OutputPolicy.of(args, ("--input", args.input), ("--result", args.result))
    out_dir, named = _figure_dir(args, policy)
    return _wrote(plot_fanin_latency(args.input, args.x, out_dir, args.result,
                                     claim=lambda p: policy.claim(p, named=named, option="--out-dir")))


def cmd_autotune_heatmap(args: argparse.Namespace) -> int:
    policy = OutputPolicy.of(args, ("--input", args.input))
    out_dir, named = _figure_dir(args, policy)
    return _wrote(plot_autotune_heatmap(args.input, out_dir,
                                        claim=lambda p: policy.claim(p, named=named, option="--out-dir")))


def measure_sweep_point(point: Point, allow_gpu: bool, out_dir: Path) -> dict[str, Any]:
    """The GPU tier's sweep-point arm (:func:`nsa_exp.gpu.sweep_point.measure_point`), imported only when a point
    is measured (torch and FLA then, after the sweep's argument checks); a module-level function, so submitit
    pickles it by reference into its jobs."""
    from .gpu.sweep_point import measure_point  # noqa: PLC0415 - the GPU tier only when a point is measured

    return measure_point(point, allow_gpu, out_dir)


def cmd_sweep(args: argparse.Namespace) -> int:
    points = load_sweep(args.config, args.routing_file, stop_rule=args.stop_rule)
    if not points:
        raise UserError(f"{args.config}: sweep.patterns: the grid is empty (no patterns and no routing_files)")
    policy = OutputPolicy.of(args, ("--config", args.config), *(("--routing-file", f) for f in args.routing_file),
                             run=points[0].sweep)
    out_dir, csv = (policy.target(p) for p in sweep_dirs(points[0].sweep))  # runs/<sweep>/sweeps/ unless --publish
    csv = Path(args.output) if args.output else csv
    policy = replace(policy, inputs=(*policy.inputs, ("the point folder", out_dir)))
    if args.table_only and args.output:  # a path that cannot be written is refused before the points are read (the
        try:  # claim itself comes at the write: a table rebuilt byte for byte needs no --overwrite)
            check_writable(csv)
        except UserError as exc:
            raise UserError(f"--output {exc}") from None
    if not args.table_only:
        slurm = parse_slurm(args.slurm)  # --points-per-job, --executor and --slurm checked by arguments.CHECKS
        todo = points_to_run(points, out_dir)
        if todo:  # new points change the table: claimed before any GPU work
            policy.claim(csv, named=args.output is not None)
        elif not gpu_present():  # asked to measure, nothing to measure, and nothing to measure it on
            raise UserError(f"sweep {points[0].sweep}: no CUDA GPU on this machine, and all {len(points)} points are "
                            f"already done under {recorded_path(out_dir)}/ (nothing to measure); pass --table-only "
                            f"to rebuild {recorded_path(csv)} from them")
        if todo and args.executor in ("inline", "local"):  # the points run on this host: its first two gates here,
            # torch-free (a point's own gates run them again), as a GATED command's door does (arguments.GATED)
            door_gates(points[0].config["gpu"]["required_name"])
        done = run_sweep(points, out_dir, args.allow_gpu, args.executor, measure=measure_sweep_point,
                         points_per_job=args.points_per_job, slurm=slurm)
        for p in points:
            if p.refused:
                print(f"sweep point {p.point_id}: {p.refused}")
        print(f"sweep {points[0].sweep}: {len(done['ran'])} points run, {len(done['skipped'])} already done"
              + (f", {len(done['refused'])} refused (memory)" if done["refused"] else ""))
    elif not out_dir.is_dir():
        raise UserError(f"{out_dir}: no point folder of this run yet; --publish rebuilds the published table from "
                        f"{sweep_dirs(points[0].sweep)[0]}, or run the sweep on a GPU first; nothing written")
    frame = sweep_table(out_dir)
    if frame.empty:
        raise UserError(f"sweep {points[0].sweep}: no valid point file under {out_dir}/ (0 of {len(points)} points "
                        "measured); run the sweep on a GPU first (--publish reads the published points); nothing "
                        "written")
    print(frame.to_string(index=False, columns=["point_id", "fanin_max", "fanin_cv", "dkv_median_ms",
                                                "ratio_vs_local"], float_format="%.3f"))
    wrote = policy.write(csv, frame_csv(csv, frame, "sweep_row").encode("utf-8"), named=args.output is not None)
    print(f"{'wrote' if wrote else 'unchanged (rebuilt byte for byte):'} {csv} ({len(frame)} points)")
    return 0


def cmd_schemas(args: argparse.Namespace) -> int:
    stale = sync_schemas(write=args.write, records=KIND_RECORDS)
    for path in stale:
        print(f"{'wrote' if args.write else 'drifts from the vocabulary:'} {path.relative_to(REPO_ROOT)}")
    if not stale:
        print("schemas/ match the vocabulary")
    return 1 if stale and not args.write else 0


def cmd_sweep_plot(args: argparse.Namespace) -> int:
    policy = OutputPolicy.of(args, ("--table", args.table))
    out_dir, named = _figure_dir(args, policy)
    return _wrote(plot_sweep(args.table, out_dir, claim=lambda p: policy.claim(p, named=named, option="--out-dir")))
