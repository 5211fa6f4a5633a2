"""Every command's arguments, checked before its handler runs: before any gate, before torch is imported.

:func:`nsa_exp.cli.main` calls :func:`check_arguments` between argparse and the handler. A check reads
only the arguments and the CPU-side files they name (the config, a routing's CSR rows), so a bad or
contradictory argument of a GPU command is one line, exit 2, on any machine: never a "no CUDA GPU"
gate first, never an out-of-memory after minutes. argparse has already checked types and choices; the
checks here are the rules between values (and against the config) that argparse cannot state.

A check that reads a command's settings once folds them for its handler: ``bench``'s builds its one frozen
:class:`nsa_exp.core.requests.BenchRequest` (``args.bench_request``: the config with its overrides, the outputs
claimed under the output policy, the routing files read), so the handler and everything below it read that value.

``CHECKS`` holds one function per command that needs more than argparse (a command without an entry
has none); each raises :class:`nsa_exp.errors.UserError` naming the option.

>>> sorted(CHECKS)[:6]
['autotune-matrix', 'bench', 'calibrate', 'check', 'compare', 'cost']
"""

from __future__ import annotations

import argparse
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import PINNED_COMMIT, REPO_ROOT, RESULTS_DIR
from .analysis.noise_table import table_path
from .analysis.stop_rule import DEFAULT_RULE, STAGE_RULE
from .commands import command_named
from .core.config import MAX_T, Config, Shape
from .core.environment import door_gates
from .core.families import TUNE_PATTERN
from .core.nvtx import parse_patterns
from .core.peers import peer
from .core.protocol import WHATIF_LAYOUTS
from .core.requests import BenchRequest, CompareRequest, PeerRequest, WhatIfRequest
from .core.stages import AUTOTUNED_STAGES
from .errors import UserError
from .io.config_files import checked_shape_at, load_config, read_config_file
from .io.journal import Journal
from .io.progress import start
from .io.reader import file_size, require_folder, show_path
from .io.store import OutputPolicy, check_work_folder
from .io.strict_csv import parse_positive_ints
from .io.strict_json import parse_strict
from .model.split import GPU_MEMORY_BYTES, check_whatif_memory
from .releases.config import load_release_config
from .releases.environments import check_source_tree, wheel_folder
from .routing.files import file_routings, max_file_bytes, pattern_names
from .routing.patterns import generate_routing

Check = Callable[[argparse.Namespace], None]


def check_length(shape: Shape, T: int, option: str) -> Shape:
    """``shape`` at sequence length ``T`` (a positive multiple of block_size up to :data:`MAX_T`, with every
    shape rule of a config: :func:`nsa_exp.io.config_files.checked_shape_at`); one line naming ``option`` otherwise."""
    if not 0 < T <= MAX_T or T % shape.block_size:
        raise UserError(f"{option}: {T} is not a positive multiple of block_size {shape.block_size} up to {MAX_T}")
    return checked_shape_at(shape, T, f"{option} {T}")


#: The most ``routing-time --repeats``: each repeat draws every routing at every length on the CPU (~0.1 s at T=32768).
MOST_REPEATS = 1_000


def _routing(args: argparse.Namespace) -> None:
    """``--save``, the folder ``routing`` fills with one file per routing, before the config is read: never
    ``--output``'s file nor under it (the report was written, then the first routing failed on "Not a directory":
    an attacker, 2026-12-07), then a folder of its own (:func:`nsa_exp.io.store.check_work_folder`: not an existing
    file, a system folder, the published tree or a folder of the repository's own files: ``--save tests`` wrote
    tests/local.npy). Nothing is made here; the handler claims each file (and ``--output``) under the output policy."""
    if args.save is None:
        return
    save = Path(args.save).resolve()
    if args.output and (out := Path(args.output).resolve()) in (save, *save.parents):
        raise UserError(f"--save {show_path(args.save)}: {'is' if out == save else 'lies under'} --output "
                        f"{show_path(args.output)}, the report's file; give --save a folder of its own")
    check_work_folder(args.save, "--save")


def _routing_time(args: argparse.Namespace) -> None:
    config = load_config(args.config)
    if not 1 <= args.repeats <= MOST_REPEATS:  # 10**8 ran until it was killed (an attacker, 2026-12-07)
        raise UserError(f"--repeats: {args.repeats} is not a positive integer of at most {MOST_REPEATS:,} (timed "
                        "repeats of each routing's generation; the median is printed)")
    for T in args.lengths:
        check_length(config.shape, T, "--lengths")


#: The most rounds a run may ask for: ``timing.repetitions``' maximum in schemas/config.schema.json and the result
#: schemas (a larger ``--repetitions`` or ``--cupti-rounds`` was refused only at the GPU gate, or by the schema once
#: the GPU had run: an attacker's finding of 2026-12-06).
MOST_ROUNDS = 100_000
#: the most warm-up rounds of an autotune matrix (its schema's ``timing.warmup_rounds`` maximum)
MOST_WARMUP_ROUNDS = 1_000


