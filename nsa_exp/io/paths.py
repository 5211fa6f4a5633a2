"""Paths as documents record them, and how a reader finds a recorded one on another machine.

Writers record a path inside the repository relative to it (:func:`recorded_path`: argv, config paths,
compare inputs, sources), so a result reads the same on every machine; a path outside the repository is
kept as given. Readers never depend on a recorded absolute path: :func:`locate_recorded` tries the path's
repository-relative tails first (``/root/out/repo/results/raw/x.json`` -> ``results/raw/x.json`` ...) under
the folders the reader names, and the absolute path itself only last.

>>> recorded_path(REPO_ROOT / "results" / "raw" / "x.json"), recorded_path("/elsewhere/x.json")
('results/raw/x.json', '/elsewhere/x.json')
>>> [str(t) for t in tails("/root/out/results/raw/x.json")][-3:]
['results/raw/x.json', 'raw/x.json', 'x.json']
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from .. import REPO_ROOT
from .reader import same_file


def recorded_path(path: str | Path, root: Path = REPO_ROOT) -> str:
    """``path`` (str) as a document records it: relative to ``root`` (POSIX separators) when it lies inside
    it, else as given. A relative path is taken relative to the working directory. Raises nothing."""
    text = str(path)
    if not text:
        return text
    resolvers: tuple[Callable[[str], Path], ...] = (lambda t: Path(os.path.abspath(os.path.expanduser(t))),
                                                    lambda t: Path(t).resolve())
    for resolve in resolvers:
        try:
            return resolve(text).relative_to(root.resolve()).as_posix() or "."
        except (ValueError, OSError, RuntimeError):
            continue
    return text


def recorded_argv(argv: Iterable[str], root: Path = REPO_ROOT) -> list[str]:
    """The command line as recorded: each argument (or ``--option=`` value) that is an absolute path inside
    ``root``, or a relative one naming an existing file or folder, made relative to ``root``
    (:func:`recorded_path`); every other argument (options, numbers, paths elsewhere) unchanged."""

    def one(text: str) -> str:
        try:
            path_like = bool(text) and len(text) < 4096 and (os.path.isabs(text) or Path(text).exists())
        except (OSError, ValueError):
            path_like = False
        return recorded_path(text, root) if path_like else text

    out = []
    for arg in map(str, argv):
        option, eq, value = arg.partition("=")
        out.append(f"{option}={one(value)}" if arg.startswith("--") and eq else one(arg))
    return out


def tails(recorded: str | Path) -> list[Path]:
    """The relative paths a recorded path may be found as, longest first: each tail of its components
    (``/a/b/c`` or ``a/b/c`` -> ``a/b/c``, ``b/c``, ``c``): the path itself, then shorter, down to its file name (a
    submission folder moved elsewhere: ``runs/reproduce_h200/e1_h200.json`` is found as ``e1_h200.json`` beside the
    document that names it)."""
    p = PurePosixPath(str(recorded).replace("\\", "/"))
    parts = p.parts[1:] if p.is_absolute() else p.parts
    return [Path(*parts[i:]) for i in range(len(parts))]


#: The repository's own top folders: a path recorded under one of them names this repository's file, never a file
#: of that name beside a document (``configs/e1_h200.json`` is not the run ``e1_h200.json`` of a submission folder).
COMMITTED_ROOTS = ("results", "docs", "configs", "schemas")


#: The longest recorded path looked for (PATH_MAX): a forged 100 KB path of 50,000 components made validate's
#: search of every tail run for minutes (an attacker, 2026-12-07); longer is "not found".
MAX_RECORDED_PATH = 4096


def locate_recorded(recorded: str | Path | None, folders: Iterable[Path], folder: bool = False,
                    beside: Path | None = None, itself: Path | None = None) -> Path | None:
    """The file (``folder``: the folder) a document records as ``recorded``: the first of ``folder / tail`` that
    is one, tails (:func:`tails`) longest first, each over ``folders`` in order; then, for an absolute path, the
    path itself. None when nothing is found (the caller lists its figures as unverified).

    ``beside`` (the document's own folder): for each tail, the tree the document itself lies in is tried before
    ``folders``: the folder above each of its ancestors named as the tail's first component (a document in
    ``<root>/results/compare/`` recording ``results/noise/floors.json`` reads ``<root>/results/noise/floors.json``,
    never a copy planted at ``<root>/results/compare/results/noise/floors.json``). A path recorded relative is
    looked for whole in every folder, and, unless it lies under one of :data:`COMMITTED_ROOTS`, by its shorter tails
    only beside the document (a submission folder moved elsewhere: ``runs/reproduce_h200/e1_h200.json``), never as
    the document itself (``itself``)."""
    if not recorded or len(str(recorded)) > MAX_RECORDED_PATH:  # no file has such a path; its tails are quadratic
        return None
    folders = list(folders)
    around = [] if beside is None else [beside, *beside.parents]
    parts = PurePosixPath(str(recorded).replace("\\", "/")).parts
    relative = parts[:1] != ("/",)
    for n, tail in enumerate(tails(recorded)):
        if n == 0 or not relative:
            anchored = [a.parent for a in around if a.name == tail.parts[0] and a.parent != a]
            search = [*anchored, *folders]
        elif beside is not None and parts[0] not in COMMITTED_ROOTS:
            search = [beside]
        else:
            break
        for where in search:
            candidate = where / tail
            if _is_file(candidate, folder) and not (itself is not None and same_file(candidate, itself)):
                return candidate
    p = Path(str(recorded))
    return p if p.is_absolute() and _is_file(p, folder) else None


def _is_file(p: Path, folder: bool = False) -> bool:
    """Whether ``p`` is a regular file (``folder``: a folder) this user may see: a path under another user's
    folder (``/root/out/...`` read as the image's user) is not found, never a PermissionError."""
    try:
        return p.is_dir() if folder else p.is_file()
    except OSError:
        return False


def _work_tree_top(root: Path) -> bool:
    """Whether ``root`` is the top of a git work tree (False also when git is missing or fails)."""
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return top.returncode == 0 and Path(top.stdout.strip()).resolve() == Path(root).resolve()


def _git_paths(root: Path, *args: str) -> frozenset[str] | None:
    """The NUL-separated entries ``git -C root ARGS`` prints (``-z``); None when ``root`` is not the top of a git work
    tree or git fails."""
    if not _work_tree_top(root):
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return frozenset(p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p)


def tracked_files(root: Path) -> frozenset[str] | None:
    """The files git tracks under ``root`` (``git ls-files``, relative POSIX paths); None when ``root`` is not the
    top of a git work tree (or git is missing): then every file of the tree counts."""
    return _git_paths(root, "ls-files", "-z", "--", "results", "docs")


def is_tracked(root: Path, rel: str) -> bool | None:
    """Whether git tracks the file ``rel`` (a POSIX path relative to ``root``, taken literally: no pathspec magic)
    in the work tree whose top is ``root``; None when git cannot tell (no git, ``root`` not the top of a work tree,
    a tree git refuses to read, e.g. one owned by another user)."""
    found = _git_paths(root, "--literal-pathspecs", "ls-files", "-z", "--", rel)
    return None if found is None else rel in found


def holds_tracked(root: Path, rel: str) -> bool | None:
    """Whether git tracks any file in the folder ``rel`` (a POSIX path relative to ``root``; "." is ``root``
    itself) of the work tree whose top is ``root``; None when git cannot tell (as :func:`is_tracked`)."""
    found = (_git_paths(root, "ls-files", "-z") if rel in ("", ".") else
        _git_paths(root, "--literal-pathspecs", "ls-files", "-z", "--", rel))
    return None if found is None else bool(found)


def changed_files(root: Path, under: str = "results") -> frozenset[str] | None:
    """The files under ``root/under`` that differ from the checkout's HEAD (modified, staged, added, deleted or
    untracked: ``git status --porcelain``), relative POSIX paths; None when ``root`` is not the top of a git work tree
    (or git is missing)."""
    entries = _git_paths(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--", under)
    return None if entries is None else frozenset(e[3:] for e in entries if len(e) > 3)  # "XY path"
