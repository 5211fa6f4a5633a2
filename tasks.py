"""invoke tasks: one task per ``python -m nsa_exp`` command, generated from the one command table
(:data:`nsa_exp.commands.COMMANDS`, which the CLI's parser is built from too), so every CLI option is an
invoke option and nothing is declared twice (see docs/ARCHITECTURE.md); plus the developer chores
``test`` and ``lint``. ``invoke --list``; ``invoke --help bench``.

GPU tasks need the environment of ``scripts/run_h100.sh``; run them as
``scripts/run_h100.sh invoke bench`` (or inside the container, where it is set).
"""

from __future__ import annotations

import inspect
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from invoke import Collection, Context, Exit, ParseError, Task, task

# invoke's own listings (``invoke --list | head``, ``invoke --help report | head``) end as a writer whose reader left:
# killed by SIGPIPE, exit 141, as README says of every command, not in a BrokenPipeError traceback from invoke's
# program.py, exit 1 (a new user, 2026-12-06). Python ignores SIGPIPE; the default action is the shell's convention.
# Only in invoke's own process: a test importing this module keeps Python's BrokenPipeError.
if hasattr(signal, "SIGPIPE") and Path(sys.argv[0]).name in ("invoke", "inv"):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nsa_exp.commands import COMMANDS, Command, Option, cli_argv, invoke_name  # noqa: E402

PY = shlex.quote(sys.executable)
#: What each option kind adds to its invoke help (the kinds: nsa_exp.commands).
KIND_NOTE = {
    "list": " (give the flag once per value: {flag} A {flag} B)",
    "append": " (give the flag once per value: {flag} A {flag} B)",
    "pair": " (give the flag twice, once per value: {flag} X {flag} Y)",
    "positional": " (positional: give the value without a flag)",
    "positionals": " (positional: give the first value without a flag, more with --more)",
}
MORE = "more"  # the repeatable option holding the 2nd, 3rd... value of a variadic positional (validate)


def _nsa(c: Context, *args: str) -> None:
    """``python -m nsa_exp ARGS`` with this process's own stdin, stdout and stderr, its exit code invoke's. Not
    ``c.run``: invoke copies a child's output through its own threads, so a reader that goes away (``invoke validate
    ... | head -1``) ended in a 435-line BrokenPipeError traceback from invoke, exit 1 (a new user, 2026-12-06),
    where the command itself exits 141 as a writer killed by SIGPIPE. Ctrl-C reaches the child from the terminal
    too: it is waited for, so it ends on its own terms (a bench keeps its journal), never killed."""
    with subprocess.Popen([sys.executable, "-m", "nsa_exp", *args]) as child:
        try:
            code = child.wait()
        except KeyboardInterrupt:
            code = child.wait()
    if code:
        raise Exit(code=code if code > 0 else 128 - code)  # killed by signal N: the shell's 128 + N


def option_help(o: Option) -> str:
    """An option's invoke help: the CLI's help, what its kind takes, and its choices."""
    text = o.help.replace("%%", "%") + KIND_NOTE.get(o.kind, "").format(flag=o.flag)
    return text + (f" (one of {', '.join(map(str, o.choices))})" if o.choices else "")


class CommandTask(Task):
    """A task whose parameters' kinds come from the command table (invoke would guess them from defaults)."""

    def __init__(self, *args: Any, options: dict[str, Option], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.options = options

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = super().arg_opts(name, default, taken_names)
        o = self.options.get(name)
        if o is not None and o.kind == "value":
            opts["kind"] = int if o.type is int else str  # invoke shows INT / STRING; floats travel as text
        opts["names"] = [n for n in opts["names"] if n.strip("-")]  # no "-" short flag from a dashed name
        return opts


def command_task(cmd: Command) -> Task:
    """The invoke task of one command: a parameter per option (positionals first), its kind and help."""
    options = {invoke_name(o): o for o in sorted(cmd.options, key=lambda o: not o.positional)}
    params = [inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    positional, iterable, helps = [], [], {}
    for name, o in options.items():
        if o.positional:
            positional.append(name)
            params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD))
        else:
            listed = o.kind in ("list", "pair", "append")
            default: bool | list[str] | None = False if o.kind == "flag" else [] if listed else None
            if listed:
                iterable.append(name)
            params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
        helps[name] = option_help(o).replace("%%", "%")  # argparse's escape; invoke prints help as written
        if o.kind == "positionals":
            iterable.append(MORE)
            helps[MORE] = f"more {o.metavar or name} values after the first (give the flag once per value)"
            params.append(inspect.Parameter(MORE, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=[]))

    def body(c: Context, *args: Any, **kwargs: Any) -> None:
        values = dict(zip([p.name for p in params[1:]], args, strict=False)) | kwargs
        for name, o in options.items():  # a variadic positional's first value, then --more's
            if o.kind == "positionals":
                values[name] = [values[name], *(values.get(MORE) or [])]
        _nsa(c, cmd.name, *cli_argv(cmd, values))

    # inspect.signature reads __signature__, which typeshed does not declare on functions
    body.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # no __signature__ in the stub
    body.__name__ = cmd.name.replace("-", "_")
    shown = [o.metavar if isinstance(o.metavar, str) and o.metavar else o.name for o in cmd.options if o.positional]
    body.__doc__ = cmd.help.replace("%%", "%") + (f"\n\nPositional: {' '.join(shown)}" if shown else "")
    # no auto short flags: invoke would make them from first letters (``-h`` for ``report --h200``, which reads as
    # help; ``-b`` for ``--publish``); every option has its one long name, as in ``python -m nsa_exp``
    return CommandTask(body, name=cmd.name.replace("-", "_"), positional=positional, iterable=iterable, help=helps,
                       options={n: o for n, o in options.items()}, auto_shortflags=False)


