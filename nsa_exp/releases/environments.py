"""Each FLA release in its own folder, and a child process that imports it and not the pinned FLA.

Torch-free (stdlib only). The experiment's own environment holds the pinned fla-core 0.5.2 (``check``
proves it); the release arm never adds a second ``fla`` to it. Instead:

- :func:`prepare_release` installs ``fla-core==X`` into ``.nsa-exp/releases/fla-core-X/`` with
  ``pip install --no-deps --no-index --no-compile --target``, from a wheel found in ``--wheel-dir`` (offline)
  or fetched by ``pip download --no-deps`` from the package index; the wheel's sha256 is recorded and a
  finished install is reused when the same wheel is asked for again;
- :func:`source_tree` takes a maintainer's working tree (the folder holding ``fla/``) as it is, through a
  view folder that exposes only its ``fla`` (so the tree's ``tests/`` or ``utils/`` cannot shadow anything),
  with ``git describe`` / HEAD / dirty recorded when it is a git checkout;
- :func:`child_sys_path` is the child's ``sys.path``: the target's folder, this repository, then the
  parent's entries, every one that holds an ``fla`` package or an FLA distribution replaced by a
  *shadow* folder of symlinks to its other entries (torch, triton, jsonschema ... stay importable);
- :func:`run_child` starts the release arm's child (``nsa_exp.gpu.release.child_main``) in a fresh interpreter
  with that path.

>>> is_fla_entry("fla"), is_fla_entry("fla_core-0.5.2.dist-info"), is_fla_entry("torch")
(True, True, False)
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import REPO_ROOT
from ..errors import UserError
from ..io.paths import recorded_path
from ..io.reader import require_folder, show_path
from .source import NSA_FILE, sha256_bytes

RELEASES_DIR = REPO_ROOT / ".nsa-exp" / "releases"
MARKER = "NSA_EXP_RELEASE.json"
#: A release version ``--release`` may name (``0.6.0``, ``0.5.3rc1``): stricter than a recorded package version
#: (checking/record_checks.VERSION_RE, which allows a local ``+cu130`` build tag). ASCII digits, and nothing after
#: it (``$`` let a trailing newline through, ``\d`` other scripts' digits).
RELEASE_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?\Z")
FLA_ENTRY_RE = re.compile(r"^(fla|(fla_core|flash_linear_attention|fla)-[^/]+\.(dist-info|egg-info|egg-link))$")
PIP_INSTALL = ("-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile", "--no-cache-dir", "--target")
BOOT = ("import json, os, sys; sys.path[:] = json.loads(os.environ['NSA_EXP_RELEASE_SYS_PATH']); "
        "from nsa_exp.gpu.release import child_main; sys.exit(child_main(sys.argv[1]))")


@dataclass(frozen=True)
class Target:
    """One FLA to time: ``root`` is the ``sys.path`` entry whose ``fla/`` it is."""

    label: str                 # fla-core-0.6.0 | source-<tree>[-<sha12>]: output file names start with it
    kind: str                  # "release" | "source"
    version: str | None        # the release asked for, or the tree's fla/__init__.py __version__
    root: Path
    origin: dict[str, Any] = field(default_factory=dict)


def is_fla_entry(name: str) -> bool:
    """A site-folder entry that belongs to an FLA distribution (its package or metadata)."""
    return bool(FLA_ENTRY_RE.match(name))


def sha256_file(path: Path) -> str:
    return sha256_bytes(Path(path).read_bytes())


def _pip(python: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, *args], capture_output=True, text=True, timeout=600)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def wheel_folder(wheel_dir: str | Path) -> Path:
    """``--wheel-dir`` as a folder (one UserError line saying whether it is missing or not a folder)."""
    require_folder(wheel_dir, f"--wheel-dir {show_path(wheel_dir)}", "pass the folder holding the fla_core wheels")
    return Path(wheel_dir)


def find_wheel(version: str, wheel_dir: str | Path) -> Path:
    """The one ``fla_core-<version>-*.whl`` in ``wheel_dir`` (UserError naming the fix otherwise)."""
    folder = wheel_folder(wheel_dir)
    found = sorted(folder.glob(f"fla_core-{version}-*.whl"))
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise UserError(f"--wheel-dir {wheel_dir}: {what} fla_core-{version}-*.whl there; fetch exactly one with "
                        f"`pip download --no-deps --dest {wheel_dir} fla-core=={version}`")
    return found[0]


def download_wheel(version: str, releases_dir: Path, python: str = sys.executable) -> Path:
    """``pip download --no-deps fla-core==<version>`` from the package index into ``<releases_dir>/_wheels``."""
    dest = releases_dir / "_wheels" / version
    dest.mkdir(parents=True, exist_ok=True)
    proc = _pip(python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--dest", str(dest),
                f"fla-core=={version}")
    if proc.returncode != 0:
        raise UserError(f"--release {version}: pip download failed ({_last_line(proc.stderr)}); offline? pass "
                        f"--wheel-dir DIR holding fla_core-{version}-py3-none-any.whl")
    return find_wheel(version, dest)


def prepare_release(version: str, wheel_dir: str | Path | None = None, releases_dir: Path = RELEASES_DIR,
                    python: str = sys.executable) -> Target:
    """``fla-core==version`` installed (or reused) in ``<releases_dir>/fla-core-<version>``; see the module doc.

    Raises :class:`UserError` for a malformed version, a missing wheel, a failed pip or a wheel that
    does not hold that version's ``fla`` package."""
    if not RELEASE_VERSION_RE.match(version):
        raise UserError(f"--release: {version!r} is not a release version (e.g. --release 0.6.0)")
    releases_dir = Path(releases_dir)
    wheel = find_wheel(version, wheel_dir) if wheel_dir else download_wheel(version, releases_dir, python)
    digest = sha256_file(wheel)
    origin = {"kind": "wheel-dir" if wheel_dir else "index", "wheel": wheel.name, "wheel_sha256": digest,
              "wheel_path": str(wheel), "install": "pip install --no-deps --no-index --no-compile --target"}
    target = releases_dir / f"fla-core-{version}"
    try:
        marker = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        marker = {}
    if marker.get("wheel_sha256") != digest:
        tmp = releases_dir / f".fla-core-{version}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        proc = _pip(python, *PIP_INSTALL, str(tmp), str(wheel))
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise UserError(f"--release {version}: pip install of {wheel.name} failed ({_last_line(proc.stderr)})")
        meta = tmp / f"fla_core-{version}.dist-info" / "METADATA"
        if not (tmp / "fla" / "__init__.py").is_file() or f"\nVersion: {version}\n" not in meta.read_text("utf-8"):
            shutil.rmtree(tmp, ignore_errors=True)
            raise UserError(f"--release {version}: {wheel.name} does not install fla-core {version}'s fla package")
        (tmp / MARKER).write_text(json.dumps({"version": version, "wheel": wheel.name, "wheel_sha256": digest}) + "\n",
                                  encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    return Target(f"fla-core-{version}", "release", version, target, origin | {"folder": recorded_path(target)})


def declared_version(fla_init: Path) -> str | None:
    """``__version__`` assigned in ``fla/__init__.py`` (read with ast, not imported)."""
    try:
        tree = ast.parse(fla_init.read_bytes())
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    return None


def git_facts(path: Path) -> dict[str, Any] | None:
    """HEAD, ``git describe --tags --always --dirty`` and dirtiness of a checkout (None outside git)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    if sha is None:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"sha": sha, "describe": git("describe", "--tags", "--always", "--dirty"),
            "dirty": bool(status) if status is not None else None}


def check_source_tree(path: str | Path) -> Path:
    """The resolved ``--fla-source`` folder, nothing read or made: UserError (one line naming the option) when it
    is no folder or holds no FLA with NSA (``release-bench`` asks before its gates, :func:`source_tree` again)."""
    tree = Path(path).expanduser().resolve()
    require_folder(tree, f"--fla-source {show_path(path)}", "pass your FLA checkout (the folder holding fla/)")
    if not (tree / NSA_FILE).is_file():
        hint = f"; give its parent {tree.parent}" if (tree / "ops" / "nsa" / "parallel.py").is_file() else ""
        raise UserError(f"--fla-source {path}: no {NSA_FILE} under it (give the folder that holds the fla/ "
                        f"package, e.g. a flash-linear-attention checkout){hint}")
    return tree


def source_tree(path: str | Path, releases_dir: Path = RELEASES_DIR) -> Target:
    """A maintainer's working tree (the folder holding ``fla/``), seen through a view folder that holds
    only a symlink to its ``fla`` (in ``<releases_dir>/source-<name>-<hash>/``). UserError when it holds none
    (:func:`check_source_tree`)."""
    tree = check_source_tree(path)
    git = git_facts(tree)
    slug = re.sub(r"[^A-Za-z0-9_.-]", "-", tree.name)[:40] or "tree"
    view = Path(releases_dir) / f"source-{slug}-{hashlib.sha1(str(tree).encode()).hexdigest()[:8]}"
    view.mkdir(parents=True, exist_ok=True)
    link = view / "fla"
    if not (link.is_symlink() and Path(os.readlink(link)) == tree / "fla"):
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(tree / "fla", target_is_directory=True)
    label = f"source-{slug}" + (f"-{git['sha'][:12]}" if git else "")
    return Target(label, "source", declared_version(tree / "fla" / "__init__.py"), view,
                  {"kind": "source", "path": recorded_path(tree), "view": recorded_path(view), "git": git})


def _shadow(entry: Path, releases_dir: Path) -> Path:
    """A folder of symlinks to every entry of ``entry`` except FLA's (rebuilt when the listing changed)."""
    names = sorted(n for n in os.listdir(entry) if not is_fla_entry(n))
    folder = Path(releases_dir) / "_shadow" / hashlib.sha1(str(entry).encode()).hexdigest()[:12]
    if folder.is_dir() and sorted(os.listdir(folder)) == names and all(
            Path(os.readlink(folder / n)) == entry / n for n in names if (folder / n).is_symlink()):
        return folder
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for n in names:
        (tmp / n).symlink_to(entry / n)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    return folder


def child_sys_path(target: Target, releases_dir: Path = RELEASES_DIR,
                   parent: list[str] | None = None) -> list[str]:
    """The child's ``sys.path`` (module doc): ``[target.root, REPO_ROOT, *parent entries, FLA shadowed]``."""
    out = [str(target.root), str(REPO_ROOT)]
    for entry in sys.path if parent is None else parent:
        path = Path(entry or ".").resolve()
        if str(path) in out:
            continue
        holds_fla = path.is_dir() and any(is_fla_entry(n) for n in os.listdir(path))
        out.append(str(_shadow(path, releases_dir)) if holds_fla else str(path))
    return out


def run_child(job_dir: Path, sys_path: list[str], python: str = sys.executable) -> int:
    """Run ``nsa_exp.gpu.release.child_main(job_dir)`` in a fresh interpreter whose ``sys.path`` is
    ``sys_path`` (also its ``PYTHONPATH``, for any interpreter it starts); stdout/stderr are inherited.
    Returns the exit code."""
    env = {**os.environ, "NSA_EXP_RELEASE_SYS_PATH": json.dumps(sys_path), "PYTHONPATH": os.pathsep.join(sys_path)}
    return subprocess.run([python, "-c", BOOT, str(job_dir)], env=env, cwd=REPO_ROOT).returncode
