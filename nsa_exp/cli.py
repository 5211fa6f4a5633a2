"""Command line: ``python -m nsa_exp COMMAND`` (``--help`` lists every command).

Every user error is one line on stderr and exit code 2 (``--debug`` shows the traceback). The commands
and their options are the table :data:`nsa_exp.commands.COMMANDS` (which ``tasks.py`` reads too); each
subcommand binds its handler with ``set_defaults(func=...)``, imported only when the command runs, so
the CPU commands work without torch.

>>> build_parser().parse_args(["bench", "--config", "c.json", "--name", "dev"]).name
'dev'
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import numpy as np

from .arguments import check_arguments
from .checking.sweep_checks import register_planned
from .commands import COMMANDS, Option, cli_flags
from .core.config import Pattern, Shape
from .errors import UserError
from .io.reader import show_path
from .io.strict_csv import parse_float, parse_int
from .routing.patterns import register_external

Handler = Callable[[argparse.Namespace], int]


def _fla_topk_routing(pattern: Pattern, shape: Shape, seed: int) -> np.ndarray:
    """fla-topk's routing, computed by the GPU tier (:func:`nsa_exp.gpu.topk.fla_topk_routing`), imported only
    when a command asks for one (torch then; a one-line UserError without a GPU or the Triton interpreter)."""
    from .gpu.topk import fla_topk_routing  # noqa: PLC0415 - the GPU tier only when a fla-topk routing is generated

    return fla_topk_routing(pattern, shape, seed)


register_external("fla-topk", _fla_topk_routing)  # the doors wire the tiers: the GPU tier's function, by name


def _planned_points(sweep: str) -> dict[str, list[dict[str, Any]]] | None:
    """The points a sweep's config plans (:func:`nsa_exp.sweeps.plan.planned_points`), for the sweep table's check."""
    from .sweeps.plan import planned_points  # noqa: PLC0415 - the sweep tier when a sweep table is validated

    return planned_points(sweep)


register_planned(_planned_points)  # ... and the sweep tier's grid, for validate's sweep-table check


def _lazy(target: str) -> Handler:
    """The handler ``"module:function"``, imported when its command runs (the one deliberate deferral here:
    GPU commands must not import torch before the env gate and CPU commands never; and a command pays only
    for its own imports — ``predict`` needs no pandas, scipy.stats or matplotlib)."""
    module, _, name = target.partition(":")

    def handler(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), name)(args)
    handler.__name__ = name
    return handler


@contextlib.contextmanager
def numerical_warnings(debug: bool) -> Iterator[None]:
    """numpy/scipy ``RuntimeWarning``s (an empty slice, a division by zero) never reach stderr as extra lines:
    the one-line contract holds, and a NaN they leave cannot reach a file (every document is written with
    ``allow_nan=False`` after its schema). With ``--debug`` they are shown as Python shows them."""
    with warnings.catch_warnings():
        if not debug:
            warnings.simplefilter("ignore", RuntimeWarning)
        yield


class OneLineParser(argparse.ArgumentParser):
    """argparse with the project's error contract: one line naming the option, exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def _number(parse: Callable[[str], int | float], name: str) -> Callable[[str], int | float]:
    """An argparse ``type`` by the one number rule (:mod:`nsa_exp.io.strict_csv`: ASCII digits, no '+', '_'
    or padding): ``int('٣')`` is 3 and ``float('²')`` raises deep in a handler, this refuses both at argparse."""
    def convert(text: str) -> int | float:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = name
    return convert


NUMBER_TYPES = {int: _number(parse_int, "int"), float: _number(parse_float, "float")}
ARGPARSE: dict[str, dict[str, Any]] = {"flag": {"action": "store_true"}, "list": {"nargs": "+"}, "pair": {"nargs": 2},
            "append": {"action": "append"}, "positionals": {"nargs": "+"}}


