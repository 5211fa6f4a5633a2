"""The one writer for every output: validate against its schema, write a temp file in the same
folder, fsync, then rename over the target. A reader never sees a partial file.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> write_text_atomic(d / "a.txt", "hello\\n")
>>> (d / "a.txt").read_text()
'hello\\n'
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .. import REPO_ROOT
from ..core.kinds import KINDS
from ..core.records import RunRecord, record_schema
from ..errors import UserError
from .paths import holds_tracked, is_tracked
from .reader import read_bounded, same_file, show_path
from .schemas import file_schema_errors, schema_errors
from .strict_json import MAX_BYTES, dumps_strict, parse_strict

if TYPE_CHECKING:  # a frame is only handed in: the writer does not import pandas
    import pandas as pd

R = TypeVar("R", bound=RunRecord)
R2 = TypeVar("R2", bound=RunRecord)


def check_writable(*paths: str | Path, folders: tuple[str | Path, ...] = (), option: str = "") -> None:
    """Refuse (one line, starting with ``option`` where given) unless every output can be written: call before
    writing the first of them, so a command writes all its outputs or none. ``paths`` are files, ``folders`` output
    folders."""
    try:
        _check_writable(paths, folders)
    except UserError as exc:
        raise UserError(f"{option} {exc}" if option else str(exc)) from None
    except OSError as exc:  # a name too long for the filesystem: Path.exists raises it
        raise UserError(f"{option + ' ' if option else ''}{show_path(exc.filename or '')}: {exc.strerror}") from None


def _check_writable(paths: tuple[str | Path, ...], folders: tuple[str | Path, ...]) -> None:
    def nearest_existing(p: Path) -> Path:
        while not p.exists() and p != p.parent:
            p = p.parent
        return p

    for where in (*map(Path, folders), *map(Path, paths)):
        if not str(where).isprintable():  # a newline or ESC in a file's name: 'wrote ...' cleared a terminal
            raise UserError(f"{show_path(where)}: holds a character that is not printable (a newline, an escape); "
                            "give a plain name")
        if _repo_relative(where) is None and (system := _system_folder(where)):  # a clone may live in /usr/src
            raise UserError(f"{show_path(where)}: {system}; give a path of its own (e.g. under {RUNS_DIR}/ or /tmp)")
    for folder in map(Path, folders):
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{folder}: exists and is not a folder; give a folder (or a new name)")
        base = nearest_existing(folder)
        if not base.is_dir() or not os.access(base, os.W_OK | os.X_OK):
            raise UserError(f"{folder}: cannot be created or written ({base} is not a writable folder)")
    for path in map(Path, paths):
        if path.is_dir():
            raise UserError(f"{path}: is a folder; give a file path")
        refuse_special(path)
        if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222):
            # root's os.access passes a read-only file, and the atomic write replaced it (an attacker, 2026-12-07)
            raise UserError(f"{show_path(path)}: exists and is read-only; make it writable or give another path")
        if in_kernel_tree(path):
            raise UserError(f"{path}: lies in {', '.join(KERNEL_TREES)} (the kernel's, not files); give a file path")
        base = nearest_existing(path.parent)
        if not base.is_dir() or not os.access(base, os.W_OK | os.X_OK):
            raise UserError(f"{path}: cannot be written ({base} is not a writable folder)")


#: Where a path names the kernel's objects, not files (``/dev/shm`` is a real tmpfs): root's ``os.access`` passes them,
#: and an atomic write there fails after the command's work (``/proc``, ``/sys``) or replaces a system link
#: (``--output /dev/stdout`` renamed a regular file over the ``/dev/stdout`` symlink: an attacker, 2026-12-07).
KERNEL_TREES = ("/proc", "/sys", "/dev")


def in_kernel_tree(path: Path) -> bool:
    """Whether ``path`` (as given, made absolute, or resolved) lies in :data:`KERNEL_TREES` (``/dev/shm`` aside).

    >>> in_kernel_tree(Path("/dev/stdout")), in_kernel_tree(Path("/proc/x.json")), in_kernel_tree(Path("/dev/shm/x"))
    (True, True, False)
    """
    for where in (path.absolute(), path.resolve()):
        parts = where.parts
        if len(parts) > 1 and f"/{parts[1]}" in KERNEL_TREES and not (parts[1] == "dev" and parts[2:3] == ("shm",)):
            return True
    return False


def refuse_special(path: Path) -> None:
    """Refuse (one line) an output path that exists as something other than a file or a folder: a device, a FIFO,
    a socket. The atomic write renames over its target, so it would replace ``/dev/null`` (as root) or a pipe
    with a plain file, even without ``--overwrite`` (an attacker's trial of 2026-12-05)."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise UserError(f"{path}: exists and is not a regular file (a device, FIFO or socket); give a file path")


OVERWRITE_FLAG = "--overwrite"
PUBLISH_FLAG = "--publish"
#: The user's run folders (``runs/<name>/...``, ignored by git): every default output goes there without --publish.
RUNS_DIR = "runs"
#: The published tree, relative to the repository root: what ``report`` reads and RESULTS.md cites. Only
#: ``--publish`` writes here.
PUBLISHED_DIRS = ("results", "docs")
PUBLISHED_FILES = ("README.md", "requirements-lock.txt")
#: The placeholder a refusal shows after an option that relocates an output.
_METAVARS = {"--name": "NEW_NAME", "--out-dir": "DIR", "--output-dir": "DIR", "--figures": "DIR", "--save": "DIR"}


def _inside(path: Path, folder: Path) -> bool:
    try:
        return folder.is_dir() and path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError, ValueError):  # RuntimeError: a symlink loop (Path.resolve before Python 3.13)
        return False


