"""The report's manifest: every committed input RESULTS.md, README's results block and the provenance table are
drawn from, resolved under one root (the repository), so no section globs on its own and the CLI's defaults
are the constants here.

Named inputs (each '' or None drops it): the H100 formal result and its repeat, the H200 formal result and its
repeat, the Nsight Compute summaries, the autotune matrix and the tuning arms, the varlen bench and the
routing-file bench. Folder inputs: every bench result (``results/raw``), sweep table and sweep point
(``results/sweeps``), model calibration and validation (``results/model``), what-if (``results/whatif``),
release result (``results/releases``), peer result (``results/peers``), and every file under ``results/`` for the
provenance table. The penalty map's section reads, from those folders, :data:`PENALTY_SWEEPS`,
:data:`PENALTY_VALIDATION`, :data:`RELEASE_PRIMARY` and, when committed, the layer results under
:data:`RELEASE_LAYERS` (optional; the FLA releases section leaves them out).

Only the published tree is read: in a git repository a folder input (and a figure RESULTS.md cites) counts only
when git tracks it (:attr:`Inputs.tracked`), so neither a user's run folder (``runs/``, never under
``results/``) nor an untracked file someone left in ``results/`` or ``docs/figures/`` is folded into RESULTS.md
or PROVENANCE.md; outside a repository (an unpacked release) every file of the tree is the manifest.

>>> inputs = committed_inputs()
>>> inputs.result, inputs.ncu[0]
('results/raw/e1_h100.json', 'results/ncu/e1_h100_local-vs-sink-heavy_dkv_core.json')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import REPO_ROOT
from ..io.paths import tracked_files

RESULT = "results/raw/e1_h100.json"
REPEAT = "results/raw/e1_h100_repeat.json"
AUTOTUNE_MATRIX = "results/autotune/e1_h200.json"
H200 = "results/raw/e1_h200.json"
H200_REPEAT = "results/raw/e1_h200_repeat.json"
DOCS8192 = "results/raw/e1_h200_docs8192.json"
ROUTING_FILE = "results/raw/e1_h200_file.json"
OUTPUT = "docs/RESULTS.md"
PROVENANCE = "docs/PROVENANCE.md"
SESSION_SCRIPT = "scripts/h200_session.sh"
PACKING_SWEEP = "sweep_packing_h200"
SKEW_SWEEP = "sweep_skew_h200"
T_SWEEP = "sweep_T_h200"
#: The penalty map (issue 32, RESULTS.md's "When it matters"): B·H and G at T=32768, then T; point files beside.
PENALTY_SWEEPS = ("sweep_penalty_h200", "sweep_penalty_T_h200")
#: The makespan model checked on the penalty map's points (and, through the calibration it names, the break-even).
PENALTY_VALIDATION = "results/model/h200_BQ1_w4_s2_penalty_validation.json"
#: The release arm at the primary shape through FLA's public API (the pinned files): its ``train_step``.
RELEASE_PRIMARY = "results/releases/release_h200/fla-core-0.5.2-T32768.json"
#: Optional: the release arm's layer results (``nsa_layer``: compression + selection with their gates): along T at
#: the primary B, H (``configs/release_layer_h200.json``), along B at T=32768
#: (``configs/release_layer_shapes_h200.json``).
RELEASE_LAYER = "results/releases/release_layer_h200"
RELEASE_LAYERS = (RELEASE_LAYER, "results/releases/release_layer_shapes_h200")
#: The pair whose Nsight Compute summaries the cross-GPU section sets side by side.
NCU_PAIR = "local-vs-sink-heavy"
#: Committed bench results that ``validate`` FAILs, committed as measured, each with the checks it fails and
#: where that is explained. The report names them and keeps their numbers out of every noise floor; a listed
#: file that fails other checks, or now passes, stops the report (one line), and so does any other failure.
#: Empty since the stop-rule run was re-run with the paired CUPTI pass (docs/PROVENANCE.md, H200 run of 2026-12-02
#: 14:04).
KNOWN_FAILING: dict[str, tuple[tuple[str, ...], str]] = {}


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
    h200_repeat: str | None = None
    docs8192: str | None = None
    routing_file: str | None = None
    #: The files git tracks under ``root`` (relative POSIX paths), None outside a repository (every file counts).
    tracked: frozenset[str] | None = field(default=None, compare=False, repr=False)

    def committed(self, path: Path | str | None) -> bool:
        """Whether ``path`` is a file of the published tree: it exists and, in a repository, git tracks it."""
        if path is None:
            return False
        p = Path(path) if Path(path).is_absolute() else self.root / path
        return p.is_file() and (self.tracked is None or self.relative(p) in self.tracked)

    def uncommitted(self) -> list[str]:
        """The named inputs that exist but git does not track (empty outside a repository)."""
        names = [self.result, self.repeat, self.h200, self.h200_repeat, *self.ncu, self.autotune_matrix,
                 *self.tune_arms, self.docs8192, self.routing_file]
        return [self.relative(p) for p in map(self.path, names) if p is not None and not self.committed(p)]

    def glob(self, folder: str | Path, pattern: str) -> list[Path]:
        """The committed files of ``folder`` (relative to the root) matching ``pattern``, sorted."""
        base = Path(folder) if Path(folder).is_absolute() else self.root / folder
        return sorted(p for p in base.glob(pattern) if self.committed(p))

    @property
    def figures(self) -> Path:
        return self.root / "docs" / "figures"

    def path(self, rel: str | None) -> Path | None:
        """``rel`` under the root (an absolute path as given); None for a dropped or missing input."""
        if not rel:
            return None
        p = Path(rel) if Path(rel).is_absolute() else self.root / rel
        return p if p.is_file() else None

    def _glob(self, folder: str, pattern: str) -> list[Path]:
        return self.glob(folder, pattern)

    def bench_results(self) -> list[Path]:
        """Every committed bench result, ``results/raw/*.json``."""
        return self._glob("results/raw", "*.json")

    def sweep_tables(self) -> list[Path]:
        """Every committed sweep table, ``results/sweeps/<name>.csv``."""
        return self._glob("results/sweeps", "*.csv")

    def sweep_points(self, name: str | None = None) -> list[Path]:
        """The point files of one sweep (``results/sweeps/<name>/T*.json``), or of every sweep."""
        return self._glob("results/sweeps", f"{name or '*'}/T*.json")

    def packing_table(self, name: str = PACKING_SWEEP) -> Path:
        return self.root / "results" / "sweeps" / f"{name}.csv"

    def model_validations(self) -> list[Path]:
        return self._glob("results/model", "*_validation.json")

    def model_calibrations(self) -> list[Path]:
        return [p for p in self._glob("results/model", "*.json") if not p.name.endswith("_validation.json")]

    def whatifs(self) -> list[Path]:
        return self._glob("results/whatif", "*.json")

    def release_layers(self) -> list[Path]:
        """The committed layer results (:data:`RELEASE_LAYERS`, ``*.json``; optional: none yet is fine)."""
        return [p for folder in RELEASE_LAYERS for p in self._glob(folder, "*.json")]

    def peers(self) -> list[Path]:
        """Every committed peer result (kind ``peer_result``, ``peer-bench``), ``results/peers/*.json``."""
        return self._glob("results/peers", "*.json")

    def releases(self) -> list[Path]:
        """Every committed release result (kind ``release_result``), ``results/releases/<config>/*.json``."""
        return self._glob("results/releases", "**/*.json")

    def result_files(self) -> list[Path]:
        """Every file under ``results/`` (hidden files and submitit job logs aside): the provenance table's rows."""
        return sorted(p for p in (self.root / "results").rglob("*") if self.committed(p)
                      and not any(part.startswith(".") or part.endswith("_submitit")
                                  for part in p.relative_to(self.root).parts))

    def ncu_summary(self, result: str, stage: str) -> Path:
        """The Nsight Compute summary of :data:`NCU_PAIR` on ``stage`` for the bench result ``result``."""
        return self.root / "results" / "ncu" / f"{Path(result).stem}_{NCU_PAIR}_{stage}.json"

    def relative(self, path: Path | str) -> str:
        path = Path(path)
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return path.as_posix()

    def named(self) -> list[str]:
        """The named inputs that exist, in the report's order (RESULTS.md's Inputs appendix)."""
        names = [self.result, self.repeat, self.h200, self.h200_repeat, *self.ncu, self.autotune_matrix,
                 *self.tune_arms, self.docs8192, self.routing_file]
        return [self.relative(p) for p in map(self.path, names) if p is not None]