def check_count(option: str, value: int | None, zero: str | None = None) -> None:
    """A count option (``--repetitions``, ``--rounds``, ...) given as ``value``: a positive integer of at most
    :data:`MOST_ROUNDS`, or 0 too where ``zero`` says what 0 means; None (not given) passes. One :class:`UserError`
    line otherwise.

    >>> check_count("--warmup", 0, zero="no warm-up round")
    >>> check_count("--rounds", 0)
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: --rounds: must be a positive integer of at most 100,000
    """
    if value is not None and not (0 if zero else 1) <= value <= MOST_ROUNDS:
        first = f"0 ({zero}) or a positive integer" if zero else "a positive integer"
        raise UserError(f"{option}: must be {first} of at most {MOST_ROUNDS:,}")


def _check_counts(args: argparse.Namespace, cupti_pass: str = "the CUPTI pass") -> None:
    """``--repetitions`` (a positive integer when given) and ``--cupti-rounds`` (0 skips ``cupti_pass``), each at
    most :data:`MOST_ROUNDS`: the counts bench, peer-bench and release-bench share."""
    check_count("--repetitions", args.repetitions)
    check_count("--cupti-rounds", args.cupti_rounds, zero=f"skip {cupti_pass}")


def check_suffix(option: str, path: str | None, suffix: str) -> None:
    """A named output is written as ``suffix`` (``.json``, ``.csv``): its path must say so (``bench --output x.csv``
    wrote a JSON under a CSV's name)."""
    if path and Path(path).suffix != suffix:
        raise UserError(f"{option} {show_path(path)}: this output is a {suffix} file; give a path ending in {suffix}")


def _policy(args: argparse.Namespace, run: str, *inputs: tuple[str, str | None]) -> OutputPolicy:
    """The command's output policy (:class:`nsa_exp.io.store.OutputPolicy`): ``--config`` and ``inputs`` (option,
    path) are inputs, never outputs; default outputs go to ``runs/<run>/`` unless ``--publish``."""
    return OutputPolicy.of(args, ("--config", args.config), *inputs, run=run)


def _claimed_output(args: argparse.Namespace, config: Config, default: Path,
                    *inputs: tuple[str, str | None]) -> Path:
    """``--output`` (else ``default``) claimed under :func:`_policy`, the config's name naming the run folder."""
    check_suffix("--output", args.output, default.suffix)
    return _policy(args, config.name, *inputs).claim(Path(args.output) if args.output else default,
                                                     named=args.output is not None)


#: the longest ``--name``: a file name holds 255 bytes (NAME_MAX), and a run's files add suffixes such as
#: ``_check.failed.json`` or ``_vs_<other>.json`` to it
MAX_NAME = 120


def check_run_name(name: str | None, hint: str = "name the file with --output PATH") -> None:
    """A run or report name (``--name``) names files inside a folder the output policy chose: letters, digits, '.',
    '_' and '-', not '.' or '..' (a '/' would place the output outside it). One :class:`UserError` line otherwise.

    >>> check_run_name("e1_h200_stop.v2")
    >>> check_run_name("../../tmp/x")
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: --name '../../tmp/x': a name, not a path (letters, digits, '.', '_', '-'); name the \
file with --output PATH
    """
    if name is not None and (not re.fullmatch(r"[A-Za-z0-9._-]+", name) or name in (".", "..")):
        raise UserError(f"--name {name!r}: a name, not a path (letters, digits, '.', '_', '-'); {hint}")
    if name is not None and len(name) > MAX_NAME:  # its files' names add a suffix; else ENAMETOOLONG named --output
        raise UserError(f"--name: {len(name)} characters, more than {MAX_NAME} (a file name holds 255 bytes, and the "
                        "run's files add their suffixes to it)")


def _bench(args: argparse.Namespace) -> None:
    check_run_name(args.name)
    if args.resume and args.discard_journal:
        raise UserError("--discard-journal: contradicts --resume (--resume continues the interrupted bench's journal, "
                        "--discard-journal deletes it); give one of them")
    _check_counts(args)
    check_suffix("--output", args.output, ".json")
    check_suffix("--summary", args.summary, ".csv")
    # the command line's overrides, folded into the config once (the config's own timing.stop wins); the handler
    # (gpu/commands.bench) reads this request, never the file or the options again
    config = load_config(args.config).overridden(args.repetitions, STAGE_RULE if args.stop_rule else None,
                                                 where="bench --stop-rule")
    check_bench_arm(config, args)
    _bench_result(args, "autotune_from", "--autotune-from", config)
    args.bench_request = _bench_request(args, config)


