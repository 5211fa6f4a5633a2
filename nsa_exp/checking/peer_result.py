"""The ``peer_result`` kind (issue 31): FLA's ``parallel_nsa``, FlexAttention and dense causal attention on the same
routings, inputs and protocol (``peer-bench``, :mod:`nsa_exp.gpu.peers`). Its builder (:func:`build`) and its
checks (:func:`checks`), in one module.

- ``peer_recompute``: the document rebuilt from what it records and diffed field by field
  (:func:`nsa_exp.checking.sources.deep_diff`): every routing regenerated from the config (sha256, tile-shared or
  not, the score pairs of :func:`nsa_exp.routing.block_mask.score_pairs`; fla-topk only where a GPU is visible), every
  cell's statistics from its observations, the summary (:func:`nsa_exp.analysis.peers.peer_summary`: medians,
  bootstrap CIs, penalties, ratios to dense, extra work, the fastest), the round orders from the config's seed, the
  cells each peer must have (a tile-shared-only peer on every tile-shared routing, every peer on every routing
  unless it failed the oracle), the oracle's failures from its metrics and the config's tolerances.
- ``autotune_configs``: every FLA config recorded is one of FLA's (after its pruning).
- the run record every GPU document gets (:func:`nsa_exp.checking.record_checks.run_record`), the config's rules.
- unverified: the observations and the oracle's metrics themselves (measured on the GPU host).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from ..analysis.cupti import METHOD_MARKED, cupti_problems, shift_problems
from ..analysis.peers import peer_summary
from ..analysis.reproduction import judge_naive
from ..analysis.stop_rule import DEFAULT_RULE
from ..core.config import Config, Pattern, Shape
from ..core.families import TUNE_PATTERN, family
from ..core.gpus import gpu_spec
from ..core.kinds import schema_version
from ..core.measurement import Measurement
from ..core.peers import (
    DENSE_CELL,
    NOT_TILE_SHARED,
    NOT_TIMED,
    NOT_TIMED_EARLIER,
    PEER_NAMES,
    PEER_STAGES,
    cell_name,
    peer,
    skip_reason,
)
from ..core.protocol import LAUNCH_GUARD_CYCLES, PERCENTILE_METHOD, TIMING_METHOD, round_orders
from ..core.records import StageStats
from ..errors import UserError
from ..io.config_files import config_from_dict
from ..io.memo import memoised
from ..routing.block_mask import is_tile_shared, score_pairs
from ..routing.facts import drawing_gpu
from ..routing.patterns import generate_routing, routing_sha256
from .autotune_checks import autotune_configs
from .bench_result import cupti_size_problems, phases_problems
from .checks import Add, Context, Problems, guarded
from .record_checks import (
    argv_option,
    config_provenance,
    config_semantics,
    document_argv,
    gpu_run,
    recorded_cli_argv,
    recorded_gpu,
    run_record,
    unpassed_gates,
    wall_plausible,
)
from .routing_checks import not_regenerated_here
from .sources import deep_diff
from .stats_checks import stop_rule_problems

KIND = "peer_result"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS

#: Every peer result says what it is.
PEERS_LABEL = ("PEERS: FLA's parallel_nsa, FlexAttention and dense causal SDPA on the experiment's routings and "
               "inputs, each through its public API")


def routing_facts(routing: np.ndarray, block_size: int) -> dict[str, Any]:
    """A routing's record: sha256, tile-shared or not, its score pairs per way of computing it."""
    return {"sha256": routing_sha256(routing), "tile_shared": is_tile_shared(routing, block_size),
            "work": score_pairs(routing, block_size)}


@lru_cache(maxsize=256)
@memoised
def _regenerated_facts(pattern_json: str, shape_json: str, seed: int, gpu: str | None) -> dict[str, Any]:
    """:func:`routing_facts` of one routing regenerated from its pattern, shape and seed (cached like
    :func:`nsa_exp.checking.routing_checks._routing_stats`: the committed peer results share their routings, and a
    report validates them all; each T=32768 routing takes ~0.5 s to regenerate and inspect; kept on disk too when
    ``NSA_EXP_MEMO_DIR`` is set, :mod:`nsa_exp.io.memo`). ``gpu``: the GPU model a routing FLA's kernels compute
    is drawn on (:func:`nsa_exp.routing.facts.drawing_gpu`; part of the question only)."""
    shape = Shape(**json.loads(shape_json))
    return routing_facts(generate_routing(Pattern(**json.loads(pattern_json)), shape, seed), shape.block_size)


