"""The release result (issue 22; ``schemas/release_result.schema.json``): build it, and what ``validate`` recomputes.

A release result is NOT the pinned experiment: one FLA release or source tree timed through its public
API by the release arm (:mod:`nsa_exp.gpu.release`), at one point (T x routings) of a release config. It
is bench-shaped where it can be (``patterns.<p>.stages.<stage>.{raw_ms, warmup_ms, median_ms, ...}``,
``timing``, ``telemetry``, ``edges``, ``config``, ``metadata``), so the bench's checks apply unchanged, and
adds ``release`` (what was timed and where it came from, the sha256 of every imported FLA file),
``source`` (its ``parallel_nsa_bwd`` launches, read with :mod:`nsa_exp.release_source`) and ``kernels``
(every call's kernels from the CUPTI pass, grouped into the pinned stages by
:mod:`nsa_exp.results.release_kernels`).

:func:`release_recompute` (``validate``'s entry for ``kind: release_result``, after the schema and the
bench's ``stats_recompute`` / ``min_observations`` / ``latencies_positive_finite``) recomputes:
``config_semantics``, ``shape_matches_config``, ``pattern_set``, ``edges_equal``, ``routing_recompute``
(edges and fan-in regenerated from config + seed) and ``routing_sha256``, ``timing_recompute`` (stage list,
round orders from the seed, counts), ``telemetry_recompute``, ``kernels_recompute`` (groups, spans and
medians from the per-call kernels; the group table from the source's launches), ``gates_consistent``,
``source_consistent`` (every file the source reading hashed is an imported file with that sha256) and,
with ``release_dirs`` (``validate --release-dir``), ``release_files`` (each imported file re-hashed);
``metadata_plausible`` for a GPU run. The rest is listed as unverifiable.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .. import PINNED_COMMIT
from ..errors import UserError
from ..routing.config import Config, Pattern, Shape, config_from_dict
from ..routing.fanin import routing_statistics
from .file_checks import edge_problems
from .latency import LAUNCH_GUARD_CYCLES, PERCENTILE_METHOD, round_orders
from .recompute import _pattern_set, _routings
from .recompute_records import _guarded, _metadata, _telemetry
from .release_kernels import call_span_ms, group_table, stage_groups
from .schema import schema_version
from .summary import TIMING_METHOD, stage_summaries

STAGES = ("selection_fwd", "full_bwd", "train_step")
KERNEL_STAGES = ("full_bwd", "train_step")  # the calls whose kernels are grouped into the pinned stages
KERNEL_METHOD = ("torch.profiler (CPU + CUDA activities) after the timed rounds, L2 flushed and a GPU spin queued "
                 "before each call as in the timed rounds; each call's window runs from its range's first kernel to "
                 "the next range's, the next call's flush and spin dropped; times from CUPTI's kernel records")
Add = Callable[[str, list[tuple[str, str]]], bool]


def not_pinned(target: Mapping[str, Any]) -> str:
    what = f"fla-core {target['version']}" if target["kind"] == "release" else f"the FLA source tree {target['path']}"
    return (f"NOT the pinned experiment: {what}, timed through its public API by the release arm (issue 22). "
            f"The experiment is pinned to FLA commit {PINNED_COMMIT} (fla-core 0.5.2), which `check` proves.")


def routing_sha256(block_indices: np.ndarray) -> str:
    """sha256 of a routing as the child receives it (C-contiguous int32 bytes)."""
    return hashlib.sha256(np.ascontiguousarray(block_indices, dtype=np.int32).tobytes()).hexdigest()


def kernel_block(point: Mapping[str, Any], launched: Sequence[str]) -> dict[str, Any]:
    """The result's ``kernels`` block from the child's per-call kernels (groups and spans derived here)."""
    names, calls = point["kernel_names"], point["kernel_calls"]
    return {"method": KERNEL_METHOD, "rounds": point["cupti_rounds"], "markers": point["kernel_markers"],
            "launched": list(launched), "groups_table": group_table(launched), "names": names, "calls": calls,
            "groups": {p: {s: stage_groups(c, names, launched) for s, c in st.items() if s in KERNEL_STAGES}
                       for p, st in calls.items()},
            "span_ms": {p: {s: [round(call_span_ms(c), 6) for c in cs] for s, cs in st.items()}
                        for p, st in calls.items()}}


def build_release_result(*, name: str, target: Mapping[str, Any], source: Mapping[str, Any], config: Config,
                         release_config: Mapping[str, Any], gates: list[dict[str, Any]], routings: Mapping[str, Any],
                         child: Mapping[str, Any], point: Mapping[str, Any], metadata: Mapping[str, Any],
                         throttled: Callable[[Any], bool],
                         routing_files: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``release_result`` document of one point (pure; the parent, :mod:`nsa_exp.gpu.release_run`, writes it).
    ``routing_files``: the reports of the ``--routing-file`` s timed after the config's patterns (``file:<stem>``)."""
    files = dict(routing_files or {})
    names = [p.name for p in config.patterns] + list(files)
    edges = next(g["detail"] for g in gates if g["name"] == "equal_edges")
    stats = stage_summaries(point["records"], names, STAGES)
    patterns = {n: {"params": {"name": n} if n in files else config.pattern(n).to_dict(),
                    "edges": int(edges["per_pattern"][n]),
                    "routing_sha256": routing_sha256(routings[n]),
                    **routing_statistics(routings[n], config.shape.block_size), "stages": stats[n]} for n in names}
    launched = list(dict.fromkeys(launch["kernel"] for launch in source["launches"]))
    samples = [{"round": r["round"], "pattern": r["pattern"], "warmup": r["warmup"], **(r.get("telemetry") or {})}
               for r in point["records"]]
    fla = child["fla"]
    doc = {
        "schema_version": schema_version("release_result"), "kind": "release_result", "name": name,
        "not_pinned": not_pinned(target),
        "release": {"label": target["label"], "kind": target["kind"], "version_declared": target["version"],
                    "version_imported": fla["version_imported"], "origin": dict(target["origin"]),
                    "package_dir": fla["package_dir"], "imported_files": fla["files"],
                    "distributions": fla["distributions"], "fla_roots_on_path": fla["fla_roots_on_path"],
                    "sys_path": child["sys_path"]},
        "source": dict(source),
        "config": config.raw, "config_path": release_config["path"], "release_config": release_config["raw"],
        "shape": config.shape.to_dict(), "gates": gates, "edges": edges,
        "autotune": {"tuned_on": "local", **point["autotune"]},
        "timing": {"method": TIMING_METHOD + "; the calls are FLA's public functions (release arm)",
                   "timer": child["timer"], "warmup_rounds": config.timing.warmup_rounds,
                   "repetitions": point["repetitions"], "order_mode": config.timing.order,
                   "order_seed": config.seeds.order, "round_orders": point["round_orders"],
                   "l2_flush_bytes": config.timing.l2_flush_bytes, "flush_policy": config.timing.flush,
                   "launch_guard_cycles": LAUNCH_GUARD_CYCLES, "percentile_method": PERCENTILE_METHOD,
                   "stages": list(STAGES)},
        "patterns": patterns,
        "kernels": kernel_block(point, launched) if point["kernel_calls"] is not None else None,
        "telemetry": {"available": child["telemetry_available"], "samples": samples,
                      "throttled_samples": sum(1 for s in samples if throttled(s))},
        "memory": point["memory"], "wall_seconds": point["wall_seconds"],
        "metadata": {**metadata, "release_child": {"versions": child["versions"], "env": child["env"]}},
    }
    if files:
        doc["routing_files"] = files
    if doc["kernels"] is None:
        doc["kernels_unavailable"] = point["kernels_unavailable"] or "no CUPTI pass"
    return doc


