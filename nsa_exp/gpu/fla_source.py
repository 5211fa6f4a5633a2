"""Prove which FLA sources this process imported, against the pinned commit's git blob hashes (the commit's file
list and the blob hash: :mod:`nsa_exp.io.fla_pin`), whatever installed them (the populated submodule or the
fla-core 0.5.2 wheel).
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path
from types import ModuleType

from .. import PINNED_COMMIT
from ..errors import GateFailure
from ..io.fla_pin import git_blob_sha1, load_manifest

FLA_DISTRIBUTIONS = ("fla-core", "flash-linear-attention", "fla")
# The modules whose kernels and wrappers this experiment calls; each must be imported and match.
REQUIRED_MODULES = ("fla.ops.nsa.parallel", "fla.ops.nsa.naive", "fla.ops.utils.csr", "fla.ops.attn.parallel")
INSTALL_FIX = ("pip install --no-deps fla-core==0.5.2 (or pip install --no-deps -e "
               "third_party/flash-linear-attention at commit " + PINNED_COMMIT + ")")


def fla_roots_on_path() -> list[str]:
    """Every ``sys.path`` entry holding an importable ``fla`` package (two = shadowing)."""
    roots = []
    for entry in sys.path:
        base = Path(entry or ".").resolve()
        if (base / "fla" / "__init__.py").is_file() and str(base) not in roots:
            roots.append(str(base))
    return roots


def package_dir(module: ModuleType) -> Path:
    """The folder of an imported package (its ``__init__.py``'s, resolved); GateFailure for a module imported
    without a file (a namespace package: not an installed FLA)."""
    if module.__file__ is None:
        raise GateFailure(f"{module.__name__} was imported without a file (a namespace package?)")
    return Path(module.__file__).resolve().parent


def fla_distributions() -> list[str]:
    """Installed distributions that ship ``fla`` (``name==version``)."""
    found = []
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name in FLA_DISTRIBUTIONS:
            found.append(f"{name}=={dist.version}")
    return sorted(set(found))


def verify_imported_fla(manifest: dict[str, str] | None = None) -> dict:
    """Hash every imported ``fla`` module's source file against the pinned manifest.

    Requires the NSA modules to be imported already. Raises :class:`GateFailure` on any mismatch, on a
    module outside the manifest, on a second FLA distribution or a shadowing ``fla`` on ``sys.path``.
    Returns the verification record stored in every report.
    """
    manifest = load_manifest() if manifest is None else manifest
    missing = [m for m in REQUIRED_MODULES if m not in sys.modules]
    if missing:
        raise GateFailure(f"FLA modules not imported: {', '.join(missing)}; import fla.ops.nsa.parallel first")
    root = package_dir(sys.modules["fla"]).parent
    checked, mismatched, unknown = 0, [], []
    for name, module in sorted(sys.modules.items()):
        if not (name == "fla" or name.startswith("fla.")):
            continue
        file = getattr(module, "__file__", None)
        if not file or not file.endswith(".py"):
            continue
        path = Path(file).resolve()
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            unknown.append(f"{name} from {path} (outside {root})")
            continue
        want = manifest.get(rel)
        if want is None:
            unknown.append(rel)
            continue
        checked += 1
        if git_blob_sha1(path.read_bytes()) != want:
            mismatched.append(rel)
    problems = []
    if mismatched:
        problems.append(f"{len(mismatched)} imported FLA files differ from commit {PINNED_COMMIT[:12]}: "
                        f"{', '.join(mismatched[:5])}")
    if unknown:
        problems.append(f"{len(unknown)} imported FLA files are not in the commit: {', '.join(unknown[:5])}")
    dists = fla_distributions()
    if len(dists) > 1:
        problems.append(f"several FLA distributions installed ({', '.join(dists)}); keep fla-core only")
    roots = fla_roots_on_path()
    if len(roots) > 1:
        problems.append(f"several 'fla' packages on sys.path ({', '.join(roots)}); remove the shadowing one")
    if problems:
        raise GateFailure("FLA sources: " + "; ".join(problems) + f". Fix: {INSTALL_FIX}")
    return {
        "commit": PINNED_COMMIT,
        "method": "git blob sha1 of every imported fla module file vs third_party/fla-pin/fla-0a9b9f2-tree.txt",
        "package_root": str(root),
        "files_verified": checked,
        "distributions": dists,
        "verified": True,
    }
