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


def _dotted(node: ast.expr) -> str | None:
    """``torch.jit.script`` for that attribute chain; None for anything not rooted at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _imports(source: str) -> set[str]:
    """Every module a file names: its imports (``from torch import jit`` as ``torch.jit``) and every attribute chain
    rooted at ``torch`` or an alias of it (``torch.jit.script(...)`` after ``import torch``)."""
    found: set[str] = set()
    roots = {"torch": "torch"}
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
            roots |= {a.asname: a.name for a in node.names if a.asname and a.name.split(".")[0] == "torch"}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    for node in ast.walk(tree):
        chain = _dotted(node) if isinstance(node, ast.Attribute) else None
        head = chain.split(".")[0] if chain else None
        if chain and head in roots:
            found.add(roots[head] + chain[len(head):])
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
    for source in ("import torch.jit", "from torch._dynamo import config", "from torch import jit",
                   "import torch\ntorch.jit.script(f)", "import torch as t\nt.optim.Adam(p)",
                   "import torch.jit as j"):
        assert any(_matches(m, p) for m in _imports(source) for p in _skipped()), source
    assert not any(_matches(m, p) for m in _imports("import torch\nfrom torch.nn import functional\n"
                                                    "torch.cuda.Event(enable_timing=True)\nx.jit") for p in _skipped())