@lru_cache(maxsize=16)
def _regenerated_sha(pattern_json: str, shape_json: str, seed: int, generate: Callable[..., np.ndarray]) -> str:
    return routing_sha256(generate(Pattern(**json.loads(pattern_json)), Shape(**json.loads(shape_json)), seed))


def _routing_sha(doc: dict[str, Any], config: Config, add: Add, generate: Any, unverified: list) -> None:
    problems = []
    shape_json = json.dumps(config.shape.to_dict(), sort_keys=True)
    for p in config.patterns:
        rec = doc["patterns"].get(p.name)
        if rec is None or generate is None:
            continue
        try:
            want = _regenerated_sha(json.dumps(p.to_dict(), sort_keys=True), shape_json, config.seeds.routing, generate)
        except (UserError, ImportError) as exc:  # fla-topk is FLA's top-k: it regenerates only on a GPU
            unverified.append({"path": f"$.patterns.{p.name}.routing_sha256", "why": str(exc)})
            continue
        if rec["routing_sha256"] != want:
            problems.append((f"$.patterns.{p.name}.routing_sha256", f"recorded {rec['routing_sha256']}, the routing "
                             f"regenerated from the config and seed {config.seeds.routing} hashes to {want}"))
    add("routing_sha256", problems)


def _timing(doc: dict[str, Any], config: Config, add: Add) -> None:
    t, ct = doc["timing"], config.timing
    problems = [(f"$.timing.{k}", f"recorded {t[k]!r}, the config/code says {want!r}") for k, want in (
        ("warmup_rounds", ct.warmup_rounds), ("order_mode", ct.order), ("order_seed", config.seeds.order),
        ("l2_flush_bytes", ct.l2_flush_bytes), ("flush_policy", ct.flush), ("stages", list(STAGES)),
        ("launch_guard_cycles", LAUNCH_GUARD_CYCLES)) if t[k] != want]
    names, reps, warm = list(doc["patterns"]), t["repetitions"], t["warmup_rounds"]
    if t["round_orders"] != round_orders(names, warm + reps, t["order_mode"], t["order_seed"]):
        problems.append(("$.timing.round_orders", f"differs from the {t['order_mode']} order of seed {t['order_seed']} "
                         f"over {warm} + {reps} rounds of {names}"))
    for name, p in doc["patterns"].items():
        if list(p["stages"]) != list(STAGES):
            problems.append((f"$.patterns.{name}.stages", f"{list(p['stages'])} is not {list(STAGES)}"))
        for stage, s in p["stages"].items():
            if len(s["raw_ms"]) != reps or len(s["warmup_ms"]) != warm:
                problems.append((f"$.patterns.{name}.stages.{stage}", f"{len(s['raw_ms'])} + {len(s['warmup_ms'])} "
                                 f"observations != repetitions {reps} + warm-up {warm}"))
    add("timing_recompute", problems)