def _repo_relative(path: Path) -> Path | None:
    """``path`` relative to the repository root (None when it lies outside it)."""
    try:
        return path.resolve().relative_to(REPO_ROOT.resolve())
    except (OSError, ValueError):
        return None


def _machinery(path: Path) -> str:
    """Why ``path`` is none of a command's outputs: inside a ``.git`` folder (``--output .git/HEAD`` broke the
    checkout) or inside the Python environment this process runs in (``.venv/pyvenv.cfg`` broke the venv; an
    attacker, 2026-12-07); '' otherwise."""
    for where in (path.absolute(), path.resolve()):
        if ".git" in where.parts:
            return "lies in a .git folder (git's own files)"
    venv = Path(sys.prefix)
    if sys.prefix != sys.base_prefix and _inside(path, venv) and not _inside(REPO_ROOT, venv):
        return f"lies in the Python environment this command runs in ({sys.prefix})"
    return ""


def _own_file(path: Path) -> str:
    """Why ``path`` is one of this repository's own files (a config, schema, test or module: never a run's output),
    '' when it is not: git tracks it, or it lies in the repository outside ``runs/`` where git cannot tell (no
    ``.git``, a checkout inside another repository, one git refuses to read: the guard never turns off silently)."""
    rel = _repo_relative(path)
    if rel is None or not rel.parts or rel.parts[0] == RUNS_DIR:
        return ""
    tracked = is_tracked(REPO_ROOT, rel.as_posix())
    if tracked is None:
        return "lies in this repository's tree, whose files git cannot list here (it may be one of the project's own)"
    return "is one of this repository's own files (git tracks it)" if tracked else ""


#: The operating system's own folders (and /var, /var/tmp aside, and the filesystem root's own files): no output of
#: a command goes in them (:func:`check_writable`): as root, ``--tuning-cache /etc`` reached the GPU gate, ``routing
#: --save /etc/x`` wrote its routings there, ``reproduce --out-dir /etc/x`` its failed check report and ``routing
#: --output /var/lib/x.json`` replaced a file (attackers, 2026-12-07).
SYSTEM_TREES = ("/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/sbin", "/usr")


def _system_folder(path: Path) -> str:
    """Why ``path`` (as given, made absolute, or resolved) is no folder for a command's files: a filesystem root, or
    one in :data:`SYSTEM_TREES`; ``""`` otherwise.

    >>> _system_folder(Path("/")), _system_folder(Path("/var/tmp/x"))
    ('is the filesystem root', '')
    >>> _system_folder(Path("/usr/local/x"))
    "lies in /usr (the system's own files)"
    """
    for where in (path.absolute(), path.resolve()):
        if where == Path(where.anchor) or where.parent == Path(where.anchor):  # / itself, or /x.json beside /etc
            return "is the filesystem root" if where == Path(where.anchor) else "lies in the filesystem root"
        top = f"/{where.parts[1]}"
        if top in SYSTEM_TREES or (top == "/var" and where.parts[2:3] != ("tmp",)):
            return f"lies in {top} (the system's own files)"
    return ""


