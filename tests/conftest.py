"""CPU test harness: the REAL FLA kernels run through the Triton interpreter.

``TRITON_INTERPRET=1`` must be set before triton is imported, so it is set here, at collection.
The interpreter has no bf16 (tests use float16) and autotuners need a GPU to benchmark, so
:func:`single_config_autotuners` restricts each FLA autotuner to its first config. Both changes
live in the test harness only; the GPU path never sees them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")
os.environ.setdefault("FLA_CACHE_RESULTS", "0")
os.environ.setdefault("FLA_DISABLE_BACKEND_DISPATCH", "1")
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".triton-cache"))

import pytest  # noqa: E402

# the doors' registrations (the sweep grid validate's sweep checks read), as every command has them: a test calling
# validate in-process on a worker that had imported no CLI yet saw no grid, and failed one run in four under -n 2
import nsa_exp.cli  # noqa: E402, F401
from nsa_exp.core.config import Shape  # noqa: E402
from nsa_exp.io.memo import MEMO_ENV  # noqa: E402

from .corpus.runner import REPO, precompile  # noqa: E402
from .interpreter import replay_identical_launches, skip_repatching_inside_a_launch  # noqa: E402

# The tiny shape the interpreter runs in seconds: G = 16, M = 8 blocks, S = 4 slots.
TINY = Shape(B=1, T=256, HQ=16, H=1, K=64, V=64, S=4, block_size=32, dtype="float16")


#: where the session's routing memo lives (set by pytest_configure, removed by pytest_unconfigure)
_OWN_MEMO = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """On the xdist controller (or the one process without xdist), before any worker starts: the project's modules
    byte-compiled (:func:`tests.corpus.runner.precompile`), and the routing memo (nsa_exp/io/memo.py) for this
    session, a fresh folder named by ``NSA_EXP_MEMO_DIR``, so that the workers and every
    child they run (documented commands, door cases, forged documents) share the routings each regenerates: each
    is regenerated at least once per session. A variable the user set (an empty one: no memo) is kept as it is.
    The memo keys hold numpy's and scipy's versions, so a child under another pin set recomputes
    (tests/checking/test_perturbed_numerics.py)."""
    if hasattr(config, "workerinput"):
        return
    precompile(REPO)  # before any worker or child imports it (tests/corpus/runner.py)
    if MEMO_ENV in os.environ:
        return
    folder = tempfile.mkdtemp(prefix="nsa-exp-memo-")
    os.environ[MEMO_ENV] = config.stash[_OWN_MEMO] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_OWN_MEMO, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(MEMO_ENV, None)


def single_config_autotuners() -> None:
    """Limit every FLA autotuner this experiment launches to one config (CPU harness only): the launcher's, and
    the mean pooling ``parallel_nsa`` runs before its selection (the release arm's and the peer arm's FLA call)."""
    import fla.ops.utils.pooling as pool  # noqa: PLC0415 - FLA after the interpreter setup

    from nsa_exp.gpu.launcher import _autotuner, autotuned_kernels  # noqa: PLC0415 - FLA after the interpreter setup

    for kernel in (*autotuned_kernels().values(), pool.mean_pooling_fwd_kernel):
        tuner = _autotuner(kernel)
        tuner.configs = tuner.configs[:1]


@pytest.fixture(scope="session")
def fla_interpreter():
    """Import FLA under the interpreter with single-config autotuners; yields the launcher module."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from nsa_exp.gpu import launcher  # noqa: PLC0415 - FLA after the interpreter setup
    single_config_autotuners()
    skip_repatching_inside_a_launch()
    replay_identical_launches()
    return launcher


#: Session fixtures that several test files share and that cost more than a few seconds: under ``pytest -n``
#: (``invoke test``) their users run on one worker, so each is built once.
SHARED_FIXTURE_GROUPS = {"report_data": "report-data"}


def xdist_group_of(item: pytest.Item) -> str:
    """The worker group of a test under ``pytest -n --dist loadgroup``: what its module says
    (``xdist_group(item)``, e.g. the documented commands' fenced block), else the group of a shared session
    fixture it uses, else its file (so module fixtures are built once, as without workers)."""
    own = getattr(getattr(item, "module", None), "xdist_group", None)
    group = own(item) if callable(own) else None
    if group is None:
        group = next((g for f, g in SHARED_FIXTURE_GROUPS.items() if f in getattr(item, "fixturenames", ())), None)
    return group or item.nodeid.split("::")[0]


#: Under ``pytest -n`` (``invoke test`` passes ``--no-loadscope-reorder``, so xdist hands the groups out in this
#: order instead of by test count) the groups that take longest go out first, so the last minutes are short groups on
#: both workers: the forged documents first, whose children validate every committed file from the session's first
#: seconds and so fill the routing memo that the documented commands, the bad-input doors' ``report`` and the
#: report's load then read (nsa_exp/io/memo.py: a process asking for an entry another is computing waits for it);
#: then those, and the Triton-interpreter arms (the slowest in ``invoke test``'s ``--durations`` list).
LONGEST_FIRST = ("tests/test_forged_documents.py", "tests/test_documented_commands.py", "tests/test_doors_contract.py",
                 "report-data", "tests/gpu/test_release_arm.py", "tests/gpu/test_launcher_matches_official.py",
                 "tests/checking/test_perturbed_numerics.py", "tests/gpu/test_reproduce_flow.py",
                 "tests/gpu/test_engine_arms.py")


def _rank(group: str) -> int:
    """A group's place in :data:`LONGEST_FIRST` (the documented commands' blocks and a module's tests by their file);
    after all of them, every other group."""
    where = "tests/test_documented_commands.py" if group.startswith("docs:") else group.split("::")[0]
    return LONGEST_FIRST.index(where) if where in LONGEST_FIRST else len(LONGEST_FIRST)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the marks into each test's id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {id(item): xdist_group_of(item) for item in items}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    if hasattr(config, "workerinput"):  # an xdist worker: every worker sorts the same collection the same way
        items.sort(key=lambda item: _rank(groups[id(item)]))
