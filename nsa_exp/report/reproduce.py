"""``reproduce``'s CPU side: which published run a stranger's GPU run is judged against, the verdict under the
project's noise floors, the one screen, the submission folder's provenance note, and the command's argument
checks (torch-free, run before any gate by :data:`nsa_exp.arguments.CHECKS`).

The GPU side (check -> smoke -> bench under the stop rule -> validate -> compare) is
:mod:`nsa_exp.gpu.reproduce`; everything it decides from the records is here, so a CPU test pins it.

- **Published run**: :data:`PUBLISHED` (the formal run of each GPU model, from :mod:`.manifest`); a run on
  another GPU is judged against the nearest published GPU (:func:`published_for`: same model, else the
  closest HBM bandwidth of :mod:`nsa_exp.core.gpus`, else the H100, the experiment's primary GPU) and the
  screen says so.
- **Floors**: the committed noise table, read by :func:`nsa_exp.checking.compare.build` as ``compare``
  reads it (per stage, the larger floor of the two GPUs; ``--noise-table`` another table, ``--floor`` one floor for
  every stage, recorded in the compare document).
- **Verdict**: :func:`nsa_exp.checking.compare.build`; the run agrees (exit 0)
  when no cell's verdict is ``slower`` or ``faster`` (a cell ``unclear`` is unresolved, not a difference, and
  is counted on the screen); otherwise it differs (exit 1).

>>> published_for("NVIDIA H200").path, published_for("NVIDIA H100 80GB HBM3").gpu
('results/raw/e1_h200.json', 'H100')
>>> p = published_for("NVIDIA GH200 480GB"); (p.gpu, p.same_model)
('H100', False)
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from .. import REPO_ROOT
from ..analysis.bootstrap import bootstrap_ratio_ci
from ..analysis.noise_table import read_floors
from ..checking.validate import load_validated
from ..core.families import BASELINE_PATTERN
from ..core.gpus import gpu_spec
from ..core.records import BenchResult
from ..errors import UserError
from ..io.config_files import load_config
from ..io.store import RUNS_DIR, OutputPolicy, check_writable, failed_report_path, is_published
from . import manifest
from .data import short_gpu

#: The published formal run of each GPU model a reproduction is judged against.
PUBLISHED: dict[str, str] = {"H100": manifest.RESULT, "H200": manifest.H200}
#: A CUDA device name standing for each published GPU (for its row of :data:`nsa_exp.core.gpus.GPUS`).
PUBLISHED_DEVICE = {"H100": "NVIDIA H100 80GB HBM3", "H200": "NVIDIA H200"}
#: The stages of "the answer" (ratio to local per routing, with 95% CIs), in the order the screen shows them.
ANSWER_STAGES = ("dkv_core", "csr", "dq_core")
STAGE_TITLES = {"dkv_core": "dK/dV core", "csr": "CSR", "dq_core": "dQ core"}
#: Verdicts that mean "differs beyond the floor" (compare's ``unclear`` is unresolved, not a difference).
DIFFERS = ("slower", "faster")


@dataclass(frozen=True)
class Published:
    """The published run a reproduction is judged against: its GPU key, path and why it was chosen."""

    gpu: str
    path: str
    same_model: bool
    note: str


def published_for(gpu_name: str, override: str | None = None) -> Published:
    """The published run for a run on the CUDA device ``gpu_name``; ``override`` (``--published``) names one.

    Same GPU model: its formal run; another: the published GPU with the closest HBM bandwidth (its row of
    :data:`nsa_exp.core.gpus.GPUS`), else with the closest memory, else the H100 (the primary GPU)."""
    mine = short_gpu(gpu_name)
    if override:
        return Published(mine, str(override), True, f"--published {override} (given)")
    if mine in PUBLISHED:
        return Published(mine, PUBLISHED[mine], True, f"the published {mine} formal run (same GPU model)")
    spec = gpu_spec(gpu_name)
    theirs = {k: gpu_spec(v) for k, v in PUBLISHED_DEVICE.items()}
    for field in ("hbm_tbs", "memory_gib"):
        value = getattr(spec, field, None) if spec is not None else None
        if value is not None:
            key = min(theirs, key=lambda k: abs(getattr(theirs[k], field) - value))
            return Published(key, PUBLISHED[key], False, f"no published run of {gpu_name}; the nearest is the {key} "
                             f"({field} {getattr(theirs[key], field)} vs {value}): judge with care")
    return Published("H100", PUBLISHED["H100"], False, f"no published run of {gpu_name} and no nearer GPU in the GPU "
                     "table; judged against the H100 (the experiment's primary GPU): judge with care")


def exit_code(compare_doc: Mapping[str, Any]) -> int:
    """0 when no cell differs beyond its floor (no ``slower`` / ``faster`` verdict), else 1."""
    return 1 if any(r["verdict"] in DIFFERS for r in compare_doc["rows"]) else 0


def own_answer(result: BenchResult, stages: Sequence[str] = ANSWER_STAGES) -> list[dict[str, Any]]:
    """The answer as this run sees it: per routing and stage, median / local median and its paired 95% CI
    (rounds resampled together, :func:`nsa_exp.analysis.bootstrap.bootstrap_ratio_ci`)."""
    base = result.patterns[BASELINE_PATTERN]
    rows = []
    for name, p in result.patterns.items():
        if name == BASELINE_PATTERN:
            continue
        for s in stages:
            if s not in p.stages or s not in base.stages:
                continue
            num, den = np.asarray(p.stages[s].raw_ms), np.asarray(base.stages[s].raw_ms)
            rows.append({"pattern": name, "stage": s, "ratio": float(np.median(num) / np.median(den)),
                         "ci95": list(bootstrap_ratio_ci(num, den))})
    return rows


def _ci(lo: float, hi: float) -> str:
    return f"{lo:.3f}-{hi:.3f}"


def screen(result: BenchResult, compare_doc: Mapping[str, Any], published: Published,
           steps: Sequence[tuple[str, float]], out_dir: str | Path, answer: Sequence[Mapping[str, Any]]) -> str:
    """The one screen: step times, the answer as this run sees it, the verdict per cell against the published
    run, the overall verdict and where the submission folder is."""
    code = exit_code(compare_doc)
    gpu = result.gpu_name or "?"
    lines = [f"reproduce {result.name} on {gpu}: " + ", ".join(f"{n} {s:.1f} s" for n, s in steps)
             + f" (total {sum(s for _, s in steps):.1f} s)", ""]
    patterns = list(dict.fromkeys(r["pattern"] for r in answer))
    table = [[STAGE_TITLES.get(s, s), *(next((f"{r['ratio']:.3f}x ({_ci(*r['ci95'])})" for r in answer
                                              if r["pattern"] == p and r["stage"] == s), "-") for p in patterns)]
             for s in ANSWER_STAGES]
    lines += [f"Your run's answer: median / {BASELINE_PATTERN} median per routing (95% CI, rounds resampled)",
              tabulate(table, headers=["stage", *(f"{p} x {BASELINE_PATTERN}" for p in patterns)]), ""]
    rows = [[r["pattern"], r["stage"], r["a_median"], r["b_median"], r["ratio"], _ci(*r["ci95"]),
             f"{100 * r['floor']:.1f}%", r["verdict"]] for r in compare_doc["rows"]]
    lines += [f"Against {published.path} ({compare_doc['a']['gpu']}): {published.note}",
              tabulate(rows, headers=["pattern", "stage", "published ms", "yours ms", "yours/published", "95% CI",
                                      "floor", "verdict"], floatfmt=".3f"),
              f"floors: {compare_doc['noise_floor']['rule']}", ""]
    differ = [f"{r['pattern']}/{r['stage']} {r['verdict']}" for r in compare_doc["rows"] if r["verdict"] in DIFFERS]
    unclear = sum(r["verdict"] == "unclear" for r in compare_doc["rows"])
    n = len(compare_doc["rows"])
    verdict = ((f"VERDICT: agrees with the published run (no cell of {n} differs beyond its floor"
               + (f"; {unclear} unresolved" if unclear else "") + "); exit 0") if code == 0 else
        (f"VERDICT: differs from the published run in {len(differ)} of {n} cells ({', '.join(differ)}); exit 1"))
    lines += [verdict, f"submission folder: {out_dir} (check: python -m nsa_exp validate {out_dir}/*.json "
              f"{out_dir}/*.csv)"]
    return "\n".join(lines)


def provenance_note(*, commit: str | None, dirty: bool | None, created_utc: str, gpu: str, argv: Sequence[str],
                    published: Published, files: Sequence[str], steps: Sequence[tuple[str, float]], code: int) -> str:
    """The submission folder's ``PROVENANCE.md``: commit, time, GPU, command, the published run, the files."""
    state = "" if dirty is None else " (dirty tree)" if dirty else " (clean tree)"
    return "\n".join([
        "# Reproduction of NSA-KernelExp", "",
        f"- commit: {commit or 'unknown (not a git checkout)'}{state}",
        f"- time (UTC): {created_utc}",
        f"- GPU: {gpu}",
        f"- command: `{' '.join(argv)}`",
        f"- judged against: {published.path} ({published.note})",
        "- steps: " + ", ".join(f"{n} {s:.1f} s" for n, s in steps),
        f"- verdict: {'agrees (exit 0)' if code == 0 else 'differs (exit 1)'}",
        "- files: " + ", ".join(f"`{f}`" for f in files),
        "",
        "Check it: `python -m nsa_exp validate <folder>/*.json <folder>/*.csv` (every number is recomputed from "
        "the raw observations; an edited file fails).", ""])


