"""Checks of a bench result's own records: shape, environment, memory accounting, reproduction flags and
telemetry (the run-record checks every GPU document shares are in :mod:`.record_checks`).

- ``shape_matches_config``, ``environment_recorded`` (GPU, driver, versions).
- ``memory_recompute``: every buffer size from the shape; peaks >= baselines; allocated <= reserved;
  peak - baseline recomputed; nothing above the GPU's memory.
- ``reproduction_flags``: ``bit_exact`` <=> ``n_different == 0`` <=> ``max_abs == 0``; numel from the
  shape; ``max_abs_rel`` = max_abs / ref_max_abs; dQ bit-exact and dK/dV rel-L2 within the pinned
  ``full_shape_dkv_rel_l2`` (the gate bench applies; the file's own value only where stricter).
- ``telemetry_recompute``: one sample per (round, pattern) in round order; ``throttled_samples``
  recounted. Policy: throttled samples > 0 is a WARNING (listed, not a failure; see docs/SCHEMAS.md).
"""

from __future__ import annotations

from typing import Any

from ..core.protocol import THROTTLE_MASK
from ..core.records import GpuIdentity
from .checks import Add, Problems, first_difference, same
from .record_checks import pinned

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def shape_problems(doc: dict[str, Any]) -> Problems:
    """``shape_matches_config``: the recorded shape is the embedded config's."""
    shape_d, config = doc["shape"], doc["config"]
    return [] if shape_d == config["shape"] else [
        ("$.shape", f"shape {shape_d} differs from config.shape {config['shape']}")]


def environment_problems(doc: dict[str, Any]) -> Problems:
    """``environment_recorded``: GPU name, driver, SM count and torch/triton/CUDA versions."""
    meta = doc["metadata"]
    env_p = [(f"$.metadata.gpu.{k}", "missing") for k in ("name", "driver", "sm_count") if not meta["gpu"].get(k)]
    env_p += [(f"$.metadata.versions.{k}", "missing") for k in ("torch", "triton", "cuda")
              if not meta["versions"].get(k)]
    return env_p


def memory_recompute(doc: dict[str, Any], add: Add) -> None:
    s = doc["shape"]
    B, T, HQ, H, K, V, S, BS = (s[k] for k in ("B", "T", "HQ", "H", "K", "V", "S", "block_size"))
    M = T // BS
    e = DTYPE_BYTES.get(s["dtype"], 2)
    grads = (B * T * HQ * K + B * T * H * K + B * T * H * V) * e
    expect = {
        "delta_bytes": B * T * HQ * 4,
        "csr_indices_bytes": B * T * H * S * 4,
        "csr_offsets_bytes": (B * H * M + 1) * 4,
        "csr_transient_cursor_bytes": B * H * M * 4,
        "aux_persistent_bytes": B * T * HQ * 4 + B * T * H * S * 4 + (B * H * M + 1) * 4,
        "preallocated_gradient_bytes": grads,
        "official_outputs_bytes": grads,
    }
    total = GpuIdentity.read(doc["metadata"].get("gpu")).total_memory_bytes
    problems: Problems = []
    for name, p in doc["patterns"].items():
        m, path = p["memory"], f"$.patterns.{name}.memory"
        for key, value in expect.items():
            if key in m and m[key] != value:
                problems.append((f"{path}.{key}", f"recorded {m.get(key)}, the shape gives {value}"))
        pa, pr = m["official_peak_allocated_bytes"], m["official_peak_reserved_bytes"]
        if pa > pr:
            problems.append((f"{path}.official_peak_allocated_bytes", f"allocated peak {pa} > reserved peak {pr}"))
        if isinstance(total, int) and pr > total:
            problems.append((f"{path}.official_peak_reserved_bytes", f"{pr} > the GPU's memory {total}"))
        if m["official_peak_minus_baseline_bytes"] < m.get("official_outputs_bytes", 0):
            problems.append((f"{path}.official_peak_minus_baseline_bytes",
                             f"{m['official_peak_minus_baseline_bytes']} is below the wrapper's own outputs "
                             f"({m.get('official_outputs_bytes')} bytes)"))
        if "official_baseline_allocated_bytes" not in m or "official_baseline_reserved_bytes" not in m:
            continue  # baselines not recorded (optional in the schema): only the checks above apply
        ba, br = m["official_baseline_allocated_bytes"], m["official_baseline_reserved_bytes"]
        if pa < ba:
            problems.append((f"{path}.official_peak_allocated_bytes", f"peak {pa} < baseline {ba}"))
        if pr < br:
            problems.append((f"{path}.official_peak_reserved_bytes", f"peak {pr} < baseline {br}"))
        if m["official_peak_minus_baseline_bytes"] != pa - ba:
            problems.append((f"{path}.official_peak_minus_baseline_bytes",
                             f"recorded {m['official_peak_minus_baseline_bytes']}, peak - baseline = {pa - ba}"))
        if ba > br:
            problems.append((f"{path}.official_baseline_allocated_bytes", f"allocated {ba} > reserved {br}"))
    add("memory_recompute", problems)


