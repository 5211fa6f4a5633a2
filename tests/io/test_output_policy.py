"""The two namespaces of the output policy (issue 27): a user's run goes to ``runs/<name>/``, the published results
change only with ``--publish`` (and an existing one only with ``--overwrite`` too); every refusal names a real fix."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

from nsa_exp import REPO_ROOT
from nsa_exp.cli import main
from nsa_exp.commands import COMMANDS
from nsa_exp.errors import UserError
from nsa_exp.io.store import OutputPolicy, check_writable, is_published, run_path


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"overwrite": False, "publish": False, **kw})


def _refusal(call) -> str:
    with pytest.raises(UserError) as exc:
        call()
    return str(exc.value)


def test_a_default_output_goes_to_the_run_folder_named_after_the_run():
    policy = OutputPolicy.of(_args(config="configs/e1_h200.json", name=None))
    assert policy.claim("results/reports/e1_h200_check.json") == Path("runs/e1_h200/reports/e1_h200_check.json")
    bench = OutputPolicy.of(_args(config="configs/e1_h200.json", name="my_h200"))
    assert bench.claim(REPO_ROOT / "results" / "raw" / "my_h200.json") == REPO_ROOT / "runs/my_h200/raw/my_h200.json"
    assert bench.claim("docs/figures/x_fanin_cv_latency.png") == Path("runs/my_h200/figures/x_fanin_cv_latency.png")
    assert run_path("requirements-lock.txt", "e1_h200") == Path("runs/e1_h200/requirements-lock.txt")
    assert not is_published(REPO_ROOT / "runs" / "e1_h200" / "raw" / "e1_h200.json")


def test_publish_writes_the_published_path_and_an_existing_one_needs_overwrite():
    committed = REPO_ROOT / "results" / "raw" / "e1_h200.json"
    assert committed.is_file() and is_published(committed)
    new = REPO_ROOT / "results" / "raw" / "not_a_committed_run.json"
    assert OutputPolicy.of(_args(publish=True, config="configs/e1_h200.json")).claim(new) == new
    message = _refusal(lambda: OutputPolicy.of(_args(publish=True, config="configs/e1_h200.json")).claim(committed))
    assert message.startswith(f"{committed}: exists (a published result)") and "--publish --overwrite" in message
    assert OutputPolicy.of(_args(publish=True, overwrite=True)).claim(committed) == committed
    # --overwrite alone replaces nothing published: the default moved to the run folder
    assert OutputPolicy.of(_args(overwrite=True, config="configs/e1_h200.json")).claim(committed) == \
        REPO_ROOT / "runs" / "e1_h200" / "raw" / "e1_h200.json"


def test_a_named_path_in_the_published_tree_needs_publish():
    committed = REPO_ROOT / "results" / "raw" / "e1_h200.json"
    message = _refusal(lambda: OutputPolicy.of(_args(config="configs/e1_h200.json")).claim(committed, named=True))
    assert message.startswith(f"--output {committed}: lies in the published results") and "--publish" in message
    assert _refusal(lambda: OutputPolicy.of(_args(publish=True)).claim(committed, named=True)).startswith(
        f"{committed}: exists (a published result)")
    assert OutputPolicy.of(_args(publish=True, overwrite=True)).claim(committed, named=True) == committed


def test_a_named_path_that_git_tracks_outside_the_published_tree_needs_overwrite(tmp_path):
    """A config, schema or test file of the checkout is the project's own, never a run's output: naming one as an
    output is refused (a compare written over configs/e1_h100.json, a result over schemas/, went through silently);
    --overwrite replaces it on purpose, and an untracked file or one outside the repository is the user's."""
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("a git checkout decides which files are tracked (the image holds none)")
    config = REPO_ROOT / "configs" / "e1_h100.json"
    message = _refusal(lambda: OutputPolicy(run="e1_h100").claim(config, named=True))
    assert message == (f"--output {config}: is one of this repository's own files (git tracks it); "
                       "--overwrite replaces it, or name a path outside them (e.g. under runs/e1_h100/)")
    assert OutputPolicy(overwrite=True).claim(config, named=True) == config
    (tmp_path / "mine.json").write_text("{}")
    assert OutputPolicy().claim(tmp_path / "mine.json", named=True) == tmp_path / "mine.json"
    untracked = REPO_ROOT / "runs" / "policy_probe" / "x.json"  # runs/ is ignored: the user's
    assert OutputPolicy().claim(untracked, named=True) == untracked


def test_an_input_is_never_an_output_even_with_publish_and_overwrite(tmp_path):
    source = REPO_ROOT / "results" / "raw" / "e1_h200.json"
    policy = OutputPolicy.of(_args(publish=True, overwrite=True), ("--from", source))
    assert "is an input of this command" in _refusal(lambda: policy.claim(source, named=True))


def test_each_refusal_names_a_real_fix(tmp_path):
    (tmp_path / "old.json").write_text("{}")
    for option, fix in (("--output", "--output PATH"), ("--name", "--name NEW_NAME"), ("--out-dir", "--out-dir DIR")):
        message = _refusal(lambda o=option: OutputPolicy().claim(tmp_path / "old.json", option=o))
        assert "--overwrite replaces it" in message and message.endswith(f"{fix} writes elsewhere"), message
        assert "NEW_PATH" not in message


