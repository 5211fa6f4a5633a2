"""The imported FLA files are proved against the pinned commit's blob hashes; tampering is caught."""

from __future__ import annotations

import shutil
import sys

import pytest

from nsa_exp.errors import GateFailure
from nsa_exp.gpu.fla_source import PINNED_COMMIT, git_blob_sha1, load_manifest, verify_imported_fla


def test_manifest_is_the_pinned_commit_listing():
    manifest = load_manifest()
    assert manifest["fla/ops/nsa/parallel.py"] == "dd4b2e6560eaf2885f49823deb2750aaa535f2e1"
    assert manifest["fla/ops/utils/csr.py"]
    assert PINNED_COMMIT == "0a9b9f222e86b9a895c2447767e9b4cce6c8d530"


def test_git_blob_sha1_matches_git():
    assert git_blob_sha1(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # git hash-object /dev/null


def test_installed_fla_verifies(fla_interpreter):
    import fla.ops.nsa.naive  # noqa: F401, PLC0415 - FLA after the interpreter setup

    record = verify_imported_fla()
    assert record["verified"] and record["commit"] == PINNED_COMMIT
    assert record["files_verified"] >= 100  # every imported fla module, not just the NSA files


def test_a_changed_kernel_file_is_named(fla_interpreter):
    import fla.ops.nsa.naive  # noqa: F401, PLC0415 - FLA after the interpreter setup

    manifest = load_manifest()
    manifest["fla/ops/nsa/parallel.py"] = "0" * 40
    with pytest.raises(GateFailure, match=r"1 imported FLA files differ from commit 0a9b9f222e86: "
                                          r"fla/ops/nsa/parallel.py.*Fix: pip install --no-deps fla-core==0.5.2"):
        verify_imported_fla(manifest)


def test_a_file_outside_the_commit_is_named(fla_interpreter):
    import fla.ops.nsa.naive  # noqa: F401, PLC0415 - FLA after the interpreter setup

    manifest = load_manifest()
    del manifest["fla/ops/utils/csr.py"]
    with pytest.raises(GateFailure, match="not in the commit: fla/ops/utils/csr.py"):
        verify_imported_fla(manifest)


def test_a_shadowing_fla_on_sys_path_is_refused(fla_interpreter, tmp_path, monkeypatch):
    import fla  # noqa: PLC0415 - FLA after the interpreter setup
    import fla.ops.nsa.naive  # noqa: F401, PLC0415 - FLA after the interpreter setup

    shadow = tmp_path / "shadow"
    (shadow / "fla").mkdir(parents=True)
    shutil.copy(fla.__file__, shadow / "fla" / "__init__.py")
    monkeypatch.setattr(sys, "path", [*sys.path, str(shadow)])
    with pytest.raises(GateFailure, match="several 'fla' packages on sys.path"):
        verify_imported_fla()


def test_the_fla_sources_gate_imports_the_launcher_and_verifies(fla_interpreter):
    from nsa_exp.gpu.gates import fla_sources_gate  # noqa: PLC0415 - FLA after the interpreter setup

    record = fla_sources_gate()
    assert record["verified"] and record["commit"] == PINNED_COMMIT
