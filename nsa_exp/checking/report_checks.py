"""Checks of the GPU tasks' reports beyond their run record (:mod:`.record_checks`): the smoke and check
reports, the what-if arms and the method study. Everything a CPU can recompute is recomputed; the GPU's
own comparisons (rel-L2, ULPs) are held to their own consistency and to the pinned tolerances.

- ``smoke_recompute``: every comparison record consistent with itself and its shape (numel); the
  failures re-judged from the metrics (:mod:`nsa_exp.analysis.reproduction`) at the report's tolerances
  and at the pinned ones, equal to the recorded list; ``passed`` = no failure; the naive pattern is the
  baseline; the oracle shape has M > S; with the config at hand, every shape and pattern is the config's.
- ``check_report_recompute``: ``passed`` = every gate passed; every gate of the protocol recorded, in order,
  a failed one with its message; with the config at hand the required GPU, the patterns and the closed form
  of the equal-edge gate are the config's.
- ``whatif_recompute``: each arm's stage observations = its per-round records, its total = the sum of its
  stages per round, every statistic from its observations, ``saved_ms`` = baseline - arm total median, the
  round orders regenerated from the config's seed, layout and F from the arm's name, ``batches`` from the
  routing regenerated and split (:func:`nsa_exp.model.split.split_routing`), the dK/dV equivalence within the
  pinned tolerance; with the benchmark result at hand, its autotune configs are the ones pinned.
- ``method_study_recompute``: the flush part's summary recomputed from its records, one record per round x
  policy x pattern, warm-up flags, flush bytes and launch guard; the oracle within the pinned naive
  tolerances and consistent; the compiled-kernel configs FLA's; the grid records consistent.
"""

from __future__ import annotations

import re
from typing import Any

from ..analysis.reproduction import judge_naive, judge_staged
from ..core.config import Shape
from ..core.families import BASELINE_PATTERN, pattern_from_entry
from ..core.protocol import GATE_NAMES, LAUNCH_GUARD_CYCLES, round_orders, summarize
from ..errors import UserError
from ..model.split import split_routing
from ..routing.config import check_routings_differ
from ..routing.edges import closed_form_edges
from ..routing.patterns import generate_routing
from .autotune_checks import config_problems
from .checks import Add, Context, Problems, close, first_difference
from .derived_checks import read_source
from .record_checks import argv_option, config_file, pinned
from .run_checks import comparison_problems, gradient_numel

ARM_RE = re.compile(r"^what-if:(?P<layout>[\w-]+):F=(?P<F>\d+)$")


def _config_of(doc: dict[str, Any], ctx: Context) -> dict[str, Any] | None:
    """The config a report was run with, at hand: ``config_path``, else the recorded ``--config``."""
    argv = [str(a) for a in doc.get("metadata", {}).get("argv", [])]
    path = doc.get("config_path") or argv_option(argv, "--config")
    file = config_file(ctx, path) if path else None
    if file is None:
        ctx.unverifiable("the report against its config",
                         f"unverified (source not found): its config ({path or 'not recorded'})")
    return file


def _stats_problems(s: dict[str, Any], path: str) -> Problems:
    return [(f"{path}.{k}", f"recorded {s.get(k)} but the raw observations give {v}")
            for k, v in summarize(s["raw_ms"]).items() if not close(s.get(k, float("nan")), v)]


# --- smoke -----------------------------------------------------------------------------------------

