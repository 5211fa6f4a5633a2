"""The ``release_result`` kind (record :class:`~nsa_exp.core.records.ReleaseResult`): one point of the release arm
(:mod:`nsa_exp.gpu.release`), NOT the pinned experiment -- one FLA release or source tree timed through its
public API at one point (T x routings) of a release config (results/releases). Its builder and its checks, in
one module.

It is bench-shaped where it can be (``patterns.<p>.stages.<stage>`` are
:class:`~nsa_exp.core.records.StageStats`, a :class:`~nsa_exp.core.records.Timing`, ``telemetry``, ``edges``,
``config``, ``metadata``), so the bench's checks apply unchanged, and adds ``release`` (what was timed and where
it came from, the sha256 of every imported FLA file), ``source`` (its ``parallel_nsa_bwd`` launches, read with
:mod:`nsa_exp.releases.source`) and ``kernels`` (every call's kernels from the CUPTI pass, grouped into the
pinned stages by :mod:`nsa_exp.analysis.release_kernels`). :func:`build` makes it from the child's measurement.

:func:`checks` (``validate``, once its schema has passed): after the statistics checks every run gets
(``stats_recompute``, ``min_observations``, ``latencies_positive_finite``): ``config_semantics``,
``shape_matches_config``, ``pattern_set``, ``edges_equal``, ``routing_recompute`` (edges and fan-in regenerated
from config + seed) and ``routing_sha256``, ``timing_recompute`` (stage list, round orders from the seed,
counts), ``telemetry_recompute``, ``kernels_recompute`` (groups, spans and medians from the per-call kernels; the
group table from the source's launches; on a GPU no stage timed faster than its own kernels ran),
``release_config_consistent`` (the embedded release config, the point, and one release identity throughout: label,
versions, distribution, wheel, folder, the run's releases and the point's), ``gates_consistent``,
``source_consistent`` (every file the source reading hashed is an imported file with that sha256) and, with
``release_dirs`` (``validate --release-dir``), ``release_files`` (each imported file re-hashed); and the run record
(:mod:`.record_checks`: environment gate, GPU against the GPU table, clocks, pinned tolerances, wall time;
``metadata_plausible`` for a GPU run). The rest is listed as unverifiable.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import PINNED_COMMIT, REPO_ROOT
from ..analysis.release_kernels import call_span_ms, group_table, stage_groups
from ..analysis.run_cost import timed_ms
from ..core.config import Config
from ..core.families import TUNE_PATTERN, release_point_names
from ..core.kinds import schema_version
from ..core.measurement import Measurement
from ..core.protocol import LAUNCH_GUARD_CYCLES, TIMING_METHOD, round_orders
from ..core.records import PatternRun, ReleaseResult
from ..core.stages import RELEASE_KERNEL_STAGES, release_stages
from ..errors import UserError
from ..io.config_files import config_from_dict
from ..io.fla_pin import NOT_INSTALLED, PINNED_RELEASE, pinned_files_sha256
from ..io.metadata import file_at_commit
from ..io.strict_json import _Rejected, parse_strict
from ..routing.fanin import routing_statistics
from ..routing.patterns import routing_sha256
from . import record_checks
from .checks import Add, Context, Problems, guarded
from .peer_result import MAX_PROFILER_SHIFT, MIN_PROFILER_SHIFT
from .record_checks import argv_values, document_argv, recorded_clean_commit
from .routing_checks import edge_problems, pattern_set, regenerated, routing_file_recompute, routing_recompute
from .run_checks import telemetry_recompute
from .stats_checks import stats_checks

KIND = "release_result"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def _routing_sha(doc: dict[str, Any], config: Config, add: Add, unverified: list) -> None:
    problems = []
    for p, rec, stats in regenerated(doc, config, unverified, "routing_sha256"):
        want = stats["routing_sha256"]
        if rec["routing_sha256"] != want:
            problems.append((f"$.patterns.{p.name}.routing_sha256", f"recorded {rec['routing_sha256']}, the routing "
                             f"regenerated from the config and seed {config.seeds.routing} hashes to {want}"))
    add("routing_sha256", problems)


def _timing(doc: dict[str, Any], config: Config, add: Add) -> None:
    t, ct, stages = doc["timing"], config.timing, list(release_stages(doc["release_config"]))
    problems = [(f"$.timing.{k}", f"recorded {t[k]!r}, the config/code says {want!r}") for k, want in (
        ("warmup_rounds", ct.warmup_rounds), ("order_mode", ct.order), ("order_seed", config.seeds.order),
        ("l2_flush_bytes", ct.l2_flush_bytes), ("flush_policy", ct.flush), ("stages", stages),
        ("launch_guard_cycles", LAUNCH_GUARD_CYCLES)) if t[k] != want]
    names, reps, warm = list(doc["patterns"]), t["repetitions"], t["warmup_rounds"]
    if t["round_orders"] != round_orders(names, warm + reps, t["order_mode"], t["order_seed"]):
        problems.append(("$.timing.round_orders", f"differs from the {t['order_mode']} order of seed {t['order_seed']} "
                         f"over {warm} + {reps} rounds of {names}"))
    for name, p in doc["patterns"].items():
        if list(p["stages"]) != stages:
            problems.append((f"$.patterns.{name}.stages", f"{list(p['stages'])} is not {stages}"))
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
    for p, st in k["calls"].items():  # the profiled calls are timed ones, each with its spans
        if not set(st) <= set(doc["timing"]["stages"]) or set(k["span_ms"].get(p, {})) != set(st):
            problems.append((f"$.kernels.calls.{p}", f"stages {list(st)} (spans {sorted(k['span_ms'].get(p, {}))}) "
                             f"are not among the timed stages {doc['timing']['stages']}"))
    for p, st in k["calls"].items():
        for s, calls in st.items():
            path = f"$.kernels.calls.{p}.{s}"
            if len(calls) != k["rounds"]:
                problems.append((path, f"{len(calls)} calls, but kernels.rounds = {k['rounds']}"))
            if any(not 0 <= i < len(k["names"]) for c in calls for i, _, _ in c):
                problems.append((path, "a kernel name index outside kernels.names"))
                continue
            groups = k["groups"].get(p, {}).get(s)
            if s in RELEASE_KERNEL_STAGES and groups != stage_groups(calls, k["names"], launched):
                problems.append((f"$.kernels.groups.{p}.{s}", "does not recompute from the calls"))
            spans = [round(call_span_ms(c), 6) for c in calls]
            if k["span_ms"].get(p, {}).get(s) != spans:
                problems.append((f"$.kernels.span_ms.{p}.{s}", "does not recompute from the calls"))
            problems += _span_against_events(doc, p, s, spans)
            problems += _busy_against_events(doc, p, s, [sum(d for _, _, d in c) for c in calls])
    add("kernels_recompute", problems)


def _event_median(doc: dict[str, Any], pattern: str, stage: str) -> float | None:
    """The event-timed median (ms) of a stage of a GPU run, which its profiled calls are held to; None for a
    host-clock run or a stage with no positive median."""
    timed = doc["patterns"].get(pattern, {}).get("stages", {}).get(stage, {}).get("median_ms")
    if doc["timing"]["timer"] != "cuda-events" or not isinstance(timed, (int, float)) or timed <= 0:
        return None
    return float(timed)


def _span_against_events(doc: dict[str, Any], pattern: str, stage: str, spans: list[float]) -> Problems:
    """On a GPU, the median CUPTI span (ms) of a stage's profiled calls (``spans``: first kernel's start to last
    kernel's end) within [:data:`~.peer_result.MIN_PROFILER_SHIFT`, :data:`~.peer_result.MAX_PROFILER_SHIFT`] of
    its event-timed median: the same calls, timed by events around them (committed H200 results: 0.972-1.021).
    Kernel times halved with their spans and groups recomputed passed, and a compare built on them with it (an
    attacker, 2026-12-07)."""
    timed = _event_median(doc, pattern, stage)
    if timed is None or not spans:
        return []
    ratio = float(np.median(spans)) / timed
    if MIN_PROFILER_SHIFT <= ratio <= MAX_PROFILER_SHIFT:
        return []
    return [(f"$.kernels.span_ms.{pattern}.{stage}", f"median span {ratio:.3f} x the event-timed median {timed:g} "
             f"ms, outside [{MIN_PROFILER_SHIFT}, {MAX_PROFILER_SHIFT}]: the profiled calls are the timed ones")]


#: The most a stage's median kernel busy time (ms, the sum of its kernels' CUPTI durations per profiled call) may be
#: of its event-timed median: kernels on one stream run one after another inside the events' window, so the window
#: cannot be shorter than their sum beyond the two passes' run-to-run spread (committed H200 results: 0.972-1.021 over
#: 121 cells). Event times scaled by 0.7 with their statistics recomputed, the kernels left as they ran, passed
#: (1.41), as did a compare built on them (an attacker, 2026-12-07).
MAX_BUSY_OVER_EVENTS = 1.10


def _busy_against_events(doc: dict[str, Any], pattern: str, stage: str, busy: list[float]) -> Problems:
    """On a GPU, a stage's median kernel busy time within :data:`MAX_BUSY_OVER_EVENTS` x its event-timed median."""
    timed = _event_median(doc, pattern, stage)
    if timed is None or not busy:
        return []
    ran = float(np.median(busy))
    if ran / timed <= MAX_BUSY_OVER_EVENTS:
        return []
    return [(f"$.patterns.{pattern}.stages.{stage}.median_ms", f"{timed:g} ms, but its profiled calls' kernels alone "
             f"ran {ran:g} ms (median sum of kernel durations, {ran / timed:.3f} x, more than "
             f"{MAX_BUSY_OVER_EVENTS}): the events enclose the kernels they time")]


