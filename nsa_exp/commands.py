"""The one command table: every ``python -m nsa_exp`` command, its handler and every option, declared once.

:mod:`nsa_exp.cli` builds argparse from it and ``tasks.py`` builds one invoke task per command from it,
so the two doors accept exactly the same options (a test holds them to it). Each :class:`Option` says
its kind, which both doors read:

- ``flag``: present or not (``store_true``);
- ``value``: one value (``type`` int, float or str), ``choices`` when given;
- ``list``: several values after one CLI flag (``nargs="+"``, or ``"*"`` with ``empty_ok``); invoke takes
  the flag once per value;
- ``pair``: exactly two values after one CLI flag (``--noise-from X Y``); invoke takes the flag twice;
- ``append``: the CLI flag once per value; invoke likewise;
- ``positional`` / ``positionals``: one value / one or more values, given without a flag.

A handler is ``"module:function"``, imported only when its command runs (the GPU commands must not import
torch before their environment gate, and a command pays only for its own imports).

>>> [c.name for c in COMMANDS][:3]
['routing', 'routing-time', 'check']
>>> command_named("lock").option("--from").dest, invoke_name(command_named("lock").option("--from"))
('source', 'from_')
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import DEFAULT_CONFIG
from .core.families import TUNE_PATTERN
from .core.peers import PEER_NAMES
from .core.protocol import (
    DISPATCH_ORDERS,
    SWEEP_EXECUTORS,
    TUNE_CHOICES,
    WHATIF_BENCHMARK_RESULT,
    WHATIF_LAYOUTS,
    WHATIF_MAX_FANINS,
    WHATIF_PATTERNS,
    WHATIF_ROUNDS,
)
from .core.stages import MATRIX_STAGES, STAGE_NAMES
from .report import manifest
from .routing.fanin import X_STATS

#: The kinds of an option (the module docstring); not the document kinds (core/kinds.KINDS).
OPTION_KINDS = ("flag", "value", "list", "pair", "append", "positional", "positionals")


@dataclass(frozen=True)
class Option:
    """One option of a command (see the module docstring for the kinds)."""

    flag: str                           # "--config", or a positional's name
    help: str
    kind: str = "value"
    type: type = str
    default: Any = None
    choices: tuple[str, ...] | None = None
    metavar: str | tuple[str, ...] | None = None
    required: bool = False
    dest: str | None = None
    empty_ok: bool = False              # a list that may be given with no value (nargs="*")
    hidden: bool = False                # kept for old scripts: accepted, not listed in the CLI's --help

    @property
    def positional(self) -> bool:
        return self.kind in ("positional", "positionals")

    @property
    def name(self) -> str:
        """The argparse ``dest``: ``dest``, else the flag without dashes, dashes as underscores."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")


def invoke_flag(option: Option) -> str:
    """The option's flag in invoke: ``--name``, or ``-x`` for a one-letter name (invoke spells those so only;
    the CLI accepts ``-x`` beside ``--x`` for them, so one spelling works in both doors)."""
    name = invoke_name(option).rstrip("_").replace("_", "-")
    return f"-{name}" if len(name) == 1 else f"--{name}"


def cli_flags(option: Option) -> tuple[str, ...]:
    """The option's flags on the CLI: its flag, and the invoke spelling when that differs (``--T``, ``-T``)."""
    return (option.flag,) if invoke_flag(option) == option.flag else (option.flag, invoke_flag(option))


def invoke_name(option: Option) -> str:
    """The invoke task's parameter for ``option``: the flag's name (``--from`` -> ``from_``: invoke strips the
    trailing underscore of a Python keyword again, so the invoke flag is the CLI's ``--from``)."""
    name = option.flag.lstrip("-").replace("-", "_") if not option.positional else option.name
    return name + "_" if keyword.iskeyword(name) else name


@dataclass(frozen=True)
class Command:
    """One command: its name, handler (``"module:function"``), one-line help and options, parents' first."""

    name: str
    handler: str
    help: str
    options: tuple[Option, ...]

    def option(self, flag: str) -> Option:
        return next(o for o in self.options if o.flag == flag)


