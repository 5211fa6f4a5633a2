"""Checks of a run's statistics and timing: every summary from its raw observations, the stage sum
against the wrapper, the ratios, and the timing record against the config and the code.

- ``stats_recompute`` (every median/percentile/min/mean/n from its raw observations), ``min_observations``
  (each stage has at least the run's recorded repetitions), ``latencies_positive_finite``: over every
  recorded stage (a bench result's, or the stages a sweep point timed).
- ``stage_sum_plausible``: stage-sum over full_bwd recomputes and lies in [0.75, 1.25].
- ``ratio_recompute``: each ``stage_sum_vs_full_bwd.ratio`` = stage sum / full_bwd (and the itemised ratio
  with ``wrapper_extra``).
- ``timing_recompute``: repetitions == every stage's observations; warm-up counts (plus the warm-up rounds a
  resumed run re-ran, flagged ``rewarm`` in its samples); round orders regenerated from order mode + seed;
  flush bytes, flush policy (absent = "write"), order, stage list as the config says.
- ``stop_rule`` (a run under the stop rule, or whose config asks for one): every trace entry and decision
  recomputed from the raw observations (:mod:`nsa_exp.analysis.stop_rule`).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from ..analysis.stop_rule import (
    CI_REL_RULE,
    DEFAULT_RULE,
    STAGE_RULE,
    STAGE_RULE_20US,
    decision,
    method_of,
    observations,
    rerun,
    round_entry,
)
from ..core.config import StopRule
from ..core.protocol import LAUNCH_GUARD_CYCLES, PERCENTILES, STOP_SOURCES, TIMING_METHOD, round_orders, summarize
from ..core.stages import BACKWARD_STAGES, OPTIONAL_STAGES
from ..core.stages import STAGE_NAMES as STAGES
from .checks import Add, Context, Problems, close, first_difference, same
from .record_checks import (
    argv_option,
    commit_defines,
    floors_at_commit,
    gpu_run,
    recorded_clean_commit,
    recorded_cli_argv,
)

STAGE_SUM_BOUNDS = (0.75, 1.25)


def stats_checks(doc: dict[str, Any], add: Add) -> None:
    """``stats_recompute``, ``min_observations``, ``latencies_positive_finite`` over every recorded stage
    (a bench result's six, or the stages a sweep point timed)."""
    stats_p, obs_p, lat_p = [], [], []
    # The run's own rounds (``bench --repetitions`` may shorten a run; timing_recompute pins that every
    # stage has exactly these, and the report names a run shorter than its config's as such).
    want_n = doc["timing"]["repetitions"]
    timed = timed_rounds(doc)  # under the verdict rule a converged routing has fewer
    for name, p in doc["patterns"].items():
        for stage, s in p["stages"].items():
            path = f"$.patterns.{name}.stages.{stage}"
            raw = np.asarray(s["raw_ms"], dtype=np.float64)
            if not np.all(np.isfinite(raw)) or np.any(raw <= 0):
                lat_p.append((f"{path}.raw_ms", "non-positive or non-finite latency"))
                continue
            recomputed = {"median_ms": float(np.median(raw)), "min_ms": float(raw.min()), "mean_ms": float(raw.mean())}
            recomputed |= {k: float(np.percentile(raw, q, method="linear")) for k, q in PERCENTILES.items()}
            for key, value in recomputed.items():
                if not close(s[key], value):
                    stats_p.append((f"{path}.{key}", f"recorded {s[key]} but the raw observations give {value}"))
            if s["n_obs"] != raw.size:
                stats_p.append((f"{path}.n_obs", f"recorded {s['n_obs']} but raw_ms has {raw.size}"))
            want = want_n if timed is None else timed.get(name, {}).get(stage, 0)
            if raw.size < want:
                obs_p.append((f"{path}.raw_ms", f"{raw.size} observations < the run's {want} rounds of {name}"))
    add("stats_recompute", stats_p)
    add("min_observations", obs_p)
    add("latencies_positive_finite", lat_p)


def stage_sum_problems(doc: dict[str, Any]) -> Problems:
    """``stage_sum_plausible``: each recorded stage sum and full_bwd median recompute from the stages, and
    stage sum / full_bwd lies in :data:`STAGE_SUM_BOUNDS`."""
    sum_p = []
    lo, hi = STAGE_SUM_BOUNDS
    for name, p in doc["patterns"].items():
        st = p["stages"]
        stage_sum = sum(st[k]["median_ms"] for k in BACKWARD_STAGES)
        rec = p["stage_sum_vs_full_bwd"]
        path = f"$.patterns.{name}.stage_sum_vs_full_bwd"
        if not close(rec["stage_sum_median_ms"], stage_sum) or not close(rec["full_bwd_median_ms"],
                                                                            st["full_bwd"]["median_ms"]):
            sum_p.append((path, "does not recompute from the stage medians"))
        ratio = stage_sum / st["full_bwd"]["median_ms"]
        if not lo <= ratio <= hi:
            sum_p.append((f"{path}.ratio", f"stage-sum / full_bwd = {ratio:.3f} outside [{lo}, {hi}]"))
    return sum_p


def ratio_recompute(doc: dict[str, Any], add: Add) -> None:
    problems: Problems = []
    for name, p in doc["patterns"].items():
        rec, st = p["stage_sum_vs_full_bwd"], p["stages"]
        stage_sum = sum(st[k]["median_ms"] for k in BACKWARD_STAGES if k in st)
        full = st["full_bwd"]["median_ms"] if "full_bwd" in st else float("nan")
        ratio = stage_sum / full if full else float("nan")
        if not (math.isfinite(ratio) and close(rec["ratio"], ratio)):
            problems.append((f"$.patterns.{name}.stage_sum_vs_full_bwd.ratio",
                             f"recorded {rec['ratio']}, stage sum / full_bwd median = {ratio}"))
        if ("itemised_ratio" in rec) != ("wrapper_extra" in st):
            problems.append((f"$.patterns.{name}.stage_sum_vs_full_bwd", "itemised_ratio and the wrapper_extra "
                             "stage must be recorded together"))
        elif "itemised_ratio" in rec:
            extra = st["wrapper_extra"]["median_ms"]
            itemised = (stage_sum + extra) / full if full else float("nan")
            if not (close(rec["wrapper_extra_median_ms"], extra) and math.isfinite(itemised)
                    and close(rec["itemised_ratio"], itemised)):
                problems.append((f"$.patterns.{name}.stage_sum_vs_full_bwd.itemised_ratio",
                                 f"recorded {rec['itemised_ratio']}, (stage sum + wrapper_extra) / full_bwd "
                                 f"median = {itemised}"))
    add("ratio_recompute", problems)


def timing_recompute(doc: dict[str, Any], config: Any, add: Add) -> None:
    t, ct = doc["timing"], config.timing
    problems: Problems = []
    reps, warm = t["repetitions"], t["warmup_rounds"]
    # the table's stages, an optional one only when recorded (results from before it existed lack it)
    stages = [s for s in STAGES if s not in OPTIONAL_STAGES or s in t["stages"]]
    for key, want in (("warmup_rounds", ct.warmup_rounds), ("order_mode", ct.order), ("order_seed", config.seeds.order),
                      ("l2_flush_bytes", ct.l2_flush_bytes), ("stages", stages),
                      ("launch_guard_cycles", LAUNCH_GUARD_CYCLES), ("flush_policy", ct.flush)):
        got = t.get(key, "write") if key == "flush_policy" else t[key]  # absent = recorded before the field
        if got != want:
            problems.append((f"$.timing.{key}", f"recorded {got!r}, the config/code says {want!r}"))
    if t.get("method", TIMING_METHOD) != TIMING_METHOD:  # the engine writes the one method (absent before it did)
        problems.append(("$.timing.method", f"recorded {t['method']!r}, the engine times {TIMING_METHOD!r}"))
    names = list(doc["patterns"])
    orders = t["round_orders"]
    if len(orders) != warm + reps:
        problems.append(("$.timing.round_orders", f"{len(orders)} rounds != warmup_rounds {warm} + repetitions {reps}"))
    timed = timed_rounds(doc)  # the verdict rule: converged routings leave later rounds (stop_rule recomputes which)
    for r, order in enumerate(orders if timed is None else orders[:warm]):
        if sorted(order) != sorted(names):
            problems.append((f"$.timing.round_orders[{r}]", f"{order} is not one of each pattern {names}"))
            break
    if t["order_mode"] in ("fixed-rounds", "shuffled-rounds"):
        want_orders = round_orders(names, warm + reps, t["order_mode"], t["order_seed"])
        if timed is not None:  # the planned orders cut to the routings the rule still timed (its own rerun)
            want_orders = want_orders[:warm] + rerun(doc)[1]
        if orders != want_orders:
            first = first_difference(orders, want_orders)
            problems.append((f"$.timing.round_orders[{first}]", f"differs from the {t['order_mode']} order of seed "
                             f"{t['order_seed']} ({want_orders[first] if first < len(want_orders) else 'none'})"))
    for name, p in doc["patterns"].items():
        if list(p["stages"]) != [s for s in STAGES if s in p["stages"]]:
            problems.append((f"$.patterns.{name}.stages", "stages are not in the recorded stage order"))
        # a resumed run keeps the warm-up rounds it re-ran (its samples flag them rewarm)
        rewarm = sum(1 for x in doc["telemetry"]["samples"] if x["pattern"] == name and x.get("rewarm"))
        for stage, s in p["stages"].items():
            path = f"$.patterns.{name}.stages.{stage}"
            want = reps if timed is None else timed.get(name, {}).get(stage, 0)
            if len(s["raw_ms"]) != want:
                problems.append((f"{path}.raw_ms", f"{len(s['raw_ms'])} observations != the {want} timed rounds "
                                 + ("(timing.repetitions)" if timed is None else "of its round orders")))
            if len(s["warmup_ms"]) != warm + rewarm:
                problems.append((f"{path}.warmup_ms", f"{len(s['warmup_ms'])} warm-up values != warmup_rounds {warm}"
                                 + (f" + {rewarm} re-run on resume" if rewarm else "")))
    add("timing_recompute", problems)


def timed_rounds(doc: dict[str, Any]) -> dict[str, dict[str, int]] | None:
    """Under the verdict rule (``timing.stop.rule.floor_fraction``), the timed rounds of each routing's stages,
    ``{routing: {stage: rounds}}``: a routing's rounds as its recorded round orders say, or under drop ``stage`` each
    stage's as the rule decides on the document's own observations (:func:`~nsa_exp.analysis.stop_rule.rerun`); None
    for every other run (each stage timed ``timing.repetitions`` times)."""
    t = doc["timing"]
    rule = (t.get("stop") or {}).get("rule") or {}
    if "floor_fraction" not in rule:
        return None
    if rule.get("drop") == "stage":
        try:
            return rerun(doc)[0].stage_rounds
        except (KeyError, TypeError, ValueError, IndexError):  # a block the stop_rule check refuses, naming why
            return None
    rounds = Counter(p for order in t["round_orders"][t["warmup_rounds"]:] for p in order)
    return {name: dict.fromkeys(p["stages"], rounds.get(name, 0)) for name, p in doc["patterns"].items()}


def verdict_rule_problems(doc: dict[str, Any], ctx: Context | None = None) -> Problems:
    """The verdict rule's trace rebuilt: :func:`nsa_exp.analysis.stop_rule.rerun` feeds the document's own
    observations, in its recorded orders and wall clock, to the tracker that ran it, and each field it records
    (every trace entry with the routings it dropped, the reason, the rounds, each routing's timed rounds, what
    held the run, the rounds saved, the timed orders) is diffed with the recorded one. The floors are read from
    the noise table at the run's start: fractions covering every timed stage, and the table's at the recorded
    commit (:func:`stop_floors_problems`; unverified on ``ctx`` where it is not at hand), not today's table (which
    later runs change)."""
    stop, problems = doc["timing"]["stop"], []
    stages = {s for p in doc["patterns"].values() for s in p["stages"]}
    floors = stop.get("floors")
    if (not isinstance(floors, dict) or not stages <= set(floors) or
            not all(isinstance(v, (int, float)) and 0 < v < 1 for v in floors.values())):
        return [("$.timing.stop.floors", f"the verdict rule needs a floor in (0, 1) for every timed stage "
                                         f"{sorted(stages)}; recorded {floors!r}")]
    problems += stop_floors_problems(doc, sorted(stages), ctx)
    tracker, orders = rerun(doc)
    if tracker.stopped_by is None:  # a forger's trial of 2026-12-05: a run cut at any round passed as max_rounds
        problems.append(("$.timing.stop.stopped_by", f"recorded {stop.get('stopped_by')!r} at round "
                         f"{stop.get('rounds')}, but the rule on the raw observations does not stop there (no CI "
                         f"target met by every cell, no timeout, {stop.get('max_rounds')} rounds not reached): "
                         "a run cut short"))
    got_trace, want_trace = stop["trace"], tracker.trace
    for i, (got, want) in enumerate(zip(got_trace, want_trace, strict=False)):
        bad = [k for k in ("rounds", "timed_seconds", "unconverged", "worst", "worst_ratio", "dropped",
                           "dropped_stages") if k in want or k in got
               if not (got.get(k) == want.get(k) if k.startswith("dropped") or None in (got.get(k), want.get(k))
                       else same(got[k], want[k]))]
        if bad:
            problems.append((f"$.timing.stop.trace[{i}]", "; ".join(
                f"{k} recorded {got.get(k)!r}, the rule on the raw observations gives {want.get(k)!r}" for k in bad)))
    if len(got_trace) != len(want_trace):
        problems.append(("$.timing.stop.trace", f"{len(got_trace)} entries; the rule on the raw observations "
                                                f"stops after {len(want_trace)} rounds"))
    if stop.get("method") != method_of(tracker.rule):
        problems.append(("$.timing.stop.method", f"{stop.get('method')!r}: the verdict rule records "
                                                 f"{method_of(tracker.rule)!r}"))
    elapsed = [e.get("elapsed_seconds", 0.0) for e in got_trace]
    if any(b < a for a, b in zip(elapsed, elapsed[1:], strict=False)):
        problems.append(("$.timing.stop.trace", "the wall clock goes backwards between entries"))
    if got_trace and not close(stop.get("elapsed_seconds", float("nan")), elapsed[-1]):
        problems.append(("$.timing.stop.elapsed_seconds", "differs from the last trace entry's"))
    want = tracker.record()
    for key in ("stopped_by", "rounds", "cell_rounds", "held_by", "saved_cell_rounds", "stage_rounds",
                "saved_stage_rounds"):
        if (key in stop or key in want) and stop.get(key) != want.get(key):
            problems.append((f"$.timing.stop.{key}", f"recorded {stop.get(key)!r}, the rule gives {want.get(key)!r}"))
    if doc["timing"]["round_orders"][doc["timing"]["warmup_rounds"]:] != orders:
        problems.append(("$.timing.round_orders", "the timed rounds' orders are not the planned ones cut to the "
                                                  "routings the rule still timed"))
    return problems


def stop_floors_problems(doc: dict[str, Any], stages: list[str], ctx: Context | None) -> Problems:
    """The verdict rule's recorded floors of the timed ``stages`` against the noise table the run read
    (:func:`.record_checks.floors_at_commit`: the repository's at the recorded commit); listed on ``ctx`` as
    unverified where that table is not at hand. A forger's hole of 2026-12-04: floors edited together with a
    re-cut trace passed, since the trace is recomputed from the recorded floors."""
    stop = doc["timing"]["stop"]
    want = floors_at_commit(doc, stages)
    if isinstance(want, str):
        if ctx is not None:
            ctx.unverifiable("$.timing.stop.floors", want)
        return []
    if not want:
        return [("$.timing.stop.floors", "the recorded commit holds no readable results/noise/floors.json, so a run "
                                         "of it under the verdict rule had no floors to read")]
    return [] if stop["floors"] == want else [("$.timing.stop.floors", f"{stop['floors']}: the noise table at the "
                                                f"recorded commit gives {want} for this GPU's timed stages")]


#: Every rule ``bench --stop-rule`` (and ``reproduce``) has recorded for a config without ``timing.stop``: the
#: ``ci_rel`` rule before issue 30, the verdict rule dropping routings (2026-12-03), dropping stages (2026-12-05),
#: with a 2 us absolute CI target instead of 20 us (the evening of 2026-12-05).
CLI_RULES = (CI_REL_RULE, DEFAULT_RULE, STAGE_RULE_20US, STAGE_RULE)


def cli_stop_problems(doc: dict[str, Any]) -> Problems:
    """A bench result whose rule came from the command line (source ``--stop-rule``): the rule is one bench has
    ever folded in (:data:`CLI_RULES`: the flag takes no parameters), and, where the recorded argv is the CLI's, a
    ``bench`` argv holds ``--stop-rule`` and ``max_rounds`` is the rounds it asked (``--repetitions``, else the
    config's). A forger's trial of 2026-12-05: a loosened rule, a timeout of 20 s or a ceiling of 100 rounds under
    source ``--stop-rule`` passed (peer-bench results were already held to theirs)."""
    stop = doc["timing"].get("stop")
    if doc.get("kind") != "bench_result" or not isinstance(stop, dict) or stop.get("source") != STOP_SOURCES[1]:
        return []
    problems: Problems = []
    if stop.get("rule") not in [r.to_dict() for r in CLI_RULES]:
        problems.append(("$.timing.stop.rule", f"{stop.get('rule')}: bench --stop-rule (a config without "
                         f"timing.stop) times under bench's default rule, one of {[r.to_dict() for r in CLI_RULES]}"))
    argv = recorded_cli_argv(doc)
    if argv is not None:  # the CLI's argv: its options are the run's
        if argv[1:2] == ["bench"] and "--stop-rule" not in argv:
            problems.append(("$.timing.stop.source", "--stop-rule, but the recorded argv has no --stop-rule"))
        given = argv_option(argv, "--repetitions")
        want = int(given) if given is not None and given.isdigit() else doc["config"]["timing"]["repetitions"]
        if stop.get("max_rounds") != want:
            problems.append(("$.timing.stop.max_rounds", f"{stop.get('max_rounds')}, but the config and argv ask "
                                                         f"{want} timed rounds"))
    return problems


def stop_clock_problems(doc: dict[str, Any], ctx: Context | None) -> Problems:
    """The stop rule's host clock: the round loop's seconds lie inside the run's (``wall_seconds``, and its
    ``rounds`` phase where recorded) on a GPU run; a ``timeout`` decision reads only that clock, which no file can
    recompute, so it is listed as unverified on ``ctx``. A forger's trial of 2026-12-05: a clock jumping to 301 s at
    round 60 cut a run there by "timeout" and passed."""
    stop, problems = doc["timing"]["stop"], []
    elapsed = stop.get("elapsed_seconds")
    phases: dict[str, Any] = doc["phases"] if isinstance(doc.get("phases"), dict) else {}
    if isinstance(doc.get("metadata"), dict) and gpu_run(doc) and isinstance(elapsed, (int, float)):
        for label, bound in (("wall_seconds", doc.get("wall_seconds")), ("phases.rounds", phases.get("rounds"))):
            if isinstance(bound, (int, float)) and elapsed > bound + 1e-6:
                problems.append(("$.timing.stop.elapsed_seconds", f"{elapsed} s of round loop, more than the run's "
                                                                  f"{label} {bound} s"))
    if stop.get("stopped_by") == "timeout" and ctx is not None:
        ctx.unverifiable("$.timing.stop.stopped_by", "timeout: the decision reads the host's wall clock, which no file "
                         "can recompute (only held inside the run's wall time)")
    return problems


def stop_drop_problems(doc: dict[str, Any], rule: StopRule, ctx: Context | None) -> Problems:
    """A rule that drops stages (``drop: "stage"``) exists only from the commit that defines ``STOP_DROPS``
    (``nsa_exp/core/protocol.py``, 40cee48): a run of an earlier recorded commit could not have used it (a forger's
    trial of 2026-12-05 attributed one to an older commit, whose noise table is looser). Unverified on ``ctx`` where
    the commit is not at hand."""
    if rule.drop == "routing":
        return []
    known = commit_defines(doc, "nsa_exp/core/protocol.py", "STOP_DROPS")
    if isinstance(known, str):
        if ctx is not None:
            ctx.unverifiable("$.timing.stop.rule.drop", known)
        return []
    return [] if known else [("$.timing.stop.rule.drop", f"{rule.drop!r}, but the recorded commit "
                              f"{str(recorded_clean_commit(doc))[:12]} has no such rule (drop arrived with STOP_DROPS, "
                              "commit 40cee48)")]


def stop_rule_problems(doc: dict[str, Any], ctx: Context | None = None) -> Problems | None:
    """``validate``'s ``stop_rule`` check of a bench result or sweep point (None: the run has no ``timing.stop``
    and its config asks for none, so there is nothing to check): the recorded rule is the config's
    (source ``config``) or was asked on the command line (``--stop-rule``, the config has none); the round
    count agrees with the observations; every trace entry recomputes from the raw observations of its first
    ``rounds`` timed rounds; the run went on at every earlier entry and stopped at the last, for the recorded
    reason; under the verdict rule, the floors are the noise table's at the recorded commit
    (:func:`stop_floors_problems`, unverified on ``ctx`` where it is not at hand). Returns ``(json path, message)``
    pairs (none = passed)."""
    stop, timing = doc["timing"].get("stop"), doc["timing"]
    configured = (doc["config"].get("timing") or {}).get("stop")
    if stop is None:
        return ([("$.timing.stop", "missing, but the config's timing.stop asks for the stop rule")] if configured
            else None)
    problems: Problems = []
    from_config, from_cli = STOP_SOURCES
    if configured is not None and (stop["source"] != from_config or stop["rule"] != StopRule(**configured).to_dict()):
        problems.append(("$.timing.stop.rule", f"recorded {stop['rule']} ({stop['source']}), the config's "
                                                f"timing.stop is {configured}"))
    if configured is None and stop["source"] != from_cli:
        problems.append(("$.timing.stop.source", f"{stop['source']!r}, but the config has no timing.stop"))
    rule, n, trace = StopRule(**stop["rule"]), stop["rounds"], stop["trace"]
    problems += cli_stop_problems(doc) + stop_clock_problems(doc, ctx) + stop_drop_problems(doc, rule, ctx)
    # the round loop's wall clock holds the GPU time it timed (a forger's hole of 2026-12-04: elapsed halved passed)
    problems += [(f"$.timing.stop.trace[{i}].elapsed_seconds", f"{e['elapsed_seconds']} s, less than the "
                  f"{e['timed_seconds']} s of GPU time timed by then") for i, e in enumerate(trace)
                 if e.get("timed_seconds") is not None and e["elapsed_seconds"] < e["timed_seconds"]][:1]
    if trace and stop["elapsed_seconds"] != trace[-1]["elapsed_seconds"]:
        problems.append(("$.timing.stop.elapsed_seconds", f"{stop['elapsed_seconds']} s, but the last trace entry "
                         f"records {trace[-1]['elapsed_seconds']} s"))
    if rule.floor_fraction is not None:
        if n != timing["repetitions"] or n > stop["max_rounds"]:
            problems.append(("$.timing.stop.rounds", f"{n} rounds, timing.repetitions {timing['repetitions']}, "
                                                     f"max_rounds {stop['max_rounds']}: must agree"))
        return problems + verdict_rule_problems(doc, ctx)
    if n != timing["repetitions"] or len(trace) != n or n > stop["max_rounds"]:
        problems.append(("$.timing.stop.rounds", f"{n} rounds, {len(trace)} trace entries, timing.repetitions "
                                                 f"{timing['repetitions']}, max_rounds {stop['max_rounds']}: "
                                                 "must agree (and not exceed max_rounds)"))
        return problems
    raw = observations(doc)
    last_elapsed = 0.0
    for i, got in enumerate(trace):
        path = f"$.timing.stop.trace[{i}]"
        want = round_entry(i + 1, got["elapsed_seconds"], {k: x[:i + 1] for k, x in raw.items()}, rule)
        bad = [k for k in ("rounds", "timed_seconds", "unconverged", "worst", "worst_ratio")
               if not (got[k] == want[k] if None in (got[k], want[k]) else same(got[k], want[k]))]
        if bad:
            problems.append((path, "; ".join(f"{k} recorded {got[k]!r}, the raw observations give {want[k]!r}"
                                             for k in bad)))
        if got["elapsed_seconds"] < last_elapsed:
            problems.append((f"{path}.elapsed_seconds", "the wall clock went backwards"))
        last_elapsed = got["elapsed_seconds"]
        reason = decision(want, rule, stop["max_rounds"])
        if i < n - 1 and reason is not None:
            problems.append((path, f"the rule stops here ({reason}), but the run went on to {n} rounds"))
        if i == n - 1 and reason != stop["stopped_by"]:
            problems.append(("$.timing.stop.stopped_by", f"recorded {stop['stopped_by']!r}, the rule at round {n} "
                                                         f"gives {reason!r}"))
    if trace and not close(stop["elapsed_seconds"], trace[-1]["elapsed_seconds"]):
        problems.append(("$.timing.stop.elapsed_seconds", "differs from the last trace entry's"))
    return problems


def stop_rule_check(doc: dict[str, Any], add: Add, ctx: Context | None = None) -> None:
    """``stop_rule``, only for a run under the stop rule or whose config asks for one."""
    problems = stop_rule_problems(doc, ctx)
    if problems is not None:
        add("stop_rule", problems)




def stats_problems(s: dict[str, Any], path: str) -> Problems:
    return [(f"{path}.{k}", f"recorded {s.get(k)} but the raw observations give {v}")
            for k, v in summarize(s["raw_ms"]).items() if not close(s.get(k, float("nan")), v)]