def _bench_request(args: argparse.Namespace, config: Config) -> BenchRequest:
    """bench's settings as one frozen :class:`~nsa_exp.core.requests.BenchRequest`, built once: the outputs
    (``--output`` or ``results/raw/<name>.json``, the summary beside it under ``summaries/``) claimed together under
    the output policy (``runs/<name>/`` unless ``--publish``; the config, ``--autotune-from`` and each
    ``--routing-file`` are inputs; the two outputs never one file), the ``--tuning-cache`` folder made, every
    ``--routing-file`` read and validated at the config's shape, a leftover journal refused: all before any GPU
    work, in this order."""
    name = args.name or config.name
    out = Path(args.output) if args.output else RESULTS_DIR / "raw" / f"{name}.json"
    summary = Path(args.summary) if args.summary else RESULTS_DIR / "summaries" / f"{out.stem}.csv"
    policy = _policy(args, name, ("--autotune-from", args.autotune_from),
                     *(("--routing-file", f) for f in args.routing_file))
    # the summary takes a named --output's stem; it is a default output (runs/<name>/summaries/ unless --publish)
    out, summary = policy.claim_each((out, args.output is not None, "--output"),
                                     (summary, args.summary is not None, "--summary"))
    if args.tuning_cache is not None and Path(args.tuning_cache).resolve() in (out.resolve(), summary.resolve()):
        raise UserError(f"--tuning-cache {show_path(args.tuning_cache)}: the path of an output of this run; give the "
                        "cache a folder of its own")
    cache = None if args.tuning_cache is None else check_work_folder(args.tuning_cache, "--tuning-cache")
    files = file_routings(args.routing_file, config.shape, args.require_equal_edges)
    # a leftover journal (or --resume without one): refused here too, before the door's gates (bench's own gates
    # refuse it first for a caller that is not the command line: reproduce, a test)
    Journal(REPO_ROOT, out.stem).refuse_unless_told(args.resume, args.discard_journal)
    return BenchRequest(config, args.allow_gpu, out, summary, resume=args.resume,
                        discard_journal=args.discard_journal, tune_on=args.tune_on,
                        per_pattern=args.tune == "per-pattern", autotune_from=args.autotune_from,
                        cupti_rounds=args.cupti_rounds, routing_files=files, tuning_cache=cache)


def _flush_study(args: argparse.Namespace) -> None:
    """``--output`` is a JSON file's path (``x.txt`` was written as JSON: a re-attacker, 2026-12-07); RAW a method
    study that validates."""
    check_suffix("--output", args.output, ".json")
    if not args.output and (args.publish or args.overwrite):  # it wrote nothing and said nothing (2026-12-07)
        flag = "--publish" if args.publish else "--overwrite"
        raise UserError(f"{flag}: flush-study writes a file only where --output names one (it prints its table "
                        "otherwise); add --output results/studies/h200_flush_policy.json for the committed one")
    require_valid("RAW", args.raw, ("method_study",))


def _autotune_matrix(args: argparse.Namespace) -> None:
    """The output a JSON document (x.txt was accepted: an attacker, 2026-12-07), the rounds, the config read once
    (``args.run_config``, whose GPU the door's gates name: a CPU box heard of the environment only, a new user,
    2026-12-07), the output claimed before the gates; ``--stages`` is read by the handler (the GPU tier's stage
    table)."""
    check_suffix("--output", args.output, ".json")
    check_count("--rounds", args.rounds)
    if not 0 <= args.warmup_rounds <= MOST_WARMUP_ROUNDS:  # the matrix schema's bound, refused only at the write
        raise UserError(f"--warmup-rounds: must be 0 to {MOST_WARMUP_ROUNDS:,}")
    names = [s.strip() for s in args.stages.split(",") if s.strip()]
    if not names or (bad := [s for s in names if s not in AUTOTUNED_STAGES]):
        raise UserError(f"--stages: {', '.join(bad) if names else 'empty'}; choose among "
                        f"{', '.join(AUTOTUNED_STAGES)}")
    args.matrix_stages = names
    args.run_config = load_config(args.config)
    _policy(args, args.run_config.name).claim(args.output, named=True)


def _peer_bench(args: argparse.Namespace) -> None:
    """The peers (each a row of :data:`nsa_exp.core.peers.PEERS`, listed once), the rounds; the config read once,
    ``--repetitions`` and ``--stop-rule`` folded in, the output claimed: one frozen
    :class:`~nsa_exp.core.requests.PeerRequest` (``args.peer_request``), which the handler reads."""
    names = [n.strip() for n in args.peers.split(",")]
    for name in names:
        peer(name)
    if len(set(names)) != len(names):
        raise UserError(f"--peers: {args.peers!r} lists a peer twice")
    _check_counts(args)
    config = load_config(args.config).overridden(args.repetitions, DEFAULT_RULE if args.stop_rule else None,
                                                 where="peer-bench --stop-rule")
    out = _claimed_output(args, config, RESULTS_DIR / "peers" / f"{config.name}.json")
    args.peer_request = PeerRequest(config, args.allow_gpu, tuple(names), out, args.cupti_rounds)