def regenerated_facts(pattern: Pattern, shape: Shape, seed: int) -> dict[str, Any]:
    """``routing_facts(generate_routing(pattern, shape, seed), shape.block_size)``, each routing computed once per
    process (a copy: the caller may change it); a routing FLA's kernels compute (fla-topk), once per GPU model."""
    return copy.deepcopy(_regenerated_facts(json.dumps(pattern.to_dict(), sort_keys=True),
                                            json.dumps(shape.to_dict(), sort_keys=True), seed, drawing_gpu(pattern)))


def _cells(measurement_stats: Mapping[str, Mapping[str, StageStats]],
           cells: Mapping[str, tuple[str | None, str]]) -> dict[str, Any]:
    return {c: {"routing": r, "peer": p, "stages": {s: measurement_stats[c][s].to_json() for s in PEER_STAGES}}
            for c, (r, p) in cells.items()}


def _peers(peers: list[str], backends: Mapping[str, str | None], skipped: Mapping[str, Mapping[str, str]],
           cells: Mapping[str, tuple[str | None, str]]) -> dict[str, Any]:
    out = {}
    for name in peers:
        row = peer(name)
        out[name] = {"title": row.title, "calls": row.calls, "work": row.work, "backend": backends.get(name),
                     "cells": [c for c, (_, p) in cells.items() if p == name], "skipped": dict(skipped.get(name, {}))}
    return out


