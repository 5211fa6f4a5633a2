"""Command line: ``python -m nsa_exp COMMAND`` (``--help`` lists every command).

Every user error is one line on stderr and exit code 2 (``--debug`` shows the traceback). Each
subcommand binds its handler with ``set_defaults(func=...)``; the GPU commands' handlers live in
:mod:`nsa_exp.gpu.commands` (and ``ncu-export`` in :mod:`nsa_exp.gpu.ncu`) and are imported only
when such a command runs, so the CPU commands work without torch.

>>> build_parser().parse_args(["bench", "--config", "c.json", "--name", "dev"]).name
'dev'
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from . import SWEEP_EXECUTORS
from .errors import UserError
from .model.doors import add_commands as add_model_commands
from .routing.fanin import X_STATS
from .routing.stages import STAGE_NAMES

DEFAULT_CONFIG = "configs/e1_h100.json"
Handler = Callable[[argparse.Namespace], int]


def _lazy(module: str, name: str) -> Handler:
    """A handler imported when its command runs (the one deliberate deferral here: GPU commands must
    not import torch before the env gate and CPU commands never; and a command pays only for its own
    imports — ``predict`` needs no pandas, scipy.stats or matplotlib)."""
    def handler(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), name)(args)
    handler.__name__ = name
    return handler


def _cpu(name: str) -> Handler:
    """The CPU command ``name``'s handler, ``nsa_exp.handlers.cmd_<name>``."""
    return _lazy("nsa_exp.handlers", f"cmd_{name}")


