"""Shared test helpers (no mocks of FLA: GPU-free tests run the real kernels under the interpreter)."""

from __future__ import annotations

import json
import locale
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from nsa_exp.core.families import FAMILIES as TABLE
from nsa_exp.core.families import pattern_from_entry
from nsa_exp.io.progress import is_progress_line
from nsa_exp.routing.patterns import generate_routing
from tests import fork_server

REPO = Path(__file__).resolve().parent.parent
PRIMARY_CONFIG = REPO / "configs" / "e1_h100.json"
#: The verdict rule's stop run of 2026-12-04 (commit 532868e, routings dropped whole, a CUPTI pass of 21 rounds):
#: results/raw/e1_h200_stop.json until the stage-dropping re-run of 2026-12-05 replaced it; kept with its device logs
#: (docs/PROVENANCE.md). The tests that pin that run's facts read it here.
ROUTING_STOP_RUN = REPO / "docs" / "logs" / "h200_2026-12-04" / "stop30_532868e" / "e1_h200_stop.json"


def primary_config_dict() -> dict:
    return json.loads(PRIMARY_CONFIG.read_text())


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m nsa_exp ARGS`` in a child process, as a user would run it: forked by the suite's fork server
    (:mod:`tests.fork_server`) where it can, else exec'd; past 600 s, :class:`subprocess.TimeoutExpired`."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    argv = [sys.executable, "-m", "nsa_exp", *args]
    with open(os.devnull, "rb") as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        served = fork_server.run(list(args), cwd or REPO, full_env, stdin.fileno(), out.fileno(), err.fileno(), 600)
        if served is not None:
            if served.timed_out:
                raise subprocess.TimeoutExpired(argv, 600)
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(argv, served.returncode, _text(out.read()), _text(err.read()))
    return subprocess.run(argv, capture_output=True, text=True, env=full_env, cwd=cwd or REPO, timeout=600)


def _text(data: bytes) -> str:
    """Bytes as ``subprocess.run(..., text=True)`` gives them: the locale's encoding, universal newlines."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


def harness_env() -> dict[str, str]:
    """The environment that gives a child process the suite's interpreter shortcuts (tests/child_site), passed on to
    any interpreter that child starts through its ``sys.path`` (the release arm's child): for :func:`run_cli`."""
    return {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests" / "child_site")]), "NSA_EXP_TEST_HARNESS": "1"}


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit code 2, exactly one line on stderr starting with 'error:', no traceback, each fragment in it."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "Warning" not in ln and "warn(" not in ln
             and not is_progress_line(ln)]  # a start line of long work (io/progress.py) is no message
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


FAMILIES = {n: TABLE[n] for n in ("sink-heavy", "zipf", "hot-block")}


def generate(spec, params, shape, seed, where="pattern"):
    """A family's routing through the registry (what a config entry ``{"name": ..., **params}`` gives)."""
    return generate_routing(pattern_from_entry({"name": spec.name, **params}, where, shape), shape, seed)


def validate_params(spec, params, shape, where="pattern"):
    """The registry's parameter check of a config entry; the resolved parameters (lists as lists)."""
    p = pattern_from_entry({**params, "name": spec.name}, where, shape)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in p.params}
