"""The pinned FLA commit's file list and the files of the FLA this environment installed, read without importing
FLA (stdlib only).

``third_party/fla-pin/fla-0a9b9f2-tree.txt`` is ``git ls-tree -r`` of ``fla/`` at commit
0a9b9f222e86b9a895c2447767e9b4cce6c8d530 (fla-core 0.5.2 ships these files byte for byte). A file's git blob sha1
is ``sha1(b"blob <len>\\0" + data)``, so an installed file can be checked against the commit whatever installed it.

>>> git_blob_sha1(b"hello\\n")
'ce013625030ba8dba906f756967f9e9ca394464a'
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from .. import PIN_DIR

MANIFEST = PIN_DIR / "fla-0a9b9f2-tree.txt"
#: The fla-core release whose files are the pinned commit's (``scripts/install.sh`` installs it).
PINNED_RELEASE = "0.5.2"
#: :func:`pinned_files_sha256`'s value for a file of the commit's that this install does not hold.
NOT_INSTALLED = "not installed"


def git_blob_sha1(data: bytes) -> str:
    """Git's blob id of ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def load_manifest(path: Path = MANIFEST) -> dict[str, str]:
    """``{"fla/ops/nsa/parallel.py": "<blob sha1>", ...}`` from a ``git ls-tree -r`` listing."""
    blobs = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        meta, _, rel = line.partition("\t")
        mode, kind, sha = meta.split()
        if kind == "blob":
            blobs[rel] = sha
    return blobs


def pinned_files_sha256(rels: list[str]) -> dict[str, str | None] | None:
    """sha256 of each of ``rels`` (``fla/...`` paths) in the FLA this environment installed, found without importing
    it: None for a path the pinned commit does not have, :data:`NOT_INSTALLED` for one of the commit's files this
    install leaves out (the fla-core wheel ships 314 of the commit's 470); the whole None when the installed FLA is
    not the pinned one (a file of the commit's that ``rels`` names differs from its blob) or no FLA is installed."""
    try:
        spec = importlib.util.find_spec("fla")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))).resolve().parent
    manifest: dict[str, str] = load_manifest()
    out: dict[str, str | None] = {}
    for rel in rels:
        if rel not in manifest:
            out[rel] = None
            continue
        if not (root / rel).is_file():
            out[rel] = NOT_INSTALLED
            continue
        try:
            data = (root / rel).read_bytes()
        except OSError:
            return None
        if manifest[rel] != git_blob_sha1(data):
            return None
        out[rel] = hashlib.sha256(data).hexdigest()
    return out