def smoke_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    blocks = {"naive": (doc["naive"]["shape"], {BASELINE_PATTERN: doc["naive"]["metrics"]}),
              "staged_vs_official": (doc["staged_vs_official"]["shape"], doc["staged_vs_official"]["patterns"])}
    if "oracle" in doc:
        blocks["oracle"] = (doc["oracle"]["shape"], doc["oracle"]["patterns"])
        try:
            check_routings_differ(Shape(**doc["oracle"]["shape"]), "$.oracle.shape")
        except UserError as exc:
            problems.append(("$.oracle.shape", str(exc)))
    for block, (shape, patterns) in blocks.items():
        numel = gradient_numel(shape)
        for name, grads in patterns.items():
            for g, m in grads.items():
                where = f"$.{block}.metrics.{g}" if block == "naive" else f"$.{block}.patterns.{name}.{g}"
                problems += comparison_problems(m, where, numel.get(g))
    if doc["naive"]["pattern"] != BASELINE_PATTERN:
        problems.append(("$.naive.pattern", f"{doc['naive']['pattern']!r}: smoke's naive check runs "
                         f"{BASELINE_PATTERN}"))
    tol = doc["tolerances"]
    for label, t in (("the report's", tol), ("the pinned", pinned(tol).__dict__)):
        failures = judge_naive(doc["naive"]["metrics"], t["naive_rel_l2"], t["naive_max_abs_rel"])
        for name, grads in doc.get("oracle", {}).get("patterns", {}).items():
            failures += judge_naive(grads, t["naive_rel_l2"], t["naive_max_abs_rel"], label=f"oracle {name}")
        for name, grads in doc["staged_vs_official"]["patterns"].items():
            failures += judge_staged(name, grads, t["dkv_rel_l2"], t["dkv_max_ulp"])
        if label == "the report's" and failures != doc["failures"]:
            problems.append(("$.failures", f"{len(doc['failures'])} recorded, {len(failures)} at {label} tolerances: "
                             f"{(failures or doc['failures'])[:2]}"))
        elif failures and not doc["failures"]:
            problems.append(("$.failures", f"none recorded, but at {label} tolerances: {failures[:2]}"))
    if doc["passed"] != (not doc["failures"]):
        problems.append(("$.passed", f"{doc['passed']} with {len(doc['failures'])} failure(s) listed"))
    config = _config_of(doc, ctx)
    if config is not None:
        smoke = config.get("smoke", {})
        for block, key in (("naive", "naive"), ("staged_vs_official", "staged"), ("oracle", "oracle")):
            if block in doc and key in smoke and doc[block]["shape"] != smoke[key]:
                problems.append((f"$.{block}.shape", f"{doc[block]['shape']} != the config's smoke.{key}"))
        names = [p["name"] for p in config.get("patterns", [])]
        if list(doc["staged_vs_official"]["patterns"]) != names:
            problems.append(("$.staged_vs_official.patterns", f"{list(doc['staged_vs_official']['patterns'])} != "
                             f"the config's {names}"))
    add("smoke_recompute", problems)


# --- check ----------------------------------------------------------------------------------------

def check_report_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    gates = doc["gates"]
    names = [g["name"] for g in gates]
    if names != list(GATE_NAMES):
        problems.append(("$.gates", f"{names}: check runs every gate {list(GATE_NAMES)}"))
    passed = all(g["passed"] for g in gates)
    if doc["passed"] != passed:
        problems.append(("$.passed", f"{doc['passed']}, but the gates {'all passed' if passed else 'did not'}: "
                         f"{[n for n, g in zip(names, gates, strict=True) if not g['passed']]}"))
    problems += [(f"$.gates[{i}].message", "a failed gate carries its message") for i, g in enumerate(gates)
                 if not g["passed"] and not g.get("message")]
    config = _config_of(doc, ctx)
    if config is not None:
        for i, g in enumerate(gates):
            d = g.get("detail", {})
            if g["name"] == "gpu" and d.get("required") != config.get("gpu", {}).get("required_name"):
                problems.append((f"$.gates[{i}].detail.required", f"{d.get('required')!r}, the config requires "
                                 f"{config.get('gpu', {}).get('required_name')!r}"))
            if g["name"] == "equal_edges" and d:
                names_cfg = [p["name"] for p in config.get("patterns", [])]
                if sorted(d.get("per_pattern", {})) != sorted(names_cfg):
                    problems.append((f"$.gates[{i}].detail.per_pattern", f"patterns {sorted(d.get('per_pattern', {}))}"
                                     f" != the config's {sorted(names_cfg)}"))
                try:
                    closed = closed_form_edges(Shape(**config["shape"])) if "packing" not in config else None
                except (TypeError, KeyError):
                    closed = None
                if closed is not None and d.get("closed_form") != closed:
                    problems.append((f"$.gates[{i}].detail.closed_form", f"{d.get('closed_form')}, the config's "
                                     f"shape gives {closed}"))
    add("check_report_recompute", problems)


# --- what-if -------------------------------------------------------------------------------------

