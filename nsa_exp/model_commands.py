"""The model's CPU commands: ``calibrate``, ``predict``, ``model-validate`` (argparse namespace in, one schema-valid
document written or a prediction printed); a door, as it sits above the model, checking and figures tiers. Bad
input is one :class:`UserError` line."""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy

from .checking import model_calibration, model_validation
from .checking.validate import load_validated
from .commands import FIGURES_DIR
from .core.config import MAX_T, Shape, cu_seqlens
from .core.families import family, pattern_from_entry
from .errors import UserError
from .figures.model_validation import figure_stem, plot_validation
from .io.metadata import git_state, installed_packages, utc_now
from .io.progress import progress
from .io.store import OutputPolicy, load_document, write_json_unless_same, wrote_or_kept
from .model.arguments import model_shape, parse_packing, parse_params, require_enough_blocks
from .model.calibration import (
    config_label,
    fit_calibration,
    group_size,
    kernel_resources,
    limits_from_device,
    ncu_cross_check,
    occupancy_section,
    predict,
)
from .model.points import (
    FREE_SHAPE_KEYS,
    POINT_KINDS,
    check_same_setup,
    pattern_fanin,
    point_name,
    read_points,
    regenerable,
    result_files,
)
from .model.whatif import TARGET, held_out, validation_row
from .routing.edges import closed_form_edges, effective_edges
from .routing.facts import regenerate
from .routing.fanin import csr_rows, row_fanin
from .routing.files import read_cu_seqlens, read_routing_file, validate_block_indices
from .routing.packing import packed_routing_violations, packing_token

#: what a re-run changes in a model document that computed the same model: when only these differ, the file is kept,
#: and with it its sha256, which each validation records of its calibration (a new user's re-run of docs/MODEL.md's
#: commands left the committed validations failing validate: "the calibration at hand is another file")
VOLATILE = ("metadata", "command")
CHANGED = "its metadata and command"


def _metadata() -> dict[str, Any]:
    """Host metadata of a CPU model document: like ``io.metadata.base_metadata`` without importing torch
    (its version comes from the installed distribution), which these CPU commands never need."""
    return {"created_utc": utc_now(), "argv": list(sys.argv), "git": git_state(), "hostname": platform.node(),
            "platform": platform.platform(),
            "versions": {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
                         "packages": installed_packages()}}


def _all_points(paths: list[str]) -> list:
    """Every routing of every result file under ``paths``; each file must pass ``validate`` first (one line
    naming the file and its failed checks otherwise)."""
    files = result_files(paths)
    for f in progress(files, "reading points (each file validated first)", unit="file"):
        load_validated(f, POINT_KINDS, f"--points {f}",
                       hint="the model reads only points that validate; fix or remove that file")
    return [p for f in files for p in read_points(f)]


