"""Checks of a run's own records: shape, FLA commit, environment, memory accounting, reproduction flags,
gates, telemetry and metadata plausibility.

- ``shape_matches_config``, ``fla_commit`` (the pinned commit, verification passed), ``environment_recorded``
  (GPU, driver, versions).
- ``memory_recompute``: every buffer size from the shape; peaks >= baselines; allocated <= reserved;
  peak - baseline recomputed; nothing above the GPU's memory.
- ``reproduction_flags``: ``bit_exact`` <=> ``n_different == 0`` <=> ``max_abs == 0``; numel from the
  shape; ``max_abs_rel`` = max_abs / ref_max_abs; dQ bit-exact and dK/dV rel-L2 within the config's
  ``full_shape_dkv_rel_l2`` (the gate bench applies).
- ``gates_consistent``: each recorded gate's detail agrees with the document (edges, FLA, GPU, versions).
- ``telemetry_recompute``: one sample per (round, pattern) in round order; ``throttled_samples``
  recounted. Policy: throttled samples > 0 is a WARNING (listed, not a failure; see docs/SCHEMAS.md).
- ``metadata_plausible``: a known GPU family with its SM count and compute capability, versions and
  the driver parse, NVML and CUDA names agree.
"""

from __future__ import annotations

import re
from typing import Any

from .. import PINNED_COMMIT
from ..core.protocol import THROTTLE_MASK
from .checks import Add, Problems, first_difference, same

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

# GPU families we know: name fragment -> (allowed SM counts, compute capability).
GPU_FAMILIES: dict[str, tuple[frozenset[int], str]] = {
    "H100": (frozenset({114, 132}), "9.0"),
    "H200": (frozenset({132}), "9.0"),
    "H800": (frozenset({114, 132}), "9.0"),
    "H20": (frozenset({78}), "9.0"),
    "GH200": (frozenset({132}), "9.0"),
    "A100": (frozenset({108}), "8.0"),
    "A800": (frozenset({108}), "8.0"),
    "B200": (frozenset({148}), "10.0"),
    "B100": (frozenset({132}), "10.0"),
    "L40S": (frozenset({142}), "8.9"),
}
SM_RANGE = (1, 1024)
VERSION_RE = re.compile(r"^\d+(\.\d+){1,3}([a-z]+\d*)?(\.(dev|post)\d+)?(\+[\w.]+)?$")
DRIVER_RE = re.compile(r"^\d{3}\.\d{2,3}(\.\d{1,3})?$")
CC_RE = re.compile(r"^\d{1,2}\.\d$")


def shape_problems(doc: dict[str, Any]) -> Problems:
    """``shape_matches_config``: the recorded shape is the embedded config's."""
    shape_d, config = doc["shape"], doc["config"]
    return [] if shape_d == config["shape"] else [
        ("$.shape", f"shape {shape_d} differs from config.shape {config['shape']}")]


def fla_problems(doc: dict[str, Any]) -> Problems:
    """``fla_commit``: the pinned FLA commit, verification passed, and the fla_sources gate says so."""
    fla = doc["fla"]
    fla_p = []
    if fla["commit"] != PINNED_COMMIT:
        fla_p.append(("$.fla.commit", f"{fla['commit']} is not the pinned commit {PINNED_COMMIT}"))
    if fla["verified"] is not True:
        fla_p.append(("$.fla.verified", "FLA source verification did not pass"))
    for i, gate in enumerate(doc["gates"]):
        if gate["name"] == "fla_sources" and gate.get("detail", {}).get("commit") != PINNED_COMMIT:
            fla_p.append((f"$.gates[{i}].detail.commit", "the fla_sources gate did not verify the pinned commit"))
    return fla_p


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
    total = doc["metadata"].get("gpu", {}).get("total_memory_bytes")
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


def reproduction_flags(doc: dict[str, Any], config: Any, add: Add) -> None:
    s = doc["shape"]
    numel = {"dq": s["B"] * s["T"] * s["HQ"] * s["K"], "dk": s["B"] * s["T"] * s["H"] * s["K"],
             "dv": s["B"] * s["T"] * s["H"] * s["V"]}
    tol = config.tolerances.full_shape_dkv_rel_l2
    problems: Problems = []
    for name, p in doc["patterns"].items():
        for g, m in p["reproduces_official"].items():
            path = f"$.patterns.{name}.reproduces_official.{g}"
            if m["numel"] != numel.get(g):
                problems.append((f"{path}.numel", f"recorded {m['numel']}, the shape gives {numel.get(g)}"))
            if m["n_different"] > m["numel"]:
                problems.append((f"{path}.n_different", f"{m['n_different']} > numel {m['numel']}"))
            exact = m["n_different"] == 0
            if m["bit_exact"] != exact:
                problems.append((f"{path}.bit_exact", f"{m['bit_exact']} but n_different = {m['n_different']}"))
            for key in ("max_abs", "max_ulp", "rel_l2", "max_abs_rel"):
                if (m[key] == 0) != exact:
                    problems.append((f"{path}.{key}", f"{key} = {m[key]} contradicts n_different = {m['n_different']}"))
            want = m["max_abs"] / m["ref_max_abs"] if m["ref_max_abs"] else 0.0
            if not same(m["max_abs_rel"], want):
                problems.append((f"{path}.max_abs_rel", f"recorded {m['max_abs_rel']}, max_abs / ref_max_abs = {want}"))
            if g == "dq" and not m["bit_exact"]:
                problems.append((f"{path}.bit_exact", "dQ must reproduce the official wrapper bit for bit "
                                 "(bench's reproduction gate); the timings are void"))
            if g in ("dk", "dv") and m["rel_l2"] > tol:
                problems.append((f"{path}.rel_l2", f"{m['rel_l2']} > config.tolerances.full_shape_dkv_rel_l2 {tol}: "
                                 "the reproduction gate cannot have passed"))
    add("reproduction_flags", problems)