def gradient_numel(shape: dict[str, Any]) -> dict[str, int]:
    """Elements of o, dq, dk, dv at ``shape`` (o and dq ``[B,T,HQ,V|K]``, dk/dv ``[B,T,H,K|V]``)."""
    B, T, HQ, H, K, V = (shape[k] for k in ("B", "T", "HQ", "H", "K", "V"))
    return {"o": B * T * HQ * V, "dq": B * T * HQ * K, "dk": B * T * H * K, "dv": B * T * H * V}


def comparison_problems(m: dict[str, Any], path: str, numel: int | None = None) -> Problems:
    """One comparison record (``gpu/numerics.compare``) against itself: ``bit_exact`` <=> ``n_different == 0``
    <=> every error metric zero, ``n_different <= numel``, ``max_abs_rel = max_abs / ref_max_abs``, and
    ``numel`` from the shape when given. Fields a record lacks are not judged."""
    problems: Problems = []
    if numel is not None and m.get("numel") != numel:
        problems.append((f"{path}.numel", f"recorded {m.get('numel')}, the shape gives {numel}"))
    if "n_different" in m and m["n_different"] > m["numel"]:
        problems.append((f"{path}.n_different", f"{m['n_different']} > numel {m['numel']}"))
    if "n_different" in m:
        exact = m["n_different"] == 0
        if "bit_exact" in m and m["bit_exact"] != exact:
            problems.append((f"{path}.bit_exact", f"{m['bit_exact']} but n_different = {m['n_different']}"))
        for key in ("max_abs", "max_ulp", "rel_l2", "max_abs_rel"):
            if key in m and (m[key] == 0) != exact:
                problems.append((f"{path}.{key}", f"{key} = {m[key]} contradicts n_different = {m['n_different']}"))
    if "ref_max_abs" in m:
        want = m["max_abs"] / m["ref_max_abs"] if m["ref_max_abs"] else 0.0
        if not same(m["max_abs_rel"], want):
            problems.append((f"{path}.max_abs_rel", f"recorded {m['max_abs_rel']}, max_abs / ref_max_abs = {want}"))
    return problems


def reproduction_flags(doc: dict[str, Any], add: Add) -> None:
    """Each gradient's comparison record consistent with itself and the shape; dQ bit-exact; dK/dV rel-L2
    within the pinned ``full_shape_dkv_rel_l2`` (the file's own only where stricter: a raised tolerance in
    the embedded config cannot loosen the gate)."""
    numel = gradient_numel(doc["shape"])
    tol = pinned(doc["config"].get("tolerances")).full_shape_dkv_rel_l2
    problems: Problems = []
    for name, p in doc["patterns"].items():
        for g, m in p["reproduces_official"].items():
            path = f"$.patterns.{name}.reproduces_official.{g}"
            problems += comparison_problems(m, path, numel.get(g))
            if g == "dq" and not m["bit_exact"]:
                problems.append((f"{path}.bit_exact", "dQ must reproduce the official wrapper bit for bit "
                                 "(bench's reproduction gate); the timings are void"))
            if g in ("dk", "dv") and m["rel_l2"] > tol:
                problems.append((f"{path}.rel_l2", f"{m['rel_l2']} > full_shape_dkv_rel_l2 {tol}: "
                                 "the reproduction gate cannot have passed"))
    add("reproduction_flags", problems)


def telemetry_recompute(doc: dict[str, Any], add: Add, warnings: list, unverified: list) -> None:
    tel, t = doc["telemetry"], doc["timing"]
    samples = tel["samples"]
    problems: Problems = []
    expected = [(r, p) for r, order in enumerate(t["round_orders"]) for p in order]
    got = [(s.get("round"), s.get("pattern")) for s in samples if not s.get("rewarm")]
    if got != expected:
        first = first_difference(got, expected)
        problems.append((f"$.telemetry.samples[{first}]", f"{len(got)} samples do not follow the round orders "
                         f"({len(expected)} (round, pattern) pairs expected)"))
    for i, s in enumerate(samples):
        if s.get("warmup") is not (bool(s.get("rewarm")) or s.get("round", -1) < t["warmup_rounds"]):
            problems.append((f"$.telemetry.samples[{i}].warmup", "does not match round < warmup_rounds"))
            break
    with_reasons = [s for s in samples if "throttle_reasons" in s]
    if tel["available"] and len(with_reasons) != len(samples):
        problems.append(("$.telemetry.samples", f"telemetry available but {len(samples) - len(with_reasons)} "
                         "samples lack a reading"))
    count = sum(1 for s in samples if int(s.get("throttle_reasons", 0)) & THROTTLE_MASK)
    if tel["throttled_samples"] != count:
        problems.append(("$.telemetry.throttled_samples", f"recorded {tel['throttled_samples']}, the samples' "
                         f"throttle reasons give {count}"))
    if count:
        warnings.append({"check": "telemetry_recompute", "path": "$.telemetry.throttled_samples",
                         "message": f"{count} of {len(samples)} samples were taken while the GPU throttled "
                                    "(power/thermal); the latencies of those rounds may be slow"})
    if not tel["available"]:
        unverified.append({"path": "$.telemetry", "why": "no NVML on the host: clocks and throttling unknown"})
    add("telemetry_recompute", problems)
