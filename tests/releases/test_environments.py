"""The release arm's environments: each release in its own folder (offline from a wheel folder, reused when the
same wheel is asked for again), a source tree seen through a view, and a child ``sys.path`` holding that FLA and
not the pinned one; the release arm's bad inputs are one line, exit 2, before anything runs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from nsa_exp.cli import main
from nsa_exp.errors import UserError
from nsa_exp.releases.environments import (
    MARKER,
    child_sys_path,
    find_wheel,
    is_fla_entry,
    prepare_release,
    sha256_file,
    source_tree,
)
from tests.helpers import REPO, assert_one_line_error, run_cli

PINNED_FLA = Path(importlib.util.find_spec("fla").submodule_search_locations[0])
PROBE = ("import json, os, sys; sys.path[:] = json.loads(os.environ['P']); import fla; "
         "from nsa_exp.gpu.fla_source import fla_distributions, fla_roots_on_path; "
         "print(json.dumps([os.path.dirname(fla.__file__), fla_roots_on_path(), fla_distributions()]))")


def fake_wheel(folder: Path, version: str) -> Path:
    """A pure-Python wheel of the pinned fla package, relabelled ``version`` (a stand-in for a PyPI wheel)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fla_core-{version}-py3-none-any.whl"
    info = f"fla_core-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        for f in sorted(PINNED_FLA.rglob("*.py")):
            z.write(f, "fla/" + f.relative_to(PINNED_FLA).as_posix())
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: fla-core\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def probe(sys_path: list[str]) -> list:
    out = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, "P": json.dumps(sys_path)},
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_release_installs_offline_from_a_wheel_folder_once_and_its_child_sees_only_it(tmp_path):
    wheel = fake_wheel(tmp_path / "wheels", "9.9.1")
    target = prepare_release("9.9.1", tmp_path / "wheels", tmp_path / "rel")
    assert target.label == "fla-core-9.9.1" and target.root == tmp_path / "rel" / "fla-core-9.9.1"
    assert target.origin["kind"] == "wheel-dir" and target.origin["wheel_sha256"] == sha256_file(wheel)
    stamp = (target.root / MARKER).stat().st_mtime_ns
    assert prepare_release("9.9.1", tmp_path / "wheels", tmp_path / "rel").root == target.root
    assert (target.root / MARKER).stat().st_mtime_ns == stamp  # the same wheel: the install is reused
    path = child_sys_path(target, tmp_path / "rel")
    pinned_site = str(PINNED_FLA.parent)
    assert pinned_site not in path and path[0] == str(target.root)
    fla_dir, roots, dists = probe(path)
    assert fla_dir == str(target.root / "fla") and roots == [str(target.root)] and dists == ["fla-core==9.9.1"]
    shadow = next(Path(p) for p in path if "_shadow" in p)
    assert not any(is_fla_entry(n) for n in os.listdir(shadow)) and (shadow / "numpy").is_symlink()


def test_two_fla_packages_on_one_path_are_refused_by_the_pinned_gate(tmp_path):
    """The pinned check keeps refusing a second fla: the parent's own path plus a release's is two."""
    wheel_dir = tmp_path / "wheels"
    fake_wheel(wheel_dir, "9.9.2")
    target = prepare_release("9.9.2", wheel_dir, tmp_path / "rel")
    _, roots, _ = probe([str(target.root), str(REPO), *sys.path[1:]])
    assert len(roots) == 2


def test_a_source_tree_is_seen_through_a_view_of_its_fla_only(tmp_path):
    tree = tmp_path / "my-tree"
    tree.mkdir()
    (tree / "fla").symlink_to(PINNED_FLA, target_is_directory=True)
    (tree / "numpy.py").write_text("raise ImportError('the tree must not shadow numpy')\n")
    target = source_tree(tree, tmp_path / "rel")
    assert target.kind == "source" and target.label == "source-my-tree" and target.version == "0.5.2"
    assert os.listdir(target.root) == ["fla"] and target.origin["git"] is None
    fla_dir, roots, _ = probe(child_sys_path(target, tmp_path / "rel"))
    assert Path(fla_dir).resolve() == PINNED_FLA.resolve() and roots == [str(target.root)]


@pytest.mark.parametrize("call, fragment", [
    (lambda t: prepare_release("latest", None, t), "not a release version"),
    (lambda t: find_wheel("0.6.0", t), "fla_core-0.6.0-*.whl"),
    (lambda t: find_wheel("0.6.0", t / "missing"), "no such folder"),
    (lambda t: source_tree(t, t / "rel"), "no fla/ops/nsa/parallel.py under it"),
], ids=["version", "no-wheel", "no-folder", "not-a-tree"])
def test_release_environment_refusals_name_the_fix(tmp_path, call, fragment):
    with pytest.raises(UserError, match=None) as exc:
        call(tmp_path)
    assert fragment in str(exc.value)


def _configs(tmp_path: Path, **changes) -> str:
    raw = json.loads((REPO / "configs" / "release_h200.json").read_text())
    raw.update(changes)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    return str(path)


@pytest.mark.parametrize("args, fragments", [
    (["--release", "0.6", "--wheel-dir", "{t}"], ["fla_core-0.6-*.whl", "pip download"]),
    (["--release", "x.y"], ["--release", "not a release version"]),
    (["--fla-source", "{t}"], ["--fla-source", "fla/ops/nsa/parallel.py"]),
    (["--release", "0.6.0", "--wheel-dir", "{t}/nope"], ["--wheel-dir", "no such folder"]),
    (["--release", "0.6.0", "--repetitions", "0"], ["--repetitions"]),
    (["--config", "{t}/none.json"], ["release config", "does not exist"]),
], ids=["no-wheel", "version", "tree", "wheel-dir", "reps", "config"])
def test_release_bench_bad_input_is_one_line_exit_2(tmp_path, capsys, args, fragments):
    code = main(["release-bench", *[a.format(t=tmp_path) for a in args], "--releases-dir", str(tmp_path / "rel"),
                 "--output-dir", str(tmp_path / "out")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in err[0]
    assert all(f in err[0] for f in fragments), err[0]
    assert not (tmp_path / "out").exists()  # nothing written


def test_release_config_refusals_name_the_field(tmp_path):  # through the real CLI, as a user runs it
    no_local = _configs(tmp_path, points=[{"T": 32768, "patterns": [{"name": "uniform"}]}])
    assert_one_line_error(run_cli("release-bench", "--config", no_local, "--release", "0.6.0"),
                          "release.points[0].patterns", "local")
    twice = _configs(tmp_path, points=[{"T": 8192, "patterns": [{"name": "local"}]}] * 2)
    assert_one_line_error(run_cli("release-bench", "--config", twice, "--release", "0.6.0"), "release.points[1].T")
    bad = _configs(tmp_path, points=[{"T": 100, "patterns": [{"name": "local"}]}])
    assert_one_line_error(run_cli("release-bench", "--config", bad, "--release", "0.6.0"), "release.points[0]",
                          "not a multiple of block_size")
    typo = _configs(tmp_path, cupti_round=5)
    assert_one_line_error(run_cli("release-bench", "--config", typo), "cupti_round")