#: ``invoke test --image``: the in-image suite (the compose ``test`` service, run by ``scripts/container.sh check``).
#: It proves the image, not the code (README's test command ran the whole suite on the host before): every tier
#: imports with the image's packages, the GPU-free commands and their one-line refusals, FLA's real kernels under
#: the Triton interpreter against the naive oracle, validate on a committed file (issue 30: not the suite twice).
IMAGE_TESTS = ("tests/test_tiers.py", "tests/test_environment_and_cli.py",
               "tests/gpu/test_launcher_matches_official.py::test_fla_matches_the_naive_oracle",
               "tests/checking/test_plausibility.py")


#: glibc's allocator told to keep freed memory for reuse instead of unmapping it (arrays up to 32 MiB from its heap,
#: the heap not trimmed below 4 GiB, grown 256 MiB at a time): the suite's routing regeneration and validation
#: allocate and free large arrays by the thousand, and on a VM every fresh page is a fault. Allocator tuning only
#: (the same numbers; more memory stays resident; another libc ignores it); figures: docs/METHOD.md, What a run costs.
ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20), "MALLOC_TRIM_THRESHOLD_": str(4 * 2**30),
                 "MALLOC_TOP_PAD_": str(256 * 2**20)}


def cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one; CI's machine: 2)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@task(help={"fast": "skip the slow Triton-interpreter tests",
            "image": "only the tests that prove an image (IMAGE_TESTS; the compose test service)",
            "workers": "pytest-xdist worker processes (default: one per CPU, cpus(); 1: one process, no xdist)"})
def test(c, fast=False, image=False, workers=None):
    """The CPU test suite with doctests (what CI runs), on every CPU.

    ``pytest -n N --dist loadgroup``: each worker group (tests/conftest.py) on one worker, so that a shared fixture
    is built once."""
    if image:
        c.run(f"{PY} -m pytest -q " + " ".join(IMAGE_TESTS), pty=False, env=ALLOCATOR_ENV)
        return
    n = int(workers) if workers is not None else cpus()
    spread = f" -n {n} --dist loadgroup --no-loadscope-reorder" if n > 1 else ""  # groups in conftest's order
    # the 25 slowest tests, printed after the run: where CI's minutes go (issue 30)
    c.run(f"{PY} -m pytest -q --durations=25{spread}" + (" -m 'not interpreter'" if fast else ""), pty=False,
          env=ALLOCATOR_ENV)


@task
def lint(c):
    """ruff; mypy (0 errors); hadolint on the Dockerfile; docker-compose.yml against the compose spec (no engine).

    The four run at once, each printed whole in this order once all have ended (mypy, the longest, on
    ``-n cpus()`` worker processes: a cold run 7.9 -> 5.0 s on 2 CPUs; docs/METHOD.md, CI's own time); any that fails
    makes the task fail, naming it."""
    bindir = shlex.quote(str(Path(sys.executable).parent))
    workers = f" -n {cpus()}" if cpus() > 1 else ""
    steps = {"ruff": f"{PY} -m ruff check nsa_exp scripts tests tasks.py",
             "mypy": f"{PY} -m mypy{workers}",  # pyproject.toml [tool.mypy]: nsa_exp, tasks.py, scripts
             "hadolint": f"{bindir}/hadolint Dockerfile",
             "check-jsonschema": f"{bindir}/check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml "
                                 "docker-compose.ca.yml"}
    running = {name: c.run(cmd, asynchronous=True, hide=True, warn=True, pty=False) for name, cmd in steps.items()}
    failed = []
    for name, promise in running.items():
        result = promise.join()
        sys.stdout.write(result.stdout)
        sys.stdout.flush()  # before its stderr: each linter's output stays together when both go to one pipe
        sys.stderr.write(result.stderr)
        sys.stderr.flush()
        if result.exited:
            failed.append(f"{name} (exit {result.exited})")
    if failed:
        raise Exit(f"lint: {', '.join(failed)} failed", code=1)


ns = Collection(*[command_task(cmd) for cmd in COMMANDS], test, lint)


