"""The ``analysis`` kind: a formal bench result's statistics (results/analysis/<name>.json, written by ``report``).
Its builder (:func:`build`: rows from :func:`nsa_exp.analysis.bootstrap.analysis_rows`, the record's fan-in,
memory, stage sums and autotune configs; ``report/data.py`` calls it) and its check (:func:`recompute`), in one
module.

- ``analysis_recompute``: the result ``results/raw/<source>.json`` (and its repeat) re-analysed by :func:`build`
  and compared field by field; without it: each row's half-width from its CI, the ``dkv_ci_within_1pct`` flag
  from the rows, ``repeat_diff_pct`` from the two medians.
- ``created_after_sources``: not dated before the results it was computed from.
"""

from __future__ import annotations

from typing import Any

from ..analysis.bootstrap import CI_LEVEL, METHOD, METHOD_NOTE, RESAMPLES, SEED, analysis_rows
from ..analysis.noise import SHARED_LIMIT, shared_observations
from ..core.kinds import schema_version
from ..core.records import BenchLike, BenchResult
from .checks import Add, Context, Problems, close, one_check
from .record_checks import host_problems
from .sources import created_after_sources, deep_diff, read_source, source_problems

KIND = "analysis"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def build(result: BenchLike, repeat: BenchLike | None = None) -> dict[str, Any]:
    """The analysis document of ``result`` (and its ``repeat``), without ``metadata`` (the writer adds it)."""
    result = BenchResult.coerce(result)
    repeat = None if repeat is None else BenchResult.coerce(repeat)
    rows = analysis_rows(result, repeat)
    patterns = result.patterns
    return {
        "schema_version": schema_version("analysis"),
        "kind": "analysis",
        "source": result.name,
        "repeat_source": repeat.name if repeat else None,
        "bootstrap": {"resamples": RESAMPLES, "seed": SEED, "level": CI_LEVEL, "method": METHOD,
                      "implementation": METHOD_NOTE},
        "rows": rows,
        "dkv_ci_within_1pct": all(r["ci95_halfwidth_pct"] <= 1.0 for r in rows if r["stage"] == "dkv_core"),
        "fanin": {name: p.fanin for name, p in patterns.items()},
        "memory": {name: p.memory for name, p in patterns.items()},
        "stage_sum_vs_full_bwd": {name: p.stage_sum().to_json() for name, p in patterns.items()},
        "autotune": result.best_configs(),
    }


def repeat_problems(result: dict[str, Any], repeat: dict[str, Any]) -> Problems:
    """What makes ``repeat`` no repeat of ``result``: the same run (its name, or its observations: every
    ``repeat_diff_pct`` would be 0), another GPU, or another experiment (shape, patterns). An analysis whose repeat
    was the run itself, or an H200 run, PASSed (an attacker, 2026-12-06).

    >>> run = {"name": "a", "shape": {"T": 8}, "config": {"patterns": []}, "metadata": {"gpu": {"name": "H100"}},
    ...        "patterns": {"local": {"stages": {"csr": {"raw_ms": [1.0]}}}}}
    >>> repeat_problems(run, {**run, "name": "b", "metadata": {"gpu": {"name": "H200"}},
    ...                       "patterns": {"local": {"stages": {"csr": {"raw_ms": [1.1]}}}}})
    [('$.repeat_source', 'b ran on H200, the run on H100: a repeat is the same experiment on the same GPU')]
    """
    problems: Problems = []
    made = [(d.get("metadata") or {}).get("created_utc") for d in (result, repeat)]
    if (repeat.get("name") == result.get("name") or shared_observations(result, repeat) >= SHARED_LIMIT or
            (made[0] is not None and made[0] == made[1])):
        problems.append(("$.repeat_source", f"{repeat.get('name')} is the run {result.get('name')} itself (the same "
                         "name, creation time or timed observations), not a second run"))
    gpu = [((d.get("metadata") or {}).get("gpu") or {}).get("name") for d in (result, repeat)]
    if gpu[0] != gpu[1]:
        problems.append(("$.repeat_source", f"{repeat.get('name')} ran on {gpu[1]}, the run on {gpu[0]}: a repeat is "
                         "the same experiment on the same GPU"))
    experiment = [(d.get("shape"), (d.get("config") or {}).get("patterns")) for d in (result, repeat)]
    for key, mine, theirs in zip(("shape", "patterns"), *experiment, strict=True):
        if mine != theirs:
            problems.append(("$.repeat_source", f"{repeat.get('name')} has another {key} than the run: a repeat is "
                             "the same experiment"))
    return problems




def recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    for i, r in enumerate(doc["rows"]):
        lo, hi = r["ci95_ms"]
        half = 100 * max(r["median_ms"] - lo, hi - r["median_ms"]) / r["median_ms"]
        if not close(r["ci95_halfwidth_pct"], half):
            problems.append((f"$.rows[{i}].ci95_halfwidth_pct", f"{r['ci95_halfwidth_pct']}, the CI gives {half}"))
        if "repeat_median_ms" in r:
            diff = 100 * (r["repeat_median_ms"] - r["median_ms"]) / r["median_ms"]
            if not close(r["repeat_diff_pct"], diff):
                problems.append((f"$.rows[{i}].repeat_diff_pct", f"{r['repeat_diff_pct']}, the medians give {diff}"))
    flag = all(r["ci95_halfwidth_pct"] <= 1.0 for r in doc["rows"] if r["stage"] == "dkv_core")
    if doc["dkv_ci_within_1pct"] != flag:
        problems.append(("$.dkv_ci_within_1pct", f"{doc['dkv_ci_within_1pct']}, the dK/dV rows give {flag}"))
    named = {"source": doc["source"], "repeat_source": doc.get("repeat_source")}
    sources = {k: read_source(ctx, f"results/raw/{n}.json", ("bench_result",)) if n else (None, None)
               for k, n in named.items()}
    for k, n in named.items():  # a source found must be a bench result that validates
        problems += source_problems(ctx, f"$.{k}", f"results/raw/{n}.json", sources[k], ("bench_result",)) if n else []
    (_, result), (_, repeat) = sources.values()
    if result is None or (doc.get("repeat_source") and repeat is None):
        ctx.unverifiable("$.rows, $.fanin, $.memory, $.stage_sum_vs_full_bwd, $.autotune",
                         f"unverified (source not found): results/raw/{doc['source']}.json"
                         + (f" / results/raw/{doc['repeat_source']}.json" if doc.get("repeat_source") else ""))
        add("analysis_recompute", problems)
        return
    problems += repeat_problems(result, repeat) if repeat is not None else []
    want = build(result, repeat)
    deep_diff({k: v for k, v in doc.items() if k != "metadata"}, want, "$", problems)
    add("analysis_recompute", problems)
    created_after_sources(doc, [d for d in (result, repeat) if d], add)


checks = one_check("analysis_recompute", recompute, host=host_problems)