def _kernels(doc: dict[str, Any], add: Add, warnings: list) -> None:
    k = doc["kernels"]
    if k is None:
        add("kernels_recompute", [] if doc.get("kernels_unavailable") else
            [("$.kernels_unavailable", "no kernels block and no reason")])
        return
    launched = list(dict.fromkeys(launch["kernel"] for launch in doc["source"]["launches"]))
    problems = [] if k["launched"] == launched else [("$.kernels.launched", f"{k['launched']} != the kernels the "
                                                      f"source's parallel_nsa_bwd launches {launched}")]
    if not k["markers"]["consistent"]:
        warnings.append({"check": "kernels_recompute", "path": "$.kernels.markers", "message": "a call's window did "
                         f"not end with the flush + spin sequence {k['markers']['names']}: the named kernel groups "
                         "stand, but spans and unnamed kernels may hold a neighbour's flush or spin"})
    if k["groups_table"] != group_table(launched):
        problems.append(("$.kernels.groups_table", "differs from the table the launched kernels give"))
    if set(k["calls"]) != set(doc["patterns"]):
        problems.append(("$.kernels.calls", f"patterns {sorted(k['calls'])} != {sorted(doc['patterns'])}"))
    for p, st in k["calls"].items():
        for s, calls in st.items():
            path = f"$.kernels.calls.{p}.{s}"
            if len(calls) != k["rounds"]:
                problems.append((path, f"{len(calls)} calls, but kernels.rounds = {k['rounds']}"))
            if any(not 0 <= i < len(k["names"]) for c in calls for i, _, _ in c):
                problems.append((path, "a kernel name index outside kernels.names"))
                continue
            if s in KERNEL_STAGES and k["groups"].get(p, {}).get(s) != stage_groups(calls, k["names"], launched):
                problems.append((f"$.kernels.groups.{p}.{s}", "does not recompute from the calls"))
            if k["span_ms"].get(p, {}).get(s) != [round(call_span_ms(c), 6) for c in calls]:
                problems.append((f"$.kernels.span_ms.{p}.{s}", "does not recompute from the calls"))
    add("kernels_recompute", problems)


def _gates(doc: dict[str, Any], add: Add) -> None:
    problems, meta = [], doc["metadata"]
    for i, gate in enumerate(doc["gates"]):
        d = gate.get("detail", {})
        if gate["name"] == "equal_edges" and d != doc["edges"]:
            problems.append((f"$.gates[{i}].detail", "differs from $.edges"))
        if gate["name"] == "fla_sources" and d.get("commit") != PINNED_COMMIT:
            problems.append((f"$.gates[{i}].detail.commit", "the parent's FLA is not the pinned commit"))
        if gate["name"] == "gpu" and d.get("name") != meta.get("gpu", {}).get("name"):
            problems.append((f"$.gates[{i}].detail.name", "differs from $.metadata.gpu.name"))
        if gate["name"] == "versions" and any(meta["versions"].get(k) != v for k, v in d.items()):
            problems.append((f"$.gates[{i}].detail", "differs from $.metadata.versions"))
    want = "gpu" if doc["timing"]["timer"] == "cuda-events" else "interpreter"
    if not any(g["name"] == want for g in doc["gates"]):
        problems.append(("$.gates", f"no {want} gate for a {doc['timing']['timer']} run"))
    roots = doc["release"]["fla_roots_on_path"]
    if len(roots) != 1 or len(doc["release"]["distributions"]) > 1:
        problems.append(("$.release.fla_roots_on_path", f"the child saw {len(roots)} fla packages and "
                         f"{len(doc['release']['distributions'])} distributions (must be one and at most one)"))
    add("gates_consistent", problems)


