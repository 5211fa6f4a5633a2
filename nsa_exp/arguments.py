"""Every command's arguments, checked before its handler runs: before any gate, before torch is imported.

:func:`nsa_exp.cli.main` calls :func:`check_arguments` between argparse and the handler. A check reads
only the arguments and the CPU-side files they name (the config, a routing's CSR rows), so a bad or
contradictory argument of a GPU command is one line, exit 2, on any machine: never a "no CUDA GPU"
gate first, never an out-of-memory after minutes. argparse has already checked types and choices; the
checks here are the rules between values (and against the config) that argparse cannot state.

``CHECKS`` holds one function per command that needs more than argparse (a command without an entry
has none); each raises :class:`nsa_exp.errors.UserError` naming the option.

>>> sorted(CHECKS)
['bench', 'ncu', 'profile-stage', 'reproduce', 'routing-time', 'sweep', 'whatif']
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from typing import Any

from . import REPO_ROOT
from .core.config import MAX_T, Shape
from .errors import UserError
from .io.config_files import read_config_file
from .io.reader import same_file, show_path
from .io.store import load_document
from .io.strict_json import parse_strict
from .model.split import GPU_MEMORY_BYTES, check_whatif_memory
from .report.reproduce import check_arguments as _reproduce
from .routing.config import load_config, shape_at
from .routing.patterns import generate_routing

Check = Callable[[argparse.Namespace], None]


def check_length(shape: Shape, T: int, option: str) -> Shape:
    """``shape`` at sequence length ``T`` (a positive multiple of block_size up to :data:`MAX_T`, with every
    shape rule of a config: :func:`nsa_exp.routing.config.shape_at`); one line naming ``option`` otherwise."""
    if not 0 < T <= MAX_T or T % shape.block_size:
        raise UserError(f"{option}: {T} is not a positive multiple of block_size {shape.block_size} up to {MAX_T}")
    return shape_at(shape, T, f"{option} {T}")


def _routing_time(args: argparse.Namespace) -> None:
    config = load_config(args.config)
    if args.repeats < 1:
        raise UserError(f"--repeats: {args.repeats} is not a positive integer (timed repeats; the median is printed)")
    for T in args.lengths:
        check_length(config.shape, T, "--lengths")


def _bench(args: argparse.Namespace) -> None:
    if args.resume and args.discard_journal:
        raise UserError("--discard-journal: contradicts --resume (--resume continues the interrupted bench's journal, "
                        "--discard-journal deletes it); give one of them")
    if args.output and args.summary and same_file(args.output, args.summary):
        raise UserError(f"--summary {args.summary}: the same file as --output; the raw JSON and the summary CSV need "
                        "two paths")
    load_config(args.config)
    _bench_result(args, "autotune_from", "--autotune-from")


def _bench_result(args: argparse.Namespace, dest: str, option: str) -> None:
    """The bench result an option names (replayed or pinned autotune configs): read now, bounded and checked
    for its kind and schema, so a missing, foreign or endless file is refused before any gate."""
    path = getattr(args, dest, None)
    if path:
        load_document(path, ("bench_result",), f"{option} {show_path(path)}")


def _profile(args: argparse.Namespace) -> None:
    load_config(args.config)
    _bench_result(args, "benchmark_result", "--benchmark-result")


def parse_max_fanins(text: str) -> list[int]:
    """``--max-fanin 4096,8192`` as positive integers (one line naming the option otherwise).

    >>> parse_max_fanins("4096,8192")
    [4096, 8192]
    """
    values = []
    for part in text.split(","):
        if not part.strip().isdigit() or int(part) < 1:
            raise UserError(f"--max-fanin: {part!r} is not a positive integer (e.g. --max-fanin 4096,8192)")
        values.append(int(part))
    return values


def _whatif(args: argparse.Namespace) -> None:
    """Patterns of the config, F values, layouts, rounds; then the arms' memory from the shape alone
    (:func:`nsa_exp.model.split.check_whatif_memory`, B' copies of the inputs per arm) against the memory of
    the config's GPU (on the GPU itself the free memory is checked again before anything is allocated)."""
    config = load_config(args.config)
    patterns = args.patterns.split(",")
    names = [p.name for p in config.patterns]
    if missing := [p for p in patterns if p not in names]:
        raise UserError(f"--patterns: {missing} not in {config.source}'s patterns {names}")
    max_fanins = parse_max_fanins(args.max_fanin)
    layouts = args.layouts.split(",")
    if bad := [x for x in layouts if x not in ("split", "split-heavy-first")]:
        raise UserError(f"--layouts: {bad} not in split, split-heavy-first")
    if args.rounds < 1:
        raise UserError("--rounds: must be a positive integer")
    _bench_result(args, "benchmark_result", "--benchmark-result")
    memory = GPU_MEMORY_BYTES.get(config.required_gpu)
    if memory is None or config.cu_seqlens is not None:
        return  # a GPU we hold no figure for (checked on it, against its free memory), or packed (not split)
    routings = {p: generate_routing(config.pattern(p), config.shape, config.seeds.routing) for p in patterns}
    check_whatif_memory(config.shape, routings, max_fanins, layouts, memory,
                        f"the {config.required_gpu}'s {memory / 2**30:.1f} GiB")


def parse_slurm(text: str | None) -> dict[str, Any] | None:
    """``--slurm`` as the JSON object of submitit Slurm parameters it must be (None when not given).

    >>> parse_slurm('{"slurm_partition": "gpu"}')
    {'slurm_partition': 'gpu'}
    """
    if not text:
        return None
    try:
        slurm = parse_strict(text.encode("utf-8"))
    except ValueError as exc:
        raise UserError(f"--slurm: not JSON ({exc}); e.g. --slurm '{{\"slurm_partition\": \"gpu\"}}'") from None
    if not isinstance(slurm, dict):
        raise UserError("--slurm: must be a JSON object of submitit Slurm parameters")
    return slurm


def _sweep(args: argparse.Namespace) -> None:
    if args.table_only:
        return
    if args.points_per_job < 1:
        raise UserError(f"--points-per-job: {args.points_per_job} is not a positive integer")
    parse_slurm(args.slurm)
    raw = read_config_file(args.config, "sweep config")
    if isinstance(raw.get("autotune_from"), str):  # read on the GPU after its gates: checked here first
        path = REPO_ROOT / raw["autotune_from"]
        load_document(path, ("bench_result",), f"{show_path(args.config)}: sweep.autotune_from {raw['autotune_from']}")
    if args.executor == "slurm" and (missing := [c for c in ("sbatch", "srun") if shutil.which(c) is None]):
        raise UserError(f"--executor slurm: no Slurm here ({' and '.join(missing)} not on PATH); run the sweep on a "
                        "Slurm login node, or use --executor local (one job per GPU of this host) or inline")


CHECKS: dict[str, Check] = {"routing-time": _routing_time, "bench": _bench, "whatif": _whatif, "sweep": _sweep,
                            "profile-stage": _profile, "ncu": _profile, "reproduce": _reproduce}


def check_arguments(args: argparse.Namespace) -> None:
    """Run the check of ``args.command`` (if it has one): one :class:`UserError` line naming the option."""
    check = CHECKS.get(getattr(args, "command", ""))
    if check is not None:
        check(args)
