"""``compare`` with a release result (issue 22): a release against the pinned bench, or two releases.

Rows, per routing both results timed, under compare's rule (ratio of medians B/A, bootstrap CI, verdict
against the noise floor; :mod:`nsa_exp.results.compare`):

- ``metric: events`` — the same public call timed by CUDA events on both sides: ``selection_fwd``
  (``parallel_nsa_fwd``), ``full_bwd`` (the official ``parallel_nsa_bwd`` as a whole) and, between two
  releases, ``train_step``;
- ``metric: kernel`` — a pinned stage's kernel time from CUPTI: on a release side the kernels of its
  ``parallel_nsa_bwd`` calls grouped by name (:mod:`nsa_exp.results.release_kernels`), on the pinned side
  the stage's own ``cupti`` record (GPU span of that stage's call). ``correspondence`` says how well the
  two measure the same thing (``exact``: the same kernel; ``partial``: the CSR, whose pinned range also
  holds two fills); a group only one side has (0.5.1's block mask, 0.5.2's CSR against 0.5.1) is listed
  under ``release.not_compared`` with the reason, never paired with something else.

Refused (one line, exit 2): different shapes, routing or input seeds, a common routing with other
parameters, other edges or fan-in, or (two releases) another routing sha256; a host-clock result against a
GPU one; ``--cycles``. Routings only one side timed are listed (``only_in_a``/``only_in_b``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from ..errors import UserError
from .analysis import CI_LEVEL, METHOD, SEED
from .compare import FAIL_ON, MIN_FLOOR, RULE, VERDICTS, _source, noise_floors, ratio_ci, verdict
from .schema import schema_version
from .store import load_document

EVENT_STAGES = ("selection_fwd", "full_bwd", "train_step")


def _timer(doc: dict[str, Any]) -> str:
    return doc["timing"].get("timer", "cuda-events")


def _same_experiment(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The common routings, and every difference that makes A and B not the same problem."""
    diff = [f"shape.{k}: A {a['shape'].get(k)} vs B {b['shape'].get(k)}" for k in sorted(set(a["shape"]) |
            set(b["shape"])) if a["shape"].get(k) != b["shape"].get(k)]
    for seed in ("routing", "inputs"):
        sa, sb = a["config"]["seeds"].get(seed), b["config"]["seeds"].get(seed)
        if sa != sb:
            diff.append(f"config.seeds.{seed}: A {sa} vs B {sb}")
    common = [p for p in a["patterns"] if p in b["patterns"]]
    for p in common:
        pa, pb = a["patterns"][p], b["patterns"][p]
        for key in ("params", "edges", "fanin", "routing_sha256"):
            if key in pa and key in pb and pa[key] != pb[key]:
                diff.append(f"patterns.{p}.{key}: A {pa[key]} vs B {pb[key]}")
    if not common:
        diff.append(f"patterns: none in common (A {list(a['patterns'])}, B {list(b['patterns'])})")
    return common, diff


def _kernel_samples(doc: dict[str, Any]) -> dict[str, dict[str, tuple[list[float], str, str | None]]]:
    """``{pattern: {stage: (ms per call, correspondence, note)}}`` of one side's kernel-time stages."""
    if doc["kind"] == "bench_result":
        calls = (doc.get("cupti") or {}).get("kernel_ms", {})
        return {p: {s: (v, "exact", None) for s, v in st.items() if s in ("delta_preprocess", "csr", "dq_core",
                                                                          "dkv_core")} for p, st in calls.items()}
    k = doc["kernels"] or {}
    table = {row["group"]: row for row in k.get("groups_table", [])}
    return {p: {g: (v, table[g]["correspondence"], table[g].get("note")) for g, v in st.get("full_bwd", {}).items()}
            for p, st in k.get("groups", {}).items()}


