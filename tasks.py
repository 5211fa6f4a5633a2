"""invoke tasks: thin doors onto ``python -m nsa_exp`` (see ``invoke --list``).

GPU tasks need the environment of ``scripts/run_h100.sh``; run them as
``scripts/run_h100.sh invoke bench`` (or inside the container, where it is set).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from invoke import Collection, Context, task

PY = shlex.quote(sys.executable)
CONFIG = "configs/e1_h100.json"


def _nsa(c: Context, *args: str) -> None:
    c.run(" ".join([PY, "-m", "nsa_exp", *(shlex.quote(a) for a in args)]), pty=False)


def _gpu_flags(config: str, allow_gpu: bool) -> list[str]:
    return ["--config", config] + (["--allow-gpu"] if allow_gpu else [])


@task(help={"config": f"experiment config (default {CONFIG})", "json": "print JSON",
            "save": "write DIR/<pattern>.npy"})
def routing(c, config=CONFIG, json=False, save=""):
    """CPU only: edge counts and fan-in statistics of every routing."""
    _nsa(c, "routing", "--config", config, *(["--json"] if json else []), *(["--save", save] if save else []))


@task(help={"config": f"experiment config (default {CONFIG})", "allow_gpu": "accept a non-H100 GPU (recorded)"})
def check(c, config=CONFIG, allow_gpu=False):
    """Gates: H100, versions, FLA sources vs the pinned commit, env vars, equal edges."""
    _nsa(c, "check", *_gpu_flags(config, allow_gpu))


@task(help={"config": f"experiment config (default {CONFIG})", "allow_gpu": "accept a non-H100 GPU (recorded)"})
def smoke(c, config=CONFIG, allow_gpu=False):
    """Correctness: FLA vs naive at T=256; staged launcher vs official wrapper at T=2048."""
    _nsa(c, "smoke", *_gpu_flags(config, allow_gpu))


@task(help={"config": f"experiment config (default {CONFIG})", "name": "result name (default: config name)",
            "repetitions": "override the timed rounds", "allow_gpu": "accept a non-H100 GPU (recorded)"})
def bench(c, config=CONFIG, name="", repetitions=0, allow_gpu=False):
    """Time every stage x pattern; writes results/raw/<name>.json and results/summaries/<name>.csv."""
    args = ["bench", *_gpu_flags(config, allow_gpu)]
    args += ["--name", name] if name else []
    args += ["--repetitions", str(repetitions)] if repetitions else []
    _nsa(c, *args)


@task(help={"stage": "stage to profile (dkv_core, dq_core, csr, ...)", "pattern": "a pattern or A-vs-B",
            "config": f"experiment config (default {CONFIG})", "benchmark_result": "bench result to replay "
            "autotune configs from (default results/raw/<config>.json)", "allow_gpu": "accept a non-H100 GPU"})
def ncu(c, stage, pattern="local-vs-sink-heavy", config=CONFIG, benchmark_result="", allow_gpu=False):
    """Nsight Compute on one stage: profiles/<name>.ncu-rep and results/ncu/<name>.json."""
    args = ["ncu", "--stage", stage, "--pattern", pattern, *_gpu_flags(config, allow_gpu)]
    args += ["--benchmark-result", benchmark_result] if benchmark_result else []
    _nsa(c, *args)


@task(positional=["path"], iterable=["also"],
      help={"path": "a result file to validate (JSON or summary CSV)", "also": "more files (repeatable)"})
def validate(c, path, also=None):
    """Validate result files (ours or a third party's): schema + every invariant."""
    _nsa(c, "validate", path, *(also or []))


@task(help={"from_": "a bench result (results/raw/<name>.json)"})
def lock(c, from_):
    """requirements-lock.txt from the versions a real, gate-passing bench run recorded."""
    _nsa(c, "lock", "--from", from_)


@task
def report(c):
    """docs/RESULTS.md and results/analysis/e1_h100.json from the committed formal results."""
    _nsa(c, "report", "--formal", "--update-readme")  # e1_h100 is the formal run; its config predates "formal"


@task(help={"x": "fan-in statistic for the x axis (fanin_cv, fanin_gini, fanin_max, fanin_p99)",
            "source": "summary CSV"})
def plot(c, x="fanin_cv", source="results/summaries/e1_h100.csv"):
    """Latency vs a fan-in statistic: docs/figures/<name>_<x>_latency.{png,svg}."""
    c.run(f"{PY} scripts/plot_fanin_latency.py --input {shlex.quote(source)} --x {shlex.quote(x)}", pty=False)


@task(help={"fast": "skip the slow Triton-interpreter tests"})
def test(c, fast=False):
    """The CPU test suite (what CI runs)."""
    c.run(f"{PY} -m pytest -q" + (" -m 'not interpreter'" if fast else ""), pty=False)


@task
def lint(c):
    """ruff; hadolint on the Dockerfile; docker-compose.yml against the compose spec (no engine needed)."""
    c.run(f"{PY} -m ruff check nsa_exp scripts tests tasks.py", pty=False)
    bindir = shlex.quote(str(Path(sys.executable).parent))
    c.run(f"{bindir}/hadolint Dockerfile", pty=False)
    c.run(f"{bindir}/check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml", pty=False)


ns = Collection(routing, check, smoke, bench, ncu, validate, lock, report, plot, test, lint)
