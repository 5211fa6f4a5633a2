"""``python -m nsa_exp routing``: inspect the routings on a CPU before spending GPU time.

Per pattern: effective edges (and the equal-edge gate), fan-in and CSR-row statistics, generation
time; optionally each pattern's block_indices saved as ``DIR/<pattern>.npy`` (int32 ``[B,T,H,S]``).
"""

from __future__ import annotations

import io
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from ..core.config import Config, Shape
from ..core.families import family
from ..errors import UserError
from ..io.progress import progress
from ..io.store import write_files_atomic, write_json
from .edges import effective_edges, equal_edge_gate
from .fanin import routing_statistics
from .files import CU_KEY, NPZ_KEY, file_routings
from .packing import generate_packed_routing, packed_routing_violations
from .patterns import generate_routing, routing_violations


def pattern_summaries(config: Config) -> tuple[dict[str, dict[str, Any]], dict[str, np.ndarray], dict[str, Any]]:
    """Generate every pattern of ``config`` and summarise it: (pattern -> its routing report entry, pattern ->
    block_indices, the equal-edge record); the equal-edge gate raises on a mismatch. Packed (``config.packing``):
    each routing per document, edges against the packed closed form, statistics over the varlen CSR rows
    (:mod:`.packing`). The kind's module (``checking/routing_report.py``) builds the report from them."""
    patterns, routings = {}, {}
    cu, BS = config.cu_seqlens, config.shape.block_size
    for pattern in config.patterns:
        t0 = time.perf_counter()
        bi = (generate_routing(pattern, config.shape, config.seeds.routing) if cu is None else
            generate_packed_routing(pattern, config.shape, config.seeds.routing, cu))
        seconds = time.perf_counter() - t0
        routings[pattern.name] = bi
        patterns[pattern.name] = {
            "params": pattern.to_dict(),
            "edges": effective_edges(bi, BS, cu),
            "generation_s": seconds,
            "invariant_violations": routing_violations(bi, config.shape) if cu is None else
            packed_routing_violations(bi, config.shape, cu),
            **routing_statistics(bi, BS, cu),
        }
    # fla-topk (equal_edges=False): counted and recorded under equal_edges.exempt, not gated
    gate = equal_edge_gate(routings, config.shape, cu, exempt=[n for n in routings if not family(n).equal_edges])
    return patterns, routings, gate


def routing_files_section(shape: Shape, paths: Sequence[str], require_equal: bool = False,
                          packed: bool = False) -> list[dict[str, Any]]:
    """Validate and summarise each ``--routing-file`` (before any pattern work) as bench and sweep do
    (:func:`.files.file_routings`): ``require_equal`` (``--require-equal-edges``) holds every file to the closed
    form. ``packed``: the config has a packing, which takes no routing file yet (one line)."""
    if paths and packed:
        raise UserError(f"--routing-file {paths[0]}: the config is packed (config.packing) and routing files are "
                        "dense-only for now; drop the packing or the routing file")
    return list(file_routings(paths, shape, require_equal)[1].values())


def time_generation(config: Config, lengths: tuple[int, ...], repeats: int = 3) -> list[dict[str, Any]]:
    """Median wall time of each pattern's generator at each T (the config's shape otherwise)."""
    rows = []
    for T in progress(lengths, f"routing-time: {len(config.patterns)} patterns x {repeats} repeats per T",
                      unit="length"):
        shape = replace(config.shape, T=T)
        for pattern in config.patterns:
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                generate_routing(pattern, shape, config.seeds.routing)
                times.append(time.perf_counter() - t0)
            rows.append({"T": T, "pattern": pattern.name, "median_s": float(np.median(times))})
    return rows


def save_routings(routings: dict[str, np.ndarray], directory: str | Path, cu: np.ndarray | None = None) -> list[str]:
    """Write each routing as ``<directory>/<pattern>.npy`` (atomic rename); packed (``cu``), as
    ``<pattern>.npz`` holding ``block_indices`` and its ``cu_seqlens`` (what ``predict --routing-file``
    reads). Returns the paths. All or none (:func:`~nsa_exp.io.store.write_files_atomic`)."""
    blobs = []
    for name, bi in routings.items():
        buf = io.BytesIO()
        if cu is None:
            np.save(buf, bi, allow_pickle=False)
        else:
            np.savez(buf, allow_pickle=False, **{NPZ_KEY: bi, CU_KEY: np.asarray(cu, dtype=np.int32)})
        blobs.append((Path(directory) / f"{name}.{'npy' if cu is None else 'npz'}", buf.getvalue()))
    write_files_atomic(blobs)
    return [str(path) for path, _ in blobs]


def format_table(report: dict[str, Any]) -> str:
    """Human-readable table of the report."""
    rows = [[name, p["edges"], p["fanin"]["mean"], p["fanin"]["max"], p["fanin"]["p95"], p["fanin"]["p99"],
             p["fanin"]["cv"], p["fanin"]["gini"], p["query_span"]["median"], p["adjacent_gap"]["mean"],
             p["generation_s"]] for name, p in report["patterns"].items()]
    table = tabulate(rows, headers=["pattern", "edges", "fanin mean", "max", "p95", "p99", "cv", "gini", "span med",
                                    "gap mean", "gen s"],
                     intfmt=",", floatfmt=("", ",.0f", ".1f", ".0f", ".1f", ".1f", ".3f", ".3f", ".1f", ".2f", ".2f"))
    pack = report.get("packing")
    packed = "" if pack is None else (f"; packed: {pack['documents']} documents of {pack['min_length']}–"
                                      f"{pack['max_length']} tokens, program order {pack['program_order']}")
    return "\n".join([f"config {report['config_name']}: shape {report['shape']}{packed}",
                      f"closed-form edges {report['closed_form_edges']:,}; equal-edge gate passed", table])


def write_routing_report(report: dict[str, Any], path: str | Path) -> None:
    write_json(path, report, "routing_report")