def typed(args: argparse.Namespace, dest: str) -> bool:
    """Whether the command line typed the option stored in ``dest`` (:class:`nsa_exp.cli.StoreOnce`'s record,
    ``args.given``), even with its default's value. False where none is recorded (a caller building ``args`` itself).

    >>> typed(argparse.Namespace(given={"tune_on"}), "tune_on")
    True
    """
    return dest in getattr(args, "given", ())


def check_bench_arm(config: Config, args: argparse.Namespace) -> None:
    """Refuse a tuning arm that cannot run (one line naming the option) before any GPU work."""
    names = [p.name for p in config.patterns]
    if args.tune_on not in names:
        raise UserError(f"--tune-on: {args.tune_on!r} is not one of the config's patterns ({', '.join(names)})")
    # --tune-on typed, even as its default (``local`` typed with --tune per-pattern was ignored: a re-attacker)
    tune_on = args.tune_on != TUNE_PATTERN or typed(args, "tune_on")
    if args.autotune_from and (args.tune == "per-pattern" or tune_on):
        raise UserError("--autotune-from: replays another run's configs; it cannot be combined with --tune "
                        "per-pattern or --tune-on")
    if args.tune == "per-pattern" and tune_on:
        raise UserError(f"--tune-on {args.tune_on}: contradicts --tune per-pattern, which tunes each routing on "
                        "itself (--tune-on would be ignored); give one of them")
    if args.resume and (args.tune == "per-pattern" or args.autotune_from or args.tune_on != TUNE_PATTERN):
        raise UserError("--resume: only the default arm can be resumed (it replays the journal's configs)")
    if args.resume and (args.stop_rule or config.timing.stop is not None):
        raise UserError("--resume: a run under the stop rule (--stop-rule, timing.stop) cannot be resumed; its "
                        "decision needs every round of one process (pass --discard-journal to start over)")
    if args.tuning_cache is not None and (args.autotune_from or args.tune == "per-pattern"
                                          or args.tune_on != TUNE_PATTERN or args.resume):
        raise UserError("--tuning-cache: keeps and replays the default arm's tune (on local); it cannot be combined "
                        "with --autotune-from, --tune per-pattern, --tune-on or --resume")
    if args.autotune_from:  # missing, a folder or a device: said before the tuning arm is read further
        file_size(args.autotune_from, f"--autotune-from {show_path(args.autotune_from)}", 1 << 62)


def _bench_result(args: argparse.Namespace, dest: str, option: str, config: Config) -> None:
    """The bench result an option names (replayed or pinned autotune configs): read now, bounded, and it must
    pass every check of ``validate`` and hold the config's shape (T included) and the pinned FLA commit, so a
    missing, foreign, forged or other-shape file is refused before any gate (its GPU is checked on the GPU)."""
    path = getattr(args, dest, None)
    if not path:
        return
    label = f"{option} {show_path(path)}"
    doc = _validated(path, ("bench_result",), label, hint=f"run `python -m nsa_exp validate {show_path(path)}`")
    if doc["shape"] != config.shape.to_dict():
        diff = {k: v for k, v in doc["shape"].items() if config.shape.to_dict().get(k) != v}
        raise UserError(f"{label}: its shape differs from {show_path(config.source)}'s ({diff} vs "
                        f"{ {k: config.shape.to_dict().get(k) for k in diff} }); autotune configs are per shape: "
                        "give a result of this config")
    commit = doc["fla"]["commit"]
    if commit != PINNED_COMMIT:
        raise UserError(f"{label}: FLA commit {commit} is not the pinned {PINNED_COMMIT}")


def _profile(args: argparse.Namespace) -> None:
    """``--pattern`` (one family or A-vs-B) before anything is read (the handler imports torch: a typo is refused
    in a fraction of a second), then ``--benchmark-result`` against the config (read once: ``args.run_config``), then
    the patterns against it (the order the handler checked them in before the door's gates)."""
    names = parse_patterns(args.pattern)
    args.run_config = config = load_config(args.config)
    _bench_result(args, "benchmark_result", "--benchmark-result", config)
    for name in names:
        config.pattern(name)