#: The submission folder's own files besides the bench result and summary (``<config name>.json``/``.csv``).
CHECK, SMOKE, COMPARE, FREEZE, NOTE = "check.json", "smoke.json", "compare.json", "pip-freeze.txt", "PROVENANCE.md"
#: What a failed step leaves there (replaced by the next run, never part of a submission).
FAILED = (failed_report_path(CHECK).name,)


def submission_files(config_name: str) -> tuple[str, ...]:
    """The submission folder's file names for a config named ``config_name`` (the bench result is named after it,
    as ``bench`` names a run without ``--name``, so ``validate`` reads the name from the recorded argv)."""
    return (CHECK, SMOKE, f"{config_name}.json", f"{config_name}.csv", COMPARE, FREEZE, NOTE)


def default_out_dir(required_gpu: str | None) -> Path:
    """``runs/reproduce_<gpu>`` (lower case) for the config's GPU."""
    return Path(RUNS_DIR) / f"reproduce_{short_gpu(required_gpu or 'gpu').lower()}"


def check_reproduce_arguments(args: argparse.Namespace) -> None:
    """``reproduce``'s arguments, before any gate and without torch (one :class:`UserError` line each): the
    config loads; ``--out-dir`` is a folder under ``runs/`` or outside the repository, holding no earlier
    submission unless ``--overwrite``; ``--floor`` is a fraction in [0, 1); ``--published`` is a bench result that
    validates; ``--noise-table`` reads (the default table is read after the gates, :mod:`nsa_exp.gpu.reproduce`);
    the published runs exist."""
    config = load_config(args.config)
    out = Path(args.out_dir) if args.out_dir else default_out_dir(config.required_gpu)
    # a file there, an unwritable or system folder (/etc/x as root: its failed check report went there)
    check_writable(folders=(out,), option="--out-dir")
    try:
        rel = out.resolve().relative_to(REPO_ROOT.resolve())
    except ValueError:
        rel = None
    if rel is not None and (not rel.parts or rel.parts[0] != RUNS_DIR):
        where = (f"inside the published tree ({rel.parts[0]}/)" if is_published(out.resolve()) else
                 f"inside the repository but not under {RUNS_DIR}/ (git would see it)")
        raise UserError(f"--out-dir {out}: {where}; use {RUNS_DIR}/<name> (e.g. {RUNS_DIR}/reproduce_<gpu>) or a "
                        "folder outside the repository")
    if args.floor is not None and not 0 <= args.floor < 1:
        raise UserError(f"--floor: {args.floor} is not a fraction in [0, 1)")
    if args.floor is not None and args.noise_table is not None:
        raise UserError(f"--floor {args.floor:g} and --noise-table {args.noise_table}: give one (--floor replaces "
                        "every floor of the table, which would go unused)")
    # a failed check's report (check.failed.json, deleted by the next run): never an input, never a user's file
    OutputPolicy.of(args, ("--config", args.config), ("--published", args.published),
                    ("--noise-table", args.noise_table)).claim_failed_report(out / CHECK, "--out-dir")
    held = [n for n in submission_files(config.name) if (out / n).exists()]
    if held and not args.overwrite:
        raise UserError(f"--out-dir {out}: already holds an earlier submission ({', '.join(held)}); pass --overwrite "
                        "to replace it or name another folder")
    if args.published is not None:
        load_validated(args.published, ("bench_result",), f"--published {args.published}",
                       hint=f"`python -m nsa_exp validate {args.published}` lists what failed")
    for gpu, path in ({} if args.published else PUBLISHED).items():
        if not (REPO_ROOT / path).is_file():
            raise UserError(f"{path}: the published {gpu} run is missing; restore it (git checkout -- {path})")
    if args.noise_table is not None:
        try:
            read_floors(args.noise_table)  # missing or malformed: its own one line, with the fix
        except UserError as exc:
            raise UserError(f"--noise-table {exc}") from None
