"""The ``method_study`` kind: a GPU method study's raw record (``scripts/gpu_method_study.py``, results/studies).
Its builder (:func:`build`, which the script writes after each part) and its checks (:func:`checks`), in one module.

- ``method_study_recompute``: the flush part's summary recomputed from its records, one record per round x policy
  x pattern, warm-up flags, flush bytes and launch guard; the oracle within the pinned naive tolerances and
  consistent; the compiled-kernel configs FLA's; the grid records consistent.
- the config's rules and the run record every GPU document gets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..analysis.reproduction import judge_naive
from ..core.config import Shape, check_routings_differ
from ..core.kinds import schema_version
from ..core.protocol import LAUNCH_GUARD_CYCLES, summarize
from ..errors import UserError
from . import record_checks
from .autotune_checks import config_problems
from .checks import Add, Context, Problems, close, guarded
from .record_checks import config_semantics, pinned, run_record
from .routing_checks import edge_gate_problems
from .run_checks import comparison_problems, gradient_numel

KIND = "method_study"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS
#: the study's parts, in the order the script runs them unless ``--parts`` says otherwise
PARTS = ("oracle", "flush", "kernels", "grid")
#: The oracle part's shape (scripts/gpu_method_study.py runs it there): M = 16 blocks > S = 8 slots, so the routings
#: differ; a study recording another (block_size 65, S 9) was filed unverified and PASSed (an attacker, 2026-12-07)
ORACLE_SHAPE = Shape(B=1, T=1024, HQ=64, H=4, K=192, V=128, S=8, block_size=64, dtype="bfloat16")


def build(*, config: Mapping[str, Any], metadata: Mapping[str, Any], gates: list[dict[str, Any]],
          parts: Mapping[str, Any], seconds: Mapping[str, float]) -> dict[str, Any]:
    """The study's document: the config as read (``Config.raw``), the host's metadata (``gpu_name`` the device's),
    the gates, the record of each part run so far (``parts``: a subset of :data:`PARTS`, in the order they ran) and
    the host seconds each took. Documents written before 2026-12-06 carry no ``schema_version`` (the kind's row is
    unversioned: absent reads as 1.0)."""
    return {"schema_version": schema_version(KIND), "kind": KIND, "config": dict(config), "metadata": dict(metadata),
            "gates": gates, **parts, "seconds": dict(seconds)}


#: What a compiled kernel's Triton metadata can hold on a Hopper GPU (NVIDIA's Hopper tuning guide: at most 255
#: registers per thread; a forged 4096 PASSed and fed the model's occupancy: an attacker, 2026-12-06). Shared
#: memory is what the kernel asks for, which may exceed what a block can have (227 KB: such a config compiles and
#: cannot launch; the committed study holds two): only a byte count here.
COMPILED_BOUNDS = (("n_regs", (1, 255), "registers per thread are 1-255 on Hopper"),
                   ("shared", (0, 1 << 40), "shared memory is a byte count, at least 0"),
                   ("n_spills", (0, 1 << 20), "spilled registers are a count, at least 0"),
                   ("num_warps", (1, 32), "a block has 1-32 warps"))


#: scripts/gpu_method_study.py's default ``--config``
STUDY_CONFIG = "configs/e1_h100.json"


def method_study_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    config = doc["config"]
    if "flush" in doc:
        f = doc["flush"]
        names = [p["name"] for p in config["patterns"]]
        if f["flush_bytes"] != config["timing"]["l2_flush_bytes"] or f["launch_guard_cycles"] != LAUNCH_GUARD_CYCLES:
            problems.append(("$.flush", "flush_bytes / launch_guard_cycles differ from the config and the code"))
        seen = {(r["round"], r["policy"], r["pattern"]) for r in f["records"]}
        want = {(i, pol, n) for i in range(f["warmup_rounds"] + f["rounds"]) for pol in f["policies"] for n in names}
        if seen != want or len(seen) != len(f["records"]):
            problems.append(("$.flush.records", f"{len(f['records'])} records, one per round x policy x pattern "
                             f"expected ({len(want)})"))
        problems += [(f"$.flush.records[{i}].warmup", "does not match round < warmup_rounds")
                     for i, r in enumerate(f["records"]) if r["warmup"] != (r["round"] < f["warmup_rounds"])][:1]
        for pol, by_pattern in f["summary"].items():
            for pat, by_stage in by_pattern.items():
                for stage, s in by_stage.items():
                    obs = [r["ms"][stage] for r in f["records"] if r["policy"] == pol and r["pattern"] == pat
                           and not r["warmup"] and stage in r["ms"]]
                    path = f"$.flush.summary.{pol}.{pat}.{stage}"
                    if not obs:
                        problems.append((path, "no timed record behind it"))
                        continue
                    problems += [(f"{path}.{k}", f"recorded {s.get(k)}, the records give {v}")
                                 for k, v in summarize(obs).items() if not close(s.get(k, float("nan")), v)]
        if sorted(f["summary"]) != sorted(f["policies"]):
            problems.append(("$.flush.summary", f"policies {sorted(f['summary'])} != {sorted(f['policies'])}"))
    if "oracle" in doc:
        o = doc["oracle"]
        t = pinned(config.get("tolerances"))
        numel = gradient_numel(o["shape"])
        try:
            check_routings_differ(Shape(**o["shape"]), "$.oracle.shape")
        except UserError as exc:
            problems.append(("$.oracle.shape", str(exc)))
        if o["shape"] != ORACLE_SHAPE.to_dict():
            problems.append(("$.oracle.shape", f"{o['shape']}, the study's oracle runs at {ORACLE_SHAPE.to_dict()}"))
        for name, grads in o["patterns"].items():
            for g, m in grads.items():
                problems += comparison_problems(m, f"$.oracle.patterns.{name}.{g}", numel.get(g))
            problems += [("$.oracle.patterns." + name, line) for line in
                         judge_naive(grads, t.naive_rel_l2, t.naive_max_abs_rel, label=f"oracle {name}")]
        if list(o["patterns"]) != [p["name"] for p in config["patterns"]]:
            problems.append(("$.oracle.patterns", "differ from the config's patterns"))
    if "kernels" in doc:
        for stage, rec in doc["kernels"].items():
            if stage == "device":
                continue
            problems += [p for i, c in enumerate(rec["configs"])
                         for p in config_problems(stage, c, f"$.kernels.{stage}.configs[{i}]")]
            keys = {(c["num_warps"], c["num_stages"]) for c in rec["configs"]}
            problems += [(f"$.kernels.{stage}.compiled[{i}]", f"num_warps {c['num_warps']} / num_stages "
                          f"{c['num_stages']} is none of the configs") for i, c in enumerate(rec["compiled"])
                         if (c["num_warps"], c["num_stages"]) not in keys]
            if len(rec["compiled"]) > len(rec["configs"]):
                problems.append((f"$.kernels.{stage}.compiled", "more compiled kernels than configs"))
            problems += [(f"$.kernels.{stage}.compiled[{i}].{key}", f"{c[key]!r}: {why}")
                         for i, c in enumerate(rec["compiled"]) if isinstance(c, dict)
                         for key, (low, high), why in COMPILED_BOUNDS
                         if c.get(key) is not None and not (isinstance(c[key], int) and low <= c[key] <= high)]
    for key, g in (doc.get("grid") or {}).items():
        path = f"$.grid.{key}"
        if str(g["dkv_grid"][-1]) != key:
            problems.append((path, f"keyed {key} but its dK/dV grid is {g['dkv_grid']}"))
        if g["ok"] != ("error" not in g) or g["ok"] != ("dk_vs_official" in g):
            problems.append((f"{path}.ok", f"{g['ok']}, but the record {'has' if 'error' in g else 'has no'} error "
                             f"and {'a' if 'dk_vs_official' in g else 'no'} comparison"))
        if "dk_vs_official" in g:
            problems += comparison_problems(g["dk_vs_official"], f"{path}.dk_vs_official")
    if doc.get("gates"):
        problems += edge_gate_problems(doc, config, ctx)
    # the embedded config is the file the script read (its --config, default STUDY_CONFIG), as the repository held
    # it at the recorded commit: an edited repetitions, routing seed, sink count or shape PASSed (an attacker,
    # 2026-12-06)
    argv = record_checks.document_argv(doc)
    path = record_checks.argv_option(argv, "--config") or STUDY_CONFIG
    problems += record_checks.config_against_file(doc, ctx, path, config)
    add("method_study_recompute", problems)


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    guarded("method_study_recompute", add, method_study_recompute, doc, add, ctx)
    config_semantics(doc, add)
    records = (doc.get("flush") or {}).get("records", [])
    samples = [(f"$.flush.records[{i}].telemetry", r["telemetry"]) for i, r in enumerate(records) if "telemetry" in r]
    run_record(doc, add, ctx, samples)
    if records:
        work = sum(sum(r["ms"].values()) for r in records)
        record_checks.wall_plausible(doc["seconds"].get("flush"), work, "$.seconds.flush",
                                     "the flush part's records", add)
    ctx.unverifiable("$.flush.records[*].ms, $.oracle, $.grid, $.kernels.*.compiled", "measured or compiled on "
                     "the GPU host; summaries recomputed, the rest held to consistency and the pinned tolerances")
