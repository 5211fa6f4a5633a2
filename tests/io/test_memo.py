"""The routing memo (nsa_exp/io/memo.py): off unless NSA_EXP_MEMO_DIR is set; on, what a later call reads is what
the function computes, of the same types and dtype; a corrupt entry is computed again; a folder that cannot be
written costs one warning line; any change to the package's code gives other keys."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nsa_exp.analysis.bootstrap import _percentile_ci, percentile_ci
from nsa_exp.checking.peer_result import _regenerated_facts
from nsa_exp.core.config import Pattern, Shape
from nsa_exp.io import memo
from nsa_exp.io.memo import MEMO_ENV, decode, encode, entry_key
from nsa_exp.routing import facts
from tests.helpers import REPO

SHAPE = Shape(B=1, T=512, HQ=16, H=2, K=64, V=64, S=4, block_size=32, dtype="float16")
ZIPF = Pattern("zipf", exponent=1.2)
PATTERN_JSON = json.dumps(ZIPF.to_dict(), sort_keys=True)
SHAPE_JSON = json.dumps(SHAPE.to_dict(), sort_keys=True)
#: each memoised function with the arguments of one small routing (the disk layer alone: an in-process cache in
#: front of it is skipped through ``__wrapped__``)
CALLS = {
    "routing_stats": (facts._stats, (PATTERN_JSON, SHAPE_JSON, 3, None, None)),
    "routing_stats_packed": (facts._stats, (PATTERN_JSON, SHAPE_JSON, 3, (0, 192, 512), None)),
    "peer_facts": (_regenerated_facts.__wrapped__, (PATTERN_JSON, SHAPE_JSON, 3, None)),
    "fanin": (facts._row_fanin, (PATTERN_JSON, SHAPE_JSON, 3, None, None)),
    "fanin_packed": (facts._row_fanin, (PATTERN_JSON, SHAPE_JSON, 3, (0, 192, 512), None)),
}
#: the entries one call writes: the statistics' entry holds the fan-in's too (nsa_exp/routing/facts.py)
WRITES = {"routing_stats": 2, "routing_stats_packed": 2, "peer_facts": 1, "fanin": 1, "fanin_packed": 1}


def _same(a, b) -> bool:
    """Equal, with the same types at every level and, for arrays, the same dtype and shape."""
    if isinstance(a, np.ndarray):
        return type(b) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.fixture
def memo_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "memo"
    monkeypatch.setenv(MEMO_ENV, str(folder))
    return folder


@pytest.fixture(autouse=True)
def _no_draw_kept():
    """Each test draws its routings itself (facts._draw keeps the last two in the process)."""
    facts._draw.cache_clear()
    yield
    facts._draw.cache_clear()


def _uncached(fn, args):
    """What ``fn`` (a memoised function) computes, the memo off (and no draw kept)."""
    facts._draw.cache_clear()
    with pytest.MonkeyPatch.context() as m:
        m.delenv(MEMO_ENV, raising=False)
        value = fn.__wrapped__(*args)
    facts._draw.cache_clear()
    return value


@pytest.mark.parametrize("name", CALLS)
def test_a_memoised_routing_equals_a_recomputed_one(name, memo_dir):
    fn, args = CALLS[name]
    want = _uncached(fn, args)
    first = fn(*args)  # computed, then kept
    assert len(list(memo_dir.iterdir())) == WRITES[name]
    second = fn(*args)  # read back
    assert _same(want, first) and _same(want, second)
    assert isinstance(want, np.ndarray) == name.startswith("fanin")
    if isinstance(want, np.ndarray):
        assert want.dtype == np.int64


def test_a_later_call_reads_the_entry(memo_dir):
    fn, args = CALLS["routing_stats"]
    fn(*args)
    entry = memo_dir / entry_key(f"{fn.__module__}.{fn.__qualname__}", args, {})
    entry.write_bytes(encode({"edges": -1}))  # a whole entry of another value: read, not recomputed
    assert fn(*args) == {"edges": -1}


@pytest.mark.parametrize("name", ["routing_stats", "routing_stats_packed"])
def test_the_statistics_entry_is_kept_with_its_fanin_from_one_draw(name, memo_dir, monkeypatch):
    """A routing's statistics and its fan-in are two entries written from one draw, the fan-in's inside the
    statistics' lock: a process that waited for the statistics reads the fan-in without drawing the routing again
    (before, the routing checks and the model each drew it, in processes running at once)."""
    _, args = CALLS[name]
    draws = []
    draw = facts._draw.__wrapped__
    monkeypatch.setattr(facts, "_draw", functools.lru_cache(maxsize=2)(lambda *a: draws.append(a) or draw(*a)))
    stats = facts._stats(*args)
    assert draws == [args]
    facts._draw.cache_clear()  # another process: nothing drawn in it
    assert _same(facts._stats(*args), stats)
    fanin = facts._row_fanin(*args)
    assert draws == [args] and len(list(memo_dir.iterdir())) == 2
    assert _same(fanin, np.asarray(draw(*args)[1])) and _same(stats, draw(*args)[0])


@pytest.mark.parametrize("memo_on", [True, False], ids=["memo on, read back", "memo off"])
def test_a_regenerated_fanin_is_read_only_however_it_came(memo_on, tmp_path, monkeypatch):
    """``regenerate(...).row_fanin`` is shared by every caller in the process: read-only whether it was drawn here or
    read back from another process's entry (np.load gives a writable array)."""
    if memo_on:
        monkeypatch.setenv(MEMO_ENV, str(tmp_path / "memo"))
    else:
        monkeypatch.delenv(MEMO_ENV, raising=False)
    facts._regenerate.cache_clear()
    facts.regenerate(ZIPF, SHAPE, 3)  # drawn here (and kept on disk when on)
    facts._regenerate.cache_clear()
    facts._draw.cache_clear()  # as another process: read back when on, drawn again when off
    try:
        fanin = facts.regenerate(ZIPF, SHAPE, 3).row_fanin
        assert fanin.dtype == np.int64 and not fanin.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            fanin[0] = 1
    finally:
        facts._regenerate.cache_clear()


