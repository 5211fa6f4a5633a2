"""The ``routing_report`` kind: the routings of a config inspected on the CPU (``routing --output``): per pattern
its edges, fan-in, CSR-row span and gap statistics, generation time; the equal-edge record; the packing. Its
builder (:func:`build`: the summaries from :func:`nsa_exp.routing.report.pattern_summaries`) and its check
(:func:`recompute`), in one module.

- ``routing_report_recompute``: every routing regenerated from the report's shape, routing seed and parameters:
  edges, fan-in, span and gap statistics, the closed form, the equal-edge record; with its embedded ``config``
  (reports written since 2026-12-04), the config's rules (``config_semantics``) and its name, shape, routing seed,
  packing and patterns (every one, with its parameters, in order) are the report's; without it, which patterns
  the config had is unverified; ``generation_s`` and the host are unverified. A routing FLA's kernels compute
  (fla-topk) is regenerated only on the GPU model that drew it (``metadata.gpu_name``, recorded since 2026-12-07;
  :func:`nsa_exp.checking.routing_checks.not_regenerated_here`); a report that names none is regenerated on any GPU.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..core.config import Config, Shape
from ..core.families import family, pattern_from_entry
from ..core.gpus import gpu_spec
from ..core.kinds import schema_version
from ..errors import UserError
from ..io.metadata import base_metadata, visible_gpu_name
from ..routing.edges import closed_form_edges
from ..routing.packing import packed_closed_form_edges, packing_record
from ..routing.report import pattern_summaries
from .checks import Add, Context, Problems, guarded
from .record_checks import PRINTABLE_ASCII, config_provenance, config_semantics, host_problems, recorded_gpu
from .routing_checks import _routing_stats, not_regenerated_here
from .sources import deep_diff

KIND = "routing_report"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def build(config: Config) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The routing report of ``config`` and its routings (pattern -> block_indices int32 ``[B,T,H,S]``); where a
    pattern's routing is drawn by FLA's kernels on the GPU (fla-topk), ``metadata.gpu_name`` names that GPU
    (:func:`nsa_exp.io.metadata.visible_gpu_name`; left out where nvidia-smi cannot say which), so that ``validate``
    regenerates it only on that model. Raises GateFailure when the routings' edges differ (the equal-edge gate)."""
    patterns, routings, gate = pattern_summaries(config)
    metadata = base_metadata(import_gpu=False)
    if any(family(p.name).external is not None for p in config.patterns) and (gpu := visible_gpu_name()):
        metadata["gpu_name"] = gpu
    report = {
        "schema_version": schema_version("routing_report"),
        "kind": "routing_report",
        "config_name": config.name,
        "config": config.raw,
        "shape": config.shape.to_dict(),
        "routing_seed": config.seeds.routing,
        "closed_form_edges": gate["closed_form"],
        "equal_edges": gate,
        "patterns": patterns,
        "metadata": metadata,
    }
    if config.cu_seqlens is not None:
        report["packing"] = packing_record(config.cu_seqlens, gate["closed_form"])
    return report, routings


def recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    shape = Shape(**doc["shape"])
    cu = tuple(doc["packing"]["cu_seqlens"]) if doc.get("packing") else None
    try:
        closed = closed_form_edges(shape) if cu is None else packed_closed_form_edges(shape.H, shape.S,
                                                                                       shape.block_size, list(cu))
    except (UserError, ValueError, TypeError) as exc:
        add("routing_report_recompute", [("$.shape", f"cannot compute the closed form: {exc}")])
        return
    if cu is not None:  # its documents, lengths, sha256 and closed form were never held to its cu_seqlens: one
        # 32,768-token document claimed over four of 8,192 PASSed (an attacker, 2026-12-07)
        deep_diff(doc["packing"], packing_record(np.asarray(cu), closed), "$.packing", problems)
    for where in ("$.closed_form_edges", "$.equal_edges.closed_form"):
        value = doc["closed_form_edges"] if where == "$.closed_form_edges" else doc["equal_edges"]["closed_form"]
        if value != closed:
            problems.append((where, f"{value}, the shape gives {closed}"))
    edges: dict[str, int] = {}
    gpu = recorded_gpu(doc)[1].get("name")  # the GPU that computed an fla-topk routing, if the report names one
    for name, p in doc["patterns"].items():
        path = f"$.patterns.{name}"
        entry = dict(p["params"])
        if entry.get("name") != name:
            problems.append((f"{path}.params.name", f"{entry.get('name')!r} is not the pattern's name {name!r}"))
        edges[name] = p["edges"]
        if p["invariant_violations"]:
            problems.append((f"{path}.invariant_violations", "a generated routing meets every invariant; the report "
                             f"lists {len(p['invariant_violations'])}"))
        row = family(entry.get("name", name))
        if row.external is not None and (why := not_regenerated_here(name, row.external, gpu)):
            ctx.unverifiable(f"{path}.edges|fanin|query_span|adjacent_gap", why)
            continue
        try:
            pattern = pattern_from_entry({**entry, "name": row.name}, f"{path}.params", shape)  # the config's rules
            stats = _routing_stats(json.dumps(pattern.to_dict(), sort_keys=True),
                                   json.dumps(shape.to_dict(), sort_keys=True), doc["routing_seed"], cu)
        except (UserError, ValueError, TypeError) as exc:
            problems.append((path, f"cannot be regenerated: {exc}"))
            continue
        if p["edges"] != stats["edges"]:
            problems.append((f"{path}.edges", f"{p['edges']}, the regenerated routing has {stats['edges']}"))
        for section in ("fanin", "query_span", "adjacent_gap"):
            deep_diff(p[section], stats[section], f"{path}.{section}", problems)
    gate = doc["equal_edges"]
    if gate["per_pattern"] != edges:
        problems.append(("$.equal_edges.per_pattern", f"{gate['per_pattern']} != the patterns' edges {edges}"))
    if gate["equal"] != all(e == closed for e in edges.values()):
        problems.append(("$.equal_edges.equal", f"{gate['equal']}, the counts give "
                         f"{all(e == closed for e in edges.values())}"))
    exempt = [n for n in doc["patterns"] if not family(doc["patterns"][n]["params"].get("name", n)).equal_edges]
    if gate.get("exempt", []) != exempt:
        problems.append(("$.equal_edges.exempt", f"{gate.get('exempt', [])}, the family table exempts {exempt}"))
    ctx.unverifiable("$.patterns.*.generation_s, $.metadata", "host facts of the run that wrote it")
    add("routing_report_recompute", problems)


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """``routing_report_recompute``, the host facts (``metadata_plausible``: with the GPU that drew a fla-topk
    routing, :func:`gpu_name_problems`), then :func:`config_matches` and ``config_provenance`` (the embedded config
    against the file its argv read, :func:`~.record_checks.config_provenance`)."""
    guarded("routing_report_recompute", add, recompute, doc, add, ctx)
    add("metadata_plausible", host_problems(doc["metadata"]) + gpu_name_problems(doc["metadata"], ctx))
    guarded("routing_report_config", add, config_matches, doc, add, ctx)
    if "config" in doc:  # the embedded config is the file its argv read (a packing rewritten in both the config and
        # the report, the argv pointed back at configs/, PASSed --strict: a re-attacker, 2026-12-07)
        guarded("config_provenance", add, config_provenance, doc, add, ctx)


def gpu_name_problems(meta: dict[str, Any], ctx: Context) -> Problems:
    """``metadata.gpu_name``, where recorded (the GPU that drew a fla-topk routing): a CUDA device name (printable
    ASCII) of a row of the GPU table, since the name chooses where the routing is regenerated (a forged name
    would otherwise send every host's regeneration elsewhere: an attacker, 2026-12-07); a name of no row is listed
    as unverified (GPU not in the table), which ``validate --strict`` fails."""
    if "gpu_name" not in meta:
        return []
    name = meta["gpu_name"]
    if not isinstance(name, str) or not PRINTABLE_ASCII.fullmatch(name) or not name.strip():
        return [("$.metadata.gpu_name", f"{name!r} is not a CUDA device name (a string of printable ASCII)")]
    if gpu_spec(name) is None:
        ctx.unverifiable("$.patterns.fla-topk", f"unverified (GPU not in the table): {name!r} is no row of "
                         "nsa_exp.core.gpus, so no host regenerates the routing it drew")
    return []


def config_matches(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """``config_semantics`` of the embedded config, then ``routing_report_config``: the report is that config's."""
    if "config" not in doc:
        ctx.unverifiable("$.patterns (which ones), $.config_name", "a report written before it embedded its config: "
                         "the config's pattern set is not recorded")
        return
    config = config_semantics(doc, add)
    if config is None:
        return
    want = {"config_name": config.name, "shape": config.shape.to_dict(), "routing_seed": config.seeds.routing,
            "patterns": [p.to_dict() for p in config.patterns],
            "cu_seqlens": None if config.cu_seqlens is None else config.cu_seqlens.tolist()}
    got = {"config_name": doc["config_name"], "shape": doc["shape"], "routing_seed": doc["routing_seed"],
           "patterns": [p["params"] for p in doc["patterns"].values()],
           "cu_seqlens": tuple(doc["packing"]["cu_seqlens"]) if doc.get("packing") else None}
    # compared as JSON text: a tuple (the config's heads) equals the report's list, and 1, 1.0 and true differ
    # (Python's == has 1 == 1.0 == True, which let a report's sinks: true pass; an attacker's trial of 2026-12-05)
    text = {k: (json.dumps(got[k], sort_keys=True, default=list), json.dumps(want[k], sort_keys=True, default=list))
            for k in want}
    add("routing_report_config", [(f"$.{k}" if k != "cu_seqlens" else "$.packing.cu_seqlens",
                                   f"{g[:200]}, its config gives {w[:200]}") for k, (g, w) in text.items() if g != w])
