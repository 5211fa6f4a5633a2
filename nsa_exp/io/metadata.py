"""What every report records so a number can be reproduced: versions, GPU, git state, argv, env.

>>> sorted(git_state())
['dirty', 'sha', 'source']
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy

from .. import REPO_ROOT, __version__
from ..core.environment import recorded_env
from .paths import recorded_argv


def nvidia_gpu_visible() -> bool:
    """Whether this host shows an NVIDIA GPU to CUDA, read without importing torch: the driver's device
    nodes exist (``/dev/nvidiactl``, ``/dev/nvidia0``) and ``CUDA_VISIBLE_DEVICES`` does not hide every device.
    ``validate`` regenerates a GPU-computed routing (fla-topk) only then, never in the Triton interpreter."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") and os.path.exists("/dev/nvidia0")


@cache
def visible_gpu_name() -> str | None:
    """The name of the GPU CUDA numbers 0 in this process, as ``nvidia-smi --query-gpu=name`` prints it (the NVML
    name, which torch's ``get_device_name`` also gives: "NVIDIA H100 80GB HBM3"), read without importing torch.

    nvidia-smi numbers GPUs in PCI bus order; CUDA numbers them fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
    (CUDA C Programming Guide, CUDA environment variables). So nvidia-smi is asked for the first of
    ``CUDA_VISIBLE_DEVICES`` itself only where both orders agree on it: a UUID or MIG id, or an index under
    ``PCI_BUS_ID``. Otherwise (an index, or no selection) the name is every GPU's name where all are one name, else
    None: on a host of mixed GPUs an index does not say which one CUDA picks. None also when
    :func:`nvidia_gpu_visible` is false or nvidia-smi cannot say (missing, failing, or silent within 20 s).
    Cached per process (the environment of a process does not choose another GPU once CUDA has started)."""
    if not nvidia_gpu_visible():
        return None
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    exact = bool(first) and (not first.isdigit() or os.environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID")
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", *(["-i", first] if exact
                              else [])], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    names = {n.strip() for n in out.stdout.splitlines()[:1 if exact else None]} - {""}
    return names.pop() if out.returncode == 0 and len(names) == 1 else None


@cache
def _git_output(repo: str, *args: str) -> bytes | None:
    """``git -C repo ARGS``'s stdout, or None when git fails or is not there (cached: a commit's contents never
    change)."""
    try:
        out = subprocess.run(["git", "-C", repo, *args], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def file_at_commit(sha: str, path: str, repo: str | Path = ".") -> bytes | None:
    """``path`` as the git repository at ``repo`` held it at commit ``sha`` (``git show sha:path``), or None
    when git, the commit or the file is not there (a shallow clone, another repository, a copied tree)."""
    return _git_output(str(Path(repo).resolve()), "show", f"{sha}^{{commit}}:{path}")  # a commit's, never a tree's


def file_versions(path: str, repo: str | Path = ".") -> list[tuple[str, bytes]]:
    """Every version git's history of the repository at ``repo`` holds of ``path``, newest first, as ``(commit,
    bytes)`` (``git log --format=%H -- path``, then :func:`file_at_commit`); empty without git or history."""
    out = _git_output(str(Path(repo).resolve()), "log", "--format=%H", "--", path)
    shas = out.decode(errors="replace").split() if out is not None else []
    return [(sha, data) for sha in shas if (data := file_at_commit(sha, path, repo)) is not None]


#: (repository, sha) -> committer time, for the commits found (a commit's time never changes once it exists)
_COMMIT_TIMES: dict[tuple[str, str], int] = {}


def commit_time(sha: str, repo: str | Path = ".") -> int | None:
    """The committer time (Unix seconds) of commit ``sha`` in the git repository at ``repo``
    (``git show -s --format=%ct``), or None when git or the commit is not there. Asked of git once per commit
    found and process (validate asks it twice of every run record: its date and its wall time)."""
    key = (str(Path(repo).resolve()), sha)
    if key not in _COMMIT_TIMES:
        out = _git_output(key[0], "show", "-s", "--format=%ct", f"{sha}^{{commit}}")
        text = out.decode(errors="replace").strip() if out is not None else ""
        if not text.isdigit():
            return None
        _COMMIT_TIMES[key] = int(text)
    return _COMMIT_TIMES[key]


def git_state() -> dict[str, Any]:
    """This repo's commit and whether the tree has uncommitted changes (``sha`` None outside git)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True,
                                 timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    if os.environ.get("NSA_EXP_GIT_SHA"):
        # The caller states the commit (a copied tree on a remote GPU host or in a container, where a
        # .git, if any, need not be the tree's own: one such copy carried a stale HEAD). It wins over git;
        # what git says, when it differs, is kept beside it.
        seen = git("rev-parse", "HEAD")
        out = {"sha": os.environ["NSA_EXP_GIT_SHA"], "dirty": os.environ.get("NSA_EXP_GIT_DIRTY") == "1",
               "source": "env NSA_EXP_GIT_SHA"}
        return out | ({"git_head_seen": seen} if seen and seen != out["sha"] else {})
    sha = git("rev-parse", "HEAD")
    head_file = REPO_ROOT / ".git-head"  # written by `git rev-parse HEAD > .git-head` before copying the tree
    if sha is None and head_file.is_file():
        return {"sha": head_file.read_text().strip(), "dirty": None, "source": ".git-head file"}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"sha": sha, "dirty": bool(status) if status is not None else None, "source": "git"}


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _distribution(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def software_versions(import_gpu: bool = True) -> dict[str, Any]:
    """python, numpy, torch, triton, CUDA (torch's build), fla-core (distribution version). ``import_gpu=False``
    (a CPU command: ``routing``, ``report``) reads torch's and triton's versions from their installed
    distributions instead of importing them (~4 s), and records no CUDA build."""
    versions: dict[str, Any] = {"python": platform.python_version(), "numpy": numpy.__version__,
                                "nsa_exp": __version__}
    if not import_gpu:
        versions |= {k: v for k, v in (("torch", _distribution("torch")), ("triton", _distribution("triton"))) if v}
    try:
        if not import_gpu:
            raise ImportError
        import torch  # noqa: PLC0415 - optional here: the results tier imports without torch; versions recorded when present

        versions["torch"] = torch.__version__
        versions["cuda"] = torch.version.cuda
    except ImportError:
        pass
    try:
        if not import_gpu:
            raise ImportError
        import triton  # noqa: PLC0415 - optional here: the results tier imports without torch; versions recorded when present

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    versions["fla_core"] = _distribution("fla-core")
    versions["packages"] = installed_packages()
    return versions


LOCKED_PACKAGES = ("torch", "triton", "numpy", "einops", "packaging", "jsonschema", "jsonschema-specifications",
                   "referencing", "rpds-py", "attrs", "invoke", "nvidia-ml-py", "fla-core")


def installed_packages() -> dict[str, str]:
    """Installed versions of the packages the H100 run depends on (``invoke lock`` pins these)."""
    found = {}
    for name in LOCKED_PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def base_metadata(argv: list[str] | None = None, import_gpu: bool = True) -> dict[str, Any]:
    """Host-side metadata every report carries (GPU fields are added by the GPU tasks); ``import_gpu``: see
    :func:`software_versions` (False for the CPU commands, which never need torch)."""
    return {
        "created_utc": utc_now(),
        "argv": recorded_argv(sys.argv if argv is None else argv),
        "git": git_state(),
        "hostname": platform.node(),
        "platform": platform.platform(),
        "env": recorded_env(),
        "versions": software_versions(import_gpu),
    }
