"""Running a sweep: each point measured and written on its own, resumable, on an executor.

Each point is written atomically to ``results/sweeps/<sweep>/<point_id>.json`` (schema ``sweep_point``)
by :func:`run_point`, which calls the measurement function its caller hands in (the real one,
:func:`nsa_exp.gpu.sweep_point.measure_point`, is handed in by the ``sweep`` door, which imports the GPU tier
only when a point is measured: this module never imports torch, nor names a module above its tier).
:func:`run_sweep` skips points whose file is already there and schema-valid (resume: a killed sweep loses at
most the points in flight) and hands the rest to an executor: ``inline`` (this process, sequential), or
submitit's ``debug``, ``local`` (one job per GPU on this host) or ``slurm`` (a job array).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..core.kinds import AUTOTUNE_FILE
from ..core.protocol import SWEEP_EXECUTORS as EXECUTORS
from ..errors import GateFailure, UserError
from ..io.store import write_json
from .plan import Point, point_done, point_path

if TYPE_CHECKING:
    import submitit

# measure(point, allow_gpu, out_dir) -> the point's sweep_point document (written by run_point)
Measure = Callable[["Point", bool, Path], dict[str, Any]]



def run_point(point: Point, out_dir: str, allow_gpu: bool, measure: Measure) -> str:
    """Measure one point and write it atomically (schema ``sweep_point``); returns its path."""
    doc = measure(point, allow_gpu, Path(out_dir))
    path = point_path(Path(out_dir), point)
    write_json(path, doc, "sweep_point")
    return str(path)


@dataclass(frozen=True)
class JobRefusal:
    """A submitit job's one-line refusal (a gate or a bad input met inside the job: ``error`` is the class name in
    :mod:`nsa_exp.errors`), carried back to the sweep as the job's value: raised inside the job, submitit hands the
    parent its own ``FailedJobError`` with a page of the job's traceback instead of the one line."""

    error: str
    message: str

    def raise_(self) -> NoReturn:
        raise (GateFailure if self.error == GateFailure.__name__ else UserError)(self.message)


def run_points(points: Sequence[Point], out_dir: str, allow_gpu: bool, measure: Measure) -> list[str] | JobRefusal:
    """Several points in one process, in order (one submitit job of ``--points-per-job`` points): their paths, or
    the :class:`JobRefusal` of the first point refused (the points before it are written)."""
    try:
        return [run_point(p, out_dir, allow_gpu, measure) for p in points]
    except UserError as exc:  # GateFailure included
        return JobRefusal(type(exc).__name__, str(exc))


def make_executor(kind: str, log_dir: Path, slurm: dict[str, Any] | None = None) -> submitit.Executor:
    """submitit's executor of ``kind``: ``debug`` (in-process), ``local`` (one job per GPU), ``slurm``. UserError
    (one line, naming ``--executor``) when submitit is not installed: only these executors need it."""
    try:
        import submitit  # noqa: PLC0415 - only a sweep on a submitit executor needs it (compare, validate never)
    except ImportError:
        raise UserError(f"--executor {kind}: needs submitit, which is not installed (pip install submitit==1.5.4, "
                        "as requirements-h100.txt pins it; or --executor inline)") from None
    if kind == "debug":
        return submitit.DebugExecutor(folder=str(log_dir))
    if kind == "local":
        local = submitit.LocalExecutor(folder=str(log_dir))
        local.update_parameters(gpus_per_node=1, timeout_min=60)
        return local
    executor = submitit.AutoExecutor(folder=str(log_dir), cluster="slurm")
    executor.update_parameters(gpus_per_node=1, tasks_per_node=1, timeout_min=60, **(slurm or {}))
    return executor


