"""The report's manifest: every committed input RESULTS.md and README's results block are drawn from.

The formal result and its repeat, the Nsight Compute summaries, the autotune matrix and the tuning arms,
the H200 formal result, the sweep tables, the model validations and what-ifs, the figures folder: one
:class:`Inputs` resolves them all under a root (the repository), so no section globs on its own and the
CLI's defaults are the constants here.

>>> inputs = committed_inputs()
>>> inputs.result, inputs.ncu[0]
('results/raw/e1_h100.json', 'results/ncu/e1_h100_local-vs-sink-heavy_dkv_core.json')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import REPO_ROOT

RESULT = "results/raw/e1_h100.json"
REPEAT = "results/raw/e1_h100_repeat.json"
AUTOTUNE_MATRIX = "results/autotune/e1_h200.json"
H200 = "results/raw/e1_h200.json"
OUTPUT = "docs/RESULTS.md"
PACKING_SWEEP = "sweep_packing_h200"
#: The pair whose Nsight Compute summaries the cross-GPU section sets side by side.
NCU_PAIR = "local-vs-sink-heavy"


@dataclass(frozen=True)
class Inputs:
    """The committed inputs of one report, paths as given (relative to ``root`` when they are defaults)."""

    root: Path
    result: str
    repeat: str | None
    ncu: tuple[str, ...]
    autotune_matrix: str | None
    tune_arms: tuple[str, ...]
    h200: str | None

    @property
    def figures(self) -> Path:
        return self.root / "docs" / "figures"

    def sweep_tables(self) -> list[Path]:
        """Every committed sweep table, ``results/sweeps/<name>.csv``."""
        return sorted((self.root / "results" / "sweeps").glob("*.csv"))

    def packing_table(self, name: str = PACKING_SWEEP) -> Path:
        return self.root / "results" / "sweeps" / f"{name}.csv"

    def model_validations(self) -> list[Path]:
        return sorted((self.root / "results" / "model").glob("*_validation.json"))

    def whatifs(self) -> list[Path]:
        return sorted((self.root / "results" / "whatif").glob("*.json"))

    def ncu_summary(self, result: str, stage: str) -> Path:
        """The Nsight Compute summary of :data:`NCU_PAIR` on ``stage`` for the bench result ``result``."""
        return self.root / "results" / "ncu" / f"{Path(result).stem}_{NCU_PAIR}_{stage}.json"

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def committed_inputs(root: Path = REPO_ROOT, result: str = RESULT, repeat: str | None = REPEAT,
                     ncu: Sequence[str] | None = None, autotune_matrix: str | None = AUTOTUNE_MATRIX,
                     tune_arms: Sequence[str] | None = None, h200: str | None = H200) -> Inputs:
    """The report's inputs; ``ncu`` defaults to ``results/ncu/<result stem>_*.json``, ``tune_arms`` to
    ``results/raw/*_tune_*.json`` (both sorted, relative to ``root``); '' or None drops an optional input."""
    root = Path(root)
    if ncu is None:
        ncu = [str(p.relative_to(root)) for p in sorted((root / "results" / "ncu").glob(f"{Path(result).stem}_*.json"))]
    if tune_arms is None:
        tune_arms = [str(p.relative_to(root)) for p in sorted((root / "results" / "raw").glob("*_tune_*.json"))]
    return Inputs(root, result, repeat or None, tuple(ncu), autotune_matrix or None, tuple(tune_arms), h200 or None)