def whatif_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    config, t = doc["config"], doc["timing"]
    if t["warmup_rounds"] != config["timing"]["warmup_rounds"] or t["l2_flush_bytes"] != \
            config["timing"]["l2_flush_bytes"] or t["order"] != config["timing"]["order"]:
        problems.append(("$.timing", f"{t} differs from the config's timing {config['timing']}"))
    if doc["shape"] != config["shape"]:
        problems.append(("$.shape", "differs from $.config.shape"))
    shape = Shape(**doc["shape"])
    tol = pinned(config.get("tolerances")).full_shape_dkv_rel_l2
    numel = gradient_numel(doc["shape"])
    for pname, p in doc["patterns"].items():
        path = f"$.patterns.{pname}"
        arms = p["arms"]
        names = ["baseline", *[a for a in arms if a != "baseline"]]
        rounds = t["warmup_rounds"] + t["rounds"]
        orders = round_orders(names, rounds, t["order"], config["seeds"]["order"])
        got = [(r["round"], r["pattern"]) for r in p["records"]]
        want = [(i, n) for i, order in enumerate(orders) for n in order]
        if got != want:
            problems.append((f"{path}.records[{first_difference(got, want)}]", f"{len(got)} records do not follow the "
                             f"{t['order']} order of seed {config['seeds']['order']} ({len(want)} expected)"))
        problems += [(f"{path}.records[{i}].warmup", "does not match round < warmup_rounds")
                     for i, r in enumerate(p["records"]) if r["warmup"] != (r["round"] < t["warmup_rounds"])][:1]
        base = arms.get("baseline", {}).get("total", {}).get("median_ms")
        try:
            routing = generate_routing(pattern_from_entry(_entry(config, pname), f"{path}", shape), shape,
                                       config["seeds"]["routing"])
        except (UserError, KeyError) as exc:
            routing = None
            problems.append((path, f"the routing cannot be regenerated: {exc}"))
        for name, arm in arms.items():
            apath = f"{path}.arms.{name}"
            timed = [r for r in p["records"] if r["pattern"] == name and not r["warmup"]]
            for stage, s in arm["stages"].items():
                if s["raw_ms"] != [r["ms"].get(stage) for r in timed]:
                    problems.append((f"{apath}.stages.{stage}.raw_ms", "differs from the arm's per-round records"))
                problems += _stats_problems(s, f"{apath}.stages.{stage}")
            total = [sum(r["ms"].values()) for r in timed]
            if len(total) != len(arm["total"]["raw_ms"]) or not all(
                    close(a, b) for a, b in zip(arm["total"]["raw_ms"], total, strict=False)):
                problems.append((f"{apath}.total.raw_ms", "is not the sum of the arm's stages in each round"))
            problems += _stats_problems(arm["total"], f"{apath}.total")
            if base is not None and not close(arm["saved_ms"], base - arm["total"]["median_ms"]):
                problems.append((f"{apath}.saved_ms", f"{arm['saved_ms']}, baseline - arm total median = "
                                 f"{base - arm['total']['median_ms']}"))
            if name == "baseline":
                if arm.get("batches") != 1:
                    problems.append((f"{apath}.batches", "the original launch is one batch"))
                continue
            m = ARM_RE.match(name)
            if m is None or arm.get("layout") != m["layout"] or arm.get("max_fanin") != int(m["F"]):
                problems.append((apath, f"layout {arm.get('layout')!r} / max_fanin {arm.get('max_fanin')} do not match "
                                 f"the arm's name"))
            elif routing is not None:
                batches = int(split_routing(routing, shape.block_size, int(m["F"]), m["layout"]).shape[0])
                if arm.get("batches") != batches:
                    problems.append((f"{apath}.batches", f"{arm.get('batches')}, the routing split at F={m['F']} "
                                     f"({m['layout']}) gives {batches} batches"))
            for g, cmp in arm.get("equivalence", {}).items():
                problems += comparison_problems(cmp, f"{apath}.equivalence.{g}", numel.get(g))
                if cmp["rel_l2"] > tol:
                    problems.append((f"{apath}.equivalence.{g}.rel_l2", f"{cmp['rel_l2']} > full_shape_dkv_rel_l2 "
                                     f"{tol}: the equivalence gate cannot have passed"))
    _, bench = read_source(ctx, doc["benchmark_result"], ("bench_result",))
    if bench is None:
        ctx.unverifiable("$.autotune (against the benchmark result)",
                         f"unverified (source not found): {doc['benchmark_result']}")
    else:
        for stage, k in doc["autotune"].items():
            want_cfg = bench["autotune"]["kernels"].get(stage, {}).get("best_config")
            if k.get("best_config") != want_cfg:
                problems.append((f"$.autotune.{stage}.best_config", f"{k.get('best_config')}, but the arms are pinned "
                                 f"to {doc['benchmark_result']}'s {want_cfg}"))
    add("whatif_recompute", problems)


def _entry(config: dict[str, Any], name: str) -> dict[str, Any]:
    for p in config["patterns"]:
        if p["name"] == name:
            return p
    raise KeyError(f"pattern {name!r} is not in the config")


# --- method study --------------------------------------------------------------------------------

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
    for key, g in (doc.get("grid") or {}).items():
        path = f"$.grid.{key}"
        if str(g["dkv_grid"][-1]) != key:
            problems.append((path, f"keyed {key} but its dK/dV grid is {g['dkv_grid']}"))
        if g["ok"] != ("error" not in g) or g["ok"] != ("dk_vs_official" in g):
            problems.append((f"{path}.ok", f"{g['ok']}, but the record {'has' if 'error' in g else 'has no'} error "
                             f"and {'a' if 'dk_vs_official' in g else 'no'} comparison"))
        if "dk_vs_official" in g:
            problems += comparison_problems(g["dk_vs_official"], f"{path}.dk_vs_official")
    add("method_study_recompute", problems)