def _ncu(args: argparse.Namespace) -> None:
    """profile-stage's checks (:func:`_profile`), then the bench result whose configs the profiled child replays
    (``--benchmark-result``, else ``results/raw/<config>.json`` when it exists: ``args.ncu_benchmark_result``) and the
    two outputs claimed (``--name`` names a report, not a path: ``results/ncu/<name>.json`` and
    ``profiles/<name>.ncu-rep``, in ``runs/<config>/`` unless ``--publish``: ``args.ncu_outputs``), before the handler
    imports torch."""
    check_run_name(args.name, "the report's folders are chosen for it (runs/<config>/ unless --publish)")
    _profile(args)
    config: Config = args.run_config
    bench_result, published = args.benchmark_result, RESULTS_DIR / "raw" / f"{config.name}.json"
    if bench_result is None and published.is_file():
        bench_result = str(published.relative_to(REPO_ROOT))
    name = args.name or f"{config.name}_{args.pattern}_{args.stage}"
    policy = _policy(args, config.name, ("--benchmark-result", bench_result))
    args.ncu_benchmark_result = bench_result
    args.ncu_outputs = (policy.claim(RESULTS_DIR / "ncu" / f"{name}.json", option="--name"),
                        policy.claim(REPO_ROOT / "profiles" / f"{name}.ncu-rep", option="--name"))


def parse_max_fanins(text: str) -> list[int]:
    """``--max-fanin 4096,8192`` as positive integers (one line naming the option otherwise; ASCII digits
    only, by the one number rule :func:`nsa_exp.io.strict_csv.parse_int`).

    >>> parse_max_fanins("4096,8192")
    [4096, 8192]
    """
    return parse_positive_ints(text, "--max-fanin", "4096,8192")


def _whatif(args: argparse.Namespace) -> None:
    """Patterns of the config, F values, layouts, rounds; then the arms' memory from the shape alone
    (:func:`nsa_exp.model.split.check_whatif_memory`, B' copies of the inputs per arm) against the memory of
    the config's GPU (on the GPU itself the free memory is checked again before anything is allocated); then the
    output claimed: one frozen :class:`~nsa_exp.core.requests.WhatIfRequest` (``args.whatif_request``)."""
    config = load_config(args.config)
    patterns = args.patterns.split(",")
    names = [p.name for p in config.patterns]
    if missing := [p for p in patterns if p not in names]:
        raise UserError(f"--patterns: {missing} not in {config.source}'s patterns {names}")
    max_fanins = parse_max_fanins(args.max_fanin)
    layouts = args.layouts.split(",")
    if bad := [x for x in layouts if x not in WHATIF_LAYOUTS]:
        raise UserError(f"--layouts: {bad} not in {', '.join(WHATIF_LAYOUTS)}")
    for option, given in (("--patterns", patterns), ("--layouts", layouts), ("--max-fanin", max_fanins)):
        # local,local timed each arm twice (an attacker, 2026-12-07)
        if twice := sorted({x for x in given if given.count(x) > 1}):
            raise UserError(f"{option}: {', '.join(map(str, twice))} given twice; name each once")
    check_count("--rounds", args.rounds)
    _bench_result(args, "benchmark_result", "--benchmark-result", config)
    memory = GPU_MEMORY_BYTES.get(config.required_gpu)
    if memory is not None and config.cu_seqlens is None:  # else a GPU we hold no figure for (checked on it, against
        # its free memory), or packed (not split)
        routings = {p: generate_routing(config.pattern(p), config.shape, config.seeds.routing) for p in patterns}
        check_whatif_memory(config.shape, routings, max_fanins, layouts, memory,
                            f"the {config.required_gpu}'s {memory / 2**30:.1f} GiB")
    out = _claimed_output(args, config, RESULTS_DIR / "whatif" / f"{config.name}_whatif.json",
                          ("--benchmark-result", args.benchmark_result))
    args.whatif_request = WhatIfRequest(config, args.allow_gpu, tuple(patterns), tuple(max_fanins), tuple(layouts),
                                        args.rounds, args.benchmark_result, out)


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
    check_suffix("--output", args.output, ".csv")  # the sweep's table (a .json name was written as CSV)
    raw = read_config_file(args.config, "sweep config", "e.g. --config configs/sweep_skew_h200.json")
    if not isinstance(raw, dict) or "base_config" not in raw:  # e.g. the CLI's default experiment config
        raise UserError(f"--config {show_path(args.config)}: not a sweep config (it names no base_config and "
                        "lengths); name the sweep, e.g. --config configs/sweep_skew_h200.json")
    if args.table_only:
        return
    if args.points_per_job < 1:
        raise UserError(f"--points-per-job: {args.points_per_job} is not a positive integer")
    if parse_slurm(args.slurm) is not None and args.executor != "slurm":
        raise UserError(f"--slurm: Slurm parameters, but --executor is {args.executor} (they would be ignored); "
                        "add --executor slurm or drop --slurm")
    if isinstance(raw.get("autotune_from"), str):  # read on the GPU after its gates: checked here first
        path = REPO_ROOT / raw["autotune_from"]
        _validated(path, ("bench_result",), f"{show_path(args.config)}: sweep.autotune_from {raw['autotune_from']}")
    if args.executor == "slurm" and (missing := [c for c in ("sbatch", "srun") if shutil.which(c) is None]):
        raise UserError(f"--executor slurm: no Slurm here ({' and '.join(missing)} not on PATH); run the sweep on a "
                        "Slurm login node, or use --executor local (one job per GPU of this host) or inline")