@pytest.mark.parametrize("damage", ["truncated", "altered", "empty", "garbage", "a folder", "a fifo"])
def test_a_corrupt_entry_is_recomputed_and_rewritten(damage, memo_dir):
    for name in ("routing_stats", "fanin"):
        fn, args = CALLS[name]
        want = fn(*args)
        entry = memo_dir / entry_key(f"{fn.__module__}.{fn.__qualname__}", args, {})
        data = entry.read_bytes()
        entry.unlink()
        if damage == "a folder":
            entry.mkdir()
        elif damage == "a fifo":
            os.mkfifo(entry)  # never opened for reading: the bounded reader refuses it without blocking
        else:
            entry.write_bytes({"truncated": data[:len(data) // 2], "altered": data[:-1] + bytes([data[-1] ^ 1]),
                               "empty": b"", "garbage": os.urandom(64)}[damage])
        assert _same(want, fn(*args))
        if damage != "a folder":  # a folder in the way is not replaced: the value is computed each time
            assert entry.is_file() and _same(want, decode(entry.read_bytes()))


def test_with_the_variable_unset_nothing_is_written(tmp_path, monkeypatch):
    # the suite's session memo is shared by every pytest-xdist worker, so the others may add their own entries
    # meanwhile: only these calls' entries (and their lock files) must not appear there
    session = os.environ.get(MEMO_ENV)
    mine = {entry_key(f"{fn.__module__}.{fn.__qualname__}", args, {}) for fn, args in CALLS.values()}
    before = set(os.listdir(session)) if session and os.path.isdir(session) else None
    monkeypatch.delenv(MEMO_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    for fn, args in CALLS.values():
        assert _same(_uncached(fn, args), fn(*args))
    assert list(tmp_path.iterdir()) == []
    if before is not None:
        added = set(os.listdir(session)) - before
        assert not {name for name in added if name.removesuffix(".lock") in mine}


def test_an_empty_variable_is_off(tmp_path, monkeypatch):
    monkeypatch.setenv(MEMO_ENV, "")
    monkeypatch.chdir(tmp_path)
    fn, args = CALLS["peer_facts"]
    fn(*args)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_cannot_be_written_warns_once_and_computes(tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(MEMO_ENV, str(tmp_path / "file" / "memo"))  # under a regular file: cannot be made
    for name in ("routing_stats", "fanin", "routing_stats"):
        fn, args = CALLS[name]
        assert _same(_uncached(fn, args), fn(*args))
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"warning: {MEMO_ENV}=") and "Traceback" not in err


@pytest.mark.parametrize("value", [{"heads": (1, 2)}, {"mean": np.float64(1.5)}, {"p95": float("nan")},
                                   {1: "an int key"}, {"n": np.int64(3)}, np.array([{}], dtype=object)],
                         ids=["tuple", "numpy float", "nan", "int key", "numpy int", "object array"])
def test_a_value_that_would_come_back_changed_is_not_kept(value, memo_dir):
    assert encode(value) is None
    assert memo.memoised(lambda: value)() is value
    assert not memo_dir.exists()


def test_arguments_name_the_entry():
    keys = {entry_key("f", (PATTERN_JSON, SHAPE_JSON, seed, cu), {}) for seed in (1, 2) for cu in (None, (0, 512))}
    assert len(keys) == 4 and entry_key("g", (PATTERN_JSON, SHAPE_JSON, 1, None), {}) not in keys
    assert entry_key("f", (1,), {}) != entry_key("f", (1.0,), {}) != entry_key("f", (True,), {})
    assert entry_key("f", (object(),), {}) is None


def test_a_memoised_bootstrap_ci_equals_scipys_and_is_read_back(memo_dir):
    """The one bootstrap (analysis/bootstrap.percentile_ci) kept and read back: exactly scipy's interval."""
    from scipy.stats import bootstrap  # noqa: PLC0415

    rng = np.random.default_rng(4)
    a, b = rng.lognormal(size=40), rng.lognormal(size=40)
    res = bootstrap((a, b), lambda x, y, axis=-1: np.median(x, axis=axis) / np.median(y, axis=axis), paired=True,
                    n_resamples=999, confidence_level=0.95, method="percentile",
                    random_state=np.random.default_rng(7))
    want = (float(res.confidence_interval.low), float(res.confidence_interval.high))
    assert percentile_ci("median_ratio", a, b, paired=True, resamples=999, seed=7) == want  # computed, kept
    assert len(list(memo_dir.iterdir())) == 1
    (entry,) = memo_dir.iterdir()
    assert decode(entry.read_bytes()) == list(want)
    assert percentile_ci("median_ratio", a, b, paired=True, resamples=999, seed=7) == want  # read back
    assert _percentile_ci.__wrapped__("median_ratio", [a.tolist(), b.tolist()], True, 999, 7) == list(want)


def test_a_kept_model_fit_is_the_fit_and_each_blas_thread_setting_fits_for_itself(memo_dir, monkeypatch):
    """The least-squares fit (model/fit.py) is kept under its inputs and the BLAS thread settings: read back it
    is what the solver returns with the memo off; another thread count is another entry (a refit of its own)."""
    from nsa_exp.model.fit import fit_params  # noqa: PLC0415

    rng = np.random.default_rng(3)
    points = [(rng.integers(0, 400, size=96), m) for m in (2.0, 2.6, 3.1, 4.4)]
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    params, fitted = fit_params(points, n_sm=8, slots=2)  # computed, kept
    assert len([e for e in memo_dir.iterdir() if not e.name.endswith(".lock")]) == 1
    again = fit_params(points, n_sm=8, slots=2)  # read back
    with monkeypatch.context() as m:
        m.delenv(MEMO_ENV)
        fresh = fit_params(points, n_sm=8, slots=2)
    for p, f in (again, fresh):
        assert p == params and f.dtype == np.float64 and f.tolist() == fitted.tolist()
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "8")
    assert fit_params(points, n_sm=8, slots=2)[0] == params
    assert len(list(memo_dir.iterdir())) == 2


def test_another_numpy_or_scipy_gives_other_keys(monkeypatch):
    """The memo's keys hold both versions: a child under another pin set (tests/checking/test_perturbed_numerics.py)
    recomputes every routing and bootstrap."""
    digest = memo.code_digest.__wrapped__()
    monkeypatch.setattr(memo, "_version", lambda dist: "0.0" if dist == "scipy" else "x")
    assert memo.code_digest.__wrapped__() != digest
    monkeypatch.undo()
    monkeypatch.setattr(np, "__version__", "0.0")
    assert memo.code_digest.__wrapped__() != digest


def test_any_source_change_gives_other_keys(tmp_path, monkeypatch):
    copy = tmp_path / "nsa_exp"
    shutil.copytree(REPO / "nsa_exp", copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(memo, "PACKAGE", copy)
    digest = memo.code_digest.__wrapped__()
    assert digest == memo.code_digest()  # the package as imported
    with (copy / "routing" / "fanin.py").open("a") as f:
        f.write("\n")
    assert memo.code_digest.__wrapped__() != digest
    (copy / "routing" / "fanin.py").rename(copy / "routing" / "fanin2.py")
    assert memo.code_digest.__wrapped__() != digest


WRITER = """
import sys
from pathlib import Path
from nsa_exp.io.memo import _keep
for i in range(40):
    _keep(sys.argv[1], Path(sys.argv[1]) / "entry", {"writer": sys.argv[2], "data": list(range(2000))})
"""


def test_processes_writing_one_entry_at_once_leave_a_whole_one(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), w], env=env) for w in "ab"]
    seen = set()
    while any(w.poll() is None for w in writers):
        if (tmp_path / "entry").exists():
            value = decode((tmp_path / "entry").read_bytes())
            assert value is not memo._MISSING
            seen.add(value["writer"])
    assert [w.returncode for w in writers] == [0, 0] and seen <= {"a", "b"}
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]  # no temp file left