def build(*, config: Config, gates: list[dict[str, Any]], routings: Mapping[str, dict[str, Any]],
          peers: list[str], cells: Mapping[str, tuple[str | None, str]],
          backends: Mapping[str, str | None], skipped: Mapping[str, Mapping[str, str]], oracle: dict[str, Any],
          autotune: dict[str, Any], measurement: Measurement, metadata: dict[str, Any], wall_seconds: float,
          phases: dict[str, float], cupti: dict[str, Any] | None = None,
          memory: Mapping[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """The peer result: ``routings`` (``{name: its routing_facts}``, :func:`routing_facts`), the timed ``cells``
    (``{cell: (routing or None, peer)}``) and the ``measurement`` of their rounds; ``skipped``: per peer, the
    routings it was not timed on and why; ``oracle``: :func:`nsa_exp.gpu.peers.oracle_check`'s record;
    ``autotune``: the configs FLA's autotuners chose (tuned afresh on ``local`` at this shape,
    ``{"tuned_on", "kernels"}``); ``cupti``: the CUPTI pass's block over the cells
    (:func:`nsa_exp.analysis.cupti.cupti_block`; None: no pass); ``memory``: per cell, the bytes one forward +
    backward allocates (:func:`nsa_exp.gpu.peers.peak_memory`)."""
    cells_json = _cells(measurement.stage_stats(list(cells), PEER_STAGES), cells)
    return {"schema_version": schema_version("peer_result"), "kind": "peer_result", "label": PEERS_LABEL,
            "name": config.name, "config": config.raw, "config_path": str(config.source),
            "shape": config.shape.to_dict(), "gates": gates, "routings": dict(routings),
            "peers": _peers(peers, backends, skipped, cells), "not_timed": dict(NOT_TIMED), "oracle": oracle,
            "autotune": autotune,
            "cells": cells_json, "summary": peer_summary(cells_json, routings),
            "timing": measurement.timing(PEER_STAGES).to_json(), "metadata": metadata,
            "wall_seconds": wall_seconds, "phases": phases,
            **({} if cupti is None else {"cupti": cupti}), **({} if memory is None else {"memory": dict(memory)})}


def as_bench_view(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with its cells as bench's ``patterns`` (each cell a "pattern" of the round loop, with the same
    ``stages`` records), so the round loop's shared checks -- the stop rule's trace, the CUPTI agreement -- read it
    as they read a bench result."""
    return {**doc, "patterns": doc["cells"]}


def output_numel(shape: Any) -> dict[str, int]:
    """Elements of O ``[B, T, HQ, V]``, dQ ``[B, T, HQ, K]``, dK ``[B, T, H, K]`` and dV ``[B, T, H, V]`` at
    ``shape`` (a :class:`~nsa_exp.core.config.Shape`)."""
    bt = shape.B * shape.T
    return {"o": bt * shape.HQ * shape.V, "dq": bt * shape.HQ * shape.K, "dk": bt * shape.H * shape.K,
            "dv": bt * shape.H * shape.V}


def output_bytes(shape: Any) -> int:
    """Bytes of :func:`output_numel`'s O, dQ, dK and dV at ``shape`` (2 bytes each in bf16/fp16, 4 in fp32): alive
    together when ``autograd.grad`` of a forward returns."""
    return (4 if shape.dtype == "float32" else 2) * sum(output_numel(shape).values())


#: The least a profiled call's event median may be of the same cell and stage's timed median: the profiler's pass runs
#: the same loop (flush, spin, events) and slows calls, never speeds them up (H200: 0.981-1.124 over 26 cells).
MIN_PROFILER_SHIFT = 0.95
#: The most: the profiler's own overhead per call (H200: at most 1.124 over 26 cells at T=8192-131072); a timed
#: median far below its profiled calls' is timed faster than its own kernels ran.
MAX_PROFILER_SHIFT = 1.5


def marked_cupti_problems(doc: dict[str, Any]) -> Problems:
    """Bench's CUPTI agreement on the cells, for the peer arm's marked pass
    (:data:`~nsa_exp.analysis.cupti.METHOD_MARKED`: each range bounded by empty spins, so a backward that autograd's
    device thread launches is inside it; its sizing rule the code's and its rounds the recorded argv's, as bench's), no
    profiled call of a GPU run without kernel time, and each profiled event median within
    [:data:`MIN_PROFILER_SHIFT`, :data:`MAX_PROFILER_SHIFT`] of its timed median."""
    problems = cupti_problems(doc, METHOD_MARKED) + cupti_size_problems(doc)
    zero = [(cell, stage) for cell, by in doc["cupti"].get("kernel_ms", {}).items() for stage, calls in by.items()
            if any(not x > 0 for x in calls)]
    if zero and gpu_run(doc):
        problems.append((f"$.cupti.kernel_ms.{zero[0][0]}.{zero[0][1]}", "a profiled call with no kernel time: every "
                         "peer stage launches kernels, so each call's device activity is positive"))
    problems += shift_problems(doc, (MIN_PROFILER_SHIFT, MAX_PROFILER_SHIFT), "$.cells.{cell}.stages.{stage}.median_ms")
    return problems


def _add_problems(add: Add, name: str, problems: Callable[[dict[str, Any]], Problems], doc: dict[str, Any]) -> None:
    add(name, problems(doc))


def memory_problems(doc: dict[str, Any]) -> Problems:
    """The memory block: present in a GPU run with a CUPTI block; one record per timed cell; on a GPU each cell's
    peak above its baseline at least the forward + backward's outputs (:func:`output_bytes`), its baseline at least
    the peer's own q, k, v, dO (the same shapes, so the same bytes), its peak at most the GPU's memory, and the
    recorded difference the peak minus the baseline."""
    memory, gpu, problems = doc.get("memory"), gpu_run(doc), []
    if memory is None:  # the arm that profiles kernels (a cupti block) also reads memory: both came in one version
        return ([("$.memory", "missing: a GPU run with a cupti block records each cell's memory")]
            if gpu and "cupti" in doc else [])
    tensors = output_bytes(_config(doc).shape)  # O, dQ, dK, dV; and q, k, v, dO, of the same shapes
    total = (doc["metadata"].get("gpu") or {}).get("total_memory_bytes")
    if set(memory) != set(doc["cells"]):
        return [("$.memory", f"cells {sorted(memory)} are not the timed cells {sorted(doc['cells'])}")]
    for cell, m in memory.items():
        path = f"$.memory.{cell}"
        if m["peak_minus_baseline_bytes"] != m["peak_allocated_bytes"] - m["baseline_allocated_bytes"]:
            problems.append((f"{path}.peak_minus_baseline_bytes", "is not peak_allocated_bytes - "
                             "baseline_allocated_bytes"))
        elif gpu and m["peak_minus_baseline_bytes"] < tensors:
            problems.append((f"{path}.peak_minus_baseline_bytes", f"{m['peak_minus_baseline_bytes']} bytes, fewer "
                             f"than O, dQ, dK and dV take ({tensors})"))
        elif total and m["peak_allocated_bytes"] > total:
            problems.append((f"{path}.peak_allocated_bytes", f"{m['peak_allocated_bytes']} bytes, more than the GPU "
                             f"holds ($.metadata.gpu.total_memory_bytes {total})"))
        elif gpu and m["baseline_allocated_bytes"] < tensors:
            problems.append((f"{path}.baseline_allocated_bytes", f"{m['baseline_allocated_bytes']} bytes, fewer than "
                             f"the peer's q, k, v and dO ({tensors})"))
    return problems


def _config(doc: dict[str, Any]) -> Config:
    return config_from_dict(json.loads(json.dumps(doc["config"])), source=doc.get("config_path", "<recorded>"))


def peer_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """The document rebuilt from its config, observations and oracle metrics, diffed (module docstring)."""
    problems: Problems = []
    try:
        config = _config(doc)
    except UserError as exc:
        add("peer_recompute", [("$.config", str(exc))])
        return
    shape, gpu = config.shape, gpu_run(doc)
    if doc["shape"] != shape.to_dict():
        problems.append(("$.shape", "differs from $.config.shape"))
    problems += _record_problems(doc, config)
    names = [p.name for p in config.patterns]
    if list(doc["routings"]) != names:
        problems.append(("$.routings", f"{list(doc['routings'])} are not the config's patterns {names}"))
    for p in config.patterns:
        if p.name not in doc["routings"]:
            continue
        external = family(p.name).external  # fla-topk: regenerated only on the GPU model that drew it
        if external is not None and (why := not_regenerated_here(p.name, external, recorded_gpu(doc)[1].get("name"))):
            ctx.unverifiable(f"$.routings.{p.name}", why)
            continue
        if shape.B * shape.H * shape.T * shape.num_blocks > MAX_BITMAP:
            ctx.unverifiable(f"$.routings.{p.name}", f"a [B, H, T, M] selection bitmap of {shape.B * shape.H * shape.T}"
                             f" x {shape.num_blocks} entries: too large to regenerate here")
            continue
        try:
            want = regenerated_facts(p, shape, config.seeds.routing)
        except (UserError, ImportError) as exc:  # fla-topk where this process cannot import the GPU tier
            if external is None:
                raise
            ctx.unverifiable(f"$.routings.{p.name}", str(exc))
            continue
        deep_diff(doc["routings"][p.name], want, f"$.routings.{p.name}", problems)
    # the cells each peer must have, and why the others are not there (the arm's rule, core.peers.skip_reason)
    failures = doc["oracle"]["failures"]
    want_cells: dict[str, tuple[str | None, str]] = {}
    want_skipped: dict[str, dict[str, str]] = {}
    oracle_cells: set[str] = set()
    for name in doc["peers"]:
        row = peer(name, "$.peers")
        for r in [None] if row.routing_free else names:
            cell = cell_name(r or "", name)
            shared = r is None or doc["routings"].get(r, {}).get("tile_shared", False)
            why = skip_reason(name, r, shared, failures)
            if why != NOT_TILE_SHARED:
                oracle_cells.add(cell)
            if why is None and cell not in doc["oracle"]["results"] and not gpu:
                why = "not checked against the oracle"   # the interpreter's small oracle; a GPU run checks every cell
            if why is None:
                want_cells[cell] = (r, name)
            else:
                want_skipped.setdefault(name, {})[r or DENSE_CELL] = why
    got_cells = {c: (v["routing"], v["peer"]) for c, v in doc["cells"].items()}
    if got_cells != want_cells:
        problems.append(("$.cells", f"cells {sorted(got_cells)} are not the ones the peers, routings and oracle "
                         f"allow: {sorted(want_cells)}"))
    for name, rec in doc["peers"].items():
        row = peer(name, "$.peers")
        if rec["skipped"] != want_skipped.get(name, {}):
            problems.append((f"$.peers.{name}.skipped", f"{rec['skipped']}, the routings it was not timed on and why "
                             f"are {want_skipped.get(name, {})}"))
        if rec["cells"] != [c for c, (_, p) in want_cells.items() if p == name]:
            problems.append((f"$.peers.{name}.cells", "are not its cells in $.cells"))
        if {k: rec[k] for k in ("title", "calls", "work")} != {"title": row.title, "calls": row.calls,
                                                                 "work": row.work}:
            problems.append((f"$.peers.{name}", "its title, calls or work differ from the peer table's"))
        if gpu and rec["cells"] and rec["backend"] != ("CUDNN_ATTENTION" if row.routing_free else None):
            problems.append((f"$.peers.{name}.backend", f"{rec['backend']!r}: on a GPU dense attention runs under "
                             "CUDNN_ATTENTION (FLASH and EFFICIENT refuse head dims 192/128), the others name none"))
    # statistics, summary, round orders
    for cell, c in doc["cells"].items():
        for stage, s in c["stages"].items():
            want_s = StageStats.of(s["raw_ms"], s["warmup_ms"]).to_json()
            deep_diff(s, want_s, f"$.cells.{cell}.stages.{stage}", problems)
    if not problems:
        deep_diff(doc["summary"], peer_summary(doc["cells"], doc["routings"]), "$.summary", problems)
    problems += _round_problems(doc, config, ctx)
    t = doc["timing"]
    planned: tuple[tuple[str, Any], ...] = (
        ("warmup_rounds", config.timing.warmup_rounds), ("order_mode", config.timing.order),
        ("order_seed", config.seeds.order), ("percentile_method", PERCENTILE_METHOD), ("method", TIMING_METHOD),
        ("launch_guard_cycles", LAUNCH_GUARD_CYCLES),
        ("l2_flush_bytes", config.timing.l2_flush_bytes), ("stages", list(PEER_STAGES)),
        ("flush_policy", config.timing.flush))
    for key, value in planned:
        if t.get(key) != value:
            problems.append((f"$.timing.{key}", f"recorded {t.get(key)!r}, the config/code says {value!r}"))
    # the oracle: tolerances the config's, failures what its metrics give
    o, tol = doc["oracle"], config.tolerances
    if o["tolerances"] != {"rel_l2": tol.naive_rel_l2, "max_abs_rel": tol.naive_max_abs_rel}:
        problems.append(("$.oracle.tolerances", "are not the config's naive_rel_l2 / naive_max_abs_rel"))
    if config.smoke_oracle is not None and o["shape"] != config.smoke_oracle.to_dict():
        problems.append(("$.oracle.shape", "is not the config's smoke.oracle shape"))
    want_fail = {c: f for c, m in o["results"].items()
                 if (f := judge_naive(m, tol.naive_rel_l2, tol.naive_max_abs_rel, label=c))}
    deep_diff(o["failures"], want_fail, "$.oracle.failures", problems)
    problems += oracle_metric_problems(o)
    refs: dict[tuple[str, str], set[float]] = {}
    for c, by in o["results"].items():
        if c != DENSE_CELL:   # cell_name's "routing|peer"
            for t, m in by.items():
                refs.setdefault((c.partition("|")[0], t), set()).add(m["ref_max_abs"])
    problems += [(f"$.oracle.results.*.{t}.ref_max_abs", f"{sorted(v)}: the peers on routing {r} are checked "
                  "against one reference (one per routing), so one value")
                 for (r, t), v in refs.items() if len(v) > 1][:1]
    partial = [c for c, m in o["results"].items() if gpu and set(m) != {"o", "dq", "dk", "dv"}]
    if partial:
        problems.append((f"$.oracle.results.{partial[0]}", "a GPU run checks O, dQ, dK and dV of every cell"))
    stray = [c for c in o["results"] if c not in oracle_cells]
    if stray:
        problems.append((f"$.oracle.results.{stray[0]}", "is not a cell of these peers and routings"))
    untested = [c for c in doc["cells"] if c not in o["results"]]
    if untested:
        problems.append(("$.oracle.results", f"cells {untested} were timed without an oracle check"))
    if doc["not_timed"] != NOT_TIMED and doc["not_timed"] not in NOT_TIMED_EARLIER:
        problems.append(("$.not_timed", "differs from the peer table's list (core.peers.NOT_TIMED, or an earlier "
                                        "version's in NOT_TIMED_EARLIER)"))
    add("peer_recompute", problems)


def oracle_metric_problems(oracle: Mapping[str, Any]) -> Problems:
    """Each oracle metric against the others and the oracle's shape: ``numel`` the tensor's element count
    (:func:`output_numel`), ``max_abs_rel = max_abs / ref_max_abs``
    (relative 1e-6), and ``max_abs_rel / sqrt(numel) <= rel_l2 <= sqrt(numel) * max_abs_rel`` (the L2 norm of n values
    lies between their largest magnitude and sqrt(n) times it; 1e-6 relative room).

    >>> sh = {"B": 1, "T": 2, "HQ": 2, "H": 1, "K": 3, "V": 1, "S": 1, "block_size": 1, "dtype": "float16"}
    >>> ok = {"rel_l2": 0.1, "max_abs": 0.2, "ref_max_abs": 2.0, "max_abs_rel": 0.1, "numel": 4}
    >>> oracle_metric_problems({"shape": sh, "results": {"c": {"o": ok}}})
    []
    >>> oracle_metric_problems({"shape": sh, "results": {"c": {"o": {**ok, "max_abs_rel": 0.01}}}})[0][0]
    '$.oracle.results.c.o.max_abs_rel'
    """
    numel = output_numel(Shape(**oracle["shape"]))
    problems: Problems = []
    for c, by in oracle["results"].items():
        for t, m in by.items():
            path = f"$.oracle.results.{c}.{t}"
            if t in numel and m["numel"] != numel[t]:
                problems.append((f"{path}.numel", f"{m['numel']}, but {t} has {numel[t]} elements at the oracle's "
                                 "shape"))
            elif m["ref_max_abs"] <= 0 or abs(m["max_abs_rel"] * m["ref_max_abs"] - m["max_abs"]) > 1e-6 * m["max_abs"]:
                problems.append((f"{path}.max_abs_rel", f"{m['max_abs_rel']}, but max_abs / ref_max_abs = "
                                 f"{m['max_abs']} / {m['ref_max_abs']}"))
            elif not (m["max_abs_rel"] / math.sqrt(m["numel"]) * (1 - 1e-6) <= m["rel_l2"]
                      <= math.sqrt(m["numel"]) * m["max_abs_rel"] * (1 + 1e-6)):
                problems.append((f"{path}.rel_l2", f"{m['rel_l2']}: the L2 error of {m['numel']} values lies "
                                 f"between max_abs_rel / sqrt(numel) and sqrt(numel) x max_abs_rel"))
    return problems


def _round_problems(doc: dict[str, Any], config: Config, ctx: Context | None = None) -> Problems:
    """Every cell's observations against the rounds that ran and the round orders against the seeded plan: all
    rounds for every cell without a stop rule; under one, each cell's timed rounds its trace's (the verdict rule
    drops converged cells) and the stop rule's trace, decisions and cut orders recomputed by the shared check
    (:func:`nsa_exp.checking.stats_checks.stop_rule_problems` on :func:`as_bench_view`)."""
    problems: Problems = []
    t = doc["timing"]
    reps, warm, stop = t["repetitions"], t["warmup_rounds"], t.get("stop")
    verdict = stop is not None and stop.get("rule", {}).get("floor_fraction") is not None
    want_n = {c: (stop.get("cell_rounds") or {}).get(c) if verdict else reps for c in doc["cells"]}
    short = [c for c, v in doc["cells"].items() for s in v["stages"].values()
             if len(s["raw_ms"]) != want_n[c] or len(s["warmup_ms"]) != warm]
    if short or len(t["round_orders"]) != warm + reps:
        return [(f"$.cells.{short[0]}" if short else "$.timing.round_orders",
                 f"observations or rounds != the {warm} warm-up and {reps} timed rounds")]
    planned = round_orders(list(doc["cells"]), warm + (reps if stop is None else stop["max_rounds"]), t["order_mode"],
                           config.seeds.order)
    got = t["round_orders"] if not verdict else t["round_orders"][:warm]
    if got != planned[:len(got)]:
        problems.append(("$.timing.round_orders", f"differ from the {t['order_mode']} order of seed "
                         f"{config.seeds.order} over the cells"))
    return problems + (stop_rule_problems(as_bench_view(doc), ctx) or [])


#: The most [B, H, T, M] selection-bitmap entries validate regenerates a routing's facts with (1 GiB of bools).
MAX_BITMAP = 1 << 30



def _record_problems(doc: dict[str, Any], config: Config) -> Problems:
    """What the document's own record and argv fix: its name (the config's), its label, every gate passed, the
    equal-edge gate's counts = the routings' edges, the rounds (the config's, or argv's ``--repetitions``), the
    peers (argv's ``--peers``, else every peer), FLA's autotune tuned on ``local``, each routing's work invariants
    (FLA's = edges x BS, dense's the shape's closed form, FLA's <= a block mask's <= dense's, and a block mask's =
    FLA's exactly when the routing is tile-shared: checked for an fla-topk routing too)."""
    problems: Problems = []
    from_cli = recorded_cli_argv(doc) is not None  # argv is the CLI's: its options are the run's
    argv = document_argv(doc)
    if doc["name"] != config.name:
        problems.append(("$.name", f"{doc['name']!r}, but its config is {config.name!r}"))
    if doc["label"] != PEERS_LABEL:
        problems.append(("$.label", "is not the label peer-bench writes"))
    problems += unpassed_gates(doc, "nothing is timed after a failed gate")[:1]
    edges = next((g.get("detail", {}).get("per_pattern") for g in doc["gates"] if g.get("name") == "equal_edges"), None)
    if edges is not None and edges != {n: r["work"]["edges"] for n, r in doc["routings"].items()}:
        problems.append(("$.gates", "the equal_edges gate's counts differ from $.routings.*.work.edges"))
    given = argv_option(argv, "--repetitions")
    want_reps = int(given) if given is not None and given.isdigit() else config.timing.repetitions
    stop = doc["timing"].get("stop")
    planned = doc["timing"]["repetitions"] if stop is None else stop.get("max_rounds")
    if planned != want_reps:
        problems.append(("$.timing.stop.max_rounds" if stop else "$.timing.repetitions", f"{planned}, but the config "
                         f"and argv ask {want_reps} timed rounds"))
    from_flag = stop is not None and stop.get("source") == "--stop-rule"
    if from_flag and from_cli and "--stop-rule" not in argv:
        problems.append(("$.timing.stop.source", "--stop-rule, but the recorded argv has no --stop-rule"))
    if from_flag and stop.get("rule") != DEFAULT_RULE.to_dict():
        problems.append(("$.timing.stop.rule", f"{stop.get('rule')}: peer-bench --stop-rule (a config without "
                         f"timing.stop) times under the default rule {DEFAULT_RULE.to_dict()}"))
    peers_arg = argv_option(argv, "--peers")
    want_peers = [p.strip() for p in peers_arg.split(",")] if peers_arg else list(PEER_NAMES)
    if from_cli and list(doc["peers"]) != want_peers:
        problems.append(("$.peers", f"{list(doc['peers'])}, but the recorded argv asks {want_peers}"))
    tuned = doc.get("autotune", {}).get("tuned_on")
    if tuned is not None and tuned != TUNE_PATTERN:
        problems.append(("$.autotune.tuned_on", f"{tuned!r}: peer-bench tunes FLA on {TUNE_PATTERN!r}"))
    sh, BS = config.shape, config.shape.block_size
    dense = sh.B * sh.H * BS * BS * sh.num_blocks * (sh.num_blocks + 1) // 2
    for n, r in doc["routings"].items():
        w, path = r["work"], f"$.routings.{n}.work"
        if w["fla"] != w["edges"] * BS or w["dense"] != dense or not w["fla"] <= w["block_mask"] <= w["dense"]:
            problems.append((path, f"{w}: FLA's = edges x {BS}, dense's = {dense} at this shape, FLA's <= a block "
                             "mask's <= dense's"))
        elif (w["block_mask"] == w["fla"]) != r["tile_shared"]:
            problems.append((f"$.routings.{n}.tile_shared", f"{r['tile_shared']}, but a block mask computes "
                             f"{'exactly' if w['block_mask'] == w['fla'] else 'more than'} FLA's pairs"))
    return problems


#: Matmul FLOPs per score pair and query head, at least, of each peer stage, in units of ``K + V``: a forward
#: computes ``S = Q K^T`` (2K) and ``P V`` (2V); a backward at least ``dV = P^T dO`` (2V), ``dP = dO V^T`` (2V),
#: ``dQ = dS K`` (2K) and ``dK = dS^T Q`` (2K), whether or not it recomputes ``S`` (FlashAttention-2, Dao 2023, §3.1).
MIN_FLOPS_PER_PAIR = {"fwd": 2, "bwd": 4, "fwd_bwd": 6}
#: The datasheet's dense BF16 peak is at the boost clock (1,830 MHz on H100/H200 SXM); the SM clock may run up to
#: 1,980 MHz there, so a median may imply up to 1980/1830 = 1.08 x the datasheet's peak: 1.1 x is allowed.
PEAK_ALLOWANCE = 1.1


def min_flops(doc: dict[str, Any], cell: Mapping[str, Any], stage: str) -> float:
    """The fewest matmul FLOPs one call of ``stage`` in ``cell`` can do (:data:`MIN_FLOPS_PER_PAIR` x (K + V) x the
    score pairs x G query heads per KV head): dense SDPA the causal pairs ``B * H * T (T + 1) / 2`` (its tiles hold at
    least those), a sparse peer the routing's ``edges * BS`` (FLA's pairs, which a block mask's contain).

    >>> doc = {"config": {"shape": {"B": 1, "T": 4, "H": 1, "HQ": 2, "K": 3, "V": 1}},
    ...        "routings": {"r": {"work": {"fla": 5}}}}
    >>> dense, fla = {"peer": "sdpa-dense", "routing": None}, {"peer": "fla", "routing": "r"}
    >>> min_flops(doc, dense, "fwd"), min_flops(doc, fla, "bwd")
    (160.0, 160.0)
    """
    sh = doc["config"]["shape"]
    dense = peer(cell["peer"]).work == "dense"
    pairs = (sh["B"] * sh["H"] * sh["T"] * (sh["T"] + 1) // 2 if dense
             else doc["routings"][cell["routing"]]["work"]["fla"])
    return float(MIN_FLOPS_PER_PAIR[stage] * (sh["K"] + sh["V"]) * pairs * (sh["HQ"] // sh["H"]))


def bf16_peak_tflops(doc: dict[str, Any]) -> float | None:
    """The recorded GPU's dense BF16 peak from the GPU table (:mod:`nsa_exp.core.gpus`); None: unknown or no peak."""
    spec = gpu_spec((doc["metadata"].get("gpu") or {}).get("name"))
    return None if spec is None else spec.peak_bf16_tflops


def flop_rate_problems(doc: dict[str, Any]) -> Problems:
    """On a GPU of the GPU table with a BF16 peak: no cell's median implies more than :data:`PEAK_ALLOWANCE` x that
    peak (:func:`min_flops` / median). The committed H200 results reach at most 0.68 x (dense SDPA's forward at
    T=32768); a forger who scales a peer's latencies down, or swaps two cells' data, passes this bound only by less
    than that."""
    peak = bf16_peak_tflops(doc)
    if peak is None:
        return []
    limit = PEAK_ALLOWANCE * peak * 1e12
    problems: Problems = []
    for c, cell in doc["cells"].items():
        for s, st in cell["stages"].items():
            rate = min_flops(doc, cell, s) / (st["median_ms"] * 1e-3) if st["median_ms"] > 0 else float("inf")
            if rate > limit:
                problems.append((f"$.cells.{c}.stages.{s}.median_ms", f"{st['median_ms']} ms implies at least "
                                 f"{rate / 1e12:.0f} TFLOP/s, past {PEAK_ALLOWANCE} x the GPU's {peak} TFLOP/s "
                                 "BF16 peak"))
    return problems


def timing_plausible(doc: dict[str, Any], add: Add) -> None:
    """Every cell's fwd+bwd median at least its larger part's (a forward and its backward in one timed region cannot
    be faster than either alone; 10% allowed for the flush and round-to-round noise) and, on a GPU, at least 0.9 x
    the sum of the two timed apart; every observation positive; on a GPU, bench's ``phases_plausible`` on the
    cells (the phases within the wall time, ``rounds`` at least the latencies it timed) and no median past the GPU's
    BF16 peak (:func:`flop_rate_problems`)."""
    problems: Problems = []
    gpu = gpu_run(doc)
    for c, v in doc["cells"].items():
        st = v["stages"]
        if any(x <= 0 for s in st.values() for x in s["raw_ms"]):
            problems.append((f"$.cells.{c}.stages", "an observation is not positive"))
        elif st["fwd_bwd"]["median_ms"] < 0.9 * max(st["fwd"]["median_ms"], st["bwd"]["median_ms"]):
            problems.append((f"$.cells.{c}.stages.fwd_bwd.median_ms", f"{st['fwd_bwd']['median_ms']} ms, less than "
                             "its forward or its backward alone"))
        elif gpu and st["fwd_bwd"]["median_ms"] < 0.9 * (st["fwd"]["median_ms"] + st["bwd"]["median_ms"]):
            problems.append((f"$.cells.{c}.stages.fwd_bwd.median_ms", f"{st['fwd_bwd']['median_ms']} ms, under 0.9 x "
                             "its forward + backward timed apart (the same kernels, one after the other; H200: "
                             "0.984-1.034)"))
    if gpu:
        problems += (phases_problems(as_bench_view(doc)) if "phases" in doc else []) + flop_rate_problems(doc)
    add("peer_timing_plausible", problems)


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    guarded("peer_recompute", add, peer_recompute, doc, add, ctx)
    guarded("peer_timing_plausible", add, timing_plausible, doc, add)
    if "cupti" in doc:
        guarded("cupti_agreement", add, _add_problems, add, "cupti_agreement", marked_cupti_problems,
                as_bench_view(doc))
    elif doc.get("phases", {}).get("cupti", 0) > 0:
        add("cupti_agreement", [("$.cupti", f"missing, but $.phases.cupti records a {doc['phases']['cupti']:.1f} s "
                                            "CUPTI pass")])
    if "memory" in doc or "cupti" in doc:
        guarded("peer_memory", add, _add_problems, add, "peer_memory", memory_problems, doc)
    guarded("config_provenance", add, config_provenance, doc, add, ctx)
    config_semantics(doc, add)
    autotune_configs(doc, add)
    run_record(doc, add, ctx)
    work = sum(sum(s["raw_ms"]) + sum(s["warmup_ms"]) for c in doc["cells"].values() for s in c["stages"].values())
    wall_plausible(doc["wall_seconds"], work, "$.wall_seconds", "its own observations", add, doc)
    ctx.unverifiable("$.cells.*.stages.*.raw_ms, $.oracle.results", "measured on the GPU host (statistics, summary "
                     "and oracle verdicts recomputed from them)")
    if gpu_run(doc) and bf16_peak_tflops(doc) is None:
        ctx.unverifiable("$.cells.*.stages.*.median_ms", "not held to a BF16 peak: the GPU table has none for "
                         f"{(doc['metadata'].get('gpu') or {}).get('name')!r}")
    if "cupti" in doc or "memory" in doc:
        ctx.unverifiable("$.cupti.kernel_ms, $.cupti.event_ms, $.memory", "measured on the GPU host (held to the "
                         "agreement rule, the timed medians, the outputs' bytes and the GPU's memory)")