def _validate(args: argparse.Namespace) -> None:
    """Each ``--routing-file`` is a file (a given file that is not there is a bad argument, exit 2, never a FAIL of
    the result); each ``--release-dir`` is a folder holding a release's ``fla/`` (a given folder is never
    skipped)."""
    for f in args.routing_file or ():  # the one stat of a user file: missing, not regular, or larger than any routing
        file_size(f, f"--routing-file {show_path(f)}", max_file_bytes((None, None, None, None)),
                  not_found=f"--routing-file {show_path(f)}: no such file; pass the routing file (.npy) the result "
                            "timed, or leave --routing-file out")
    pattern_names(args.routing_file or ())  # two files of one stem name one pattern: the second was never read
    for d in args.release_dir:
        require_folder(d, f"--release-dir {show_path(d)}", "pass the folder holding the release's fla/ (e.g. "
                       ".nsa-exp/releases/fla-core-0.6.0), or leave --release-dir out")
        if not (Path(d) / "fla" / "__init__.py").is_file():
            raise UserError(f"--release-dir {show_path(d)}: holds no fla/__init__.py; pass the folder that holds the "
                            "release's fla/ package")


def _reproduce(args: argparse.Namespace) -> None:
    """:func:`nsa_exp.report.reproduce.check_reproduce_arguments`, imported when ``reproduce`` runs (it imports
    validate's checkers, :func:`_validated`)."""
    from .report.reproduce import check_reproduce_arguments  # noqa: PLC0415 - deferred: see _validated
    check_reproduce_arguments(args)


#: the kinds a command reads only as the source of its own numbers (the noise table's floors): validated as
#: ``validate`` validates them as a compare's source (:func:`nsa_exp.checking.validate.load_validated`'s
#: ``as_source``): the committed table's floors rebuilt from its sources' statistics, not every source validated again
#: (2.0 -> 0.5 CPU-s of each ``compare`` with a warm routing memo; docs/METHOD.md, CI's own time, sixteenth session)
READ_AS_SOURCE = ("noise_table",)


def _validated(path: str | Path, kinds: tuple[str, ...], label: str, hint: str = "") -> dict[str, Any]:
    """:func:`nsa_exp.checking.validate.load_validated`, imported when a check reads a document: validate's checkers
    import scipy.stats and pandas (0.5 s), which a command refused on its arguments alone never needs (every
    door of tests/test_doors_contract.py is a child that pays its imports)."""
    from .checking.validate import load_validated  # noqa: PLC0415 - deferred: the docstring says why
    return load_validated(path, kinds, label, hint=hint, as_source=kinds == READ_AS_SOURCE)


def require_valid(option: str, path: str | None, kinds: tuple[str, ...] = (), also: list[str] | None = None) -> None:
    """A user-supplied document or table a command reads must pass every check of ``validate`` first: a JSON
    document of one of ``kinds`` (its kind checked first, :func:`~nsa_exp.checking.validate.load_validated`),
    else a table (a summary CSV cross-checked against ``also``, its bench result). One :class:`UserError` line
    naming ``option``, the failed checks and the command that shows them; nothing read, nothing written."""
    if not path:
        return
    label, hint = f"{option} {show_path(path)}", f"`python -m nsa_exp validate {show_path(path)}` lists what failed"
    if kinds:
        _validated(path, kinds, label, hint=hint)
        return
    from .checking.validate import validate_paths  # noqa: PLC0415 - see _validated
    try:
        report = validate_paths([path], [a for a in also or [] if a])[0]
    except UserError as exc:  # missing, unreadable, not a regular file: named by its option
        raise UserError(f"{option} {exc}") from None
    if not report["passed"]:
        bad = [c["name"] for c in report["checks"] if not c["passed"]]
        raise UserError(f"{label}: does not validate ({', '.join(bad)}); {hint}")


BENCH, RELEASE = ("bench_result",), ("release_result",)
Input = tuple[str, str | None, tuple[str, ...]]  #: (option, path, kinds), as :func:`require_valid` takes them


def require_all_valid(*inputs: Input, also: list[str] | None = None, announce: str | None = None) -> None:
    """:func:`require_valid` for each of a command's inputs, after every one of them is found to be a regular
    file (``stat`` only): a missing second file is refused at once, not after the first is validated (seconds).
    ``announce``: the start line of a validation that takes long (:func:`nsa_exp.io.progress.start`), printed once
    every input is found."""
    for option, path, _ in inputs:
        if path:
            file_size(path, f"{option} {show_path(path)}", 1 << 62)  # the readers hold each kind to its size limit
    if announce is not None:
        start(announce)
    for option, path, kinds in inputs:
        require_valid(option, path, kinds, also=also)


def _plot(args: argparse.Namespace) -> None:
    require_all_valid(("--result", args.result, BENCH), ("--input", args.input, ()), also=[args.result])


