"""The release result (``schemas/release_result.schema.json``), built from one point the release arm measured.

A release result is NOT the pinned experiment: one FLA release or source tree timed through its public API by
the release arm (:mod:`nsa_exp.gpu.release`), at one point (T x routings) of a release config. It is
bench-shaped where it can be (:class:`nsa_exp.core.records.ReleaseResult`: ``patterns.<p>.stages.<stage>``
are :class:`~nsa_exp.core.records.StageStats`, a :class:`~nsa_exp.core.records.Timing`, ``telemetry``,
``edges``, ``config``, ``metadata``), so the bench's checks apply unchanged, and adds ``release`` (what was timed
and where it came from, the sha256 of every imported FLA file), ``source`` (its ``parallel_nsa_bwd`` launches,
read with :mod:`.source`) and ``kernels`` (every call's kernels from the CUPTI pass, grouped into the pinned
stages by :mod:`nsa_exp.analysis.release_kernels`). ``validate`` recomputes it
(:mod:`nsa_exp.checking.release_checks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import PINNED_COMMIT
from ..analysis.release_kernels import call_span_ms, group_table, stage_groups
from ..core.config import Config
from ..core.families import TUNE_PATTERN
from ..core.kinds import schema_version
from ..core.measurement import Measurement
from ..core.protocol import TIMING_METHOD
from ..core.records import PatternRun, ReleaseResult
from ..core.stages import RELEASE_KERNEL_STAGES, release_stages
from ..routing.fanin import routing_statistics
from ..routing.patterns import routing_sha256

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


def build_release_result(*, name: str, target: Mapping[str, Any], source: Mapping[str, Any], config: Config,
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
