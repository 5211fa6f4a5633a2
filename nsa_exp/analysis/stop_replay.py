"""``stop-replay``: where the verdict stop rule would have stopped bench results that timed every round, and what
cutting them there does to ``compare``'s verdicts (issue 30; docs/METHOD.md, Stop rule).

For each run ``R`` of the paths and each rule (:data:`RULES`: drop ``routing``, the rule of every stop run before
2026-12-05 and peer-bench's, and drop ``stage``, bench's since), :func:`.stop_rule.replay` cuts ``R`` where the rule
stops timing each stage of each routing: the GPU seconds of the observations it keeps, against ``R``'s whole. Then,
against every other run ``Q`` whole, ``compare``'s verdict on each routing x stage (:func:`.compare.ratio_ci`, the
noise table's floor of the GPU x stage, :func:`.noise.verdict`) of ``R`` cut and of ``R`` whole. A verdict the whole
run resolves (same, faster or slower) that the cut run leaves ``unclear`` is **lost**; one that turns into another
resolved verdict is **changed**. Every number is a function of the files (a fixed bootstrap seed).

>>> sorted(RULES)
['routing', 'stage']
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import permutations
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from ..core.config import StopRule
from ..errors import UserError
from ..io.store import load_document
from .compare import ratio_ci
from .noise import verdict
from .stop_rule import DEFAULT_RULE, STAGE_RULE, replay, run_floors

#: the rules replayed, by what each drops once converged
RULES: dict[str, StopRule] = {"routing": DEFAULT_RULE, "stage": STAGE_RULE}


@dataclass(frozen=True)
class Cut:
    """One run cut by one rule: the round the rule stopped at, each routing x stage's kept observations (ms) and
    their GPU seconds (the replay's own sum)."""

    rounds: int
    stopped_by: str | None
    kept: dict[str, dict[str, np.ndarray]]
    kept_seconds: float


def cut(doc: Mapping[str, Any], whole: Mapping[str, Mapping[str, np.ndarray]], rule: StopRule,
        floors: Mapping[str, float]) -> Cut:
    """``doc`` (a bench result that timed every round; ``whole``: its observations as arrays) cut where ``rule``
    with ``floors`` stops each stage."""
    r = replay(doc, rule, floors)
    kept = {p: {s: x[:r["stage_rounds"][p][s]] for s, x in by.items()} for p, by in whole.items()}
    return Cut(r["rounds"], r["stopped_by"], kept, r["timed_seconds"])


def verdicts(a: Mapping[str, Mapping[str, np.ndarray]], b: Mapping[str, Mapping[str, np.ndarray]],
             floors: Mapping[str, float], resamples: int,
             known: Mapping[tuple[str, str], str] | None = None,
             whole_a: Mapping[str, Mapping[str, np.ndarray]] | None = None) -> dict[tuple[str, str], str]:
    """``compare``'s verdict of B against A on every routing x stage both hold; where A's observations are
    ``whole_a``'s unchanged (a stage the rule timed to the end), ``known``'s verdict of the whole run (the same
    samples, the same seeded bootstrap: the same CI)."""
    out = {}
    for p in a:
        for s in (s for s in a[p] if p in b and s in b[p]):
            if known is not None and whole_a is not None and a[p][s].size == whole_a[p][s].size:
                out[(p, s)] = known[(p, s)]
            else:
                out[(p, s)] = verdict(ratio_ci(a[p][s], b[p][s], resamples), floors[s])
    return out


def whole_run(doc: Mapping[str, Any], path: str) -> None:
    """UserError (one line naming ``path`` and the field) unless ``doc`` timed every configured round, each stage of
    each routing once per round: a stop-rule run has nothing left to cut, and a stage with fewer observations than
    rounds is not one run's whole record (``validate`` says what else is wrong with it)."""
    if doc["timing"].get("stop") is not None:
        raise UserError(f"{path}: a stop-rule run (timing.stop); stop-replay cuts runs that timed every round")
    reps = doc["timing"]["repetitions"]
    for p, v in doc["patterns"].items():
        for s, st in v["stages"].items():
            if len(st["raw_ms"]) != reps:
                raise UserError(f"{path}: patterns.{p}.stages.{s}.raw_ms holds {len(st['raw_ms'])} observations, "
                                f"timing.repetitions {reps}; stop-replay cuts runs with one per round (run validate "
                                "on it)")


def replay_study(docs: Mapping[str, Mapping[str, Any]], resamples: int,
                 rules: Mapping[str, StopRule] = RULES) -> dict[str, Any]:
    """The study of the module docstring over ``docs`` (label -> bench result, all of one GPU and shape, at least
    two). Returns ``{"gpu", "floors", "runs": [{run, rule, rounds, stopped_by, kept_seconds, whole_seconds}],
    "rules": [{rule, kept_seconds (mean per run), whole_seconds, unclear_whole, unclear_cut, lost, changed,
    judged}], "ci_abs_ms": {rule: its absolute CI target (ms)}}``. UserError for fewer than two runs, or runs of
    different GPUs, shapes or patterns."""
    if len(docs) < 2:
        raise UserError("stop-replay: give at least two bench results (each run is judged against the others)")
    kinds = {"GPU": {d["metadata"]["gpu"]["name"] for d in docs.values()},
             "shape": {repr(d["shape"]) for d in docs.values()},
             "routings": {repr(list(d["patterns"])) for d in docs.values()}}
    differ = [f"{what} ({' vs '.join(sorted(v))})" for what, v in kinds.items() if len(v) > 1]
    if differ:
        raise UserError(f"stop-replay: the runs differ in {'; '.join(differ)}; replay runs of one GPU, shape and "
                        "routing set")
    gpu = kinds["GPU"].pop()
    whole = {k: {p: {s: np.asarray(st["raw_ms"], dtype=np.float64) for s, st in v["stages"].items()}
                 for p, v in d["patterns"].items()} for k, d in docs.items()}
    stages = list(dict.fromkeys(s for d in whole.values() for by in d.values() for s in by))
    floors = run_floors(gpu, stages)
    whole_seconds = {k: sum(float(x.sum()) for by in w.values() for x in by.values()) / 1000.0
                     for k, w in whole.items()}
    base = {(a, b): verdicts(whole[a], whole[b], floors, resamples) for a, b in permutations(docs, 2)}
    runs, summary = [], []
    for name, rule in rules.items():
        cuts = {k: cut(d, whole[k], rule, floors) for k, d in docs.items()}
        unclear_whole = unclear_cut = lost = changed = judged = 0
        for (a, b), was in base.items():
            now = verdicts(cuts[a].kept, whole[b], floors, resamples, was, whole[a])
            for cell, v in now.items():
                judged += 1
                unclear_whole += was[cell] == "unclear"
                unclear_cut += v == "unclear"
                lost += was[cell] != "unclear" and v == "unclear"
                changed += v not in ("unclear", was[cell])
        runs += [{"run": k, "rule": name, "rounds": c.rounds, "stopped_by": c.stopped_by,
                  "kept_seconds": c.kept_seconds, "whole_seconds": whole_seconds[k]} for k, c in cuts.items()]
        summary.append({"rule": name, "kept_seconds": float(np.mean([c.kept_seconds for c in cuts.values()])),
                        "whole_seconds": float(np.mean(list(whole_seconds.values()))),
                        "unclear_whole": unclear_whole, "unclear_cut": unclear_cut, "lost": lost,
                        "changed": changed, "judged": judged})
    return {"gpu": gpu, "floors": floors, "runs": runs, "rules": summary,
            "ci_abs_ms": {name: rule.ci_abs_ms for name, rule in rules.items()}}


def format_study(study: Mapping[str, Any]) -> str:
    """The study as two Markdown tables: per rule, then per run."""
    rules = tabulate([[r["rule"], f"{r['kept_seconds']:.1f} s", f"{r['whole_seconds']:.1f} s",
                       f"{r['unclear_whole']} / {r['judged']}", f"{r['unclear_cut']} / {r['judged']}", r["lost"],
                       r["changed"]] for r in study["rules"]],
                     headers=["drop", "kept GPU time per run", "whole run", "unclear (whole runs)",
                              "unclear (cut run vs whole)", "lost", "changed"], tablefmt="github")
    runs = tabulate([[r["run"], r["rule"], r["rounds"], r["stopped_by"], f"{r['kept_seconds']:.1f} s",
                      f"{r['whole_seconds']:.1f} s"] for r in study["runs"]],
                    headers=["run", "drop", "stopped at round", "by", "kept GPU time", "whole"], tablefmt="github")
    targets = ", ".join(f"{name} {t:g} ms" for name, t in study["ci_abs_ms"].items())
    return f"{study['gpu']}, floors of the noise table, absolute CI targets: {targets}\n\n{rules}\n\n{runs}"


def rules_with_ci_abs(ci_abs_ms: float | None) -> dict[str, StopRule]:
    """:data:`RULES`, each with the absolute CI target ``ci_abs_ms`` (ms) instead of its own when given.
    UserError (naming ``--ci-abs-ms``) for a value that is negative or not finite.

    >>> rules_with_ci_abs(0.005)["routing"].ci_abs_ms, rules_with_ci_abs(None)["routing"].ci_abs_ms
    (0.005, 0.02)
    """
    if ci_abs_ms is None:
        return dict(RULES)
    if not math.isfinite(ci_abs_ms) or ci_abs_ms < 0:
        own = ", ".join(f"{name} {rule.ci_abs_ms:g}" for name, rule in RULES.items())
        raise UserError(f"--ci-abs-ms: {ci_abs_ms} is not a finite target >= 0 ms (the rules' own: {own} ms)")
    return {name: replace(rule, ci_abs_ms=ci_abs_ms + 0.0) for name, rule in RULES.items()}  # -0.0 as 0.0


def stop_replay_of_files(paths: Sequence[str], resamples: int, ci_abs_ms: float | None = None) -> str:
    """``stop-replay``'s tables for the bench results at ``paths`` (the strict loader; UserError naming a file
    that is not a bench result, or one that stopped early), each labelled by its path; ``ci_abs_ms``: the
    rules' absolute CI target replaced (:func:`rules_with_ci_abs`)."""
    rules = rules_with_ci_abs(ci_abs_ms)
    docs: dict[str, Any] = {}
    seen: dict[Path, str] = {}
    for p in paths:
        same = seen.setdefault(Path(p).resolve(), str(p))
        if same != str(p) or str(p) in docs:
            raise UserError(f"stop-replay: {p} is {same} again; each run is judged against the others, so give "
                            "each file once")
        doc = load_document(p, ("bench_result",), str(p))
        whole_run(doc, str(p))
        docs[str(p)] = doc
    return format_study(replay_study(docs, resamples, rules))