def check_work_folder(folder: str | Path, option: str) -> Path:
    """``folder`` as a folder a command keeps its own working files in (``bench --tuning-cache``, ``release-bench
    --releases-dir``): one :class:`UserError` line naming ``option`` when it is, or lies in, none of a command's to
    fill — the kernel's trees, a ``.git`` folder, the Python environment this command runs in, the published
    results (results/, docs/), or a folder of this repository holding files git tracks (its root, ``configs/``):
    ``release-bench --releases-dir docs`` left a link in docs/ and ``--tuning-cache .git`` reached the GPU gate (an
    attacker, 2026-12-07) — or when it exists and is not a folder, or cannot be made. Nothing is made here: the
    command makes it when it first writes there."""
    if not str(folder).strip():  # Path("") is the working folder: "holds this repository's own files" misled
        raise UserError(f"{option}: empty; name a folder (e.g. under runs/ or outside the repository)")
    path = Path(folder)
    why = ""
    if in_kernel_tree(path):
        why = f"lies in {', '.join(KERNEL_TREES)} (the kernel's, not files)"
    elif machinery := _machinery(path):
        why = machinery
    elif is_published(path):
        why = "lies in the published results (results/, docs/)"
    elif (rel := _repo_relative(path)) is not None and not (rel.parts and rel.parts[0] == RUNS_DIR):
        held = holds_tracked(REPO_ROOT, rel.as_posix() or ".")
        if held is None and path.resolve() == REPO_ROOT.resolve():
            why = "is this repository's root"
        elif held:  # a tracked file given as the folder (routing --save configs/e1_h100.json) is not "holding" any
            why = ("holds this repository's own files (git tracks files in it)" if path.is_dir() else
                   "is one of this repository's own files (git tracks it), not a folder")
        # a new folder in one of the repository's own (configs/x, nsa_exp/x) passed (an attacker, 2026-12-07)
        elif (inside := next((a for a in list(rel.parents)[:-1] if holds_tracked(REPO_ROOT, a.as_posix())),
                             None)) is not None:
            why = f"lies in {inside.as_posix()}/, a folder of this repository's own files (git tracks files in it)"
    if why:
        raise UserError(f"{option} {folder}: {why}; name a folder of its own (e.g. under {RUNS_DIR}/ or outside "
                        "the repository)")
    check_writable(folders=(path,), option=option)
    return path


def is_published(path: str | Path) -> bool:
    """Whether ``path`` lies in the published tree (:data:`PUBLISHED_DIRS`, :data:`PUBLISHED_FILES` of the
    repository).

    >>> is_published(REPO_ROOT / "results" / "raw" / "x.json"), is_published(REPO_ROOT / "runs" / "x" / "x.json")
    (True, False)
    """
    rel = _repo_relative(Path(path))
    return rel is not None and bool(rel.parts) and (rel.parts[0] in PUBLISHED_DIRS
                                                    or rel.as_posix() in PUBLISHED_FILES)


def run_path(path: str | Path, run: str) -> Path:
    """Where a default output ``path`` goes in the user's run folder: ``runs/<run>/`` + the path without its
    leading ``results/`` or ``docs/`` (``results/raw/x.json`` -> ``runs/<run>/raw/x.json``, ``docs/figures/f.png``
    -> ``runs/<run>/figures/f.png``, ``requirements-lock.txt`` -> ``runs/<run>/requirements-lock.txt``). A relative
    path stays relative (to the working folder, the repository root in the docs); an absolute path inside the
    repository goes to ``<repo>/runs/<run>/...``; a path outside the repository is not a published default and is
    returned as it is.

    >>> run_path("results/reports/e1_h200_check.json", "e1_h200").as_posix()
    'runs/e1_h200/reports/e1_h200_check.json'
    >>> run_path("/elsewhere/out.json", "x").as_posix()
    '/elsewhere/out.json'
    """
    path = Path(path)
    if path.is_absolute():
        rel = _repo_relative(path)
        if rel is None:
            return path
        base = REPO_ROOT / RUNS_DIR / run
    else:
        rel, base = path, Path(RUNS_DIR) / run
    parts = rel.parts
    if parts and parts[0] == RUNS_DIR:  # already a run path
        return path
    if parts and parts[0] in PUBLISHED_DIRS:
        parts = parts[1:]
    return base.joinpath(*parts)


#: The outputs this process claimed while no file was there (:meth:`OutputPolicy.claim`, no ``--overwrite``):
#: each is written only where still no file is, so that a command started beside it that wrote the same path
#: meanwhile is refused, not silently replaced (two ``compare`` runs both said "wrote" one path and one result was
#: lost: an attacker, 2026-12-07). Its first write by this process ends the claim.
_FRESH: set[Path] = set()


def _fresh_key(path: Path) -> Path:
    try:
        return path.parent.resolve() / path.name
    except (OSError, RuntimeError):
        return path.absolute()


def _taken_meanwhile(path: Path) -> UserError:
    return UserError(f"{path}: appeared while this command ran (another command wrote it meanwhile); nothing was "
                     f"replaced: run again with {OVERWRITE_FLAG} to replace it, or name another output")


def failed_report_path(report: str | Path) -> Path:
    """``<stem>.failed.json`` beside the report ``report``: where a failed check writes its report, so that a failed
    check (say, on a CPU box) never replaces a passing one.

    >>> failed_report_path("runs/e1_h100/reports/e1_h100_check.json").as_posix()
    'runs/e1_h100/reports/e1_h100_check.failed.json'
    """
    return Path(report).with_name(f"{Path(report).stem}.failed.json")