def calibrate(args: argparse.Namespace) -> int:
    cset = load_document(args.set, ("model_calibration_set",), f"--set {args.set}")
    policy = OutputPolicy.of(args, ("--set", args.set), ("--kernels", args.kernels), ("--ncu", args.ncu),
                             *(("--points", p) for p in args.points), run=args.set)
    if args.output:
        policy.claim(args.output, named=True)
    points = _all_points(args.points)
    by_name: dict[str, Any] = {}
    for p in points:  # the first file naming a routing wins
        by_name.setdefault(p.name, p)
    chosen = []
    for i, r in enumerate(cset["routings"]):
        name = point_name(r["pattern"], r["T"])
        if name not in by_name:
            raise UserError(f"--set {args.set}: routings[{i}] {name} is not among the --points "
                            f"({len(by_name)} routings read)")
        chosen.append((r["name"], by_name[name]))
    ref = chosen[0][1]
    setup = {"gpu": ref.gpu, "sm_count": ref.sm_count, "shape": ref.shape, "seed": ref.seed,
             "autotune_config": ref.autotune_config}
    check_same_setup(points, setup)
    resources, device = kernel_resources(args.kernels, dict(ref.autotune_config))
    occ = occupancy_section(resources, limits_from_device(device), ref.sm_count, ncu_cross_check(args.ncu))
    bq = int(ref.autotune_config["kwargs"].get("BQ", 1))
    fanins = [pattern_fanin(p.pattern, p.shape, p.T, p.seed) for _, p in chosen]
    params, rows = fit_calibration([p for _, p in chosen], fanins, ref.sm_count, occ["slots_per_sm"], bq)
    gpu_tag = ref.gpu.split()[-1].lower()
    out = policy.claim(args.output or f"results/model/{gpu_tag}_{config_label(ref.autotune_config)}.json",
                       named=args.output is not None)
    doc = model_calibration.build(name=Path(out).stem, chosen=chosen, rows=rows, params=params, bq=bq,
                                  resources=resources, occupancy=occ, set_path=args.set, set_name=cset["name"],
                                  command=shlex.join(["python", "-m", "nsa_exp", *args.argv]), metadata=_metadata())
    wrote = write_json_unless_same(out, doc, "model_calibration", VOLATILE)
    print(f"a={params.a_ms:.4f} ms  c={params.c_ms:.6f} ms  gamma={params.gamma:.3f}  slots {occ['slots_per_sm']}/SM "
          f"x {ref.sm_count} SMs; fit |error| mean {doc['residuals']['mean_abs_pct']:.2f}% max "
          f"{doc['residuals']['max_abs_pct']:.2f}%\n{wrote_or_kept(out, wrote, 'calibration', CHANGED)}")
    return 0


def load_calibration(path: str) -> dict[str, Any]:
    """A schema-valid calibration document (one-line :class:`UserError` otherwise)."""
    return load_document(path, ("model_calibration",), f"--calibration {path}",
                         missing_hint="make one with python -m nsa_exp calibrate")


def _packed_file_fanin(raw: np.ndarray, shape: Any, cu: np.ndarray, label: str) -> np.ndarray:
    """Per-row fan-in of a packed routing file in the varlen program order; UserError if a document breaks a rule."""
    if not np.issubdtype(raw.dtype, np.integer) or raw.ndim != 4:
        raise UserError(f"{label}: a packed routing is integer [1,T,H,S], got {raw.dtype} {list(raw.shape)}")
    bi = raw.astype(np.int32)
    problems = packed_routing_violations(bi, shape, cu)
    if problems:
        raise UserError(f"{label}: {problems[0]}")
    return csr_rows(bi, shape.block_size, cu).fanin


