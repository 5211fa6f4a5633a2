"""What ``compare`` pairs when A or B is a release result: a release against the pinned bench, or two releases.

Per routing both results timed (the rule itself, ratio of medians B/A with its bootstrap CI and verdict against
the noise floor, is :mod:`.compare`'s):

- ``metric: events``: the same public call timed by CUDA events on both sides: ``selection_fwd``
  (``parallel_nsa_fwd``), ``full_bwd`` (the official ``parallel_nsa_bwd`` as a whole) and, between two
  releases, ``train_step``;
- ``metric: kernel``: a pinned stage's kernel time from CUPTI: on a release side the kernels of its
  ``parallel_nsa_bwd`` calls grouped by name (:mod:`.release_kernels`), on the pinned side the stage's own
  ``cupti`` record (GPU span of that stage's call). ``correspondence`` says how well the two measure the same
  thing (``exact``: the same kernel; ``partial``: the CSR, whose pinned range also holds two fills); a group
  only one side has (0.5.1's block mask, 0.5.2's CSR against 0.5.1) is listed under ``release.not_compared``
  with the reason, never paired with something else.

:func:`same_experiment` names what makes A and B not the same problem (different shapes, routing or input
seeds, a common routing with other parameters, other edges or fan-in, or, between two releases, another
routing sha256); routings only one side timed are listed (``only_in_a`` / ``only_in_b``).
"""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from ..core.records import BenchResult, ReleaseResult
from ..core.stages import BACKWARD_STAGES, RELEASE_STAGE_LISTS, RELEASE_STAGES

#: A side of a release comparison.
Side = BenchResult | ReleaseResult
#: ``(pattern, stage, metric, A samples, B samples, correspondence, note)``: one row to judge.
Cell = tuple[str, str, str, list[float], list[float], str, str | None]


def timer(doc: Side) -> str:
    """How a side was timed: ``cuda-events`` (every bench result; a GPU release run) or ``host-clock``."""
    return doc.timing.timer or "cuda-events"


def same_experiment(a: Side, b: Side) -> tuple[list[str], list[str]]:
    """The common routings, and every difference that makes A and B not the same problem."""
    diff = [f"shape.{k}: A {a.shape.get(k)} vs B {b.shape.get(k)}" for k in sorted(set(a.shape) | set(b.shape))
            if a.shape.get(k) != b.shape.get(k)]
    for seed in ("routing", "inputs"):
        sa, sb = a.config["seeds"].get(seed), b.config["seeds"].get(seed)
        if sa != sb:
            diff.append(f"config.seeds.{seed}: A {sa} vs B {sb}")
    common = [p for p in a.patterns if p in b.patterns]
    for p in common:
        pa, pb = a.patterns[p], b.patterns[p]
        for key in ("params", "edges", "fanin", "routing_sha256"):
            va, vb = getattr(pa, key), getattr(pb, key)
            if va is not None and vb is not None and va != vb:
                diff.append(f"patterns.{p}.{key}: A {va} vs B {vb}")
    if not common:
        diff.append(f"patterns: none in common (A {list(a.patterns)}, B {list(b.patterns)})")
    return common, diff


def kernel_samples(doc: Side) -> dict[str, dict[str, tuple[list[float], str, str | None]]]:
    """``{pattern: {stage: (ms per call, correspondence, note)}}`` of one side's kernel-time stages."""
    if isinstance(doc, BenchResult):
        calls = (doc.cupti or {}).get("kernel_ms", {})
        return {p: {s: (v, "exact", None) for s, v in st.items() if s in BACKWARD_STAGES} for p, st in calls.items()}
    k = doc.kernels or {}
    table = {row["group"]: row for row in k.get("groups_table", [])}
    return {p: {g: (v, table[g]["correspondence"], table[g].get("note")) for g, v in st.get("full_bwd", {}).items()}
            for p, st in k.get("groups", {}).items()}


def release_cells(a: Side, b: Side, common: list[str]) -> tuple[list[Cell], list[dict[str, str]]]:
    """Every pair of samples to judge, and what was not compared (with why)."""
    cells: list[Cell] = []
    skipped = []
    # the three calls every release result times, and nsa_layer where either side times it
    known = [s for s in RELEASE_STAGE_LISTS[-1] if s in RELEASE_STAGES or s in a.timing.stages or s in b.timing.stages]
    events = [s for s in known if s in a.timing.stages and s in b.timing.stages]
    for s in known:
        if s not in events:
            side = "A" if s not in a.timing.stages else "B"
            skipped.append({"what": s, "why": f"{side} ({a.name if side == 'A' else b.name}) does not time it"})
    ka, kb = kernel_samples(a), kernel_samples(b)
    for p in common:
        cells += [(p, s, "events", list(a.patterns[p].stages[s].raw_ms), list(b.patterns[p].stages[s].raw_ms),
                   "exact", None) for s in events]
        ga, gb = ka.get(p, {}), kb.get(p, {})
        for g in [g for g in ga if g in gb]:
            corr = "partial" if "partial" in (ga[g][1], gb[g][1]) else ga[g][1] if ga[g][1] == gb[g][1] else "none"
            cells.append((p, g, "kernel", ga[g][0], gb[g][0], corr, ga[g][2] or gb[g][2]))
        for g in [g for g in [*ga, *gb] if (g in ga) != (g in gb)]:
            if p == common[0]:
                side = "A" if g in ga else "B"
                skipped.append({"what": f"kernel {g}", "why": f"only {side} has it (no counterpart on the other side"
                                f"{'' if ka or kb else '; no CUPTI block'})"})
    return cells, skipped


def release_block(a: Side, b: Side, common: list[str], skipped: list[dict[str, str]]) -> dict[str, Any]:
    """The compare document's ``release`` block: both kinds and labels, the routings compared and not."""
    def label(d: Side) -> str:
        return d.release["label"] if isinstance(d, ReleaseResult) else "pinned bench"

    return {"a_kind": a.kind, "b_kind": b.kind, "a_label": label(a), "b_label": label(b), "patterns": common,
            "only_in_a": [p for p in a.patterns if p not in b.patterns],
            "only_in_b": [p for p in b.patterns if p not in a.patterns], "not_compared": skipped}


def format_release_table(doc: dict[str, Any]) -> str:
    """A comparison with a release result as a plain-text table, with what was not compared and why."""
    rows = [[r["pattern"], r["stage"], r["metric"], r["correspondence"], r["a_median"], r["b_median"], r["ratio"],
             f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]", f"{100 * r['floor']:.1f}%", r["verdict"]]
            for r in doc["rows"]]
    rel = doc["release"]
    lines = [f"A = {doc['a']['name']} ({rel['a_label']}), B = {doc['b']['name']} ({rel['b_label']}); ms",
             tabulate(rows, headers=["pattern", "stage", "metric", "corresp.", "A ms", "B ms", "B/A", "95% CI",
                                     "floor", "verdict"], floatfmt=".3f"),
             f"rule: {doc['rule']}", "verdicts: " + ", ".join(f"{v} {n}" for v, n in doc["counts"].items())]
    lines += [f"not compared: {s['what']}: {s['why']}" for s in rel["not_compared"]]
    lines += [f"only in {side}: {', '.join(rel[f'only_in_{side.lower()}'])}" for side in ("A", "B")
              if rel[f"only_in_{side.lower()}"]]
    return "\n".join(lines)