def committed_inputs(root: Path = REPO_ROOT, result: str = RESULT, repeat: str | None = REPEAT,
                     ncu: Sequence[str] | None = None, autotune_matrix: str | None = AUTOTUNE_MATRIX,
                     tune_arms: Sequence[str] | None = None, h200: str | None = H200,
                     h200_repeat: str | None = H200_REPEAT, docs8192: str | None = DOCS8192,
                     routing_file: str | None = ROUTING_FILE) -> Inputs:
    """The report's inputs; ``ncu`` defaults to ``results/ncu/<result stem>_*.json``, ``tune_arms`` to
    ``results/raw/*_tune_*.json`` (both sorted, relative to ``root``); '' or None drops an optional input."""
    root = Path(root)
    tracked = tracked_files(root)
    probe = Inputs(root, result, None, (), None, (), None, tracked=tracked)
    if ncu is None:
        ncu = [str(p.relative_to(root)) for p in probe.glob("results/ncu", f"{Path(result).stem}_*.json")]
    if tune_arms is None:
        tune_arms = [str(p.relative_to(root)) for p in probe.glob("results/raw", "*_tune_*.json")]
    return Inputs(root, result, repeat or None, tuple(ncu), autotune_matrix or None, tuple(tune_arms), h200 or None,
                  h200_repeat or None, docs8192 or None, routing_file or None, tracked=tracked)