def _routing_fanin(args: argparse.Namespace, cal: dict[str, Any]) -> tuple[np.ndarray, str, Shape]:
    """Per-CSR-row fan-in of ``predict``'s routing, its name and the shape it is at (the calibration's with
    ``--T``, ``--B``, ``--H``, ``--G`` applied: :func:`nsa_exp.model.arguments.model_shape`)."""
    if (args.pattern is None) == (args.routing_file is None):
        raise UserError("predict: pass exactly one of --pattern NAME or --routing-file PATH")
    if args.param and args.pattern is None:
        raise UserError(f"--param {args.param[0]}: parameters of a registered --pattern; a --routing-file has none "
                        "(drop --param or give --pattern instead of --routing-file)")
    base = cal["shape"]
    if args.T is not None and (args.T < 1 or args.T % base["block_size"] or args.T > MAX_T):
        raise UserError(f"--T: {args.T} is not a positive multiple of block_size {base['block_size']} "
                        f"up to {MAX_T} (the config schema's limit)")
    packing = parse_packing(args.packing)
    if packing is not None and (args.B or base["B"]) != 1:
        raise UserError(f"--B: a --packing needs B=1 (one packed row, FLA's cu_seqlens path), got {args.B}")
    if args.pattern is not None:
        T = args.T or base["T"]
        require_enough_blocks(T, base, "--T")
        shape = model_shape(base, T, args.B, args.H, args.G)
        family(args.pattern, "--pattern")
        try:  # a parameter's fault names --param, the option that gave it (it read --pattern.exponnt: a new user)
            pattern = pattern_from_entry({"name": args.pattern, **parse_params(args.param)}, "--param", shape)
        except UserError as exc:
            raise UserError(str(exc).replace("--param.", "--param ", 1)) from None
        entry = {"name": pattern.name, **dict(pattern.params)}
        if packing is not None:  # varlen program order (global_block)*H + h
            packed = tuple(cu_seqlens(packing, T, shape.block_size, "--packing"))
            return (regenerate(pattern, shape, cal["seed"], packed).row_fanin,
                    f"{point_name(entry, T)}-{packing_token(packing)}", shape)
        return regenerate(pattern, shape, cal["seed"]).row_fanin, point_name(entry, T), shape
    want = model_shape(base, base["T"], args.B, args.H, args.G)
    raw, key, _ = read_routing_file(args.routing_file, (want.B, None, want.H, want.S))
    label = f"routing file {args.routing_file}" + (f" [{key}]" if key else "")
    T = args.T or (int(raw.shape[1]) if raw.ndim == 4 else base["T"])
    if T < 1 or T % base["block_size"] or T > MAX_T:
        raise UserError(f"{label}: T={T} is not a positive multiple of block_size {base['block_size']} "
                        f"up to {MAX_T}")
    require_enough_blocks(T, base, label)
    shape = model_shape(base, T, args.B, args.H, args.G)
    cu = read_cu_seqlens(args.routing_file, T, shape.block_size, (want.B, None, want.H, want.S))
    if packing is not None:
        cu = cu_seqlens(packing, T, shape.block_size, "--packing")
    if cu is not None:
        return (_packed_file_fanin(raw, shape, cu, label), f"{args.routing_file}@T={shape.T}-{len(cu) - 1}docs",
                shape)
    validate_block_indices(raw, shape, label)
    edges, closed = effective_edges(raw, shape.block_size), closed_form_edges(shape)
    if edges != closed:
        print(f"note: {label} has {edges:,} edges, not the closed form {closed:,} of T={T} "
              f"(a routing with fewer slots filled; the prediction is for the edges it has)", file=sys.stderr)
    return row_fanin(raw.astype(np.int32), shape.block_size), f"{args.routing_file}@T={shape.T}", shape


#: FLA's NSA group-size minimum (``nsa_exp.core.config.check_shape``): below it a prediction is the model's
#: extrapolation, a shape no config (and no FLA 0a9b9f2 launch) can measure.
FLA_MIN_G = 16


def predict_command(args: argparse.Namespace) -> int:
    cal = load_calibration(args.calibration)
    fanin, name, shape = _routing_fanin(args, cal)
    if shape.group_size < FLA_MIN_G:
        print(f"note: G={shape.group_size} is below FLA's NSA minimum group size {FLA_MIN_G} (a config refuses it): "
              "the prediction extrapolates the model's c scaling, no run can check it", file=sys.stderr)
    pred = predict(cal, fanin, args.order, shape.to_dict())
    out = {"routing": name, "calibration": args.calibration,
           "shape": {"B": shape.B, "T": shape.T, "H": shape.H, "G": shape.group_size}, **pred}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    lb, hr, be = out["lower_bounds"], out["heaviest_row"], out["break_even"]
    g_cal = group_size(cal["shape"])
    print(f"{name} at B={shape.B} H={shape.H} G={shape.group_size} ({args.order} order, {out['programs']} programs "
          f"on {out['slots']} slots): predicted dK/dV {out['predicted_ms']:.3f} ms\n"
          f"  per-query cost c x {out['c_scale']:.3f} (G / G_cal = {shape.group_size}/{g_cal})\n"
          f"  lower bounds: total work / slots {lb['total_work_over_slots_ms']:.3f} ms, heaviest row alone "
          f"{lb['heaviest_row_alone_ms']:.3f} ms\n"
          f"  heaviest row: program {hr['program_id']} (fan-in {hr['fanin']}) runs {hr['start_ms']:.3f}-"
          f"{hr['end_ms']:.3f} ms\n  busy fraction of the slots: {out['busy_fraction']:.3f}\n"
          f"  break-even B*H = {be['BH']:.3f} (heaviest row alone {be['heaviest_row_ms']:.3f} ms x {out['slots']} "
          f"slots / work per (b,h) {be['work_per_bh_ms']:.3f} ms): B*H={shape.B * shape.H} is {be['regime']}\n"
          "  (the model's estimate; set it beside the measured B*H sweep: docs/RESULTS.md, When it matters)")
    return 0