def _compare(args: argparse.Namespace) -> None:
    """The options, A against B and the output before any file is read, as one
    :class:`~nsa_exp.core.requests.CompareRequest` (``args.compare_request``; its ``output``: the claimed path, ''
    for none); then every input found and validated (:func:`require_all_valid`)."""
    from .analysis.compare import check_compare_arguments  # noqa: PLC0415 - deferred: it imports scipy (0.6 s)
    check_compare_arguments(args.noise_from, args.floor, args.fail_on, args.resamples)
    if Path(args.a).resolve() == Path(args.b).resolve():
        raise UserError(f"compare: A and B are the same file ({args.a}); compare two runs (e.g. a result and "
                        "its independent repeat)")
    output = (f"results/compare/{Path(args.a).stem}_vs_{Path(args.b).stem}{'_cycles' if args.cycles else ''}.json"
              if args.output is None else args.output)
    if output:
        noise = [("--noise-from", p) for p in args.noise_from or []]
        if not args.noise_from and args.floor is None:  # the committed noise table is read too: never an output
            noise.append(("the noise table", table_path()))
        output = str(OutputPolicy.of(args, ("A", args.a), ("B", args.b), *noise).claim(
            output, named=args.output is not None))
    args.compare_request = CompareRequest(args.a, args.b, output, tuple(args.noise_from or ()), args.floor,
                                          args.cycles, args.fail_on, args.resamples)
    results = BENCH + RELEASE + ("peer_result",)
    inputs: list[Input] = [("A", args.a, results), ("B", args.b, results),
                           *(("--noise-from", path, BENCH) for path in args.noise_from or ())]
    announce = None
    if not args.noise_from and args.floor is None:  # the floors come from the committed noise table: it must hold
        inputs.append(("noise table", str(table_path()), ("noise_table",)))
        # the table as a source (READ_AS_SOURCE): committed, its floors are rebuilt from its ~110 sources' statistics
        # (3.5 s in all, cold, on a 2-CPU VM); a table edited since, or not this repository's, has every source
        # validated too (43 s there)
        announce = ("compare: validating A, B and the noise table, its floors rebuilt from the results it is derived "
                    "from (--floor or --noise-from skips the table)")
    require_all_valid(*inputs, announce=announce)


def _gpu_report(args: argparse.Namespace) -> None:
    """check's and smoke's config, read once (``args.run_config``), and their report's path claimed under the output
    policy (``args.run_output``: ``--output``, else ``results/reports/<config>_<command>.json`` in the run folder):
    a bad config or output is refused before the handler imports torch (1.2-1.5 s -> 0.3 s on a CPU box)."""
    config = load_config(args.config)
    args.run_config = config
    args.run_output = _claimed_output(args, config, RESULTS_DIR / "reports" / f"{config.name}_{args.command}.json")
    if args.command == "check":  # a failed check's report goes beside it (<stem>.failed.json): claimed too
        _policy(args, config.name).claim_failed_report(args.run_output)


def _release_bench(args: argparse.Namespace) -> None:
    """release-bench's numbers, its release config (read once: ``args.release_config``), ``--wheel-dir``, each
    ``--fla-source`` tree and the releases it times (``args.releases``,
    :meth:`nsa_exp.releases.config.ReleaseConfig.versions`): refused before the handler imports torch (1.5 s ->
    0.3 s on a CPU box)."""
    _check_counts(args, "the per-kernel pass")
    cfg = load_release_config(args.config)
    if args.wheel_dir:
        wheel_folder(args.wheel_dir)
    for tree in args.fla_source:  # a tree that is not an FLA checkout needs no GPU to be refused
        check_source_tree(tree)
    if args.releases_dir:  # it gets each release's folder and a tree's view (links): none of the repository's own
        check_work_folder(args.releases_dir, "--releases-dir")
    args.release_config, args.releases = cfg, cfg.versions(args.release, bool(args.fla_source), args.wheel_dir)


def _release_table(args: argparse.Namespace) -> None:
    require_all_valid(*(("RESULT", path, RELEASE) for path in args.paths))


def _results(args: argparse.Namespace) -> None:
    """``cost`` and ``stop-replay`` read their figures off the bench results they are given: a forged one is refused,
    as compare's inputs are."""
    require_all_valid(*(("RESULT", path, BENCH) for path in args.paths))


def _model(args: argparse.Namespace) -> None:
    require_valid("--calibration", args.calibration, ("model_calibration",))


def _calibrate(args: argparse.Namespace) -> None:
    require_all_valid(("--set", args.set, ("model_calibration_set",)), ("--kernels", args.kernels, ("method_study",)),
                      ("--ncu", args.ncu, ("ncu_summary",)))