def _source_and_files(doc: dict[str, Any], add: Add, release_dirs: Sequence[str], unverified: list) -> None:
    files = doc["release"]["imported_files"]
    add("source_consistent", [(f"$.source.files.{rel}", f"sha256 {sha} is not the imported file's ({files.get(rel)})")
                              for rel, sha in doc["source"]["files"].items() if files.get(rel) != sha])
    init = files.get("fla/__init__.py")
    roots = [Path(d) for d in release_dirs if (Path(d) / "fla" / "__init__.py").is_file()
             and hashlib.sha256((Path(d) / "fla" / "__init__.py").read_bytes()).hexdigest() == init]
    if not roots:  # a supplied folder whose fla/__init__.py is another release's belongs to another result
        unverified.append({"path": "$.release.imported_files", "why": "unverified (release folder not supplied): "
                           "pass the folder holding its fla/ with validate --release-dir DIR"})
        return
    problems = []
    for rel, sha in files.items():
        hit = next((r / rel for r in roots if (r / rel).is_file()), None)
        if hit is None:
            problems.append((f"$.release.imported_files.{rel}", "not in the supplied release folder"))
        elif hashlib.sha256(hit.read_bytes()).hexdigest() != sha:
            problems.append((f"$.release.imported_files.{rel}", f"{hit} hashes differently"))
    add("release_files", problems)


def release_recompute(doc: dict[str, Any], add: Add, generate: Callable[..., np.ndarray] | None,
                      release_dirs: Sequence[str] = ()) -> dict[str, list]:
    """Every recompute check of a schema-valid release result (module doc); returns ``{"unverified", "warnings"}``."""
    unverified: list[dict[str, str]] = []
    warnings: list[dict[str, str]] = []
    try:
        config = config_from_dict(doc["config"], source="$.config")
    except UserError as exc:
        add("config_semantics", [("$.config", str(exc))])
        config = None
    else:
        add("config_semantics", [])
    add("shape_matches_config", [] if doc["shape"] == doc["config"].get("shape") else
        [("$.shape", "differs from config.shape")])
    add("edges_equal", edge_problems(doc))
    if config is not None:
        _guarded("pattern_set", add, _pattern_set, doc, config, add)
        _guarded("routing_recompute", add, _routings, doc, config, add, generate, unverified)
        _guarded("routing_sha256", add, _routing_sha, doc, config, add, generate, unverified)
        _guarded("timing_recompute", add, _timing, doc, config, add)
    _guarded("telemetry_recompute", add, _telemetry, doc, add, warnings, unverified)
    _guarded("kernels_recompute", add, _kernels, doc, add, warnings)
    _guarded("gates_consistent", add, _gates, doc, add)
    _guarded("source_consistent", add, _source_and_files, doc, add, release_dirs, unverified)
    if doc["timing"]["timer"] == "cuda-events":
        _guarded("metadata_plausible", add, _metadata, doc, add)
    else:
        warnings.append({"check": "timer", "path": "$.timing.timer", "message": "host-clock: a CPU run through "
                         "Triton's interpreter, not a GPU measurement (its latencies say nothing about FLA's speed)"})
    unverified += [
        {"path": "$.patterns.*.stages.*.raw_ms|warmup_ms", "why": "measured latencies (statistics recomputed)"},
        {"path": "$.kernels.calls", "why": "CUPTI kernel records from the GPU host (groups and spans recomputed)"},
        {"path": "$.autotune", "why": "autotune choices and tune time come from the run"},
        {"path": "$.memory", "why": "free/total GPU memory read on the host"},
        {"path": "$.source", "why": "read from the release's source; its files' hashes are cross-checked"},
        {"path": "$.release.origin", "why": "where the release came from (wheel sha256, git describe) as recorded"},
        {"path": "$.wall_seconds|$.metadata", "why": "host facts"}]
    return {"unverified": unverified, "warnings": warnings}
