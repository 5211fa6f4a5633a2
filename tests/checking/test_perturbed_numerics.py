"""The committed files whose checks are numeric recomputations pass `validate` under perturbed numerics:
one BLAS/OpenMP thread, many threads, and a second numpy/scipy pin set (installed for the test into a
throwaway folder put first on PYTHONPATH), as on a reader's other CPU (docs/SCHEMAS.md, Tolerances).

Only those files, to keep it cheap: the calibrations (least_squares refit) and the model validations recomputed
from them, the analysis (bootstrap CIs), a repeat compare (bootstrap of ratios) and the flush policy (paired
bootstrap). The rest compare integers, hashes and order statistics.

The children keep the session's memo (tests/conftest.py, nsa_exp/io/memo.py): its keys hold numpy's and scipy's
versions, so the second pin set regenerates every routing and bootstrap under its own numerics; routings, fan-in and
bootstrap CIs use no BLAS, so a thread count cannot change them, and the least-squares refit, which may, is kept
under the thread settings it ran with (nsa_exp/model/fit.py ``blas_threads``): each thread count here refits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy

from tests.helpers import REPO, run_cli

NUMERIC = [*sorted(str(p.relative_to(REPO)) for p in (REPO / "results" / "model").glob("*.json")),
           "results/analysis/e1_h100.json", "results/compare/e1_h200_vs_e1_h200_repeat.json",
           "results/studies/h200_flush_policy.json"]
#: under the second pin set, one file of each numeric kind: the penalty map's validation (a model_validation like
#: the two kept, recomputed by the same code from 41 routings at up to 8x the primary shape: 29 of the 45 s this
#: test took on a 2-CPU box, docs/METHOD.md) is left to the thread-count tests above, which read the session's memo
OTHER_NUMERIC = [p for p in NUMERIC if not p.endswith("_penalty_validation.json")]
#: a second numpy<2.3 / scipy pair for the venv's Python (FLA's interpreter path needs numpy < 2.3)
OTHER_PINS = {"numpy": "2.1.3", "scipy": "1.13.1"} if np.__version__ != "2.1.3" else {"numpy": "2.2.6",
                                                                                       "scipy": "1.14.1"}


def _threads(n: int) -> dict[str, str]:
    return {k: str(n) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


def _assert_all_pass(env: dict[str, str], paths: list[str] = NUMERIC) -> None:
    proc = run_cli("validate", "--json", *paths, env=env)
    assert proc.stdout.strip(), f"validate exit {proc.returncode}: {proc.stderr.strip()}"
    reports = json.loads(proc.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed = {r.get("path"): [c["name"] for c in r["checks"] if not c["passed"]] for r in reports if not r["passed"]}
    assert len(reports) == len(paths) and not failed and proc.returncode == 0, (failed, proc.stderr[-2000:])


def test_the_list_names_committed_files():
    assert all((REPO / p).is_file() for p in NUMERIC) and len(NUMERIC) >= 8


@pytest.mark.parametrize("threads", [1, 8])
def test_numeric_recomputations_pass_at_any_thread_count(threads):
    _assert_all_pass(_threads(threads))


@pytest.fixture(scope="module")
def other_pins(tmp_path_factory) -> Path:
    """A folder holding another numpy/scipy pair (skips when the package index cannot be reached)."""
    target = tmp_path_factory.mktemp("other_numerics")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary", ":all:", "--target",
           str(target), *(f"{k}=={v}" for k, v in OTHER_PINS.items())]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip could not fetch {OTHER_PINS} within 300 s (package index unreachable?)")
    if proc.returncode != 0:
        pytest.skip(f"pip could not install {OTHER_PINS} (package index unreachable?): {proc.stderr.strip()[-300:]}")
    return target


def test_numeric_recomputations_pass_with_another_numpy_and_scipy(other_pins):
    env = {"PYTHONPATH": f"{other_pins}:{REPO}", **_threads(2)}
    probe = subprocess.run([sys.executable, "-c", "import numpy, scipy; print(numpy.__version__, scipy.__version__)"],
                           capture_output=True, text=True, env={"PYTHONPATH": env["PYTHONPATH"]}, timeout=120)
    assert probe.stdout.split() == [OTHER_PINS["numpy"], OTHER_PINS["scipy"]] != [np.__version__, scipy.__version__], \
        probe
    _assert_all_pass(env, OTHER_NUMERIC)


def xdist_group(item: pytest.Item) -> str:
    """Each run its own worker group under ``pytest -n`` (tests/conftest.py): they share nothing but the pin folder."""
    return item.nodeid
