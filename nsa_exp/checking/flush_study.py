"""The ``flush_study`` kind: the L2 flush policy chosen from a GPU method study's flush records
(results/studies/<name>.json, written by ``flush-study``). Its builder (:func:`build`: the rows and the choice
from :mod:`nsa_exp.analysis.flush_study`) and its check (:func:`recompute`), in one module.

- ``flush_study_recompute``: the raw method study at ``source`` re-analysed by :func:`build` and compared field
  by field; without it: each ratio, ``differs`` flag and the chosen policy from the rows.
- ``created_after_sources``: not dated before the method study it was computed from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..analysis.bootstrap import CI_LEVEL, METHOD_NOTE, RESAMPLES, SEED
from ..analysis.flush_study import REFERENCE, choose_policy, load_flush_records, ratio_rows
from ..core.gpus import gpu_spec
from ..core.kinds import schema_version
from ..errors import UserError
from ..io.paths import recorded_path
from .checks import Add, Context, Problems, close, fixed_field_problems, one_check
from .record_checks import host_problems
from .sources import created_after_sources, deep_diff, read_source, source_problems

KIND = "flush_study"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def build(raw_path: str | Path) -> dict[str, Any]:
    """The ``flush_study`` document of the method study at ``raw_path``, without its host ``metadata`` (the
    ``flush-study`` command adds it). Raises UserError (one line) for a file that is not a method study with
    flush records."""
    doc, frame = load_flush_records(raw_path)
    rows = ratio_rows(frame)
    policy, reason = choose_policy(rows)
    return {"schema_version": schema_version("flush_study"), "kind": "flush_study", "source": recorded_path(raw_path),
            "gpu_name": str(doc.get("metadata", {}).get("gpu_name", "unknown")),
            "rounds": int(frame["round"].nunique()), "flush_bytes": int(doc["flush"].get("flush_bytes", 0)),
            "reference": REFERENCE,
            "bootstrap": {"resamples": RESAMPLES, "seed": SEED, "confidence_level": CI_LEVEL, "method": METHOD_NOTE},
            "rows": rows, "chosen": policy, "reason": reason}


def recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    # what flush-study always records, and what a flush can be: also with the method study found nowhere, a
    # confidence of 0.5, a billion resamples or a 1-byte flush PASSed (an attacker, 2026-12-07)
    fixed = {"resamples": RESAMPLES, "seed": SEED, "confidence_level": CI_LEVEL, "method": METHOD_NOTE}
    problems += fixed_field_problems(doc["bootstrap"], fixed, "$.bootstrap", "flush-study always records")
    if doc["reference"] != REFERENCE:
        problems.append(("$.reference", f"{doc['reference']!r}, flush-study's reference policy is {REFERENCE!r}"))
    l2 = getattr(gpu_spec(doc["gpu_name"]), "l2_bytes", None)
    if l2 is not None and doc["flush_bytes"] < l2:
        problems.append(("$.flush_bytes", f"{doc['flush_bytes']} bytes cannot flush the {doc['gpu_name']}'s "
                         f"{l2 // 2**20} MiB L2"))
    for i, r in enumerate(doc["rows"]):
        if not close(r["ratio"], r["median_ms"] / r["none_median_ms"]):
            problems.append((f"$.rows[{i}].ratio", f"{r['ratio']}, median_ms / none_median_ms = "
                             f"{r['median_ms'] / r['none_median_ms']}"))
        if r["differs"] != (r["ci_low"] > 1.0 or r["ci_high"] < 1.0):
            problems.append((f"$.rows[{i}].differs", f"{r['differs']}, but the CI [{r['ci_low']}, {r['ci_high']}] "
                             f"{'excludes' if not r['differs'] else 'contains'} 1"))
        if r["n_rounds"] != doc["rounds"]:
            problems.append((f"$.rows[{i}].n_rounds", f"{r['n_rounds']} != rounds {doc['rounds']}"))
    try:
        chosen, reason = choose_policy(doc["rows"])
    except (UserError, ValueError) as exc:
        problems.append(("$.rows", str(exc)))
    else:
        if (doc["chosen"], doc["reason"]) != (chosen, reason):
            problems.append(("$.chosen", f"{doc['chosen']!r}, the rows choose {chosen!r} ({reason})"))
    source = read_source(ctx, doc["source"], ("method_study",))
    problems += source_problems(ctx, "$.source", doc["source"], source, ("method_study",))
    if source[1] is None:
        if source[0] is None:
            ctx.unverifiable("$.rows (medians, CIs), $.rounds, $.gpu_name",
                             f"unverified (source not found): {doc['source']}")
        add("flush_study_recompute", problems)
        return
    found, raw = source
    try:
        want = build(found)
    except UserError as exc:
        problems.append(("$.source", f"{doc['source']}: {exc}"))
    else:
        want["source"] = doc["source"]
        deep_diff({k: v for k, v in doc.items() if k != "metadata"}, want, "$", problems)
    add("flush_study_recompute", problems)
    created_after_sources(doc, [raw], add)


checks = one_check("flush_study_recompute", recompute, host=host_problems)