#: What each command reads that ``validate`` cannot check, named here so the gap is stated: ``predict
#: --routing-file`` (a routing array, checked by the routing reader's rules), ``ncu-export`` (Nsight's own
#: .ncu-rep / raw CSV export, parsed by io/ncu_csv.py), ``lock --from`` and the sweep config's inputs
#: (validated where they are read), configs (schema + rules: io/config_files.py).
CHECKS: dict[str, Check] = {"routing": _routing, "routing-time": _routing_time, "bench": _bench,
                            "peer-bench": _peer_bench, "check": _gpu_report, "smoke": _gpu_report,
                            "whatif": _whatif, "sweep": _sweep,
                            "profile-stage": _profile, "ncu": _ncu, "plot": _plot,
                            "sweep-plot": lambda a: require_valid("--table", a.table), "compare": _compare,
                            "release-bench": _release_bench, "release-table": _release_table,
                            "cost": _results, "stop-replay": _results,
                            "flush-study": _flush_study,
                            "predict": _model, "model-validate": _model, "calibrate": _calibrate,
                            "validate": _validate, "reproduce": _reproduce,
                            # the summary is JSON; its raw CSV goes beside it as <stem>.raw.csv
                            "ncu-export": lambda a: check_suffix("--output", a.output, ".json"),
                            "autotune-matrix": _autotune_matrix}


#: The GPU commands whose handler meets the strict gates first once their checks here have passed, each with the
#: config its check read (its ``required_gpu`` names the GPU in the refusal): the door runs the first two gates
#: here, torch-free (:func:`nsa_exp.core.environment.require_env`, then the ``gpu`` gate's device-node half
#: :func:`nsa_exp.core.environment.require_device_node`), so a CPU box or a container started without its GPU
#: refuses them in ~0.3 s, not after torch's import (~1.5 s); the handler's gates run both again. Not here:
#: ``check`` (lists every gate's verdict), ``reproduce`` (its first step is check), ``release-bench``, ``ncu``
#: and ``sweep`` (work or checks of their own between their arguments and their gates).
GATED: dict[str, Callable[[argparse.Namespace], Config]] = {
    "bench": lambda a: a.bench_request.config, "smoke": lambda a: a.run_config,
    "peer-bench": lambda a: a.peer_request.config, "whatif": lambda a: a.whatif_request.config,
    "profile-stage": lambda a: a.run_config, "autotune-matrix": lambda a: a.run_config,
    # ncu's child runs profile-stage's gates, but on a CPU box it was told to install Nsight Compute, then of the
    # counters' permissions, and left runs/<config>/profiles/ behind (a new user, 2026-12-07)
    "ncu": lambda a: a.run_config}


#: The options whose empty value ('' from a script's unset variable) is refused, naming them: it fell back to the
#: default (``release-bench --releases-dir ''``, ``--wheel-dir ''``, ``--output-dir ''``, ``reproduce --out-dir ''``),
#: named a default path the user never typed (``bench --output ''``) or read as ``.`` (``--routing-file ''``): an
#: attacker, 2026-12-07. Elsewhere '' can mean "none" (``compare --output ''`` writes no file; README).
NO_EMPTY: dict[str, tuple[str, ...]] = {
    "bench": ("--output", "--summary", "--routing-file"), "routing": ("--routing-file",),
    "release-bench": ("--releases-dir", "--wheel-dir", "--output-dir", "--routing-file"), "reproduce": ("--out-dir",),
    # a second pass: the figures went into the working folder, or the refusal named a default path
    "plot": ("--out-dir",), "sweep-plot": ("--out-dir",), "autotune-heatmap": ("--out-dir",),
    "report": ("--output", "--analysis"), "lock": ("--output",), "noise-table": ("--output",),
    "ncu-export": ("--output",)}


def _refuse_empty_values(args: argparse.Namespace, command: str) -> None:
    """One line naming the first option of :data:`NO_EMPTY` given as ''."""
    for flag in NO_EMPTY.get(command, ()):
        value = getattr(args, command_named(command).option(flag).name, None)
        if value == "" or (isinstance(value, list) and "" in value):
            raise UserError(f"{flag}: empty; give a value (or leave the option out)")


def check_arguments(args: argparse.Namespace) -> None:
    """Run the check of ``args.command`` (if it has one): one :class:`UserError` line naming the option; then, for a
    :data:`GATED` command, the environment and device-node gates (one :class:`~nsa_exp.errors.GateFailure` line)."""
    command = getattr(args, "command", "")
    _refuse_empty_values(args, command)
    if getattr(args, "require_equal_edges", False) and not getattr(args, "routing_file", None):
        # a flag with nothing to hold was accepted and did nothing (an attacker, 2026-12-07)
        raise UserError("--require-equal-edges: holds each --routing-file to the closed form's edges, and none is "
                        "given; add --routing-file PATH or leave the flag out")
    check = CHECKS.get(command)
    if check is not None:
        check(args)
    if command in GATED:
        door_gates(GATED[command](args).required_gpu)
