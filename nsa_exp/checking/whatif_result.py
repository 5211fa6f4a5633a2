"""The ``whatif_result`` kind: the WHAT-IF ARMS, timed (results/whatif; not the experiment's measurement). Its
builder (:func:`build`; ``gpu/whatif_run.WhatIfArm`` calls it) and its checks (:func:`checks`), in one module.

- ``whatif_recompute``: each arm's stage observations = its per-round records, its total = the sum of its stages
  per round, every statistic from its observations, ``saved_ms`` = baseline - arm total median, the round orders
  regenerated from the config's seed, layout and F from the arm's name, ``batches`` from the routing regenerated
  and split (:func:`nsa_exp.model.split.split_routing`), the dK/dV equivalence within the pinned tolerance; with
  the benchmark result at hand, its autotune configs are the ones pinned.
- the autotune configs, the config's rules, the run record, provenance and wall time every GPU document gets.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..core.config import Config, Shape
from ..core.families import pattern_from_entry
from ..core.kinds import schema_version
from ..core.protocol import (
    WHATIF_ARM_STAGES,
    WHATIF_BASELINE_STAGES,
    WHATIF_BENCHMARK_RESULT,
    WHATIF_LAYOUTS,
    WHATIF_MAX_FANINS,
    WHATIF_PATTERNS,
    WHATIF_ROUNDS,
    round_orders,
)
from ..errors import UserError
from ..model.split import split_batches
from ..routing.facts import regenerate
from . import record_checks
from .autotune_checks import autotune_configs
from .checks import Add, Context, Problems, close, first_difference, guarded
from .record_checks import config_semantics, pinned, run_record
from .routing_checks import edge_gate_problems
from .run_checks import comparison_problems, gradient_numel
from .sources import read_source, source_problems
from .stats_checks import stats_problems

KIND = "whatif_result"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS

ARM_RE = re.compile(r"^what-if:(?P<layout>[\w-]+):F=(?P<F>\d+)$")


def arm_name(layout: str, max_fanin: int) -> str:
    """``what-if:split-heavy-first:F=4096``"""
    return f"what-if:{layout}:F={max_fanin}"


def argv_problems(doc: dict[str, Any]) -> Problems:
    """The document against its recorded ``whatif`` command line (its options, else their defaults,
    :data:`~nsa_exp.core.protocol.WHATIF_PATTERNS` ...): its routings, each routing's arms (the baseline and one
    per layout x F) and its timed rounds. Nothing without the CLI's argv (``config_provenance`` lists it
    unverified). A what-if of 10 rounds recorded as 5, or with its F=8192 arms or its zipf routing dropped (the
    rest re-sorted and recomputed), PASSed (an attacker, 2026-12-06)."""
    argv = record_checks.recorded_cli_argv(doc)
    if argv is None:
        return []

    def given(flag: str, default: tuple[Any, ...]) -> list[str]:  # as the door reads them: stripped, each once
        value = record_checks.argv_option(argv, flag)
        return list(dict.fromkeys(x.strip() for x in value.split(","))) if value else [str(x) for x in default]

    patterns, layouts = given("--patterns", WHATIF_PATTERNS), given("--layouts", WHATIF_LAYOUTS)
    fanins = given("--max-fanin", WHATIF_MAX_FANINS)
    rounds = (record_checks.argv_option(argv, "--rounds") or str(WHATIF_ROUNDS)).strip().replace("_", "")  # int("1_0")
    if not all(f.isdigit() for f in fanins) or not rounds.isdigit():
        return [("$.metadata.argv", f"--max-fanin {','.join(fanins)} / --rounds {rounds}: not what whatif accepts")]
    problems: Problems = []
    bench = record_checks.argv_option(argv, "--benchmark-result") or WHATIF_BENCHMARK_RESULT
    if not (Path(doc["benchmark_result"]).as_posix().endswith(Path(bench).as_posix().removeprefix("./"))
            or Path(bench).as_posix().endswith(Path(doc["benchmark_result"]).as_posix())):
        # another bench's pins, its name put in benchmark_result, PASSed --strict (a re-attacker, 2026-12-07)
        problems.append(("$.benchmark_result", f"{doc['benchmark_result']!r}, but the recorded argv pins {bench!r}"))
    if sorted(doc["patterns"]) != sorted(patterns):
        problems.append(("$.patterns", f"{sorted(doc['patterns'])}, the recorded argv times {sorted(patterns)}"))
    want = sorted(["baseline", *(arm_name(layout, f) for layout in layouts
                                 for f in dict.fromkeys(int(x) for x in fanins))])
    problems += [(f"$.patterns.{name}.arms", f"{sorted(p['arms'])}, the recorded argv's layouts x F give {want}")
                 for name, p in doc["patterns"].items() if sorted(p["arms"]) != want]
    if doc["timing"]["rounds"] != int(rounds):
        problems.append(("$.timing.rounds", f"{doc['timing']['rounds']}, the recorded argv's --rounds is {rounds}"))
    return problems


def whatif_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    config, t = doc["config"], doc["timing"]
    if (t["warmup_rounds"] != config["timing"]["warmup_rounds"] or t["l2_flush_bytes"] !=
            config["timing"]["l2_flush_bytes"] or t["order"] != config["timing"]["order"]):
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
        try:  # the routing's CSR-row fan-in: B' of every split follows from it (model.split.split_batches)
            fanin = regenerate(pattern_from_entry(_entry(config, pname), f"{path}", shape), shape,
                               config["seeds"]["routing"]).row_fanin
        except (UserError, KeyError) as exc:
            fanin = None
            problems.append((path, f"the routing cannot be regenerated: {exc}"))
        for name, arm in arms.items():
            apath = f"{path}.arms.{name}"
            timed = [r for r in p["records"] if r["pattern"] == name and not r["warmup"]]
            # every arm times its layout's stages, each call a positive latency; a split arm holds its equivalence
            # (an attacker dropped a split's reduce, or set it to 0 ms, with its equivalence: PASS --strict)
            stages = WHATIF_BASELINE_STAGES if name == "baseline" else WHATIF_ARM_STAGES
            if list(arm["stages"]) != list(stages):
                problems.append((f"{apath}.stages", f"{list(arm['stages'])}, the arm times {list(stages)}"))
            problems += [(f"{path}.records[{i}].ms", f"{list(r['ms'])} (ms {[v for v in r['ms'].values()]}), the arm "
                          f"{name} times {list(stages)}, each a positive latency")
                         for i, r in enumerate(p["records"]) if r["pattern"] == name and
                         (list(r["ms"]) != list(stages) or not all(v > 0 for v in r["ms"].values()))][:1]
            if name != "baseline" and set(arm.get("equivalence") or {}) != {"dk", "dv"}:
                problems.append((f"{apath}.equivalence", f"{sorted(arm.get('equivalence') or {})}: a split arm is "
                                 "timed only after its dK and dV equal the original launch's (the equivalence gate)"))
            for stage, s in arm["stages"].items():
                if s["raw_ms"] != [r["ms"].get(stage) for r in timed]:
                    problems.append((f"{apath}.stages.{stage}.raw_ms", "differs from the arm's per-round records"))
                problems += stats_problems(s, f"{apath}.stages.{stage}")
            total = [sum(r["ms"].values()) for r in timed]
            if len(total) != len(arm["total"]["raw_ms"]) or not all(
                    close(a, b) for a, b in zip(arm["total"]["raw_ms"], total, strict=False)):
                problems.append((f"{apath}.total.raw_ms", "is not the sum of the arm's stages in each round"))
            problems += stats_problems(arm["total"], f"{apath}.total")
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
            elif fanin is not None:
                batches = split_batches(fanin, int(m["F"]), m["layout"])
                if arm.get("batches") != batches:
                    problems.append((f"{apath}.batches", f"{arm.get('batches')}, the routing split at F={m['F']} "
                                     f"({m['layout']}) gives {batches} batches"))
            for g, cmp in arm.get("equivalence", {}).items():
                problems += comparison_problems(cmp, f"{apath}.equivalence.{g}", numel.get(g))
                if cmp["rel_l2"] > tol:
                    problems.append((f"{apath}.equivalence.{g}.rel_l2", f"{cmp['rel_l2']} > full_shape_dkv_rel_l2 "
                                     f"{tol}: the equivalence gate cannot have passed"))
    problems += edge_gate_problems(doc, config, ctx) + argv_problems(doc)
    bench_source = read_source(ctx, doc["benchmark_result"], ("bench_result",))
    problems += source_problems(ctx, "$.benchmark_result", doc["benchmark_result"], bench_source, ("bench_result",))
    bench = bench_source[1]
    if bench is None:
        ctx.unverifiable("$.autotune (against the benchmark result)",
                         f"unverified (source not found): {doc['benchmark_result']}")
    else:
        for stage, k in doc["autotune"].items():
            want = bench["autotune"]["kernels"].get(stage, {})
            for key in ("kernel", "best_config"):  # the schema types each config (``BQ: true`` was 1 here)
                if k.get(key) != want.get(key):
                    problems.append((f"$.autotune.{stage}.{key}", f"{k.get(key)}, but the arms are pinned to "
                                     f"{doc['benchmark_result']}'s {want.get(key)}"))
    add("whatif_recompute", problems)


def _entry(config: dict[str, Any], name: str) -> dict[str, Any]:
    for p in config["patterns"]:
        if p["name"] == name:
            return p
    raise KeyError(f"pattern {name!r} is not in the config")


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    guarded("whatif_recompute", add, whatif_recompute, doc, add, ctx)
    autotune_configs(doc, add)
    config_semantics(doc, add)
    run_record(doc, add, ctx)
    guarded("config_provenance", add, record_checks.config_provenance, doc, add, ctx)
    work = sum(sum(r["ms"].values()) for p in doc["patterns"].values() for r in p["records"])
    record_checks.wall_plausible(doc["wall_seconds"], work, "$.wall_seconds", "its own per-round records", add)
    ctx.unverifiable("$.patterns.*.records[*].ms, $.patterns.*.arms.*.equivalence", "measured on the GPU host "
                     "(statistics recomputed from them; equivalence held to the pinned tolerance)")


#: Every what-if result says what it is not.
WHATIF_LABEL = ("WHAT-IF ARMS: FLA's unmodified kernels on an emulated split/heaviest-first schedule; not the "
                "experiment's measurement")


def build(*, config: Config, benchmark_result: str, gates: list[dict[str, Any]], autotune: dict[str, Any],
          rounds: int, patterns: dict[str, Any], wall_seconds: float, metadata: dict[str, Any]) -> dict[str, Any]:
    """The what-if arms' document: per routing its arms (``patterns.<p>.arms``, each with its stages' and total's
    observations and statistics, ``saved_ms``) and every round's records; the autotune configs pinned from
    ``benchmark_result``; ``rounds`` timed rounds after the config's warm-up."""
    return {"schema_version": schema_version("whatif_result"), "kind": "whatif_result", "label": WHATIF_LABEL,
            "config": config.raw, "config_path": str(config.source), "benchmark_result": benchmark_result,
            "shape": config.shape.to_dict(), "gates": gates, "autotune": autotune,
            "timing": {"warmup_rounds": config.timing.warmup_rounds, "rounds": rounds,
                       "l2_flush_bytes": config.timing.l2_flush_bytes, "order": config.timing.order},
            "patterns": patterns, "wall_seconds": wall_seconds, "metadata": metadata}
