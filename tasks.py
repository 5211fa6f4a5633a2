"""invoke tasks: one task per ``python -m nsa_exp`` command, generated from the CLI's own parser, so
every CLI option is an invoke option and nothing is declared twice (see docs/ARCHITECTURE.md);
plus the developer chores ``test`` and ``lint``. ``invoke --list``; ``invoke --help bench``.

GPU tasks need the environment of ``scripts/run_h100.sh``; run them as
``scripts/run_h100.sh invoke bench`` (or inside the container, where it is set).
"""

from __future__ import annotations

import argparse
import inspect
import shlex
import sys
from pathlib import Path

from invoke import Collection, Context, Task, task

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nsa_exp.cli import build_parser  # noqa: E402

PY = shlex.quote(sys.executable)
MORE = "more"  # the repeatable option holding the 2nd, 3rd... value of a variadic positional (validate)


def _nsa(c: Context, *args: str) -> None:
    c.run(" ".join([PY, "-m", "nsa_exp", *(shlex.quote(a) for a in args)]), pty=False)


def _options(sub: argparse.ArgumentParser) -> list[argparse.Action]:
    """The command's arguments, positionals first (they are the task's positional parameters)."""
    actions = [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]
    return sorted(actions, key=lambda a: bool(a.option_strings))


def _repeated(a: argparse.Action) -> bool:
    """An option whose invoke flag is given once per value: ``action="append"`` (one CLI flag per value),
    ``nargs`` ``+``/``*`` or a fixed count such as ``--noise-from X Y`` (one CLI flag, every value)."""
    return isinstance(a, argparse._AppendAction) or a.nargs in ("+", "*") or isinstance(a.nargs, int)


def _argv(actions: list[argparse.Action], values: dict) -> list[str]:
    """The CLI arguments for the task's keyword values (unset options are left to the CLI's defaults).

    >>> p = argparse.ArgumentParser(); _ = p.add_argument("--f", action="append", default=[])
    >>> _ = p.add_argument("--pair", nargs=2); _ = p.add_argument("--x")
    >>> _argv(p._actions[1:], {"f": ["a.npy", "b.npy"], "pair": ["X", "Y"], "x": ""})
    ['--f', 'a.npy', '--f', 'b.npy', '--pair', 'X', 'Y']
    """
    argv: list[str] = []
    for a in actions:
        value = values[a.dest]
        if not a.option_strings:  # positional
            argv += [value, *(values.get(MORE) or [])] if a.nargs in ("+", "*") else [value]
        elif isinstance(a, argparse._StoreTrueAction):
            argv += [a.option_strings[-1]] if value else []
        elif isinstance(a, argparse._AppendAction):
            argv += [x for v in value or [] for x in (a.option_strings[-1], str(v))]
        elif _repeated(a):
            argv += [a.option_strings[-1], *map(str, value)] if value else []
        elif value not in (None, ""):
            argv += [a.option_strings[-1], str(value)]
    return argv


def _command_task(name: str, sub: argparse.ArgumentParser) -> Task:
    actions = _options(sub)
    params = [inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    positional, iterable, helps = [], [], {}
    for a in actions:
        if not a.option_strings:
            positional.append(a.dest)
            params.append(inspect.Parameter(a.dest, inspect.Parameter.POSITIONAL_OR_KEYWORD))
            if a.nargs in ("+", "*"):
                iterable.append(MORE)
                helps[MORE] = f"more {a.dest} (repeatable)"
        else:
            default = False if isinstance(a, argparse._StoreTrueAction) else (
                [] if _repeated(a) else "" if a.default is None else a.default)
            if isinstance(default, list):
                iterable.append(a.dest)
            params.append(inspect.Parameter(a.dest, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
        repeat = " (repeat the flag once per value)" if a.option_strings and _repeated(a) else ""
        helps[a.dest] = (a.help or "").replace("%%", "%") + repeat if a.option_strings or a.help else a.dest
    if MORE in iterable:
        params.append(inspect.Parameter(MORE, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=[]))

    def body(c, *args, **kwargs):
        values = dict(zip([p.name for p in params[1:]], args, strict=False)) | kwargs
        _nsa(c, name, *_argv(actions, values))

    body.__signature__ = inspect.Signature(params)
    body.__name__ = name.replace("-", "_")
    body.__doc__ = sub.description or sub.format_usage()
    return task(body, name=name.replace("-", "_"), positional=positional, iterable=iterable, help=helps)


def _command_tasks() -> list[Task]:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {ch.dest: ch.help for ch in subparsers._choices_actions}
    tasks = []
    for name, sub in subparsers.choices.items():
        sub.description = sub.description or helps.get(name)
        tasks.append(_command_task(name, sub))
    return tasks


@task(help={"fast": "skip the slow Triton-interpreter tests"})
def test(c, fast=False):
    """The CPU test suite with doctests (what CI runs)."""
    c.run(f"{PY} -m pytest -q" + (" -m 'not interpreter'" if fast else ""), pty=False)


@task
def lint(c):
    """ruff; hadolint on the Dockerfile; docker-compose.yml against the compose spec (no engine needed)."""
    c.run(f"{PY} -m ruff check nsa_exp scripts tests tasks.py", pty=False)
    bindir = shlex.quote(str(Path(sys.executable).parent))
    c.run(f"{bindir}/hadolint Dockerfile", pty=False)
    c.run(f"{bindir}/check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml docker-compose.ca.yml",
          pty=False)


ns = Collection(*_command_tasks(), test, lint)