def _earlier_check_report(path: Path) -> bool:
    """``path`` is a regular file (no link) holding a JSON object of kind ``check_report``."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        doc = parse_strict(read_bounded(path, show_path(path), MAX_BYTES))
    except (UserError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("kind") == "check_report"


@dataclass(frozen=True)
class OutputPolicy:
    """The output policy of every writing command, in one place (issues 23, 27). For each output path:

    0. **Two namespaces.** The published results (``results/``, ``docs/`` — RESULTS.md, the figures, the
       provenance table —, README.md's results block, ``requirements-lock.txt``: what ``report`` reads and
       RESULTS.md cites) change only on purpose, with ``--publish``. Without it a command's default output goes
       to the user's run folder ``runs/<run>/`` (:func:`run_path`: ``results/raw/<name>.json`` ->
       ``runs/<name>/raw/<name>.json``; ``runs/`` is ignored by git), and a path named with ``--output`` may not
       lie in the published tree. With ``--publish`` a default output is the published path itself.
    1. **An input is never an output.** A path that is one of the command's own inputs (the same file by
       resolved path or inode), or lies inside an input folder, is refused, with or without
       ``--overwrite``: nothing a user gives a command may be lost.
    2. **A default output is never replaced unless asked.** A path the command chose itself (``named=False``: its
       default, e.g. ``runs/<run>/raw/<name>.json``, or with ``--publish`` ``results/raw/<name>.json``) that
       already exists is refused unless ``overwrite`` (the command's ``--overwrite``); so is an existing published
       file, named or not. A path the user named (``--output PATH``, ``--out-dir DIR``) outside the published tree
       may be replaced, but for a file git tracks in this checkout (its configs, schemas, tests: the project's
       own files, never a run's output; where git cannot tell, any file of the tree outside ``runs/``), which only
       ``overwrite`` replaces.
    3. **Writable.** The path can be written (:func:`check_writable`).

    Every refusal is one :class:`UserError` line naming the file and the fix(es). Claim every output
    before writing the first (and before any long or GPU work), so a command writes all or none; write to
    the path :meth:`claim` returns (a default output may have moved to ``runs/<run>/``).

    ``inputs`` holds ``(what, path)`` pairs (``what``: the option or argument that gave it, for the message)
    or bare paths; ``run`` names the run folder (the run's or config's name, so the GPU model shows).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "in.json").write_text("{}"), (d / "old.json").write_text("{}")
    >>> policy = OutputPolicy(inputs=(("--config", d / "in.json"),))
    >>> policy.claim(d / "new.json") == d / "new.json"
    True
    >>> def refusal(call):
    ...     try:
    ...         call()
    ...     except UserError as exc:
    ...         print(str(exc).replace(str(d), "D"))
    >>> refusal(lambda: policy.claim(d / "in.json", named=True))
    --output D/in.json: is an input of this command (--config D/in.json); choose another path
    >>> refusal(lambda: policy.claim(d / "old.json"))
    D/old.json: exists (an earlier run's output); --overwrite replaces it, --output PATH writes elsewhere
    >>> OutputPolicy(overwrite=True).claim(d / "old.json") == d / "old.json"
    True
    >>> OutputPolicy(run="e1_h200").claim("results/reports/e1_h200_check.json").as_posix()
    'runs/e1_h200/reports/e1_h200_check.json'
    """

    inputs: tuple[Any, ...] = ()
    overwrite: bool = False
    publish: bool = False
    run: str = "run"

    @classmethod
    def of(cls, args: Any, *inputs: tuple[str, Any], run: str | Path | None = None) -> OutputPolicy:
        """The policy of one command run: ``inputs`` as ``(what, path)`` pairs (an unset one, None or '', is
        skipped), its ``--overwrite`` and ``--publish`` (``args.overwrite`` / ``args.publish``, False for a command
        without the flag) and its run folder's name: ``run`` (a name, or a path whose stem is the name), else
        ``args.name``, else the stem of ``args.config``, else of the first input."""
        given = tuple((w, p) for w, p in inputs if p not in (None, ""))
        if run in (None, ""):
            run = getattr(args, "name", None) or getattr(args, "config", None) or (given[0][1] if given else "run")
        return cls(given, bool(getattr(args, "overwrite", False)), bool(getattr(args, "publish", False)),
                   Path(str(run)).stem or "run")

    def _inputs(self) -> Iterable[tuple[str, Path]]:
        for item in self.inputs:
            what, path = item if isinstance(item, tuple) else ("input", item)
            if path not in (None, ""):
                yield str(what), Path(path)

    def target(self, path: str | Path, *, named: bool = False) -> Path:
        """Where an output goes: a named path as given; a default one in ``runs/<run>/`` unless ``--publish``."""
        return Path(path) if named or self.publish else run_path(path, self.run)

    def claim(self, path: str | Path, *, named: bool = False, option: str = "--output") -> Path:
        """Refuse the output (one line) unless the policy lets this command write it; return the path to write
        (:meth:`target`). ``named``: the user gave this path (or its folder) explicitly; ``option``: the option
        that relocates the output (named in the refusal)."""
        if named and str(path).endswith(("/", "/.")):  # compare --output new/ wrote a file named 'new'
            raise UserError(f"{option} {show_path(path)}: names a folder; give a file path")
        try:
            return self._claim(self.target(path, named=named), named, option)
        except OSError as exc:  # a name too long for the filesystem, say: one line naming the option
            raise UserError(f"{option} {show_path(path)}: {exc.strerror or exc}") from None

    def _claim(self, path: Path, named: bool, option: str) -> Path:
        try:
            path.resolve()
        except RuntimeError:  # Python < 3.13 raises it for a symlink loop (3.13 resolves the loop's path as it is)
            raise UserError(f"{option} {path}: is a symlink loop; choose another path") from None
        for what, source in self._inputs():
            if same_file(path, source) or _inside(path, source):
                how = "is an input of this command" if same_file(path, source) else "lies inside an input folder"
                raise UserError(f"{option} {path}: {how} ({what} {source}); choose another path")
        machinery = _machinery(path)
        if machinery:  # never an output, --overwrite or not
            raise UserError(f"{option} {path}: {machinery}; choose another path")
        published = is_published(path)
        elsewhere = f"{option} {_METAVARS.get(option, 'PATH')} writes elsewhere"
        cwd = Path.cwd().resolve()
        if not named and not path.is_absolute() and cwd != REPO_ROOT.resolve() and _inside(cwd, REPO_ROOT):
            # a default path is the repository's (results/..., runs/<run>/...), relative to the working folder: from
            # docs/ it lay in the published tree, from configs/ in a tracked folder (an attacker, 2026-12-07)
            raise UserError(f"the default output {path} is relative to the working folder, here {cwd} inside the "
                            f"repository: run the command from the repository's root ({REPO_ROOT}), or name "
                            f"{option} {_METAVARS.get(option, 'PATH')}")
        if published and not self.publish:
            raise UserError(f"{option} {path}: lies in the published results (results/, docs/, README.md, "
                            f"requirements-lock.txt); {PUBLISH_FLAG} writes there on purpose ({OVERWRITE_FLAG} to "
                            f"replace), or name a path outside them (e.g. under {RUNS_DIR}/{self.run}/)")
        own = named and not published and not self.overwrite and path.is_file() and _own_file(path)
        if own:
            raise UserError(f"{option} {path}: {own}; {OVERWRITE_FLAG} replaces it, or name a path outside them "
                            f"(e.g. under {RUNS_DIR}/{self.run}/)")
        if path.exists() and not path.is_dir() and (published or not named) and not self.overwrite:
            if published:
                raise UserError(f"{path}: exists (a published result); {PUBLISH_FLAG} {OVERWRITE_FLAG} replaces it "
                                f"on purpose; without {PUBLISH_FLAG} the output goes to {RUNS_DIR}/{self.run}/")
            raise UserError(f"{path}: exists (an earlier run's output); {OVERWRITE_FLAG} replaces it, {elsewhere}")
        try:
            check_writable(path)
        except UserError as exc:  # a path the user named: the line names the option too
            raise UserError(f"{option} {exc}" if named else str(exc)) from None
        if not path.exists() and not path.is_symlink() and not self.overwrite:
            _FRESH.add(_fresh_key(path))
        return path

    def claim_each(self, *outputs: tuple[str | Path, bool, str]) -> list[Path]:
        """:meth:`claim` each output ``(path, named, option)``, every refusal in the one line (a command of several
        outputs named only the first it refused, and the user met the next on each try: a new user, 2026-12-06)."""
        claimed: list[tuple[Path, str]] = []  # (path, the option that gave it)
        refused: list[str] = []
        for path, named, option in outputs:
            try:
                out = self.claim(path, named=named, option=option)
            except UserError as exc:
                refused.append(str(exc))
                continue
            twin = next((o for c, o in claimed if same_file(c, out)), None)
            if twin is not None:  # report --output X --analysis X wrote both, the second over the first
                refused.append(f"{option} {path}: is {twin}'s path too; give each output its own path")
            claimed.append((out, option))
        if refused:
            raise UserError("; also ".join(refused))
        return [c for c, _ in claimed]

    def claim_failed_report(self, report: str | Path, option: str = "--output") -> Path:
        """Where a failed check writes its report instead of ``report`` (:func:`failed_report_path`), claimed: never
        an input of the command, and an existing file there is replaced only when it is an earlier check report
        (the name is the command's, not the user's: a config named ``q.failed.json``, given as ``--config`` beside
        ``--output q.json``, was overwritten by the failed report, and ``reproduce`` deleted one named
        ``check.failed.json`` in its ``--out-dir``: an attacker, 2026-12-07). One UserError line otherwise."""
        path = failed_report_path(report)
        for what, source in self._inputs():
            if same_file(path, source) or _inside(path, source):
                raise UserError(f"{option} {show_path(report)}: a failed check writes its report to {show_path(path)}, "
                                f"which is an input of this command ({what} {show_path(source)}); name another "
                                f"{option}")
        if (path.exists() or path.is_symlink()) and not _earlier_check_report(path):
            raise UserError(f"{show_path(path)}: exists and is not an earlier check report, and a failed check writes "
                            f"its report there; move that file, or name another {option}")
        return path

    def claim_all(self, paths: Iterable[str | Path], *, named: bool = False, option: str = "--output") -> list[Path]:
        """:meth:`claim` each of ``paths`` (all before any is written)."""
        return [self.claim(p, named=named, option=option) for p in paths]

    def write(self, path: str | Path, data: bytes, *, named: bool = False, option: str = "--output") -> Path | None:
        """Write ``data`` to the output ``path`` under the policy (:meth:`target`); an existing file with exactly
        these bytes is left as it is (a byte-identical rebuild replaces nothing, so it needs no ``--overwrite``).
        Returns the path written, None when the file was left as it is."""
        out = self.target(path, named=named)
        try:
            if out.is_file() and out.stat().st_size == len(data) and read_bounded(out, str(out), len(data)) == data:
                OutputPolicy(self.inputs, True, True, self.run).claim(out, named=True, option=option)  # never an input
                return None
        except (OSError, UserError):
            pass  # not a readable regular file of these bytes: claimed and written below
        out = self.claim(path, named=named, option=option)
        write_bytes_atomic(out, data)
        return out


def write_files_atomic(files: Iterable[tuple[str | Path, bytes]]) -> None:
    """Write several files all or none. Each is first written in full (:func:`write_bytes_atomic`) under a hidden temp
    name beside its target (a symlink's target: the link is kept, as there), and only then is each renamed over its
    target; a write that fails (a full disk) removes the temp files, replaces nothing, and its one line names the file
    asked for (``routing --save`` left two of four routings on a full tmpfs, or replaced one of two: an attacker,
    2026-12-07)."""
    targets = [(Path(p).resolve() if Path(p).is_symlink() else Path(p), data) for p, data in files]
    for target, _ in targets:
        if target.is_dir():
            raise UserError(f"{target}: is a folder; give a file path")
        refuse_special(target)
    staged: list[tuple[Path, Path]] = []
    try:
        for target, data in targets:
            staged.append((_tmp_name(target), target))
            write_bytes_atomic(staged[-1][0], data)
    except BaseException as exc:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
        if isinstance(exc, UserError):  # the line names the file asked for, not its hidden temp name
            temp, target = staged[-1]
            raise UserError(str(exc).replace(str(temp), str(target))) from None
        raise
    taken = next((t for _, t in staged if _fresh_key(t) in _FRESH and t.exists()), None)
    if taken is not None:  # another command wrote one of them meanwhile (write_bytes_atomic's rule)
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
        raise _taken_meanwhile(taken)
    for temp, target in staged:
        os.replace(temp, target)
        _FRESH.discard(_fresh_key(target))


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    write_bytes_atomic(path, text.encode("utf-8"))


TMP_SUFFIX = ".tmp"


def _tmp_name(path: Path) -> Path:
    """``.<name>.<pid>.<random>.tmp`` beside ``path`` (the pid lets a later run sweep it)."""
    return path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}{TMP_SUFFIX}"


def sweep_stale_temps(folder: str | Path) -> list[str]:
    """Remove temp files in ``folder`` whose writing process is gone (killed mid-write); return them."""
    removed = []
    for tmp in Path(folder).glob(f".*{TMP_SUFFIX}"):
        parts = tmp.name.split(".")
        try:
            pid = int(parts[-3])
        except (IndexError, ValueError):
            continue
        try:
            os.kill(pid, 0)
            continue  # its writer is alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        tmp.unlink(missing_ok=True)
        removed.append(str(tmp))
    return removed


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically.

    Linux: the data goes to an *unnamed* ``O_TMPFILE`` in the target folder and is fsynced. A new file
    is then linked straight to ``path`` (a kill at any moment leaves nothing or the whole file); an
    existing one is replaced by linking under a temp name and renaming over it, so a kill between those
    two calls can leave a *complete* hidden ``.<name>.<pid>.<hex>.tmp``, which the next write in that
    folder (or :func:`sweep_stale_temps`) removes. Without O_TMPFILE a named temp file is used.
    The target itself is never partial.
    """
    path = Path(path)
    if path.is_symlink():  # the link's target is written, the link kept (a rename would replace the link itself)
        path = path.resolve()
    if path.is_dir():
        raise UserError(f"{path}: is a folder; give a file path")
    refuse_special(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create folder {path.parent}: {exc.strerror}") from None
    sweep_stale_temps(path.parent)
    fresh = _fresh_key(path) in _FRESH
    if fresh and path.exists():
        raise _taken_meanwhile(path)
    tmp = _tmp_name(path)
    fd = None
    if hasattr(os, "O_TMPFILE"):
        try:
            fd = os.open(path.parent, os.O_TMPFILE | os.O_WRONLY, 0o644)
        except OSError:
            fd = None
    try:
        if fd is not None:
            _write_all(fd, data)
            if not path.exists() and _link_unnamed(fd, path):
                os.close(fd)
                fd = None
                _fsync_dir(path.parent)
                _FRESH.discard(_fresh_key(path))
                return
            if fresh and path.exists():  # linked by another process between our check and our link
                raise _taken_meanwhile(path)
            if not _link_unnamed(fd, tmp):
                os.close(fd)
                fd = None
        if fd is None:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            _write_all(fd, data)
        if fresh:  # only where no file is: link(2) fails on an existing name, rename(2) would replace it
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise _taken_meanwhile(path) from None
            finally:
                tmp.unlink(missing_ok=True)
        else:
            os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if fd is not None:
            os.close(fd)
    _fsync_dir(path.parent)
    _FRESH.discard(_fresh_key(path))


def _fsync_dir(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)  # a folder only: never blocks on a FIFO
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _link_unnamed(fd: int, target: Path) -> bool:
    """Give an O_TMPFILE a name: ``linkat(AT_FDCWD, "/proc/self/fd/N", AT_FDCWD, target, AT_SYMLINK_FOLLOW)``."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        at_fdcwd, at_symlink_follow = -100, 0x400
        rc = libc.linkat(at_fdcwd, f"/proc/self/fd/{fd}".encode(), at_fdcwd, os.fsencode(target), at_symlink_follow)
    except (OSError, AttributeError):
        return False
    return int(rc) == 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def write_json(path: str | Path, doc: dict[str, Any], kind: str) -> None:
    """Validate ``doc`` against ``schemas/<kind>.schema.json``, then write it atomically."""
    errors = schema_errors(doc, kind, label=kind)
    if errors:
        raise UserError(f"refusing to write {path}: {len(errors)} schema violation(s); first: {errors[0]}")
    try:
        text = dumps_strict(doc)
    except ValueError as exc:
        raise UserError(f"refusing to write {path}: {exc} (NaN or infinity in the document)") from None
    write_text_atomic(path, text)


def _dirty_tree(doc: dict[str, Any]) -> bool:
    """Whether a document records an uncommitted tree (``metadata.git.dirty``)."""
    return bool(((doc.get("metadata") or {}).get("git") or {}).get("dirty"))


def write_json_unless_same(path: str | Path, doc: dict[str, Any], kind: str,
                           volatile: tuple[str, ...] = ("metadata",)) -> bool:
    """:func:`write_json`, unless the file at ``path`` already holds the same document but for its ``volatile``
    top-level keys (its metadata: time, argv, git) from a clean tree, or the tree is dirty now (``doc``'s
    ``metadata.git.dirty``) and the file's was too. A derived file is refreshed when what it derives changed, or
    when a clean tree can replace one derived from a dirty tree; otherwise it is kept, so that its sha256, which
    other documents record (a model validation records its calibration's), stays. Returns whether it wrote.

    A file that is not strict JSON, or not a JSON object, is replaced."""
    p = Path(path)
    if p.is_file():
        try:
            old = read_strict(p)[1]
        except UserError:
            old = None
        if isinstance(old, dict):
            same = ({k: v for k, v in old.items() if k not in volatile}
                    == {k: v for k, v in doc.items() if k not in volatile})
            if same and (not _dirty_tree(old) or _dirty_tree(doc)):
                return False
    write_json(path, doc, kind)
    return True


def wrote_or_kept(path: str | Path, wrote: bool, what: str, volatile: str = "its metadata") -> str:
    """The line a command prints for a derived file :func:`write_json_unless_same` wrote, or kept (a new user read
    "wrote" for a file left as it was).

    >>> wrote_or_kept("t.json", False, "noise table")
    'kept t.json (the same noise table; only its metadata would change)'
    """
    return f"wrote {path}" if wrote else f"kept {path} (the same {what}; only {volatile} would change)"


def frame_csv(path: str | Path, frame: pd.DataFrame, row_kind: str) -> str:
    """``frame`` as the CSV text :func:`write_frame` writes, each row validated against
    ``schemas/<row_kind>.schema.json`` first (one line naming ``path`` and the row otherwise)."""
    for i, row in enumerate(frame.to_dict(orient="records")):
        errors = schema_errors(row, row_kind, label=f"row[{i}]")
        if errors:
            raise UserError(f"refusing to write {path}: {errors[0]}")
    return str(frame.to_csv(index=False, lineterminator="\n"))


def write_frame(path: str | Path, frame: pd.DataFrame, row_kind: str) -> None:
    """Validate each row of ``frame`` against ``schemas/<row_kind>.schema.json``, then write the CSV atomically."""
    write_text_atomic(path, frame_csv(path, frame, row_kind))


def file_sha256(path: str | Path) -> str:
    """The sha256 (hex) of a file's bytes (documents cite each file they were computed from by it)."""
    return hashlib.sha256(read_bounded(path, show_path(path), MAX_BYTES)).hexdigest()


def read_strict(path: str | Path, label: str | None = None, missing_hint: str = "") -> tuple[bytes, Any]:
    """A JSON file's bytes (a regular file of at most :data:`~nsa_exp.io.strict_json.MAX_BYTES`, read by
    :func:`nsa_exp.io.reader.read_bounded`) and its strict parse (no duplicate keys, NaN or overflowing
    numbers); every failure is one :class:`UserError` line starting with ``label`` (default: the path)."""
    label = show_path(path) if label is None else label
    data = read_bounded(path, label, MAX_BYTES,
                        not_found=f"{label}: no such file" + (f"; {missing_hint}" if missing_hint else ""))
    try:
        return data, parse_strict(data)
    except ValueError as exc:
        if Path(path).suffix.lower() == ".csv":  # a summary given for its result (a new user's compare, cost)
            raise UserError(f"{label}: a CSV table, not a JSON document (a summary CSV's result is "
                            f"results/raw/{Path(path).stem}.json)") from None
        raise UserError(f"{label}: unreadable ({exc})") from None


def read_document(path: str | Path, kinds: tuple[str, ...], label: str | None = None,
                  missing_hint: str = "") -> tuple[bytes, dict[str, Any]]:
    """:func:`read_strict`, then the document's ``kind`` must be one of ``kinds`` (one line otherwise)."""
    label = show_path(path) if label is None else label
    data, doc = read_strict(path, label, missing_hint)
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if kind not in kinds:
        wanted = " or ".join(k.replace("_", " ") for k in kinds)
        raise UserError(f"{label}: not a {wanted} (kind {kind!r})")
    return data, doc


@overload
def load_record(path: str | Path, record: type[R], label: str | None = None, missing_hint: str = "") -> R: ...


@overload
def load_record(path: str | Path, record: tuple[type[R], type[R2]], label: str | None = None,
                missing_hint: str = "") -> R | R2: ...


@overload
def load_record(path: str | Path, record: tuple[type[R], ...], label: str | None = None,
                missing_hint: str = "") -> R: ...


def load_record(path: str | Path, record: type[RunRecord] | tuple[type[RunRecord], ...], label: str | None = None,
                missing_hint: str = "") -> RunRecord:
    """:func:`load_document` of ``record``'s kind (or of any of several records' kinds: the one the document
    names), as that typed record (:mod:`nsa_exp.core.records`); a key the schema allows but the record does not
    know is one :class:`UserError` line."""
    label = show_path(path) if label is None else label
    records = record if isinstance(record, tuple) else (record,)
    by_kind = {r.KIND: r for r in records}
    try:
        doc = load_document(path, tuple(by_kind), label, missing_hint)
        return by_kind[doc["kind"]].from_json(doc)
    except ValueError as exc:
        raise UserError(f"{label}: {exc}") from None


def write_record(path: str | Path, record: RunRecord) -> None:
    """Validate ``record``'s JSON against its kind's schema, then write it atomically (:func:`write_json`)."""
    write_json(path, record.to_json(), record_schema(record))


def load_document(path: str | Path, kinds: tuple[str, ...], label: str | None = None,
                  missing_hint: str = "") -> dict[str, Any]:
    """The one loader for every document this package reads back: read, parse strictly, check the kind,
    then validate against the kind's schema. (Every check of the validator as well:
    :func:`nsa_exp.checking.validate.load_validated`.)

    Every failure is one :class:`UserError` line starting with ``label`` (default: the path).
    """
    label = show_path(path) if label is None else label
    data, doc = read_document(path, kinds, label, missing_hint)
    errors = file_schema_errors(data, doc, KINDS[doc["kind"]], label)
    if errors:
        raise UserError(errors[0])
    return doc
