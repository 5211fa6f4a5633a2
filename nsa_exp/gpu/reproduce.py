"""``reproduce``: one verdict for a stranger's GPU run (issue 27, item 2).

On a GPU, with the config of that GPU (``--config configs/e1_h200.json`` on an H200; default the H100 one):
``check`` -> ``smoke`` -> ``bench`` under the stop rule (the config's ``timing.stop``, else the default rule of
``bench --stop-rule``) -> ``validate`` every output -> ``compare`` with the published run of the same GPU model
under the project's noise floors (:mod:`nsa_exp.report.reproduce` chooses the run, reads the floors and
renders the screen) -> ONE screen. Each step's elapsed seconds are printed as it ends.

The submission folder (``--out-dir``, default ``runs/reproduce_<gpu>/``) holds exactly what a third party
sends: ``check.json``, ``smoke.json``, ``<config name>.json`` + ``<config name>.csv`` (the bench result and its
summary), ``compare.json`` (against the published run), ``pip-freeze.txt`` (the environment beyond what every
record's metadata holds) and ``PROVENANCE.md`` (commit, time, GPU, command). ``python -m nsa_exp validate
DIR/*.json DIR/*.csv`` accepts every file; an edited one fails.

Exit codes: 0 the run agrees with the published one (no cell differs beyond its floor), 1 it differs, 2 it could
not run (no GPU, a gate failed, a bad argument, an output that does not validate: one line, the problem then
the fix). The steps write only into the submission folder (the bench journal aside, under ``.nsa-exp/``).

Time budget (under 6 minutes on an H200): the bench runs the stop rule's default (at most the config's 150
rounds, ~0.65 s each on an H200, 300 s timeout) and no CUPTI pass unless ``--cupti`` (then sized by need, 21-23
rounds on the H200). Measured on an H200 at d8b2dcd (docs/PROVENANCE.md, H200 runs of 2026-12-02): 3 min 21 s
(check 14.8 s, smoke 77.0 s, bench 103.4 s with 61.8 s of autotuning and 49 rounds, compare 2.1 s, validate
3.9 s).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..analysis.noise_table import table_path
from ..analysis.stop_rule import STAGE_RULE
from ..checking import compare
from ..checking.validate import load_validated, validate_paths
from ..core.config import Config
from ..core.records import BenchResult
from ..core.requests import BenchRequest
from ..errors import GateFailure, UserError
from ..io.config_files import load_config
from ..io.metadata import git_state
from ..io.reader import show_path
from ..io.store import load_record, write_json, write_text_atomic
from ..report.reproduce import (
    CHECK,
    COMPARE,
    FAILED,
    FREEZE,
    NOTE,
    SMOKE,
    check_reproduce_arguments,
    default_out_dir,
    exit_code,
    own_answer,
    provenance_note,
    published_for,
    screen,
    submission_files,
)
from .bench import run_bench
from .check import run_check
from .smoke import run_smoke


def pip_freeze() -> str:
    """``pip freeze`` of this interpreter, or a line saying why it is absent (never fatal)."""
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True, timeout=120,
                             check=True)
        return out.stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"# pip freeze unavailable: {type(exc).__name__}\n"


class Steps:
    """Each step timed by ``clock`` (host seconds) and printed as it ends."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.done: list[tuple[str, float]] = []

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        t = self.clock()
        value = fn()
        self.done.append((name, self.clock() - t))
        print(f"[reproduce] {name}: {self.done[-1][1]:.1f} s", flush=True)
        return value


def run_reproduce(config: Config, allow_gpu: bool, out_dir: str | Path, noise_table: str | None = None,
                  published: str | None = None, floor: float | None = None,
                  device: Any = None, clock: Callable[[], float] = time.monotonic,
                  argv: list[str] | None = None, cupti_rounds: int | None = None) -> tuple[int, str]:
    """The whole flow; returns ``(exit code 0/1, the screen)``. Raises UserError / GateFailure (exit 2) when
    a gate, a smoke comparison or the validation of an output fails, or the published run is not the same
    experiment. ``device`` and ``clock`` are injectable (:mod:`.engine`), so a CPU test drives it whole;
    ``cupti_rounds`` is bench's (default None: the CUPTI pass sized by need; 0 skips it, as a CPU test must)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result_path, summary_path = out / f"{config.name}.json", out / f"{config.name}.csv"
    steps = Steps(clock)
    steps.run("check", lambda: run_check(config, allow_gpu, out / CHECK, device=device))
    if floor is None:  # after the gates (a CPU box is told "no CUDA GPU" first), before any GPU work: every check
        # validate runs on a noise table (its floors rebuilt from their sources), so a forged table stops here
        table = table_path(noise_table)
        load_validated(table, ("noise_table",), f"--noise-table {show_path(table)}",
                       hint=f"`python -m nsa_exp validate {show_path(table)}` lists what failed",
                       missing_hint="generate it with `python -m nsa_exp noise-table`")
    steps.run("smoke", lambda: run_smoke(config, allow_gpu, out / SMOKE, device=device))
    timed = config.overridden(stop=STAGE_RULE, where="reproduce")
    request = BenchRequest(timed, allow_gpu, result_path, summary_path, cupti_rounds=cupti_rounds)
    steps.run("bench", lambda: run_bench(request, device=device, clock=clock))
    run = load_record(result_path, BenchResult)
    chosen = published_for(run.gpu_name or "", published)

    def compared() -> dict[str, Any]:
        doc = compare.build(chosen.path, result_path, floor=floor, noise_table=noise_table)
        write_json(out / COMPARE, doc, "compare")
        return doc

    doc = steps.run("compare", compared)
    steps.run("validate", lambda: _validate(out, config))
    answer = own_answer(run)
    code = exit_code(doc)
    write_text_atomic(out / FREEZE, pip_freeze())
    git = git_state()
    write_text_atomic(out / NOTE, provenance_note(
        commit=git.get("sha"), dirty=git.get("dirty"), created_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        gpu=run.gpu_name or "?", argv=argv or sys.argv, published=chosen, files=submission_files(config.name),
        steps=steps.done, code=code))
    return code, screen(run, doc, chosen, steps.done, out, answer)


def _validate(out: Path, config: Config) -> None:
    """Every JSON and CSV of the submission through ``validate``, as a third party's; GateFailure naming each
    failed check otherwise."""
    paths = [str(out / n) for n in submission_files(config.name) if n.endswith((".json", ".csv"))]
    failed = [f"{Path(r['path']).name}: " + ", ".join(c["name"] for c in r["checks"] if not c["passed"])
              for r in validate_paths(paths) if not r["passed"]]
    if failed:
        raise GateFailure(f"validate: the submission does not validate ({'; '.join(failed)}); run python -m nsa_exp "
                          f"validate {out}/*.json {out}/*.csv for the details")


def command(args: argparse.Namespace) -> int:
    """The ``reproduce`` command (arguments already checked by
    :func:`nsa_exp.report.reproduce.check_reproduce_arguments`)."""
    check_reproduce_arguments(args)  # again when called directly, not through the CLI
    config = load_config(args.config)
    out = Path(args.out_dir) if args.out_dir else default_out_dir(config.required_gpu)
    for name in (*(submission_files(config.name) if args.overwrite else ()), *FAILED):  # what an earlier run left
        (out / name).unlink(missing_ok=True)
    try:
        code, text = run_reproduce(config, args.allow_gpu, out, args.noise_table, args.published, args.floor,
                                   cupti_rounds=None if args.cupti else 0)
    except UserError as exc:
        raise type(exc)(f"reproduce could not run: {exc}") from None
    print(text)
    return code