def _rows(a: dict[str, Any], b: dict[str, Any], common: list[str], floors: dict[str, float], floor: float,
          resamples: int) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    rows, skipped = [], []
    events = [s for s in EVENT_STAGES if s in a["timing"]["stages"] and s in b["timing"]["stages"]]
    for s in EVENT_STAGES:
        if s not in events:
            side = "A" if s not in a["timing"]["stages"] else "B"
            skipped.append({"what": s, "why": f"{side} ({a['name'] if side == 'A' else b['name']}) does not time it"})
    ka, kb = _kernel_samples(a), _kernel_samples(b)
    for p in common:
        cells = [(s, "events", a["patterns"][p]["stages"][s]["raw_ms"], b["patterns"][p]["stages"][s]["raw_ms"],
                  "exact", None) for s in events]
        ga, gb = ka.get(p, {}), kb.get(p, {})
        for g in [g for g in ga if g in gb]:
            corr = "partial" if "partial" in (ga[g][1], gb[g][1]) else ga[g][1] if ga[g][1] == gb[g][1] else "none"
            cells.append((g, "kernel", ga[g][0], gb[g][0], corr, ga[g][2] or gb[g][2]))
        for g in [g for g in [*ga, *gb] if (g in ga) != (g in gb)]:
            if p == common[0]:
                side = "A" if g in ga else "B"
                skipped.append({"what": f"kernel {g}", "why": f"only {side} has it (no counterpart on the other side"
                                f"{'' if ka or kb else '; no CUPTI block'})"})
        for stage, metric, xa, xb, corr, note in cells:
            xa, xb = np.asarray(xa, dtype=np.float64), np.asarray(xb, dtype=np.float64)
            if min(xa.size, xb.size) < 2:
                raise UserError(f"{p} {stage}: {xa.size} vs {xb.size} observations; a bootstrap CI needs at least 2 "
                                "on each side (rerun with more --repetitions / --cupti-rounds)")
            ci = ratio_ci(xa, xb, resamples)
            f = floors.get(stage, floor)
            rows.append({"pattern": p, "stage": stage, "metric": metric, "correspondence": corr,
                         **({"note": note} if note else {}), "a_median": float(np.median(xa)),
                         "b_median": float(np.median(xb)), "a_n": int(xa.size), "b_n": int(xb.size),
                         "ratio": float(np.median(xb) / np.median(xa)), "ci95": list(ci), "floor": f,
                         "verdict": verdict(ci, f)})
    return rows, skipped


def compare_release(path_a: str | Path, a: dict[str, Any], path_b: str | Path, b: dict[str, Any],
                    noise_from: list[str] | None, floor: float, cycles: bool, fail_on: str | None,
                    resamples: int) -> dict[str, Any]:
    """The ``compare`` document (schema ``compare``, with its release fields) of B against A (module doc)."""
    if cycles:
        raise UserError("--cycles: not available with a release result (its kernel times have no per-call clock); "
                        "compare in time")
    if _timer(a) != _timer(b):
        raise UserError(f"{path_a} ({_timer(a)}) and {path_b} ({_timer(b)}): a CPU interpreter run cannot be compared "
                        "with a GPU measurement")
    common, diff = _same_experiment(a, b)
    if diff:
        raise UserError(f"{path_a} and {path_b} are not the same experiment: " + "; ".join(diff))
    floors: dict[str, float] = {}
    if noise_from:
        if len(noise_from) != 2:
            raise UserError(f"--noise-from: give a result and its repeat (2 paths), not {len(noise_from)}")
        x, y = (load_document(p, ("bench_result",), f"--noise-from {p}") for p in noise_from)
        floors = noise_floors(x, y, [s for s in x["timing"]["stages"] if s in y["timing"]["stages"]])
        source = {"kind": "repeat", "paths": [str(p) for p in noise_from], "rule": f"per pinned stage, max over "
                  f"patterns of |median(Y)/median(X) - 1|, at least {MIN_FLOOR:g}; {floor:g} for other stages"}
    else:
        source = {"kind": "default", "paths": [], "rule": f"stated default {floor:g} for every stage"}
    rows, skipped = _rows(a, b, common, floors, floor, resamples)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    label = {d["name"]: d.get("release", {}).get("label", "pinned bench") for d in (a, b)}
    return {"schema_version": schema_version("compare"), "kind": "compare", "a": _source(path_a, a),
            "b": _source(path_b, b), "space": "time", "unit": "ms",
            "bootstrap": {"resamples": resamples, "seed": SEED, "level": CI_LEVEL, "method": METHOD,
                          "paired": False},
            "rule": RULE, "noise_floor": {**source, "per_stage": {r["stage"]: r["floor"] for r in rows}},
            "rows": rows, "counts": counts, "fail_on": fail_on,
            "failed": fail_on is not None and any(r["verdict"] in FAIL_ON[fail_on] for r in rows),
            "release": {"a_kind": a["kind"], "b_kind": b["kind"], "a_label": label[a["name"]],
                        "b_label": label[b["name"]], "patterns": common,
                        "only_in_a": [p for p in a["patterns"] if p not in b["patterns"]],
                        "only_in_b": [p for p in b["patterns"] if p not in a["patterns"]], "not_compared": skipped}}


def format_release_table(doc: dict[str, Any]) -> str:
    """The release comparison as a plain-text table, with what was not compared and why."""
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
