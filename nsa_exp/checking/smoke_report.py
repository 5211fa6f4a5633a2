"""The ``smoke_report`` kind: correctness against FLA's naive oracle and the staged path against the official
wrapper (results/reports/<config>_smoke.json). Its builder (:func:`build`; ``gpu/smoke.SmokeArm`` calls it) and
its checks (:func:`checks`), in one module.

- ``smoke_recompute``: every comparison record consistent with itself and its shape (numel); the failures
  re-judged from the metrics (:mod:`nsa_exp.analysis.reproduction`) at the report's tolerances and at the pinned
  ones, equal to the recorded list; ``passed`` = no failure; the naive pattern is the baseline; the oracle shape
  has M > S; with the config at hand, every shape and pattern is the config's.
- the pinned tolerances, the run record and the config's provenance every GPU document gets.
"""

from __future__ import annotations

from typing import Any

from ..analysis.reproduction import judge_naive, judge_staged
from ..core.config import Shape, check_routings_differ
from ..core.families import BASELINE_PATTERN
from ..core.kinds import schema_version
from ..errors import UserError
from . import record_checks
from .checks import Add, Context, Problems, guarded
from .record_checks import config_of, pinned, run_record
from .routing_checks import edge_gate_problems
from .run_checks import comparison_problems, gradient_numel

KIND = "smoke_report"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


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
    config = config_of(doc, ctx)
    if config is not None:
        smoke = config.get("smoke", {})
        for block, key in (("naive", "naive"), ("staged_vs_official", "staged"), ("oracle", "oracle")):
            if block in doc and key in smoke and doc[block]["shape"] != smoke[key]:
                problems.append((f"$.{block}.shape", f"{doc[block]['shape']} != the config's smoke.{key}"))
        names = [p["name"] for p in config.get("patterns", [])]
        for block in ("staged_vs_official", "oracle"):  # the oracle gate checks every routing (an attacker dropped 3)
            if block in doc and list(doc[block]["patterns"]) != names:
                problems.append((f"$.{block}.patterns", f"{list(doc[block]['patterns'])} != the config's {names}"))
    if "oracle" not in doc:  # optional only for reports of the commits before smoke ran the oracle gate
        ran = record_checks.commit_mentions(doc, "nsa_exp/gpu/smoke.py", "oracle")
        if isinstance(ran, str):
            ctx.unverifiable("$.oracle", f"absent; whether the recorded commit's smoke ran the oracle gate: {ran}")
        elif ran:
            problems.append(("$.oracle", f"absent, but smoke at the recorded commit "
                             f"{str(record_checks.recorded_clean_commit(doc))[:12]} runs the oracle gate (every "
                             "routing against FLA's naive oracle at M > S)"))
    # smoke runs its gates strictly, before any comparison: a report carrying comparisons behind a failed gate
    # cannot exist (a re-attacker, 2026-12-06)
    problems += record_checks.unpassed_gates(doc, "smoke compares only after every gate passed")
    if config is not None:
        problems += edge_gate_problems(doc, config, ctx)
    add("smoke_recompute", problems)


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    guarded("smoke_recompute", add, smoke_recompute, doc, add, ctx)
    record_checks.tolerances_pinned(doc["tolerances"], "$.tolerances", add)
    run_record(doc, add, ctx)
    guarded("config_provenance", add, record_checks.config_provenance, doc, add, ctx)
    ctx.unverifiable("$.naive, $.oracle, $.staged_vs_official (rel_l2, max_abs, max_ulp, n_different)",
                     "need the GPU tensors; held to their own consistency and the pinned tolerances")


def build(*, config_name: str, gates: list[dict[str, Any]], checks: dict[str, Any],
          metadata: dict[str, Any]) -> dict[str, Any]:
    """The report of one smoke run: the gates, the comparisons (``checks``: ``naive``, ``oracle``,
    ``staged_vs_official``, ``tolerances``, ``failures``, as ``gpu/smoke.run_smoke_checks`` gives them) and the
    host's metadata; ``passed`` = no failure."""
    return {"schema_version": schema_version("smoke_report"), "kind": "smoke_report", "config_name": config_name,
            "passed": not checks["failures"], "gates": gates, **checks, "metadata": metadata}