def gates_consistent(doc: dict[str, Any], add: Add) -> None:
    problems: Problems = []
    meta = doc["metadata"]
    for i, gate in enumerate(doc["gates"]):
        d, path = gate.get("detail", {}), f"$.gates[{i}].detail"
        if gate["name"] == "equal_edges" and d != doc["edges"]:
            problems.append((path, "the equal_edges gate's detail differs from $.edges"))
        if gate["name"] == "fla_sources" and d != doc["fla"]:
            problems.append((path, "the fla_sources gate's detail differs from $.fla"))
        if gate["name"] == "gpu":
            name = meta.get("gpu", {}).get("name")
            if d.get("name") != name:
                problems.append((f"{path}.name", f"{d.get('name')!r} differs from $.metadata.gpu.name {name!r}"))
            if d.get("required") != doc["config"]["gpu"]["required_name"]:
                problems.append((f"{path}.required", "differs from $.config.gpu.required_name"))
            matches = str(d.get("required", "")) in str(d.get("name", ""))
            if d.get("matches_required") != matches:
                problems.append((f"{path}.matches_required", f"{d.get('matches_required')} but the name test gives "
                                 f"{matches}"))
            if not matches and d.get("allow_gpu") is not True:
                problems.append((f"{path}.allow_gpu", "a GPU other than the required one without --allow-gpu"))
        if gate["name"] == "versions":
            for k, v in d.items():
                if meta.get("versions", {}).get(k) != v:
                    problems.append((f"{path}.{k}", f"{v!r} differs from $.metadata.versions.{k}"))
    per = doc["edges"]["per_pattern"]
    if set(per) != set(doc["patterns"]):
        problems.append(("$.edges.per_pattern", "names differ from $.patterns"))
    if doc["edges"]["equal"] != (len(set(per.values())) <= 1 and all(v == doc["edges"]["closed_form"]
                                                                      for v in per.values())):
        problems.append(("$.edges.equal", "does not follow from the counts"))
    add("gates_consistent", problems)


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


def metadata_plausible(doc: dict[str, Any], add: Add) -> None:
    meta = doc["metadata"]
    gpu, versions = meta.get("gpu", {}), meta.get("versions", {})
    problems: Problems = []
    name = str(gpu.get("name", ""))
    family = next((f for f in sorted(GPU_FAMILIES, key=len, reverse=True) if re.search(rf"\b{f}\b", name)), None)
    sm = gpu.get("sm_count")
    if family is None:
        problems.append(("$.metadata.gpu.name", f"{name!r} is not a known GPU family ({', '.join(GPU_FAMILIES)})"))
    if not isinstance(sm, int) or not SM_RANGE[0] <= sm <= SM_RANGE[1]:
        problems.append(("$.metadata.gpu.sm_count", f"{sm!r} is not an SM count in {SM_RANGE}"))
    elif family is not None and sm not in GPU_FAMILIES[family][0]:
        problems.append(("$.metadata.gpu.sm_count", f"{sm} SMs is not a {family} ({sorted(GPU_FAMILIES[family][0])})"))
    cc = gpu.get("compute_capability")
    if cc is not None and (not CC_RE.match(str(cc)) or (family is not None and cc != GPU_FAMILIES[family][1])):
        problems.append(("$.metadata.gpu.compute_capability", f"{cc!r} is not the compute capability of a {family}"))
    if gpu.get("nvml_name") is not None and gpu["nvml_name"] != name:
        problems.append(("$.metadata.gpu.nvml_name", f"{gpu['nvml_name']!r} differs from the CUDA name {name!r}"))
    if not DRIVER_RE.match(str(gpu.get("driver", ""))):
        problems.append(("$.metadata.gpu.driver", f"{gpu.get('driver')!r} does not parse as a driver version"))
    for key in ("python", "numpy", "torch", "triton", "cuda", "fla_core"):
        if key in versions and not VERSION_RE.match(str(versions[key])):
            problems.append((f"$.metadata.versions.{key}", f"{versions[key]!r} does not parse as a version"))
    add("metadata_plausible", problems)
