"""NSA-KernelExp: do equal-edge NSA routings with different fan-in cost FLA's backward differently?

Three tiers (docs/ARCHITECTURE.md): ``routing/`` (numpy: config, Stage table, Pattern registry,
edges, fan-in), ``results/`` (schemas, strict loader, validation, analysis, report, figures) and
``gpu/`` (the only tier importing torch/triton/FLA: gates, launcher, timing, bench, smoke, ncu).

``python -m nsa_exp --help`` lists every command.
"""

from pathlib import Path

__version__ = "0.1.0"

REPO_ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = REPO_ROOT / "schemas"
PIN_DIR = REPO_ROOT / "third_party" / "fla-pin"
RESULTS_DIR = REPO_ROOT / "results"
# The FLA commit every result is measured at (gpu/fla_source.py proves the imported sources match it).
PINNED_COMMIT = "0a9b9f222e86b9a895c2447767e9b4cce6c8d530"
# The config a configured command reads without --config (results record it as their config_path).
DEFAULT_CONFIG = "configs/e1_h100.json"
