"""What a run costs (issue 30): a bench result's wall time against the GPU time it timed, phase by phase.

The ratio ``wall_seconds / timed`` (timed = every raw and warm-up latency the rounds recorded, CUDA events,
:func:`timed_ms`) is the instrument's overhead: 1.0 would be a bench that does
nothing but run the kernels it times. The phases (:data:`nsa_exp.core.measurement.PHASES`, host seconds,
recorded since issue 30) say where the rest goes; ``other`` is the wall time no phase holds (the time between
the hooks: command-line handling before the engine is not in ``wall_seconds`` at all).

>>> doc = {"wall_seconds": 10.0, "phases": {"gates": 1.0, "inputs": 0.5, "tune": 2.0, "rounds": 6.0, "cupti": 0.0,
...        "reproduction": 0.25, "record": 0.25}, "patterns": {"p": {"stages": {"s": {"raw_ms": [4000.0],
...        "warmup_ms": [1000.0]}}}}}
>>> cost(doc)["wall_over_timed"], cost(doc)["phases"]["other"]
(2.0, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from ..core.measurement import PHASES
from ..io.store import load_document


def timed_ms(doc: Mapping[str, Any]) -> float:
    """Every observation and warm-up a bench-shaped document timed, in ms."""
    return sum(sum(s["raw_ms"]) + sum(s.get("warmup_ms", [])) for p in doc["patterns"].values()
               for s in p["stages"].values())


def cost(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``{"wall_seconds", "timed_seconds", "wall_over_timed", "phases"}`` of a bench result; ``phases`` is
    ``{phase: seconds}`` plus ``other`` (wall minus their sum), or None for a result recorded before phases."""
    wall, timed = float(doc["wall_seconds"]), timed_ms(doc) / 1000
    phases = doc.get("phases")
    if phases is not None:
        phases = {p: float(phases[p]) for p in PHASES}
        phases["other"] = wall - math.fsum(phases.values())
    return {"wall_seconds": wall, "timed_seconds": timed, "wall_over_timed": wall / timed if timed else math.inf,
            "phases": phases}


def cost_table(named: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """The phase table of one or more bench results (``(label, document)`` pairs), one column each: every
    phase's seconds and share of the wall, then wall, the timed latencies and their ratio."""
    costs = [(label, cost(doc)) for label, doc in named]
    rows = []
    for phase in (*PHASES, "other"):
        rows.append([phase, *[f"{c['phases'][phase]:.1f} s ({c['phases'][phase] / c['wall_seconds']:.0%})"
                              if c["phases"] is not None else "-" for _, c in costs]])
    rows.append(["wall", *[f"{c['wall_seconds']:.1f} s" for _, c in costs]])
    rows.append(["timed latencies", *[f"{c['timed_seconds']:.1f} s" for _, c in costs]])
    rows.append(["wall / timed", *[f"{c['wall_over_timed']:.2f}x" for _, c in costs]])
    table = tabulate(rows, headers=["phase", *[label for label, _ in costs]], tablefmt="github", disable_numparse=True)
    before = [label for label, c in costs if c["phases"] is None]
    return table + (f"\n-: {', '.join(before)} recorded no phases (a result written before bench recorded them, "
                    "2026-12-03): only its wall and timed latencies are known" if before else "")


def cost_of_files(paths: Sequence[str]) -> str:
    """``cost``'s table of the bench results at ``paths``, each read by the strict loader (UserError naming the
    file for anything else), labelled by its name, or by its file's where two share a name (a run and its copy
    under another file name, ``e1_h200_stop.json`` and ``e1_h200_stop_45c4a0c.json``), or by its path as given
    where two files share that too."""
    docs = [load_document(p, ("bench_result",), str(p)) for p in paths]
    names, stems = [d["name"] for d in docs], [Path(p).stem for p in paths]
    return cost_table([(d["name"] if names.count(d["name"]) == 1 else stem if stems.count(stem) == 1 else str(p), d)
                       for p, d, stem in zip(paths, docs, stems, strict=True)])