def model_validate(args: argparse.Namespace) -> int:
    cal = load_calibration(args.calibration)
    if args.max_fanin < 0:
        raise UserError(f"--max-fanin: {args.max_fanin} is negative (0 skips the split what-if)")
    policy = OutputPolicy.of(args, ("--calibration", args.calibration), *(("--points", p) for p in args.points))
    out = policy.claim(args.output or f"results/model/{Path(args.calibration).stem}_validation.json",
                       named=args.output is not None)
    fig_dir = str(policy.target(FIGURES_DIR)) if args.figures is None else args.figures
    if fig_dir:  # the figure's two files are claimed now, before the long work (their stem is known)
        stem = Path(fig_dir) / figure_stem({"calibration": {"name": cal["name"]}, "name": Path(out).stem})
        policy.claim_all([stem.with_name(f"{stem.name}.{ext}") for ext in ("png", "svg")],
                         named=args.figures is not None, option="--figures")
    points = _all_points(args.points)
    for p in points:
        if not regenerable(p.pattern):  # routing files, fla-topk: their per-row fan-in is not rebuilt on a CPU
            print(f"skipped {p.name} ({p.source}): its routing cannot be regenerated here", file=sys.stderr)
    points = [p for p in points if regenerable(p.pattern)]
    setup = {"gpu": cal["gpu"]["name"], "sm_count": cal["gpu"]["sm_count"], "shape": cal["shape"],
             "seed": cal["seed"], "autotune_config": cal["autotune_config"]}
    check_same_setup(points, setup, free=FREE_SHAPE_KEYS)  # each point is predicted at its own B, H, G
    validated, excluded = held_out(cal, points)
    cache: dict = {}  # a routing measured in several files is modelled once
    rows = [validation_row(cal, p, args.max_fanin, cache)
            for p in progress(validated, "model-validate: predicting", unit="point")]
    if not rows:
        raise UserError("--points: every routing read was used to calibrate; nothing to validate")
    doc = model_validation.build(name=Path(out).stem, calibration_path=args.calibration, calibration_name=cal["name"],
                                 rows=rows, excluded=excluded, split_max_fanin=args.max_fanin,
                                 command=shlex.join(["python", "-m", "nsa_exp", *args.argv]), metadata=_metadata())
    wrote = write_json_unless_same(out, doc, "model_validation", VOLATILE)
    figures = plot_validation(doc, fig_dir) if fig_dir else []
    for r in rows:
        print(f"{r['name']:<40} measured {r['measured_ms']:8.3f}  predicted {r['predicted_ms']:8.3f}  "
              f"{r['error_pct']:+6.1f}%")
    summary = doc["summary"]
    verdict = "meets the target" if doc["meets_target"] else "MISSES the target (recorded: meets_target false)"
    print(f"{len(rows)} points: |error| mean {summary['mean_abs_pct']:.2f}% max {summary['max_abs_pct']:.2f}% "
          f"(target {TARGET['mean_abs_pct']}% / {TARGET['max_abs_pct']}%): {verdict}")
    print(wrote_or_kept(out, wrote, "validation", CHANGED))
    for path in figures:
        print(f"wrote {path}")
    return 0