COMMON = (Option("--debug", "show tracebacks", "flag"),)
CONFIGURED = (*COMMON, Option("--config", f"experiment config (default {DEFAULT_CONFIG})", default=DEFAULT_CONFIG),)
GPU = (*CONFIGURED, Option("--allow-gpu", "run on a GPU other than the config's (recorded in the report)", "flag"),)
CPU, GPU_COMMANDS, MODEL = "nsa_exp.handlers", "nsa_exp.gpu.commands", "nsa_exp.model_commands"
#: The output policy's flag (nsa_exp.io.store.OutputPolicy): every command with a default output path has it.
OVERWRITE = Option("--overwrite", "replace this command's default output(s) when they exist (with --publish: to "
                   "regenerate a published file on purpose); without it an existing default output is refused in one "
                   "line", "flag")
#: The two namespaces' flag (nsa_exp.io.store.OutputPolicy): without it every default output goes to the user's run
#: folder runs/<name>/ (ignored by git); with it, to the published tree (results/, docs/, README.md, the lock file).
PUBLISH = Option("--publish", "write the published results (results/, docs/, README.md, requirements-lock.txt) on "
                 "purpose: the defaults named in this help; without it each default goes to the run folder "
                 "runs/<name>/ (its path without results/ or docs/); replacing a published file needs --overwrite",
                 "flag")
#: Every writing command's output options: --publish, then --overwrite.
WRITES = (PUBLISH, OVERWRITE)
#: The figures' published folder: the default of every command that draws one (its --out-dir, --figures).
FIGURES_DIR = "docs/figures"
OUT_DIR_HELP = f"where the PNG and SVG go (default runs/<name>/figures; {FIGURES_DIR} with --publish)"
ROUTING_FILE_HELP = ("also validate and summarise your own block_indices (.npy/.npz/.pt, int32/int64 [B,T,H,S], -1 "
                     "padding); repeatable")


def _cmd(name: str, handler: str, help: str, parent: tuple[Option, ...], *options: Option) -> Command:
    return Command(name, handler, help, (*parent, *options))