def test_the_test_session_shares_one_memo_with_its_children():
    """tests/conftest.py names a fresh folder before any xdist worker starts; workers and their children inherit it."""
    folder = os.environ.get(MEMO_ENV)
    if not folder:
        pytest.skip(f"{MEMO_ENV} set empty for this session: no memo")
    child = subprocess.run([sys.executable, "-c", f"import os; print(os.environ[{MEMO_ENV!r}])"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == folder


ASKER = """
import sys, time
from nsa_exp.io.memo import memoised

@memoised
def slow(x):
    with open(sys.argv[1], "a") as log:
        log.write("computed\\n")
    time.sleep(1.0)
    return {"x": x}

print(slow(3)["x"])
"""


def test_processes_asking_one_entry_at_once_compute_it_once(memo_dir, tmp_path):
    """The second process waits on the entry's lock while the first computes, then reads the first's answer."""
    log = tmp_path / "computed.log"
    memo_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), MEMO_ENV: str(memo_dir)}
    askers = [subprocess.Popen([sys.executable, "-c", ASKER, str(log)], env=env, stdout=subprocess.PIPE, text=True)
              for _ in range(2)]
    outs = [a.communicate(timeout=60)[0] for a in askers]
    assert [a.returncode for a in askers] == [0, 0] and outs == ["3\n", "3\n"]
    assert log.read_text() == "computed\n"