def _parse_errors_exit_2() -> None:
    """Give ``invoke`` this project's answer to a bad argument: one ``error:`` line and exit 2 (README), not invoke's
    own message with exit 1. invoke parses a task's flags after loading this file, so the running program
    (``invoke.main.program``, what the ``invoke`` command runs) can be told here: its task parse turns a
    :class:`invoke.exceptions.ParseError` (an unknown task or flag, a flag without its value) into invoke's
    :class:`invoke.exceptions.Exit`, which it prints as one line and exits with. Nothing else changes (a flag invoke
    knows, ``--help``, ``--list``, a task's own exit code); a program of its own (the tests'
    ``Program(namespace=...)``) is left as it is."""
    main = sys.modules.get("invoke.main")
    program = getattr(main, "program", None)
    if program is None or getattr(program, "_nsa_exit_2", False):
        return
    parse_tasks = program.parse_tasks

    def parse_tasks_exit_2() -> None:
        try:
            parse_tasks()
        except (ParseError, ValueError) as exc:  # ValueError: invoke's int() of an INT flag's value ("abc")
            tokens, contexts = program.core.unparsed, program.collection.to_contexts()
            bad = flag_with_bad_int(tokens, contexts) if isinstance(exc, ValueError) else None
            needs = re.match(r"Flag <Argument: (\w+)", str(exc))  # invoke's 'Flag <Argument: x [int]> needed value'
            if bad:
                why = f"{bad[0]}: {bad[1]!r} is not an integer"
            elif twice := flag_given_twice(tokens, contexts):
                why = f"flag {twice} given twice; give it once"
            elif needs:
                why = f"flag --{needs.group(1).replace('_', '-')} needs a value"
            else:
                why = str(exc)
            raise Exit(f"error: invoke: {why} (see invoke --list, invoke --help TASK)", code=2) from None
        empty = flag_without_value(program.core.unparsed, program.tasks)
        if empty:
            raise Exit(f"error: invoke: flag {empty} needs a value (give it once per value: {empty} A {empty} B)",
                       code=2)

    program.parse_tasks, program._nsa_exit_2 = parse_tasks_exit_2, True


def flag_with_bad_int(tokens: list[str], contexts: Any) -> tuple[str, str] | None:
    """The first integer flag of ``contexts`` in ``tokens`` whose value is not an integer, with that value (invoke's
    parser says only Python's ``invalid literal for int()``); None when there is none.

    >>> from invoke.parser import Argument, ParserContext
    >>> ctx = ParserContext("whatif", args=[Argument(names=("rounds",), kind=int)])
    >>> flag_with_bad_int(["whatif", "--rounds", "abc"], [ctx]), flag_with_bad_int(["--rounds", "3"], [ctx])
    (('--rounds', 'abc'), None)
    """
    ints = {n for ctx in contexts for n, arg in ctx.flags.items() if arg.kind is int}
    for i, token in enumerate(tokens):
        flag, eq, value = token.partition("=")
        value = value if eq else (tokens[i + 1] if i + 1 < len(tokens) else "")
        if flag in ints:
            try:
                int(value)
            except ValueError:
                return flag, value
    return None


def flag_given_twice(tokens: list[str], contexts: Any) -> str | None:
    """The first flag that takes one value (not a repeatable one) given twice to one task in ``tokens`` (invoke says
    only "No idea what '6' is!"); None when there is none. A flag of two tasks of a chain is one per task.

    >>> from invoke.parser import Argument, ParserContext
    >>> ctx = ParserContext("bench", args=[Argument(names=("repetitions",), kind=int)])
    >>> flag_given_twice(["bench", "--repetitions", "5", "--repetitions=6"], [ctx])
    '--repetitions'
    >>> flag_given_twice(["bench", "--repetitions", "5", "bench", "--repetitions", "6"], [ctx]) is None
    True
    """
    by_name = {ctx.name: ctx for ctx in contexts}
    once: set[str] = set()
    seen: set[str] = set()
    for token in tokens:
        if token in by_name:  # a task: its own flags from here on
            once = {n for n, arg in by_name[token].flags.items() if arg.kind is not list}
            seen = set()
            continue
        flag = token.partition("=")[0]
        if flag in once:
            if flag in seen:
                return flag
            seen.add(flag)
    return None


def flag_without_value(tokens: list[str], contexts: Any) -> str | None:
    """The first repeatable flag of the parsed tasks (``--lengths``, ``--more``) that ``tokens`` give without a value
    (last, or followed by another flag), which invoke's parser takes as not given; None when there is none.

    >>> from invoke.parser import Argument, ParserContext
    >>> ctx = ParserContext("routing-time", args=[Argument(names=("lengths",), kind=list)])
    >>> flag_without_value(["routing-time", "--lengths"], [ctx]), flag_without_value(["--lengths", "8"], [ctx])
    ('--lengths', None)
    """
    flags = {n: arg for ctx in contexts for n, arg in ctx.flags.items()}
    repeatable = {n for n, arg in flags.items() if arg.kind is list}
    for i, token in enumerate(tokens):
        if token in repeatable and (i + 1 == len(tokens) or tokens[i + 1] in flags):
            return token
    return None


_parse_errors_exit_2()