class StoreOnce(argparse._StoreAction):
    """argparse's store, refusing an option given twice: argparse kept the last silently (``calibrate --points A
    --points B`` read B alone; an attacker, 2026-12-07). A list option takes its values after one flag."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given = namespace.__dict__.setdefault("_given", set())
        if self.dest in given:
            several = f" (its values follow the one flag: {option_string} A B)" if self.nargs in ("+", "*") else ""
            parser.error(f"{option_string}: given twice; give it once{several}")
        given.add(self.dest)
        setattr(namespace, self.dest, values)


def add_option(parser: argparse.ArgumentParser, o: Option) -> None:
    """One :class:`nsa_exp.commands.Option` as an argparse argument (each option but a flag or an append once)."""
    kw: dict = {**ARGPARSE.get(o.kind, {}), "help": argparse.SUPPRESS if o.hidden else o.help}
    if not o.positional and o.kind not in ("flag", "append"):
        kw["action"] = StoreOnce
    if o.kind == "list" and o.empty_ok:
        kw["nargs"] = "*"
    if o.kind not in ("flag",):
        typ = NUMBER_TYPES.get(o.type, o.type)
        given = (("type", None if o.type is str else typ), ("choices", o.choices), ("metavar", o.metavar))
        kw |= {k: v for k, v in given if v is not None}
    if o.positional:
        parser.add_argument(o.name, **kw)
        return
    if o.kind != "flag":
        kw["default"] = o.default
    if o.required:
        kw["required"] = True
    if o.dest:
        kw["dest"] = o.dest
    parser.add_argument(*cli_flags(o), **kw)


def build_parser() -> argparse.ArgumentParser:
    """The CLI, one subcommand per row of :data:`nsa_exp.commands.COMMANDS`."""
    # allow_abbrev=False: an option is its whole name. argparse took '--conf X' for '--config X', which the recorded
    # argv's checks (validate reads --config, --resume, --allow-gpu by name) could not see: an abbreviated argv
    # passed them while the run read another config (an attacker, 2026-12-06)
    parser = OneLineParser(prog="python -m nsa_exp", description=__doc__.splitlines()[0], allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in COMMANDS:
        p = sub.add_parser(cmd.name, help=cmd.help, allow_abbrev=False)
        for o in cmd.options:
            add_option(p, o)
        p.set_defaults(func=_lazy(cmd.handler))
    return parser


#: the exit code of a command whose output's reader went away: the shell's for a writer killed by SIGPIPE
BROKEN_PIPE_EXIT = 128 + 13


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a path or field holding a lone surrogate (JSON's "\ud800") prints
        if isinstance(stream, io.TextIOWrapper):  # as "\ud800", never an internal UnicodeEncodeError mid-report
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    at = next((i for i, token in enumerate(given) if token in {c.name for c in COMMANDS}), len(given))
    early = [t for t in given[:at] if t.startswith("-") and t not in ("-h", "--help")]
    if early:  # python -m nsa_exp --debug routing: argparse said only "unrecognized arguments: --debug"
        name = given[at] if at < len(given) else "COMMAND"
        parser.error(f"{early[0]}: a command's options go after its name (python -m nsa_exp {name} {early[0]} ...)")
    args = parser.parse_args(argv)
    args.given = args.__dict__.pop("_given", set())  # StoreOnce's record of the options typed (their dests)
    args.argv = given  # the command line as this call was given it (a derived document records it as its command)

    def command() -> int:
        with numerical_warnings(args.debug):
            check_arguments(args)  # before the handler: before any gate, before torch is imported
            return args.func(args)

    return run_reporting_errors(command, args.debug)


def run_reporting_errors(command: Callable[[], int], debug: bool = False) -> int:
    """``command()``'s exit code under the project's error contract (README): a :class:`UserError` is one
    ``error:`` line and its exit code (2 bad input, 3 a failed gate), an ``OSError`` about a path one line and 2,
    a reader gone from the pipe 141, Ctrl-C 130, anything else one ``internal error`` line and 1 (with ``debug``
    the traceback too). The CLI's ``main`` and the study scripts (scripts/gpu_method_study.py) end through it."""
    try:
        return command()
    except UserError as exc:
        if debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # the reader went away (``| head``): no traceback, but never success either: the
        # command's own verdict (validate's 1 for a forged file) was not delivered, so exit as a writer killed by
        # SIGPIPE does (128 + 13), which ``set -o pipefail`` reports; exit 0 here let a piped validate pass a forgery
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the interpreter's flush at exit
        return BROKEN_PIPE_EXIT
    except OSError as exc:
        if exc.filename is None:  # not about a path the user gave: an internal error below
            return _internal(exc, debug)
        if debug:
            traceback.print_exc()
        print(f"error: {show_path(exc.filename)}: {exc.strerror or exc}", file=sys.stderr)  # e.g. a path too long
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; no partial output was written", file=sys.stderr)
        return 130
    except Exception as exc:  # an internal error: still one line unless --debug
        return _internal(exc, debug)


def _internal(exc: Exception, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"error: internal error {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
          file=sys.stderr)
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