def test_a_link_planted_as_an_entrys_lock_is_not_followed(memo_dir, tmp_path):
    """The lock is opened without following links: a link in its place pointing nowhere makes no file there (opening
    it with O_CREAT would create its target), and unlocked, the value is still computed and kept."""
    memo_dir.mkdir()
    target = tmp_path / "made_through_a_link.txt"
    fn, args = CALLS["routing_stats"]  # the memoised function (the disk layer)
    key = entry_key(f"{fn.__module__}.{fn.__qualname__}", args, {})
    (memo_dir / f"{key}.lock").symlink_to(target)
    assert _same(fn(*args), _uncached(fn, args))
    assert not target.exists() and (memo_dir / key).is_file()


TWICE = """
from nsa_exp.io.memo import memoised

def f(x):
    return {"x": x}

print(memoised(memoised(f))(2)["x"])
"""


def test_an_entry_asked_again_inside_its_own_computation_does_not_wait_on_itself(memo_dir):
    """A function memoised twice asks for the same entry inside its own computation: the inner call does not wait
    for the lock the outer one holds (a child, so that a regression fails on its timeout instead of hanging)."""
    memo_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), MEMO_ENV: str(memo_dir)}
    child = subprocess.run([sys.executable, "-c", TWICE], env=env, capture_output=True, text=True, timeout=60)
    assert (child.returncode, child.stdout) == (0, "2\n"), child.stderr