#: A release's version as its wheel, folder or distribution names it (``fla_core-0.6.0-py3...``, ``fla-core-0.6.0``).
_NAMED_VERSION = re.compile(r"fla[-_]core-([0-9][0-9A-Za-z.+]*?)(?=-py|/|$|\.whl|-T)")


def _strings(node: Any) -> list[str]:
    """Every string in a JSON value (its keys' values, recursively)."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [t for v in node.values() for t in _strings(v)]
    if isinstance(node, list):
        return [t for v in node for t in _strings(v)]
    return []


def _identity(doc: dict[str, Any], point: dict[str, Any] | None) -> Problems:
    """A release target's identity, one throughout the record: a release (``kind`` ``release``: ``label``
    ``fla-core-<version_declared>``, the version imported and the distribution the declared one, and every release
    version its origin, folder and roots name, wheel and wheel path included) or a source tree (``kind`` ``source``:
    an origin of kind ``source``, run by ``--fla-source``); the version one the run timed (``--release`` in its argv,
    else the release config's ``releases`` unless it timed source trees) and run by its ``point`` (a point naming
    ``releases`` runs only those; a source tree runs only points naming none). A 0.6.0 result relabelled 0.5.1 (wheel,
    folder and imported version still 0.6.0), a release no config lists, and 0.6.0's T=8192 point relabelled 0.5.2,
    which the config runs at T=8192 for 0.6.0 only, passed (an attacker, 2026-12-07); so did the same relabels
    with ``kind`` set to ``source``, a folder renamed, or ``--fla-source`` added to the argv (a re-attacker, the same
    day)."""
    rel, problems = doc["release"], []
    version, origin = rel.get("version_declared"), rel.get("origin") or {}
    argv = document_argv(doc)
    sources = "--fla-source" in argv or bool(argv_values(argv, "--fla-source"))
    if rel.get("kind") != "release":
        if origin.get("kind") != "source" or not sources:
            problems.append(("$.release.kind", f"{rel.get('kind')!r}: a source tree is timed by --fla-source and "
                             f"recorded with an origin of kind 'source' (this origin: {origin.get('kind')!r})"))
        if point is not None and point.get("releases") is not None:
            problems.append(("$.release.kind", f"a source tree, but the point at T={point.get('T')} runs only the "
                             f"releases {point['releases']}"))
        return problems
    if origin.get("kind") not in ("wheel-dir", "index"):
        problems.append(("$.release.origin.kind", f"{origin.get('kind')!r}: a release comes from a wheel folder or "
                         "the package index"))
    if rel.get("label") != f"fla-core-{version}":
        problems.append(("$.release.label", f"{rel.get('label')!r} is not fla-core-{version} (version_declared)"))
    if rel.get("version_imported") != version:
        problems.append(("$.release.version_imported", f"{rel.get('version_imported')!r}, but version_declared is "
                         f"{version!r}: the child imported another fla"))
    if rel.get("distributions") not in ([], [f"fla-core=={version}"]):
        problems.append(("$.release.distributions", f"{rel.get('distributions')} is not fla-core=={version}"))
    named = {"origin": _strings(origin), "package_dir": _strings(rel.get("package_dir")),
             "fla_roots_on_path": _strings(rel.get("fla_roots_on_path"))}
    for field, texts in named.items():
        others = sorted({v for t in texts for v in _NAMED_VERSION.findall(t) if v != version})
        if others:
            problems.append((f"$.release.{field}", f"names fla-core {', '.join(others)}, not {version}"))
    if isinstance(origin.get("wheel"), str) and not origin["wheel"].startswith(f"fla_core-{version}-"):
        problems.append(("$.release.origin.wheel", f"{origin['wheel']!r} is not a wheel of fla-core {version}"))
    asked = argv_values(argv, "--release")
    timed = asked or ([] if sources else list(doc["release_config"].get("releases") or []))
    if version not in timed:
        problems.append(("$.release.version_declared", f"{version!r} is none of the releases the run timed "
                         f"({', '.join(map(str, timed)) or 'none'}: " + ("its --release" if asked or sources else
                                                                         "the release config's releases") + ")"))
    if point is not None and point.get("releases") is not None and version not in point["releases"]:
        problems.append(("$.release.version_declared", f"{version!r}: the point at T={point.get('T')} runs only the "
                         f"releases {point['releases']}"))
    return problems


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
    if not roots and doc["release"].get("version_imported") == PINNED_RELEASE:
        # the pinned release's files are this environment's own FLA, checked against the pinned commit: a 0.5.1
        # result relabelled 0.5.2 (the pinned control) passed with its files listed unverified (an attacker, 2026-12-06)
        pinned = pinned_files_sha256(list(files))
        if pinned is not None:  # a file the pin lacks is no file of 0.5.2 (one added entry hid the rest: 2026-12-06)
            ours = f"fla-core {PINNED_RELEASE}'s file (the pinned commit's, installed here)"
            absent = [rel for rel in files if pinned[rel] == NOT_INSTALLED]
            if absent:  # the commit's, but not in this install (the wheel's subset): those alone stay unverified
                unverified.append({"path": "$.release.imported_files", "why": f"unverified (release folder not "
                                   f"supplied): {len(absent)} of its files ({absent[0]}, ...) are the pinned commit's "
                                   "but not installed here; pass the folder holding its fla/ with --release-dir DIR"})
            add("release_files", [(f"$.release.imported_files.{rel}", f"not a file of fla-core {PINNED_RELEASE} (the "
                                   "pinned commit has none of that name)" if pinned[rel] is None else
                                   f"sha256 {sha}, but {ours} hashes {pinned[rel]}")
                                  for rel, sha in files.items() if pinned[rel] not in (sha, NOT_INSTALLED)])
            return
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


def _release_config(doc: dict[str, Any], add: Add, unverified: list) -> None:
    """The embedded release config against its file (``config_path``) as the repository held it at the recorded
    commit (a clean tree): exactly that file; and the embedded experiment config as one of its points: the name
    ``<release name>-T<T>[-B<B>-H<H>-HQ<HQ>]``, that point's T, and B, H, HQ = its ``shape`` (else the base
    config's, read at the same commit); the result's name ``<label>-T<T>[-B<B>-H<H>-G<G>]``."""
    problems = []
    raw, cfg = doc["release_config"], doc["config"]
    commit, path = recorded_clean_commit(doc), doc.get("config_path")
    then = file_at_commit(commit, path, REPO_ROOT) if commit is not None and path else None
    base_then = file_at_commit(commit, str(raw.get("base_config")), REPO_ROOT) if commit is not None else None
    try:
        then_doc = parse_strict(then) if then is not None else None
        base_doc = parse_strict(base_then) if base_then is not None else None
    except (_Rejected, UserError):
        then_doc = base_doc = None
    if isinstance(then_doc, dict):
        if then_doc != raw:
            problems.append(("$.release_config", f"differs from {path} at the recorded commit {str(commit)[:12]}"))
    else:
        unverified.append({"path": "$.release_config", "why": f"{path} at the recorded commit is not at hand (another "
                           "repository, a shallow clone or a dirty tree): the embedded release config is taken as is"})
    shape = cfg.get("shape", {})
    base_shape = base_doc.get("shape") if isinstance(base_doc, dict) else None
    match = point = None
    dims = (shape.get("T"), shape.get("B"), shape.get("H"), shape.get("HQ"))
    for pt in (pt for pt in raw.get("points", []) if pt.get("T") == shape.get("T")):
        own = pt.get("shape") or {}
        label = release_point_names(*dims, bool(own))[0]
        if cfg.get("name") == f"{raw.get('name')}-{label}" and all(shape.get(k) == v for k, v in own.items()):
            match, point = own, pt
    if match is None:
        problems.append(("$.config.name", f"{cfg.get('name')!r} with shape B, H, HQ = {shape.get('B')}, "
                         f"{shape.get('H')}, {shape.get('HQ')} is no point of the embedded release config"))
    else:
        want = {**base_shape, **match} if isinstance(base_shape, dict) else None
        if want is not None and any(shape.get(k) != want.get(k) for k in ("B", "H", "HQ")):
            problems.append(("$.config.shape", f"B, H, HQ differ from the base config's shape with the point's "
                             f"{match or 'none'} at the recorded commit"))
        elif not isinstance(base_shape, dict) and not match:
            unverified.append({"path": "$.config.shape", "why": "the base config at the recorded commit is not at "
                               "hand: B, H, HQ of a point without its own shape are taken as recorded"})
        key = release_point_names(*dims, bool(match))[1]
        if doc["name"] != f"{doc['release']['label']}-{key}":
            problems.append(("$.name", f"{doc['name']!r} is not {doc['release']['label']}-{key} (its release label "
                             "and point)"))
    add("release_config_consistent", problems + _identity(doc, point))


def release_recompute(doc: dict[str, Any], add: Add, release_dirs: Sequence[str] = ()) -> dict[str, list]:
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
        guarded("pattern_set", add, pattern_set, doc, config, add)
        guarded("routing_recompute", add, routing_recompute, doc, config, add, unverified)
        guarded("routing_sha256", add, _routing_sha, doc, config, add, unverified)
        guarded("timing_recompute", add, _timing, doc, config, add)
    guarded("telemetry_recompute", add, telemetry_recompute, doc, add, warnings, unverified)
    guarded("kernels_recompute", add, _kernels, doc, add, warnings)
    guarded("release_config_consistent", add, _release_config, doc, add, unverified)
    guarded("gates_consistent", add, _gates, doc, add)
    guarded("source_consistent", add, _source_and_files, doc, add, release_dirs, unverified)
    if doc["timing"]["timer"] != "cuda-events":  # a GPU run's host facts: the run record (:mod:`.record_checks`)
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


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """A release result (another FLA release through its public API, NOT the pinned experiment): bench-shaped
    statistics, what its own record allows (:func:`release_recompute`), and the run record every GPU document
    gets (environment gate, GPU against the GPU table, clocks, pinned tolerances, wall time)."""
    stats_checks(doc, add)
    extra = release_recompute(doc, add, ctx.release_dirs)
    ctx.unverified += extra["unverified"]
    ctx.warnings += extra["warnings"]
    if ctx.path != "<bytes>" and Path(ctx.path).stem != doc["name"]:  # release-bench writes <name>.json
        ctx.warnings.append({"check": "file_name", "path": "$.name", "message": f"the file is named "
                             f"{Path(ctx.path).name}, but the result is {doc['name']}.json (renamed or copied: read "
                             "its release, T and shape from the document, not the file name)"})
    ctx.unverified += routing_file_recompute(doc, ctx.routing_files, add)
    gpu_run = doc["timing"]["timer"] == "cuda-events"
    samples = [(f"$.telemetry.samples[{i}]", s) for i, s in enumerate(doc["telemetry"]["samples"])]
    guarded("environment_gate", add, record_checks.environment_gate_holds, doc, add)
    if gpu_run:
        guarded("metadata_plausible", add, record_checks.metadata_plausible, doc, add, ctx)
        guarded("telemetry_plausible", add, record_checks.telemetry_plausible, samples, doc, add, ctx)
    record_checks.tolerances_pinned(doc["config"].get("tolerances"), "$.config.tolerances", add)
    record_checks.wall_plausible(doc["wall_seconds"], timed_ms(doc), "$.wall_seconds",
                                 "its own raw and warm-up latencies", add)


KERNEL_METHOD = ("torch.profiler (CPU + CUDA activities) after the timed rounds, L2 flushed and a GPU spin queued "
                 "before each call as in the timed rounds; each call's window runs from its range's first kernel to "
                 "the next range's, the next call's flush and spin dropped; times from CUPTI's kernel records")


def not_pinned(target: Mapping[str, Any]) -> str:
    """The sentence every release result opens with: what was timed, and that it is not the pinned experiment."""
    what = f"fla-core {target['version']}" if target["kind"] == "release" else f"the FLA source tree {target['path']}"
    return (f"NOT the pinned experiment: {what}, timed through its public API by the release arm (issue 22). "
            f"The experiment is pinned to FLA commit {PINNED_COMMIT} (fla-core 0.5.2), which `check` proves.")


def kernel_block(point: Mapping[str, Any], launched: Sequence[str]) -> dict[str, Any]:
    """The result's ``kernels`` block from the child's per-call kernels (groups and spans derived here)."""
    names, calls = point["kernel_names"], point["kernel_calls"]
    return {"method": KERNEL_METHOD, "rounds": point["cupti_rounds"], "markers": point["kernel_markers"],
            "launched": list(launched), "groups_table": group_table(launched), "names": names, "calls": calls,
            "groups": {p: {s: stage_groups(c, names, launched) for s, c in st.items() if s in RELEASE_KERNEL_STAGES}
                       for p, st in calls.items()},
            "span_ms": {p: {s: [round(call_span_ms(c), 6) for c in cs] for s, cs in st.items()}
                        for p, st in calls.items()}}


def build(*, name: str, target: Mapping[str, Any], source: Mapping[str, Any], config: Config,
                         release_config: Mapping[str, Any], gates: list[dict[str, Any]], routings: Mapping[str, Any],
                         child: Mapping[str, Any], point: Mapping[str, Any], metadata: Mapping[str, Any],
                         throttled: Callable[[Any], bool],
                         routing_files: Mapping[str, Any] | None = None) -> ReleaseResult:
    """The :class:`~nsa_exp.core.records.ReleaseResult` of one point (pure; the release arm writes it).

    ``child``: what the child process saw (``timer``, ``fla`` as :func:`nsa_exp.gpu.release.imported_fla` gives it,
    ``sys_path``, ``telemetry_available``, ``versions``, ``env``); ``point``: what it measured (``measurement``,
    the engine's :class:`~nsa_exp.core.measurement.Measurement` of the round loop; ``autotune``; the CUPTI pass's
    ``kernel_names`` / ``kernel_calls`` / ``kernel_markers`` / ``cupti_rounds`` or ``kernels_unavailable``;
    ``memory``; ``wall_seconds``). ``routing_files``: the reports of the ``--routing-file`` s timed after the
    config's patterns (``file:<stem>``)."""
    files = dict(routing_files or {})
    names = [p.name for p in config.patterns] + list(files)
    edges = next(g["detail"] for g in gates if g["name"] == "equal_edges")
    stages = release_stages(release_config["raw"])
    measurement: Measurement = point["measurement"]
    stats = measurement.stage_stats(names, stages)
    rows = {n: routing_statistics(routings[n], config.shape.block_size) for n in names}
    patterns = {n: PatternRun(params={"name": n} if n in files else config.pattern(n).to_dict(),
                              edges=int(edges["per_pattern"][n]), routing_sha256=routing_sha256(routings[n]),
                              fanin=rows[n]["fanin"], query_span=rows[n]["query_span"],
                              adjacent_gap=rows[n]["adjacent_gap"], stages=stats[n])
                for n in names}
    launched = list(dict.fromkeys(launch["kernel"] for launch in source["launches"]))
    samples = [{"round": r["round"], "pattern": r["pattern"], "warmup": r["warmup"], **(r.get("telemetry") or {})}
               for r in measurement.records]
    fla = child["fla"]
    timing = measurement.timing(stages, timer=child["timer"],
                                method=TIMING_METHOD + "; the calls are FLA's public functions (release arm)")
    kernels = kernel_block(point, launched) if point["kernel_calls"] is not None else None
    return ReleaseResult(
        schema_version=schema_version(ReleaseResult.KIND), kind=ReleaseResult.KIND, name=name,
        not_pinned=not_pinned(target),
        release={"label": target["label"], "kind": target["kind"], "version_declared": target["version"],
                 "version_imported": fla["version_imported"], "origin": dict(target["origin"]),
                 "package_dir": fla["package_dir"], "imported_files": fla["files"],
                 "distributions": fla["distributions"], "fla_roots_on_path": fla["fla_roots_on_path"],
                 "sys_path": child["sys_path"]},
        source=dict(source), config=config.raw, config_path=release_config["path"],
        release_config=release_config["raw"], shape=config.shape.to_dict(), gates=gates, edges=edges,
        autotune={"tuned_on": TUNE_PATTERN, **point["autotune"]}, timing=timing, patterns=patterns, kernels=kernels,
        telemetry={"available": child["telemetry_available"], "samples": samples,
                   "throttled_samples": sum(1 for s in samples if throttled(s))},
        memory=point["memory"], wall_seconds=point["wall_seconds"],
        metadata={**metadata, "release_child": {"versions": child["versions"], "env": child["env"]}},
        routing_files=files or None,
        kernels_unavailable=(point["kernels_unavailable"] or "no CUPTI pass") if kernels is None else None)