COMMANDS: tuple[Command, ...] = (
    _cmd("routing", f"{CPU}:cmd_routing", "CPU only: edges and fan-in statistics of every pattern", CONFIGURED,
         Option("--json", "print the report as JSON (schema routing_report)", "flag"),
         Option("--save", "write each pattern's block_indices as DIR/<pattern>.npy", metavar="DIR"),
         Option("--output", "also write the JSON report to PATH", metavar="PATH"),
         Option("--routing-file", ROUTING_FILE_HELP, "append", default=[], metavar="PATH"),
         Option("--require-equal-edges", "refuse a --routing-file whose edges differ from the closed form", "flag"),
         *WRITES),
    _cmd("routing-time", f"{CPU}:cmd_routing_time", "CPU only: routing generation time per pattern and T", CONFIGURED,
         Option("--lengths", "sequence lengths T (default 32768 131072)", "list", int, default=[32768, 131072]),
         Option("--repeats", "timed repeats (the median is printed)", type=int, default=3)),
    _cmd("check", f"{GPU_COMMANDS}:check",
         "gates: the config's GPU (H100 / H200), versions, FLA sources, env vars, equal edges", GPU,
         Option("--output", "report path (default runs/<name>/reports/<config>_check.json"
                "; results/reports/<config>_check.json with --publish)", metavar="PATH"), *WRITES),
    _cmd("smoke", f"{GPU_COMMANDS}:smoke", "correctness: FLA vs naive (T=256 local; T=1024 S=8 every routing); "
         "staged vs official (T=2048)", GPU,
         Option("--output", "report path (default runs/<name>/reports/<config>_smoke.json"
                "; results/reports/<config>_smoke.json with --publish)", metavar="PATH"), *WRITES),
    _cmd("bench", f"{GPU_COMMANDS}:bench", "time every stage x pattern at the primary shape", GPU,
         Option("--name", "result name (default: the config's name)"),
         Option("--output", "raw JSON path (default runs/<name>/raw/<name>.json"
                "; results/raw/<name>.json with --publish)", metavar="PATH"),
         Option("--summary", "CSV path (default runs/<name>/summaries/<name>.csv"
                "; results/summaries/<name>.csv with --publish)", metavar="PATH"),
         Option("--repetitions", "override the config's timed rounds", type=int),
         Option("--resume", "continue an interrupted bench from its journal", "flag"),
         Option("--discard-journal", "delete an interrupted bench's journal first", "flag"),
         Option("--tune-on", "tune FLA's autotuners on this routing first and reuse its configs for all (default "
                f"{TUNE_PATTERN}: the seed's protocol)", default=TUNE_PATTERN, metavar="PATTERN"),
         Option("--tune", "per-pattern: tune each routing on itself (caches cleared between patterns) and time each "
                "under its own configs", default="once", choices=TUNE_CHOICES),
         Option("--autotune-from", "replay this bench result's autotune configs (tune nothing); recorded as "
                "autotune.replayed_from", metavar="RESULT"),
         Option("--tuning-cache", "replay the configs a fresh tune on this GPU, FLA commit and shape kept in DIR "
                "(recorded as autotune.replayed_from); without an entry tune afresh and keep it there (default: "
                "tune afresh, the formal protocol)", metavar="DIR"),
         Option("--cupti-rounds", "rounds of the torch.profiler (CUPTI) cross-check after the timed rounds (default: "
                "sized by need, each stage called as often as it needs, the shortest multi-launch stage setting the "
                "rounds, recorded as cupti.sizing; 0 skips it)", type=int),
         Option("--routing-file", "also time your own block_indices (.npy/.npz/.pt, [B,T,H,S] of the config) as "
                "pattern file:<stem>; repeatable", "append", default=[], metavar="PATH"),
         Option("--require-equal-edges", "refuse a --routing-file whose edges differ from the closed form", "flag"),
         Option("--stop-rule", "stop timing each routing once its medians' 95%% CIs reach half the noise floor "
                "compare judges them by, the run once every routing has (docs/METHOD.md; the config's timing.stop, "
                "else this verdict rule); recorded as timing.stop", "flag"),
         *WRITES),
    _cmd("release-bench", "nsa_exp.gpu.release:command", "RELEASE ARM, not the pinned experiment: time an FLA release "
         "or source tree through its public API (parallel_nsa_bwd as a whole, its kernels by CUPTI, parallel_nsa "
         "fwd+bwd), each in its own child process", COMMON,
         Option("--config", "release config (default configs/release_h200.json)", default="configs/release_h200.json"),
         Option("--allow-gpu", "run on a GPU other than the base config's (recorded)", "flag"),
         Option("--release", "an fla-core release to time (installed in .nsa-exp/releases/fla-core-VERSION/); "
                "repeatable; default: the config's releases", "append", default=[], metavar="VERSION"),
         Option("--fla-source", "a source tree to time as it is (the folder holding its fla/ package, e.g. your "
                "flash-linear-attention checkout); repeatable", "append", default=[], metavar="PATH"),
         Option("--wheel-dir", "take fla_core-VERSION-*.whl from DIR (offline) instead of pip download from the "
                "package index", metavar="DIR"),
         Option("--releases-dir", "release folders, source views and job folders (default .nsa-exp/releases)",
                metavar="DIR"),
         Option("--output-dir", "where <label>-T<T>.json go (<label>-T<T>-B<B>-H<H>-G<G>.json for a point with its own "
                "shape; default "
                "runs/<config>/releases/<config name>, with --publish results/releases/<config name>)", metavar="DIR"),
         *WRITES,
         Option("--repetitions", "override the config's timed rounds", type=int),
         Option("--cupti-rounds", "rounds of the CUPTI per-kernel pass (default: the config's; 0 skips it)",
                type=int),
         Option("--routing-file", "also time your own block_indices (.npy/.npz/.pt, [B,T,H,S]) as pattern "
                "file:<stem> at the point of its T; repeatable", "append", default=[], metavar="PATH"),
         Option("--require-equal-edges", "refuse a --routing-file whose edges differ from the closed form", "flag")),
    _cmd("autotune-matrix", "nsa_exp.gpu.autotune_matrix:command",
         "time every autotune config x routing of dq_core/dkv_core (issue 11)", GPU,
         Option("--stages", "comma-separated autotuned stages", default=",".join(MATRIX_STAGES)),
         Option("--rounds", "timed rounds (every config x routing once per round)", type=int, default=15),
         Option("--warmup-rounds", "warm-up rounds (kept, flagged)", type=int, default=2),
         Option("--output", "results/autotune/<name>.json (with --publish), or a path outside the published "
                "results (e.g. runs/<name>/autotune/<name>.json)", required=True, metavar="PATH"), *WRITES),
    _cmd("autotune-heatmap", f"{CPU}:cmd_autotune_heatmap", "CPU only: heatmap of an autotune-matrix result", COMMON,
         Option("--input", "results/autotune/<name>.json", required=True),
         Option("--out-dir", OUT_DIR_HELP, metavar="DIR"), *WRITES),
    _cmd("profile-stage", f"{GPU_COMMANDS}:profile",
         "launch one stage inside NVTX range nsa_<pattern>_<stage> (for ncu)", GPU,
         Option("--pattern", "a pattern, or A-vs-B (e.g. local-vs-sink-heavy)", required=True),
         Option("--stage", "the stage to launch", required=True, choices=STAGE_NAMES),
         Option("--benchmark-result", "replay the autotune configs this bench result recorded")),
    _cmd("ncu", f"{GPU_COMMANDS}:ncu", "run Nsight Compute on one stage and export its metrics to JSON", GPU,
         Option("--pattern", "a pattern or A-vs-B", default="local-vs-sink-heavy"),
         Option("--stage", "the stage to profile", required=True, choices=STAGE_NAMES),
         Option("--benchmark-result", "bench result whose autotune configs to replay (default "
                "results/raw/<config>.json when it exists)"),
         Option("--name", "report name (default <config>_<pattern>_<stage>)"), *WRITES),
    _cmd("ncu-export", "nsa_exp.gpu.ncu:export_command", "export an existing .ncu-rep (or its raw CSV) to summary JSON",
         COMMON,
         Option("report", "a .ncu-rep file, or a CSV from `ncu --import R --csv --page raw`", "positional"),
         Option("--output", "summary JSON path", required=True),
         Option("--reuse-context", "re-parse a raw CSV, keeping this earlier summary's profile context and GPU-host "
                "metadata (recorded as reexported_from)", metavar="SUMMARY"),
         Option("--pattern", "the profiled pattern spec (e.g. local-vs-sink-heavy), recorded; required unless "
                "--reuse-context gives it"),
         Option("--stage", "the profiled stage, recorded", choices=STAGE_NAMES), *WRITES),
    _cmd("peer-bench", f"{GPU_COMMANDS}:peer_bench",
         "PEERS: the config's routings through FLA's parallel_nsa, FlexAttention and dense SDPA, each checked against "
         "the oracle, then fwd, bwd and fwd+bwd timed in interleaved rounds", COMMON,
         Option("--config", "peers config (default configs/peers_h200.json)", default="configs/peers_h200.json"),
         Option("--allow-gpu", "run on a GPU other than the config's (recorded in the report)", "flag"),
         Option("--peers", f"peers, comma-separated (of {', '.join(PEER_NAMES)})", default=",".join(PEER_NAMES)),
         Option("--repetitions", "override the config's timed rounds", type=int),
         Option("--cupti-rounds", "rounds of the torch.profiler (CUPTI) cross-check after the timed rounds (default: "
                "sized by need, recorded as cupti.sizing; 0 skips it)", type=int),
         Option("--stop-rule", "stop timing each cell once its three stages' 95%% CIs reach half the noise floor "
                "(the config's timing.stop, else the verdict rule; timing.repetitions is the most rounds); recorded "
                "as timing.stop", "flag"),
         Option("--output", "default runs/<name>/peers/<config>.json"
                "; results/peers/<config>.json with --publish", metavar="PATH"), *WRITES),
    _cmd("whatif", f"{GPU_COMMANDS}:whatif",
         "WHAT-IF ARMS: split / heaviest-first dK/dV schedules on FLA's unmodified kernels, timed", GPU,
         Option("--patterns", "config patterns, comma-separated", default=",".join(WHATIF_PATTERNS)),
         Option("--max-fanin", "F values: rows longer than F are split",
                default=",".join(map(str, WHATIF_MAX_FANINS))),
         Option("--layouts", ", ".join(WHATIF_LAYOUTS), default=",".join(WHATIF_LAYOUTS)),
         Option("--rounds", "timed rounds (after the config's warm-up)", type=int, default=WHATIF_ROUNDS),
         Option("--benchmark-result", "bench result whose autotune configs are pinned",
                default=WHATIF_BENCHMARK_RESULT),
         Option("--output", "default runs/<name>/whatif/<config>_whatif.json"
                "; results/whatif/<config>_whatif.json with --publish", metavar="PATH"), *WRITES),
    _cmd("report", f"{CPU}:cmd_report", "RESULTS.md, PROVENANCE.md's table and the analysis JSON from committed "
         "results (under runs/<name>/; docs/ and results/analysis/ with --publish)", COMMON,
         Option("--result", "the formal raw result", default=manifest.RESULT),
         Option("--repeat", "an independent repeat ('' for none)", default=manifest.REPEAT),
         Option("--ncu", "ncu summaries to cite (default results/ncu/e1_h100_*.json)", "list", empty_ok=True),
         Option("--output", "RESULTS.md path (default runs/<result stem>/RESULTS.md; with --publish "
                f"{manifest.OUTPUT})", metavar="PATH"),
         Option("--analysis", "analysis JSON path (default runs/<result stem>/analysis/<result stem>.json; with "
                "--publish results/analysis/<result stem>.json)"),
         Option("--update-readme", "also rewrite README's results block", "flag"),
         Option("--no-readme", "accepted and ignored: README is rewritten only with --update-readme (kept for old "
                "scripts)", "flag", hidden=True),
         Option("--autotune-matrix", "autotune-matrix result for the autotune-config section (skipped when the file "
                "does not exist; '' for none)", default=manifest.AUTOTUNE_MATRIX),
         Option("--tune-arms", "bench results of extra tuning arms to cite (default results/raw/*_tune_*.json)",
                "list", empty_ok=True),
         Option("--formal", "label the run formal although its embedded config has no 'formal' field (results "
                "recorded before the field existed, e.g. e1_h100)", "flag"),
         Option("--h200", "the H200 formal result for the H100-vs-H200 section (a note when the file does not "
                "exist; '' for none)", default=manifest.H200),
         Option("--h200-repeat", "the H200 formal result's independent repeat ('' for none)",
                default=manifest.H200_REPEAT),
         Option("--provenance", "the file whose generated provenance table is rewritten (default "
                "runs/<result stem>/PROVENANCE.md, a copy of docs/PROVENANCE.md; with --publish docs/PROVENANCE.md; "
                "'' for none)", default=manifest.PROVENANCE), *WRITES),
    _cmd("compare", f"{CPU}:cmd_compare", "CPU only: bench result B vs A per pattern x stage: ratio of medians, "
         "bootstrap CI, verdict same/faster/slower/unclear; exit 0 ok, 1 --fail-on hit, 2 bad input", COMMON,
         Option("a", "reference bench result (results/raw/<name>.json)", "positional", metavar="A"),
         Option("b", "bench result compared against A", "positional", metavar="B"),
         Option("--noise-from", "a result and its independent repeat: the per-stage noise floor is their largest "
                "|median ratio - 1| (at least 0.5%%)", "pair", metavar=("X", "Y")),
         Option("--floor", "one noise floor (fraction) for every stage, instead of the noise table's "
                "(results/noise/floors.json: per stage, the larger of the two GPUs' floors; 0.02 for a GPU it lacks)",
                type=float),
         Option("--cycles", "compare in SM-cycle space (ms x the SM clock NVML sampled after each round)", "flag"),
         Option("--fail-on", "exit 1 when any verdict is this (any-change: anything but same)",
                choices=("slower", "faster", "unclear", "any-change")),
         Option("--resamples", "bootstrap resamples (default 10000; at least 1000)", type=int, default=10_000),
         Option("--output", "compare JSON path (default runs/<name>/compare/<A>_vs_<B>.json"
                "; results/compare/<A>_vs_<B>.json with --publish; '' for none)",
                metavar="PATH"), *WRITES),
    _cmd("noise-table", f"{CPU}:cmd_noise_table", "CPU only: the noise table, f(GPU, stage) of the rule from every "
         "repeated measurement of the committed results (bench results, sweep points), each floor with its rule and "
         "the files that set it", COMMON,
         Option("--output", "noise table JSON path (default runs/noise-table/noise/floors.json; with --publish "
                "results/noise/floors.json, the table compare, report and validate read)", metavar="PATH"), *WRITES),
    _cmd("release-table", f"{CPU}:cmd_release_table", "CPU only: per release result, the wrapper and the dK/dV "
         "kernel of each routing with 95%% CIs and the skew penalty (Markdown)", COMMON,
         Option("paths", "release results (results/releases/<config>/*.json)", "positionals", metavar="RESULT"),
         Option("--resamples", "bootstrap resamples (default 10000; at least 1000)", type=int, default=10_000)),
    _cmd("cost", f"{CPU}:cmd_cost", "CPU only: what a bench run cost: its wall time against the latencies it timed, "
         "phase by phase (tune, rounds, CUPTI pass, reproduction, ...), one column per result (Markdown)", COMMON,
         Option("paths", "bench results (results/raw/*.json)", "positionals", metavar="RESULT")),
    _cmd("stop-replay", f"{CPU}:cmd_stop_replay", "CPU only: where bench's stop rule would have stopped bench "
         "results that timed every round (dropping converged routings, or each converged stage), the GPU time it "
         "keeps, and compare's verdicts of each run cut there against every other run whole (Markdown)", COMMON,
         Option("paths", "bench results of one GPU and shape that timed every round (at least two)", "positionals",
                metavar="RESULT"),
         Option("--resamples", "bootstrap resamples of each verdict (default 10000, compare's; the seven runs of "
                "docs/METHOD.md take ~2 min at it on one CPU, ~40 s at 2000)", type=int, default=10_000),
         Option("--ci-abs-ms", "replay both rules with this absolute CI half-width target (ms) instead of their "
                "own (routing 0.02 ms, stage 0.002 ms): what another absolute floor would keep and lose",
                type=float, metavar="MS")),
    _cmd("plot", f"{CPU}:cmd_plot", "figure: latency vs a fan-in statistic, one panel per backward stage", COMMON,
         Option("--input", "summary CSV (results/summaries/<name>.csv)", required=True),
         Option("--x", "fan-in statistic on the x axis", default="fanin_cv", choices=tuple(sorted(X_STATS))),
         Option("--result", "bench result naming the GPU (default <summary's folder>/../raw/<summary stem>.json: "
                "results/summaries/X.csv -> results/raw/X.json)"),
         Option("--out-dir", OUT_DIR_HELP, metavar="DIR"), *WRITES),
    _cmd("flush-study", f"{CPU}:cmd_flush_study", "CPU only: choose the L2 flush policy from a GPU method study's "
         "flush records (paired bootstrap of median ratios vs no flush)", COMMON,
         Option("raw", "method-study raw JSON (results/studies/h200_method_study_flush.raw.json)", "positional",
                metavar="RAW"),
         Option("--output", "write the flush_study JSON (the committed one, with --publish: "
                "results/studies/h200_flush_policy.json)", metavar="PATH"), *WRITES),
    _cmd("sweep", f"{CPU}:cmd_sweep", "a grid of routings x T, one result per point under runs/<name>/sweeps/<name>/, "
         "plus its tidy table (results/sweeps/ with --publish)", GPU,
         Option("--executor", "inline (this process, default), or submitit's debug, local (one job per GPU of this "
                "host) or slurm (a job array)", default="inline", choices=SWEEP_EXECUTORS),
         Option("--points-per-job", "points per submitit job (default 1)", type=int, default=1),
         Option("--slurm", "submitit Slurm parameters, e.g. '{\"slurm_partition\": \"gpu\"}'", metavar="JSON"),
         Option("--table-only", "CPU only: rebuild the CSV from the point files (a byte-identical table is left as "
                "it is)", "flag"),
         Option("--output", "the tidy table (default runs/<name>/sweeps/<name>.csv"
                "; results/sweeps/<name>.csv with --publish)", metavar="PATH"),
         Option("--routing-file", "one more point per file (added to the config's routing_files; T from the file), "
                "timed against local; repeatable", "append", default=[], metavar="PATH"),
         Option("--stop-rule", "each point stops timing once every median's 95%% CI is tight (the sweep's "
                "timing.stop, else the default rule; docs/METHOD.md)", "flag"), *WRITES),
    _cmd("sweep-plot", f"{CPU}:cmd_sweep_plot",
         "CPU only: dK/dV median vs each fan-in statistic and vs T, from a sweep table", COMMON,
         Option("--table", "results/sweeps/<name>.csv", required=True),
         Option("--out-dir", OUT_DIR_HELP, metavar="DIR"), *WRITES),
    _cmd("lock", f"{CPU}:cmd_lock", "a requirements lock file from the versions a real bench run recorded", COMMON,
         Option("--from", "results/raw/<name>.json", required=True, metavar="RESULT", dest="source"),
         Option("--output", "the lock file (default runs/<name>/requirements-lock.txt; requirements-lock.txt with "
                "--publish)", metavar="PATH"), *WRITES),
    _cmd("validate", f"{CPU}:cmd_validate", "validate result files (ours or a third party's): schema + invariants",
         COMMON,
         Option("paths", "JSON results/reports or summary CSVs", "positionals", metavar="PATH"),
         Option("--json", "print one validation report per file as a JSON list", "flag"),
         Option("--strict", "exit 1 also when a check group is unverifiable (a source it reads was not found, or "
                "the recorded argv is not this CLI's, or its GPU is no row of the GPU table)", "flag"),
         Option("--also", "a bench result JSON to cross-check the summary CSVs against (not itself reported; "
                "repeatable)", "append", metavar="RESULT"),
         Option("--routing-file", "a routing file the result timed (file:<stem>): its sha256, edges and fan-in "
                "re-checked; repeatable", "append", default=[], metavar="PATH"),
         Option("--release-dir", "a release result's FLA folder (the one holding its fla/, e.g. "
                ".nsa-exp/releases/fla-core-0.6.0): every imported file re-hashed; repeatable", "append", default=[],
                metavar="DIR")),
    _cmd("schemas", f"{CPU}:cmd_schemas", "CPU only: check schemas/ against the vocabulary (stages, families, "
         "orders, kinds) and, for a kind whose module declares its record, against that record; exit 1 when a file "
         "drifts", COMMON,
         Option("--write", "rewrite (or create) the schema files that drift", "flag")),
    _cmd("calibrate", f"{MODEL}:calibrate", "CPU only: fit the dK/dV makespan model to designed calibration routings",
         COMMON,
         Option("--points", "result files or sweep folders (*.json)", "list", required=True),
         Option("--set", "calibration-set config naming the designed routings", required=True),
         Option("--output", "calibration path (default runs/<name>/model/<gpu>_<autotune config>.json"
                "; results/model/<gpu>_<autotune config>.json with --publish)"),
         Option("--kernels", "study JSON with kernels.dkv_core compiled metadata",
                default="results/studies/h200_method_study_flush.raw.json"),
         Option("--ncu", "ncu summary to cross-check occupancy ('' for none)",
                default="results/ncu/e1_h100_local-vs-sink-heavy_dkv_core.json"), *WRITES),
    _cmd("predict", f"{MODEL}:predict_command", "CPU only: predicted dK/dV ms of a routing from a calibration", COMMON,
         Option("--calibration", "a calibration (results/model/<gpu>_<autotune config>.json)", required=True),
         Option("--pattern", "a registered pattern name"),
         Option("--param", "pattern parameter (repeatable)", "append", default=[], metavar="K=V"),
         Option("--T", "sequence length (default the calibration's)", type=int),
         Option("--B", "batch size (default the calibration's)", type=int),
         Option("--H", "KV heads (default the calibration's)", type=int),
         Option("--G", "query heads per KV head, HQ = H*G (default the calibration's; the per-query cost c is "
                "scaled by G / G_cal, docs/MODEL.md)", type=int),
         Option("--routing-file", "block_indices .npy/.npz/.pt [B,T,H,S]"),
         Option("--packing", "packed documents, a config packing section as JSON (e.g. '{\"documents\": 8192}'): "
                "varlen program order; a .npz routing may carry cu_seqlens instead"),
         Option("--order", "the dK/dV programs' dispatch order (default program-id)", default="program-id",
                choices=DISPATCH_ORDERS),
         Option("--json", "print the prediction as JSON", "flag")),
    _cmd("reproduce", "nsa_exp.gpu.reproduce:command", "one verdict for your GPU run: check, smoke, bench under the "
         "stop rule, validate, compare with the published run of your GPU model under the noise floors; exit 0 "
         "agrees, 1 differs, 2 could not run", GPU,
         Option("--out-dir", "the submission folder (default runs/reproduce_<gpu of the config>)", metavar="DIR"),
         Option("--noise-table", "the noise floors table (default results/noise/floors.json)", metavar="PATH"),
         Option("--floor", "one noise floor (a fraction) for every stage instead of the noise table's (recorded in "
                "the compare document)", type=float),
         Option("--cupti", "add bench's CUPTI cross-check (a torch.profiler pass sized by need); off by default: on "
                "the H200 its uniform CSR kernel time disagrees with the CUDA events (docs/METHOD.md, CUPTI)", "flag"),
         Option("--published", "judge against this bench result instead of the published run of your GPU model",
                metavar="RESULT"),
         Option("--overwrite", "replace the submission folder's files when they exist (without it an existing "
                "submission is refused in one line)", "flag")),
    _cmd("model-validate", f"{MODEL}:model_validate",
         "CPU only: predicted vs measured dK/dV for non-calibration points", COMMON,
         Option("--calibration", "a calibration (results/model/<gpu>_<autotune config>.json)", required=True),
         Option("--points", "result files or sweep folders (*.json)", "list", required=True),
         Option("--output", "validation path (default runs/<name>/model/<calibration>_validation.json"
                "; results/model/<calibration>_validation.json with --publish)"),
         Option("--max-fanin", "F of the modelled split what-if (0: none)", type=int, default=4096),
         Option("--figures", "folder of the predicted-vs-measured figure (default runs/<name>/figures; "
                f"{FIGURES_DIR} with --publish; '' for none)", metavar="DIR"), *WRITES),
)