def visible_gpus() -> list[int]:
    """This host's GPUs as ``CUDA_VISIBLE_DEVICES`` lists them (integer ids), else those ``nvidia-smi -L``
    lists, else ``[0]``."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if listed.strip():
        return [int(g) for g in listed.split(",") if g.strip().isdigit()] or [0]
    try:
        lines = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return [0]
    return list(range(sum(1 for ln in lines if ln.startswith("GPU ")))) or [0]


def gpu_present() -> bool:
    """Whether this host can measure a point (torch-free): ``nvidia-smi -L`` lists a GPU, or
    ``TRITON_INTERPRET=1`` (FLA's kernels on the CPU interpreter, the tests' stand-in)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return True
    try:
        lines = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return False
    return any(ln.startswith("GPU ") for ln in lines)


def _submit_per_gpu(points: Sequence[Point], out: Path, allow_gpu: bool, measure: Measure, log_dir: Path,
                    gpus: Sequence[int]) -> list[Any]:
    """submitit's LocalExecutor gives every job the GPUs ``0..gpus_per_node-1`` unless told otherwise, so
    we place the points ourselves: round-robin over ``gpus``, one job (one process) per GPU, pinned to
    that GPU with ``visible_gpus``; the jobs run concurrently."""
    jobs = []
    for i, gpu in enumerate(gpus):
        mine = list(points[i::len(gpus)])
        if mine:
            ex = make_executor("local", log_dir)
            ex.update_parameters(visible_gpus=[gpu])
            jobs.append(ex.submit(run_points, mine, str(out), allow_gpu, measure))
    return jobs


def must_tune(point: Point, out_dir: Path) -> bool:
    """No ``autotune_from`` and no ``_autotune.json`` yet: the first point measured tunes the kernels."""
    return point.autotune_from is None and not (out_dir / AUTOTUNE_FILE).is_file()


def points_to_run(points: Sequence[Point], out_dir: str | Path) -> list[Point]:
    """The points without a valid file under ``out_dir`` that fit the GPU (what :func:`run_sweep` would run)."""
    return [p for p in points if p.refused is None and not point_done(point_path(Path(out_dir), p), p)]


def run_sweep(points: Sequence[Point], out_dir: str | Path, allow_gpu: bool, executor: str = "inline",
              *, measure: Measure, points_per_job: int = 1,
              slurm: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """Run every point not already done; ``{"skipped": [...], "ran": [...], "refused": [...]}`` (point ids;
    refused: the points that cannot fit the GPU's memory, :attr:`Point.refused`, never attempted).

    ``inline`` runs here, in order. ``local``: one submitit job per visible GPU (:func:`visible_gpus`),
    the points dealt round-robin. ``slurm`` / ``debug``: one job per ``points_per_job`` points,
    submitted as one array (``map_array``); on Slurm each array task gets one GPU.
    """
    if executor not in EXECUTORS:
        raise UserError(f"--executor: {executor!r}; choose one of {', '.join(EXECUTORS)}")
    out = Path(out_dir)
    todo = points_to_run(points, out)
    refused = [p.point_id for p in points if p.refused is not None]
    skipped = [p.point_id for p in points if p not in todo and p.refused is None]
    if executor == "inline":
        for p in todo:
            run_point(p, str(out), allow_gpu, measure)
    elif todo:
        log_dir = out.parent / f"{out.name}_submitit"
        # Without pinned configs the first point tunes (and stores _autotune.json) alone; the rest pin them.
        waves = [todo[:1], todo[1:]] if must_tune(todo[0], out) else [todo]
        for wave in filter(None, waves):
            if executor == "local":
                jobs = _submit_per_gpu(wave, out, allow_gpu, measure, log_dir, visible_gpus())
            else:
                chunks = [list(wave[i:i + points_per_job]) for i in range(0, len(wave), points_per_job)]
                jobs = make_executor(executor, log_dir, slurm).map_array(
                    run_points, chunks, [str(out)] * len(chunks), [allow_gpu] * len(chunks), [measure] * len(chunks))
            for job in jobs:
                if isinstance(outcome := job.result(), JobRefusal):
                    outcome.raise_()
    return {"skipped": skipped, "ran": [p.point_id for p in todo], "refused": refused}
