"""The committed noise table (issue 28): ``f(GPU, stage)`` read from one generated, committed file, so that
``compare``, ``report``, ``validate`` and ``reproduce`` judge every ratio under the same floors.

This module is the seam every door reads the floors through: :func:`read_floors` returns the table,
:func:`comparison_floors` the floor per stage of one comparison (the larger of the two GPUs' floors,
:func:`nsa_exp.analysis.noise.floor_of`). The table is derived from every repeated measurement of the
committed results by :func:`nsa_exp.analysis.noise.floors`: :func:`floor_rows` computes its rows and the kind's
module (:func:`nsa_exp.checking.noise_table.build`) the document (kind ``noise_table``,
``schemas/noise_table.schema.json``) from the runs ``python -m nsa_exp noise-table`` reads
(every bench result ``results/raw/*.json`` and sweep point ``results/sweeps/*/T*.json``, :data:`SOURCES`,
except the files ``validate`` fails, listed with the reason), and ``validate`` rebuilds it from those files.

Each row is one GPU x stage: its floor, ``rule`` (``spread``: the largest spread of a repeated quantity;
``minimum``: every spread below :data:`~nsa_exp.analysis.noise.MIN_FLOOR`; ``borrowed``: no two files measured
the stage under one protocol, the largest floor of the GPU's other stages, ``borrowed_from`` naming it) and
``set_by``: the quantity that sets it with its members (repo-relative paths, medians, ratios to ``local``,
rounds) and its spread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tabulate import tabulate

from .. import REPO_ROOT
from ..core.records import RunRecord
from ..core.stages import STAGE_NAMES
from ..io.paths import tracked_files
from ..io.store import load_document
from .noise import MIN_FLOOR, MIN_ROUNDS, Quantity, borrowed, floor_of, floors, quantities, repeated

#: Where the committed noise table lives, relative to the repository root.
NOISE_TABLE = "results/noise/floors.json"
#: The committed files a noise table is derived from (globs relative to the repository root).
SOURCES = ("results/raw/*.json", "results/sweeps/*/T*.json")
#: The floor of a stage whose GPU the table lacks (``compare``'s documented fallback).
FALLBACK_FLOOR = 0.02
#: How a floor is derived, as a noise table records it (its ``rule``); the verdicts' rule is compare.VERDICT_RULE.
FLOOR_RULE = (f"f(GPU, stage): the largest relative spread (max/min - 1 of the medians, or of their ratios to local "
              f"in the same rounds) of one quantity (stage, routing, shape, packing, flush policy, autotune configs) "
              f"that two or more committed files timed on that GPU over at least {MIN_ROUNDS} rounds each, at least "
              f"{MIN_FLOOR:g}; a stage no two such files measured under one protocol borrows the largest floor of "
              f"its GPU; a comparison across two GPUs uses the larger floor")


def read_floors(path: str | Path | None = None) -> dict[tuple[str, str], float]:
    """``{(gpu, stage): floor}`` (fractions) from the noise table at ``path`` (default :data:`NOISE_TABLE`),
    read by the strict loader (kind ``noise_table``, its schema).

    Raises UserError (one line, with the fix) when the table is missing or not a valid noise table."""
    return floors_of(load_table(path))


def table_path(path: str | Path | None = None) -> Path:
    """The noise table a command reads: ``path``, else the committed :data:`NOISE_TABLE` of this checkout."""
    return Path(path) if path is not None else REPO_ROOT / NOISE_TABLE


def load_table(path: str | Path | None = None) -> dict[str, Any]:
    """The noise table document at ``path`` (default :data:`NOISE_TABLE`): strict parse, kind, schema
    (UserError, one line with the fix, otherwise)."""
    return load_document(table_path(path), ("noise_table",),
                         missing_hint="generate it with `python -m nsa_exp noise-table`")


def floors_of(doc: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """``{(gpu, stage): floor}`` of a noise table document."""
    return {(str(r["gpu"]), str(r["stage"])): float(r["floor"]) for r in doc["floors"]}


def comparison_floors(table: Mapping[tuple[str, str], float], stages: Iterable[str], *gpus: str) -> dict[str, float]:
    """The floor of each stage when comparing runs on ``gpus`` (one GPU, or the two of a cross-GPU ratio)."""
    return {s: floor_of(table, s, *gpus) for s in stages}


def compare_floors(table: Mapping[tuple[str, str], float], stages: Iterable[str], gpus: Iterable[str | None],
                   fallback: float = FALLBACK_FLOOR) -> tuple[dict[str, float], list[str]]:
    """``compare``'s floors from the table: per stage, :func:`comparison_floors` of the GPUs when the table has
    the stage of every one of them, else ``fallback``; and the (GPU, stage) pairs the table lacks, as
    ``"<gpu> <stage>"`` (the caller says so in one line)."""
    names = [g or "?" for g in gpus]
    out, lacking = {}, []
    for s in stages:
        miss = [g for g in names if (g, s) not in table]
        lacking += [f"{g} {s}" for g in miss]
        out[s] = fallback if miss else comparison_floors(table, [s], *names)[s]
    return out, list(dict.fromkeys(lacking))


def _member(m: Any) -> dict[str, Any]:
    return {"path": m.path, "median_ms": m.median_ms, "ratio": m.ratio, "n_obs": m.n_obs}


def _quantity(q: Quantity) -> dict[str, Any]:
    return {"pattern": q.pattern, "routing": q.label, "T": q.T, "spread": q.spread, "median_spread": q.median_spread,
            "ratio_spread": q.ratio_spread, "members": [_member(m) for m in q.members],
            "short": [_member(m) for m in q.short]}


def floor_rows(runs: Iterable[tuple[str, RunRecord]]) -> list[dict[str, Any]]:
    """The noise table's rows (:mod:`nsa_exp.checking.noise_table` builds the document) of ``runs``
    (``(repo-relative path, record)``: bench results and sweep points): one per GPU x stage, its floor, rule and
    the quantity that sets it, in GPU then Stage-table order."""
    qs = quantities(runs)
    table = floors(qs)
    lent = set(borrowed(qs))
    setter: dict[tuple[str, str], Quantity] = {}
    for q in repeated(qs):
        if (q.gpu, q.stage) not in setter or q.spread > setter[q.gpu, q.stage].spread:
            setter[q.gpu, q.stage] = q
    order = {s: i for i, s in enumerate(STAGE_NAMES)}
    rows = []
    for (gpu, stage), f in sorted(table.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], len(order)),
                                                                 kv[0][1])):
        row: dict[str, Any] = {"gpu": gpu, "stage": stage, "floor": f}
        if (gpu, stage) in lent:
            lender = max((k for k in setter if k[0] == gpu), key=lambda k: table[k], default=None)
            row.update(rule="borrowed", borrowed_from=None if lender is None else {"gpu": gpu, "stage": lender[1]},
                       set_by=None if lender is None else _quantity(setter[lender]))
        else:
            q = setter[gpu, stage]
            row.update(rule="spread" if q.spread >= MIN_FLOOR else "minimum", borrowed_from=None, set_by=_quantity(q))
        rows.append(row)
    return rows


def committed_sources(root: str | Path = REPO_ROOT) -> list[str]:
    """Every committed file a noise table is derived from (:data:`SOURCES`), repo-relative, sorted: in a git
    checkout the files git tracks (a result a user drops into ``results/raw/`` untracked is none: it was counted
    among the floors, and the committed table then failed validate, report with it; a new user, 2026-12-06),
    elsewhere every file there (:func:`nsa_exp.io.paths.tracked_files`)."""
    root = Path(root)
    tracked = tracked_files(root)
    found = {p.relative_to(root).as_posix() for g in SOURCES for p in root.glob(g) if p.is_file()}
    return sorted(found if tracked is None else found & tracked)


def format_table(doc: Mapping[str, Any]) -> str:
    """The noise table as plain text (tabulate): GPU, stage, floor, rule and the files that set it."""
    rows = []
    for r in doc["floors"]:
        q = r["set_by"]
        how = (f"borrowed from {r['borrowed_from']['stage']}" if r["rule"] == "borrowed" and r["borrowed_from"]
               else r["rule"])
        files = "" if q is None else ", ".join(Path(m["path"]).stem for m in q["members"])
        what = "—" if q is None else (f"{q['routing']} T={q['T']}: spread {100 * q['spread']:.2f}% over "
                                      f"{len(q['members'])} files ({files})")
        rows.append([r["gpu"], r["stage"], f"{100 * r['floor']:.2f}%", how, what])
    left = [f"excluded: {e['path']} ({e['why']})" for e in doc["excluded"]]
    return "\n".join([tabulate(rows, headers=["GPU", "stage", "floor", "rule", "set by"]),
                      f"rule: {doc['rule']}", f"{len(doc['sources'])} sources", *left])
