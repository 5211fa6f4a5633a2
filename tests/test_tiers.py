"""The tiers: every import runs down the tier order (docs/ARCHITECTURE.md), no modules import each other in a
loop, the torch-free tiers import with torch, triton, FLA and submitit blocked, and every module imports."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import nsa_exp
from tests.helpers import REPO

#: Bottom to top: a module may import its own tier and the tiers below it, never one above.
TIERS: tuple[tuple[str, ...], ...] = (
    ("nsa_exp", "nsa_exp.errors"),
    ("nsa_exp.core",),
    ("nsa_exp.io",),
    ("nsa_exp.routing",),
    ("nsa_exp.analysis",),
    ("nsa_exp.model",),  # the model's computations: validate recomputes calibrations and validations with them
    ("nsa_exp.checking",),
    ("nsa_exp.figures",),
    ("nsa_exp.sweeps",),
    ("nsa_exp.releases",),
    ("nsa_exp.report",),
    ("nsa_exp.gpu",),
    # the doors; model_commands: the model's command handlers (they read validated points and draw figures)
    ("nsa_exp.commands", "nsa_exp.arguments", "nsa_exp.handlers", "nsa_exp.model_commands", "nsa_exp.cli",
     "nsa_exp.__main__"),
)


def tier_of(module: str) -> int:
    """The tier of ``module``: the one holding its longest matching prefix."""
    best = max(((len(p), i) for i, tier in enumerate(TIERS) for p in tier
                if module == p or module.startswith(p + ".")), default=None)
    assert best is not None, f"{module} is in no tier of TIERS"
    return best[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every ``nsa_exp`` module ``path`` imports (at module top or inside a function), resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "nsa_exp"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] != "nsa_exp":
                continue
            for alias in node.names:  # `from nsa_exp.core import stages` imports the module nsa_exp.core.stages
                sub = f"{base}.{alias.name}"
                out.add(sub if (REPO / Path(*sub.split("."))).with_suffix(".py").exists() else base)
    return out - {name}


def import_graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted((REPO / "nsa_exp").rglob("*.py"))}


def test_every_import_runs_down_the_tier_order():
    upward = sorted(f"{a} -> {b}" for a, deps in import_graph().items() for b in deps if tier_of(b) > tier_of(a))
    assert upward == []


def test_no_modules_import_each_other_in_a_loop():
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert loops == []


def test_every_module_is_in_a_tier():
    for name in import_graph():
        tier_of(name)


MODULE_STRING = re.compile(r"^nsa_exp(\.\w+)+(:\w+)?$")


def test_no_module_names_a_module_above_its_tier_in_a_string():
    """An import path in a string (``"nsa_exp.gpu.topk:fla_topk_routing"`` resolved with importlib) is an import
    the edge test cannot see: the routing and sweep tiers reached up to the GPU tier that way (issue 29). The
    tiers below register what they need from above, so a module's strings may name only its own tier or lower."""
    upward = []
    for path in sorted((REPO / "nsa_exp").rglob("*.py")):
        here = module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value):
                target = node.value.partition(":")[0]
                if tier_of(target) > tier_of(here):
                    upward.append(f"{here}: {node.value!r}")
    assert upward == []


def test_folders_and_tiers_agree():
    """Every module of one folder (sub-package) is in one tier, and a tier's modules in a folder are all of it:
    a reader who knows the folder knows the tier (issue 29; model/commands.py, a door, sat in model/)."""
    by_folder: dict[str, set[int]] = {}
    for name in import_graph():
        parts = name.split(".")
        if len(parts) > 2 or (REPO / "nsa_exp" / parts[-1]).is_dir():  # inside a folder of nsa_exp/
            by_folder.setdefault(parts[1], set()).add(tier_of(name))
    assert {f: t for f, t in by_folder.items() if len(t) != 1} == {}
    assert len(set().union(*by_folder.values())) == len(by_folder)  # no two folders share a tier


BLOCKED = """
import importlib, pkgutil, sys
for name in ("torch", "triton", "fla", "submitit"):
    sys.modules[name] = None  # `import torch` now raises ImportError (submitit: only sweeps on its executors need it)
import nsa_exp.core, nsa_exp.io, nsa_exp.routing, nsa_exp.analysis, nsa_exp.checking, nsa_exp.figures
import nsa_exp.model, nsa_exp.sweeps, nsa_exp.releases, nsa_exp.report
for pkg in (nsa_exp.core, nsa_exp.io, nsa_exp.routing, nsa_exp.analysis, nsa_exp.checking, nsa_exp.figures,
            nsa_exp.model, nsa_exp.sweeps, nsa_exp.releases, nsa_exp.report):
    for info in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(info.name)
from nsa_exp.cli import main
assert main(["validate", "results/raw/e1_h100_dev.json"]) == 0
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "triton", "fla") and sys.modules[m])
gpu = sorted(m for m in sys.modules if m.startswith("nsa_exp.gpu"))
print("heavy", heavy, "gpu", gpu)
"""


def test_the_cpu_tiers_import_and_validate_runs_with_torch_triton_fla_and_submitit_blocked():
    """The CPU commands need none of these: on an H200 without submitit, compare and validate ended in "internal
    error ModuleNotFoundError: No module named 'submitit'" (2026-12-04)."""
    proc = subprocess.run([sys.executable, "-c", BLOCKED], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "heavy [] gpu []"


def test_every_module_imports():
    names = [info.name for info in pkgutil.walk_packages(nsa_exp.__path__, "nsa_exp.")
             if info.name not in ("nsa_exp.__main__",)]
    for name in names:
        importlib.import_module(name)


def test_architecture_md_names_every_module_once_and_in_its_tier():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    rows = [ln for ln in text.split("## Modules", 1)[1].split("\n## ", 1)[0].splitlines() if ln.startswith("| ")][1:]
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
    named = [m for c in cells for m in re.findall(r"`([\w/]+\.py)`", c[2])]
    modules = sorted(p.relative_to(REPO / "nsa_exp").as_posix() for p in (REPO / "nsa_exp").rglob("*.py"))
    assert sorted(named) == modules  # each module exactly once, nothing that is not a module
    order = []
    for c in cells:  # a row lists the modules of one tier, bottom tier first
        tiers = {tier_of(module_name(REPO / "nsa_exp" / m)) for m in re.findall(r"`([\w/]+\.py)`", c[2])}
        assert len(tiers) == 1, c[0]
        order.append(tiers.pop())
    assert order == sorted(order)


def test_the_tests_mirror_the_package():
    folders = {p.parent.name for p in (REPO / "tests").glob("*/test_*.py")}
    packages = {p.parent.name for p in (REPO / "nsa_exp").glob("*/__init__.py")}
    assert folders and folders <= packages
