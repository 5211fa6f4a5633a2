"""The torch modules mypy does not follow (pyproject.toml, ``follow_imports = "skip"``) are modules this code never
imports: were one imported, its names would type as ``Any`` and ``invoke lint`` would check nothing about them."""

from __future__ import annotations

import ast
import fnmatch

import pytest

from tests.helpers import REPO

tomllib = pytest.importorskip("tomllib", reason="Python 3.11's tomllib reads pyproject.toml (3.10: skipped)")


def _skipped() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    return [m for o in config["overrides"] if o.get("follow_imports") == "skip" for m in o["module"]]


def _imports(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return found


def _matches(module: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(module, pattern) or module == pattern.removesuffix(".*")


def test_no_checked_module_imports_a_torch_module_mypy_skips():
    skipped = _skipped()
    assert skipped and all(p.startswith("torch.") for p in skipped), skipped
    files = [*sorted((REPO / "nsa_exp").rglob("*.py")), *sorted((REPO / "scripts").glob("*.py")), REPO / "tasks.py"]
    hits = {(str(f.relative_to(REPO)), m) for f in files for m in _imports(f.read_text()) for p in skipped
            if _matches(m, p)}
    assert not hits, sorted(hits)


def test_the_matcher_sees_a_skipped_import():
    """The check above is only a check if an import of a skipped module is found."""
    assert any(_matches(m, p) for m in _imports("import torch.jit\nfrom torch._dynamo import config")
               for p in _skipped())
    assert not any(_matches(m, p) for m in _imports("import torch\nfrom torch.nn import functional")
                   for p in _skipped())