class OneLineParser(argparse.ArgumentParser):
    """argparse with the project's error contract: one line naming the option, exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m nsa_exp", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show tracebacks")
    configured = argparse.ArgumentParser(add_help=False, parents=[common])
    configured.add_argument("--config", default=DEFAULT_CONFIG, help=f"experiment config (default {DEFAULT_CONFIG})")
    gpu = argparse.ArgumentParser(add_help=False, parents=[configured])
    gpu.add_argument("--allow-gpu", action="store_true", help="run on a GPU other than the config's (recorded in the "
                     "report)")

    def command(name: str, func: Handler, help: str, parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, parents=[parent])
        p.set_defaults(func=func)
        return p

    p = command("routing", _cpu("routing"), "CPU only: edges and fan-in statistics of every pattern", configured)
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema routing_report)")
    p.add_argument("--save", metavar="DIR", help="write each pattern's block_indices as DIR/<pattern>.npy")
    p.add_argument("--output", metavar="PATH", help="also write the JSON report to PATH")
    p.add_argument("--routing-file", action="append", default=[], metavar="PATH",
                   help="also validate and summarise your own block_indices (.npy/.npz/.pt, int32/int64 "
                        "[B,T,H,S], -1 padding); repeatable")
    p.add_argument("--require-equal-edges", action="store_true",
                   help="fail unless every --routing-file has the same edge count")

    p = command("routing-time", _cpu("routing_time"), "CPU only: routing generation time per pattern and T", configured)
    p.add_argument("--lengths", type=int, nargs="+", default=[32768, 131072], help="sequence lengths T")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats (the median is printed)")

    p = command("check", _lazy("nsa_exp.gpu.commands", "check"),
                "gates: the config's GPU (H100 / H200), versions, FLA sources, env vars, equal edges", gpu)
    p.add_argument("--output", metavar="PATH", help="report path (default results/reports/<config>_check.json)")

    p = command("smoke", _lazy("nsa_exp.gpu.commands", "smoke"),
                "correctness: FLA vs naive (T=256 local; T=1024 S=8 every routing); staged vs official "
                "(T=2048)", gpu)
    p.add_argument("--output", metavar="PATH", help="report path (default results/reports/<config>_smoke.json)")

    p = command("bench", _lazy("nsa_exp.gpu.commands", "bench"), "time every stage x pattern at the primary shape",
                gpu)
    p.add_argument("--name", help="result name (default: the config's name)")
    p.add_argument("--output", metavar="PATH", help="raw JSON path (default results/raw/<name>.json)")
    p.add_argument("--summary", metavar="PATH", help="CSV path (default results/summaries/<name>.csv)")
    p.add_argument("--repetitions", type=int, help="override the config's timed rounds")
    p.add_argument("--resume", action="store_true", help="continue an interrupted bench from its journal")
    p.add_argument("--discard-journal", action="store_true", help="delete an interrupted bench's journal first")
    p.add_argument("--tune-on", default="local", metavar="PATTERN", help="tune FLA's autotuners on this routing "
                   "first and reuse its configs for all (default local: the seed's protocol)")
    p.add_argument("--tune", choices=("once", "per-pattern"), default="once", help="per-pattern: tune each routing "
                   "on itself (caches cleared between patterns) and time each under its own configs")
    p.add_argument("--autotune-from", metavar="RESULT", help="replay this bench result's autotune configs (tune "
                   "nothing); recorded as autotune.replayed_from")
    p.add_argument("--cupti-rounds", type=int, default=5, help="rounds of the torch.profiler (CUPTI) cross-check "
                   "after the timed rounds (default 5; 0 skips it)")
    p.add_argument("--routing-file", action="append", default=[], metavar="PATH", help="also time your own "
                   "block_indices (.npy/.npz/.pt, [B,T,H,S] of the config) as pattern file:<stem>; repeatable")
    p.add_argument("--require-equal-edges", action="store_true",
                   help="refuse a --routing-file whose edges differ from the closed form")

    # issue 22: the release arm (nsa_exp.gpu.release_run; not the pinned experiment)
    p = command("release-bench", _lazy("nsa_exp.gpu.release_run", "command"), "RELEASE ARM, not the pinned "
                "experiment: time an FLA release or source tree through its public API (parallel_nsa_bwd as a whole, "
                "its kernels by CUPTI, parallel_nsa fwd+bwd), each in its own child process", common)
    p.add_argument("--config", default="configs/release_h200.json", help="release config (default "
                   "configs/release_h200.json)")
    p.add_argument("--allow-gpu", action="store_true", help="run on a GPU other than the base config's (recorded)")
    p.add_argument("--release", action="append", default=[], metavar="VERSION", help="an fla-core release to time "
                   "(installed in .nsa-exp/releases/fla-core-VERSION/); repeatable; default: the config's releases")
    p.add_argument("--fla-source", action="append", default=[], metavar="PATH", help="a source tree to time as it "
                   "is (the folder holding its fla/ package, e.g. your flash-linear-attention checkout); repeatable")
    p.add_argument("--wheel-dir", metavar="DIR", help="take fla_core-VERSION-*.whl from DIR (offline) instead of "
                   "pip download from the package index")
    p.add_argument("--releases-dir", metavar="DIR", help="release folders, source views and job folders (default "
                   ".nsa-exp/releases)")
    p.add_argument("--output-dir", metavar="DIR", help="where <label>-T<T>.json go (default "
                   "results/releases/<config name>)")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs (refused otherwise)")
    p.add_argument("--repetitions", type=int, help="override the config's timed rounds")
    p.add_argument("--cupti-rounds", type=int, help="rounds of the CUPTI per-kernel pass (default: the config's; "
                   "0 skips it)")
    p.add_argument("--routing-file", action="append", default=[], metavar="PATH", help="also time your own "
                   "block_indices (.npy/.npz/.pt, [B,T,H,S]) as pattern file:<stem> at the point of its T; repeatable")
    p.add_argument("--require-equal-edges", action="store_true",
                   help="refuse a --routing-file whose edges differ from the closed form")

    p = command("autotune-matrix", _lazy("nsa_exp.gpu.autotune_matrix", "command"),
                "time every autotune config x routing of dq_core/dkv_core (issue 11)", gpu)
    p.add_argument("--stages", default="dq_core,dkv_core", help="comma-separated autotuned stages")
    p.add_argument("--rounds", type=int, default=15, help="timed rounds (every config x routing once per round)")
    p.add_argument("--warmup-rounds", type=int, default=2, help="warm-up rounds (kept, flagged)")
    p.add_argument("--output", required=True, metavar="PATH", help="results/autotune/<name>.json")

    p = command("autotune-heatmap", _cpu("autotune_heatmap"), "CPU only: heatmap of an autotune-matrix result", common)
    p.add_argument("--input", required=True, help="results/autotune/<name>.json")
    p.add_argument("--out-dir", default="docs/figures", help="where the PNG and SVG go")

    p = command("profile-stage", _lazy("nsa_exp.gpu.commands", "profile"),
                "launch one stage inside NVTX range nsa_<pattern>_<stage> (for ncu)", gpu)
    p.add_argument("--pattern", required=True, help="a pattern, or A-vs-B (e.g. local-vs-sink-heavy)")
    p.add_argument("--stage", required=True, choices=STAGE_NAMES)
    p.add_argument("--benchmark-result", help="replay the autotune configs this bench result recorded")

    p = command("ncu", _lazy("nsa_exp.gpu.commands", "ncu"),
                "run Nsight Compute on one stage and export its metrics to JSON", gpu)
    p.add_argument("--pattern", default="local-vs-sink-heavy", help="a pattern or A-vs-B")
    p.add_argument("--stage", required=True, choices=STAGE_NAMES)
    p.add_argument("--benchmark-result", help="bench result whose autotune configs to replay "
                   "(default results/raw/<config>.json when it exists)")
    p.add_argument("--name", help="report name (default <config>_<pattern>_<stage>)")

    p = command("ncu-export", _lazy("nsa_exp.gpu.ncu", "export_command"),
                "export an existing .ncu-rep (or its raw CSV) to summary JSON", common)
    p.add_argument("report", help="a .ncu-rep file, or a CSV from `ncu --import R --csv --page raw`")
    p.add_argument("--output", required=True, help="summary JSON path")
    p.add_argument("--reuse-context", metavar="SUMMARY", help="re-parse a raw CSV, keeping this earlier summary's "
                   "profile context and GPU-host metadata (recorded as reexported_from)")
    p.add_argument("--pattern", help="the profiled pattern spec (e.g. local-vs-sink-heavy), recorded")
    p.add_argument("--stage", choices=STAGE_NAMES, help="the profiled stage, recorded")

    p = command("whatif", _lazy("nsa_exp.gpu.commands", "whatif"),
                "WHAT-IF ARMS: split / heaviest-first dK/dV schedules on FLA's unmodified kernels, timed", gpu)
    p.add_argument("--patterns", default="sink-heavy,zipf", help="config patterns, comma-separated")
    p.add_argument("--max-fanin", default="4096,8192", help="F values: rows longer than F are split")
    p.add_argument("--layouts", default="split,split-heavy-first", help="split, split-heavy-first")
    p.add_argument("--rounds", type=int, default=20, help="timed rounds (after the config's warm-up)")
    p.add_argument("--benchmark-result", default="results/raw/e1_h200_pre.json",
                   help="bench result whose autotune configs are pinned")
    p.add_argument("--output", help="default results/whatif/<config>_whatif.json")

    p = command("report", _cpu("report"), "docs/RESULTS.md + results/analysis/<name>.json from committed results",
                common)
    p.add_argument("--result", default="results/raw/e1_h100.json", help="the formal raw result")
    p.add_argument("--repeat", default="results/raw/e1_h100_repeat.json", help="an independent repeat ('' for none)")
    p.add_argument("--ncu", nargs="*", default=None, help="ncu summaries to cite (default results/ncu/e1_h100_*.json)")
    p.add_argument("--output", default="docs/RESULTS.md")
    p.add_argument("--analysis", help="analysis JSON path (default results/analysis/<result stem>.json)")
    p.add_argument("--update-readme", action="store_true", help="also rewrite README's results block")
    p.add_argument("--no-readme", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for old scripts
    p.add_argument("--autotune-matrix", default="results/autotune/e1_h200.json", help="autotune-matrix result for "
                   "the autotune-config section (skipped when the file does not exist; '' for none)")
    p.add_argument("--tune-arms", nargs="*", default=None, help="bench results of extra tuning arms to cite "
                   "(default results/raw/*_tune_*.json)")
    p.add_argument("--formal", action="store_true", help="label the run formal although its embedded config has "
                   "no 'formal' field (results recorded before the field existed, e.g. e1_h100)")
    p.add_argument("--h200", default="results/raw/e1_h200.json", help="the H200 formal result for the H100-vs-H200 "
                   "section (a note when the file does not exist; '' for none)")

    p = command("compare", _cpu("compare"), "CPU only: bench result B vs A per pattern x stage: ratio of medians, "
                "bootstrap CI, verdict same/faster/slower/unclear; exit 0 ok, 1 --fail-on hit, 2 bad input", common)
    p.add_argument("a", metavar="A", help="reference bench result (results/raw/<name>.json)")
    p.add_argument("b", metavar="B", help="bench result compared against A")
    p.add_argument("--noise-from", nargs=2, metavar=("X", "Y"), help="a result and its independent repeat: the "
                   "per-stage noise floor is their largest |median ratio - 1| (at least 0.5%%)")
    p.add_argument("--floor", type=float, default=0.02, help="noise floor (fraction) without --noise-from "
                   "(default 0.02)")
    p.add_argument("--cycles", action="store_true", help="compare in SM-cycle space (ms x the SM clock NVML "
                   "sampled after each round)")
    p.add_argument("--fail-on", choices=("slower", "faster", "unclear", "any-change"), help="exit 1 when any "
                   "verdict is this (any-change: anything but same)")
    p.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    p.add_argument("--output", metavar="PATH", help="compare JSON path (default results/compare/<A>_vs_<B>.json; "
                   "'' for none)")

    p = command("release-table", _cpu("release_table"), "CPU only: per release result, the wrapper and the dK/dV "
                "kernel of each routing with 95%% CIs and the skew penalty (Markdown; issue 22)", common)
    p.add_argument("paths", nargs="+", metavar="RESULT", help="release results (results/releases/<config>/*.json)")
    p.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")

    p = command("plot", _cpu("plot"), "figure: latency vs a fan-in statistic, one panel per backward stage", common)
    p.add_argument("--input", required=True, help="summary CSV (results/summaries/<name>.csv)")
    p.add_argument("--x", default="fanin_cv", choices=sorted(X_STATS), help="fan-in statistic on the x axis")
    p.add_argument("--result", help="bench result naming the GPU (default results/raw/<summary stem>.json)")
    p.add_argument("--out-dir", default="docs/figures", help="where the PNG and SVG go")

    p = command("flush-study", _cpu("flush_study"), "CPU only: choose the L2 flush policy from a GPU method study's "
                "flush records (paired bootstrap of median ratios vs no flush)", common)
    p.add_argument("raw", metavar="RAW", help="method-study raw JSON "
                   "(results/studies/h200_method_study_flush.raw.json)")
    p.add_argument("--output", metavar="PATH", help="write the flush_study JSON "
                   "(e.g. results/studies/h200_flush_policy.json)")

    p = command("sweep", _cpu("sweep"), "a grid of routings x T, one result per point under results/sweeps/<name>/, "
                "plus the tidy table results/sweeps/<name>.csv", gpu)
    p.add_argument("--executor", default="inline", choices=SWEEP_EXECUTORS, help="inline (this process, default), or "
                   "submitit's debug, local (one job per GPU of this host) or slurm (a job array)")
    p.add_argument("--points-per-job", type=int, default=1, help="points per submitit job (default 1)")
    p.add_argument("--slurm", metavar="JSON", help='submitit Slurm parameters, e.g. \'{"slurm_partition": "gpu"}\'')
    p.add_argument("--table-only", action="store_true", help="CPU only: rebuild the CSV from the point files")
    p.add_argument("--routing-file", action="append", default=[], metavar="PATH", help="one more point per file "
                   "(added to the config's routing_files; T from the file), timed against local; repeatable")

    p = command("sweep-plot", _cpu("sweep_plot"), "CPU only: dK/dV median vs each fan-in statistic and vs T, from a "
                "sweep table", common)
    p.add_argument("--table", required=True, help="results/sweeps/<name>.csv")
    p.add_argument("--out-dir", default="docs/figures", help="where the PNG and SVG go")

    p = command("lock", _cpu("lock"), "requirements-lock.txt from the versions a real bench run recorded", common)
    p.add_argument("--from", dest="source", required=True, metavar="RESULT", help="results/raw/<name>.json")
    p.add_argument("--output", default="requirements-lock.txt")

    p = command("validate", _cpu("validate"), "validate result files (ours or a third party's): schema + invariants",
                common)
    p.add_argument("paths", nargs="+", metavar="PATH", help="JSON results/reports or summary CSVs")
    p.add_argument("--json", action="store_true", help="print one validation report per file as a JSON list")
    p.add_argument("--also", action="append", metavar="RESULT", help="a bench result JSON to cross-check the "
                   "summary CSVs against (not itself reported; repeatable)")
    p.add_argument("--routing-file", action="append", default=[], metavar="PATH", help="a routing file the "
                   "result timed (file:<stem>): its sha256, edges and fan-in re-checked; repeatable")
    p.add_argument("--release-dir", action="append", default=[], metavar="DIR", help="a release result's FLA "
                   "folder (the one holding its fla/, e.g. .nsa-exp/releases/fla-core-0.6.0): every imported file "
                   "re-hashed; repeatable")
    add_model_commands(command, common, _lazy)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UserError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # the reader went away (``| head``): not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the interpreter's flush at exit
        return 0
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
