"""The tiers: routing/, results/ and model/ import without torch, triton or FLA; every module imports."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import nsa_exp

from .helpers import REPO

BLOCKED = """
import importlib, pkgutil, sys
for name in ("torch", "triton", "fla"):
    sys.modules[name] = None  # `import torch` now raises ImportError
import nsa_exp.routing, nsa_exp.results, nsa_exp.model
for pkg in (nsa_exp.routing, nsa_exp.results, nsa_exp.model):
    for info in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(info.name)
from nsa_exp.cli import main
assert main(["validate", "results/raw/e1_h100_dev.json"]) == 0
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "triton", "fla") and sys.modules[m])
gpu = sorted(m for m in sys.modules if m.startswith("nsa_exp.gpu"))
print("heavy", heavy, "gpu", gpu)
"""


def test_routing_results_and_model_import_with_torch_triton_and_fla_blocked():
    proc = subprocess.run([sys.executable, "-c", BLOCKED], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "heavy [] gpu []"


def test_every_module_imports():
    names = [info.name for info in pkgutil.walk_packages(nsa_exp.__path__, "nsa_exp.")
             if info.name not in ("nsa_exp.__main__",)]
    for name in names:
        importlib.import_module(name)


def test_no_module_is_over_300_lines():
    long = {p.relative_to(REPO).as_posix(): n for p in (REPO / "nsa_exp").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 300}
    assert long == {}
