"""Nsight Compute's raw export (``ncu --import R --csv --page raw``) as per-kernel metrics: what
``ncu-export`` writes into an ``ncu_summary`` and what ``validate`` recomputes a summary from.

Layout: a header row (its first cell ``ID``), a units row, then one row per profiled kernel. Numbers are
read with the bundle's one CSV number rule in ncu's dialect (:func:`nsa_exp.io.strict_csv.parse_ncu_number`:
thousands grouped as ncu prints them, nothing looser). Durations are brought to ns and sizes to bytes
from whatever SI prefix ncu printed (an unknown unit is refused).

>>> _normalise_units({"duration_ns": 15.4, "shared_mem_static_bytes": 0.0, "shared_mem_dynamic_bytes": 73.92},
...                  {"duration_ns": "ms", "shared_mem_static_bytes": "byte/block",
...                   "shared_mem_dynamic_bytes": "Kbyte/block"})
{'duration_ns': 15400000.0, 'shared_mem_static_bytes': 0.0, 'shared_mem_dynamic_bytes': 73920.0}
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any, TypedDict

from ..errors import UserError
from .strict_csv import parse_ncu_number

METRICS = {
    "duration_ns": "gpu__time_duration.sum",  # converted to ns from the report's unit
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_static_bytes": "launch__shared_mem_per_block_static",
    "shared_mem_dynamic_bytes": "launch__shared_mem_per_block_dynamic",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    # min/max over SMs: a wide gap is SM load imbalance (a few long CTAs, the rest idle)
    "sm_throughput_min_pct": "sm__throughput.min.pct_of_peak_sustained_elapsed",
    "sm_throughput_max_pct": "sm__throughput.max.pct_of_peak_sustained_elapsed",
    "dram_throughput_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "sm_count": "device__attribute_multiprocessor_count",
}
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(.+)_per_issue_active\.ratio$")
NOT_A_STALL = {"selected"}  # 'selected' counts the issuing warp itself (always 1 per issue)
# ncu prints quantities in SI-prefixed units; these bring durations to ns and sizes to bytes.
TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
TO_BYTES = {"byte": 1.0, "byte/block": 1.0, "Kbyte": 1e3, "Kbyte/block": 1e3, "KB/block": 1e3,
            "Mbyte": 1e6, "Mbyte/block": 1e6, "KiB/block": 1024.0}
#: ncu's clock-rate units, to Hz
TO_HZ = {"hz": 1.0, "Khz": 1e3, "Mhz": 1e6, "Ghz": 1e9, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}
TOP_STALLS = 6


class Stall(TypedDict):
    """One entry of a kernel row's ``top_stalls``: a stall reason and its cycles per issued instruction."""

    reason: str
    cycles_per_issue: float


def _number(text: str, where: str) -> float | None:
    """One numeric cell, as ncu writes it (:func:`nsa_exp.io.strict_csv.parse_ncu_number`); UserError naming it."""
    try:
        return parse_ncu_number(text or "")
    except ValueError as exc:
        raise UserError(f"ncu export: {where}: {exc}") from None


#: The unit of a stored value that :func:`_normalise_units` converted (``units`` keeps what ncu printed).
VALUE_UNITS = {"duration_ns": "ns", "shared_mem_static_bytes": "byte/block", "shared_mem_dynamic_bytes": "byte/block"}


def _normalise_units(metrics: dict[str, float | None], units: dict[str, str]) -> dict[str, float | None]:
    """Duration to ns, shared memory to bytes, whatever prefix ncu printed; unknown units are refused."""
    out = dict(metrics)
    for key, table in (("duration_ns", TO_NS), ("shared_mem_static_bytes", TO_BYTES),
                       ("shared_mem_dynamic_bytes", TO_BYTES)):
        value = out[key]
        if value is None:
            continue
        if units[key] not in table:
            raise UserError(f"ncu export: unexpected unit {units[key]!r} for {METRICS[key]}")
        out[key] = value * table[units[key]]
    return out


def parse_raw_csv(text: str) -> list[dict[str, Any]]:
    """Rows of ``ncu --csv --page raw``: header row, units row, one row per profiled kernel."""
    rows = list(csv.reader(io.StringIO(text)))
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None or len(rows) < start + 2:
        raise UserError("ncu export: no kernel rows in the report (did the NVTX range match any launch?)")
    header, units = rows[start], rows[start + 1]
    kernels = []
    for values in rows[start + 2:]:
        if len(values) != len(header):
            continue
        raw = dict(zip(header, values, strict=True))
        unit = dict(zip(header, units, strict=True))
        where = f"kernel ID {raw.get('ID')!r}"
        metrics = {key: _number(raw.get(name, ""), f"{where} {name}") for key, name in METRICS.items()}
        metrics = _normalise_units(metrics, {key: unit.get(name, "") for key, name in METRICS.items()})
        stalls: list[Stall] = []
        for name, value in raw.items():
            m = STALL.match(name)
            if m is None or m.group(1) in NOT_A_STALL:
                continue
            cycles = _number(value, f"{where} {name}")
            if cycles is not None:
                stalls.append({"reason": m.group(1), "cycles_per_issue": cycles})
        stalls.sort(key=lambda s: -s["cycles_per_issue"])
        kernels.append({
            "id": int(_number(raw.get("ID", ""), "ID") or 0),
            "kernel": raw.get("Kernel Name", ""),
            "device": raw.get("device__attribute_display_name") or raw.get("Device", ""),
            "grid": raw.get("Grid Size", ""),
            "block": raw.get("Block Size", ""),
            "metrics": metrics,
            "units": {key: unit.get(name, "") for key, name in METRICS.items()},
            "value_units": {key: VALUE_UNITS.get(key, unit.get(name, "")) for key, name in METRICS.items()},
            "metric_names": dict(METRICS),
            "top_stalls": stalls[:TOP_STALLS],
        })
    if not kernels:
        raise UserError("ncu export: the report holds no complete kernel rows")
    return kernels


def assign_patterns(kernels: list[dict[str, Any]], names: list[str]) -> None:
    """Label each kernel row (in ncu's launch order) with the pattern whose stage launched it, in place.

    ``profile_stage`` launches pattern A's stage, then pattern B's, ... inside one NVTX range
    (:mod:`nsa_exp.gpu.profiler`), so a stage of k kernels per pattern (``csr``: fills, the two
    ``prepare_block_csr_kernel`` passes, the cumsum; ``full_bwd``: every kernel of the wrapper) gives
    k x len(names) rows: rows [i*k, (i+1)*k) are pattern i's. The split is accepted only when every
    pattern's block holds the same kernel names in the same order; otherwise every pattern is None.
    """
    k, rest = divmod(len(kernels), len(names)) if names else (0, 1)
    blocks = [[r["kernel"] for r in kernels[i * k:(i + 1) * k]] for i in range(len(names))] if k and not rest else []
    same = bool(blocks) and all(b == blocks[0] for b in blocks)
    for i, row in enumerate(kernels):
        row["pattern"] = names[i // k] if same else None