def test_every_writing_command_has_publish_and_overwrite():
    writers = [c for c in COMMANDS if any(o.flag in ("--output", "--out-dir", "--output-dir", "--name", "--save")
                                          for o in c.options) and c.name not in ("profile-stage", "reproduce")]
    # reproduce writes only its submission folder, which may never lie in the published tree (no --publish)
    assert len(writers) >= 19
    for c in writers:
        flags = [o.flag for o in c.options]
        assert "--publish" in flags and "--overwrite" in flags, c.name


def test_lock_writes_the_run_folder_by_default_and_the_published_path_with_publish(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # relative defaults (requirements-lock.txt) resolve here, outside the repository
    source = str(REPO_ROOT / "results" / "raw" / "e1_h200.json")
    assert main(["lock", "--from", source]) == 0
    assert (tmp_path / "runs" / "e1_h200" / "requirements-lock.txt").is_file()
    assert not (tmp_path / "requirements-lock.txt").exists()
    assert main(["lock", "--from", source]) == 2  # an earlier run's output is not replaced unasked
    assert re.search(r"runs/e1_h200/requirements-lock.txt: exists \(an earlier run's output\); --overwrite",
                     capsys.readouterr().err)
    assert main(["lock", "--from", source, "--publish"]) == 0  # here, outside the repository: nothing published
    assert (tmp_path / "requirements-lock.txt").is_file()


def test_a_default_output_from_a_folder_inside_the_repository_says_to_run_from_the_root(monkeypatch):
    """From docs/, compare's default runs/<run>/... lay under docs/: the refusal blamed --output, which was not given,
    and suggested runs/<run>/, the path it had just refused (an attacker, 2026-12-07)."""
    for folder in ("docs", "configs"):  # from configs/ it wrote configs/runs/... into a tracked folder
        monkeypatch.chdir(REPO_ROOT / folder)
        message = _refusal(lambda: OutputPolicy(run="e1_h200").claim("results/compare/a_vs_b.json"))
        assert message == ("the default output runs/e1_h200/compare/a_vs_b.json is relative to the working folder, "
                           f"here {REPO_ROOT / folder} inside the repository: run the command from the repository's "
                           f"root ({REPO_ROOT}), or name --output PATH"), message


def test_no_output_lands_in_git_or_the_python_environment_or_on_another_output(tmp_path):
    """--output .git/HEAD broke the checkout, .venv/pyvenv.cfg the environment, and report --output X --analysis X
    wrote both outputs to one file (an attacker, 2026-12-07): refused, --overwrite or not."""
    policy = OutputPolicy(overwrite=True, publish=True)
    assert "lies in a .git folder" in _refusal(lambda: policy.claim(REPO_ROOT / ".git" / "HEAD", named=True))
    if sys.prefix != sys.base_prefix:
        cfg = Path(sys.prefix) / "pyvenv.cfg"
        assert "lies in the Python environment" in _refusal(lambda: policy.claim(cfg, named=True))
    twice = _refusal(lambda: OutputPolicy().claim_each((tmp_path / "x", True, "--output"),
                                                       (tmp_path / "x", True, "--analysis")))
    assert twice == f"--analysis {tmp_path / 'x'}: is --output's path too; give each output its own path"


def test_an_output_another_command_wrote_meanwhile_is_refused_not_replaced(tmp_path):
    """Two ``compare`` runs beside each other both claimed the free default output and both said "wrote" it; the
    second renamed its file over the first's (an attacker, 2026-12-07). A path claimed free is written only where
    still no file is; one claimed with ``--overwrite``, or already written by this process, is replaced."""
    from nsa_exp.io.store import write_bytes_atomic, write_files_atomic  # noqa: PLC0415 - the writers under test

    out = OutputPolicy().claim(tmp_path / "r.json", named=True)
    out.write_text("the other command's")  # another process, between our claim and our write
    assert "appeared while this command ran" in _refusal(lambda: write_bytes_atomic(out, b"ours"))
    assert out.read_text() == "the other command's" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    figure = OutputPolicy().claim(tmp_path / "f.png", named=True)
    figure.write_text("theirs")
    assert "appeared while" in _refusal(lambda: write_files_atomic([(tmp_path / "g.svg", b"x"), (figure, b"y")]))
    assert figure.read_text() == "theirs" and not (tmp_path / "g.svg").exists()
    mine = OutputPolicy().claim(tmp_path / "m.json", named=True)
    write_bytes_atomic(mine, b"1")
    write_bytes_atomic(mine, b"2")  # this process's own file now: a rewrite replaces it
    assert mine.read_bytes() == b"2"
    forced = OutputPolicy(overwrite=True).claim(tmp_path / "o.json", named=True)
    forced.write_text("old")
    write_bytes_atomic(forced, b"new")
    assert forced.read_bytes() == b"new"


def test_a_read_only_output_is_refused_even_as_root(tmp_path):
    """Root's ``os.access`` passes a read-only file, and the atomic write replaced it with a 0644 one (a second
    attacker, 2026-12-07)."""
    target = tmp_path / "ro.json"
    target.write_text("{}")
    target.chmod(0o444)
    with pytest.raises(UserError, match=r"--output .*ro\.json: exists and is read-only"):
        check_writable(target, option="--output")