def command_named(name: str) -> Command:
    """The table's row of the command ``name`` (a GPU module's ``command`` is a handler, not this lookup)."""
    return next(c for c in COMMANDS if c.name == name)


def cli_argv(cmd: Command, values: Mapping[str, Any]) -> list[str]:
    """The CLI arguments for an invoke task's values (keyed by :func:`invoke_name`; an unset option — None,
    False or [] — is left to the CLI's default; an empty string given is passed on, e.g. ``--output ''``).

    >>> cli_argv(command_named("compare"), {"a": "A.json", "b": "B.json", "noise_from": ["X", "Y"], "cycles": True})
    ['A.json', 'B.json', '--noise-from', 'X', 'Y', '--cycles']
    """
    argv: list[str] = []
    for o in cmd.options:
        value = values.get(invoke_name(o))
        if value is None or value is False or (isinstance(value, (list, tuple)) and not value):
            continue
        if o.kind == "positional":
            argv.append(str(value))
        elif o.kind == "positionals":
            argv += [str(v) for v in _as_list(value)]
        elif o.kind == "flag":
            argv.append(o.flag)
        elif o.kind == "append":
            argv += [x for v in _as_list(value) for x in (o.flag, str(v))]
        elif o.kind in ("list", "pair"):
            argv += [o.flag, *map(str, _as_list(value))]
        else:
            argv += [o.flag, str(value)]
    return argv


def _as_list(value: Any) -> Sequence[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]
