"""Checks of the documents the CPU derives from others: recomputed from their sources by the same functions
that wrote them, compared field by field. A source that is not at hand (:meth:`.checks.Context.locate`)
leaves those fields unverified; what the document says about itself is checked either way.

- ``compare_recompute`` (compare): with A and B (and the repeat pair of the noise floor) at hand, the
  whole document recomputed by :func:`nsa_exp.analysis.compare.compare_results` with its recorded
  resamples, floor, space and ``fail_on`` (rows, ratios, CIs, verdicts, floors, counts, ``failed``, the
  sources' names, GPUs, dates, shas); without them: ratio = b_median / a_median, each verdict from its CI
  and floor, each floor the recorded stage floor, counts from the verdicts, ``failed`` from ``fail_on``.
- ``noise_table_recompute`` (noise table): every source it names read (bench results, sweep points) and the
  table rebuilt by :func:`nsa_exp.analysis.noise_table.table_document` (rows, floors, rules, the quantities
  and members that set them); every committed file of :data:`nsa_exp.analysis.noise_table.SOURCES` under the
  table's repository must be a source or excluded (a dropped file is named), an excluded file must fail
  ``validate``; without the sources: each floor from its ``set_by`` spread (at least ``min_floor``), a borrowed
  floor equal to its lender's.
- ``analysis_recompute`` (analysis): the result ``results/raw/<source>.json`` (and its repeat) re-analysed
  (:func:`nsa_exp.analysis.bootstrap.analyse`); without it: each row's half-width from its CI, the
  ``dkv_ci_within_1pct`` flag from the rows, ``repeat_diff_pct`` from the two medians.
- ``flush_study_recompute`` (flush study): the raw method study at ``source`` re-analysed
  (:func:`nsa_exp.analysis.flush_study.study_of`); without it: each ratio, ``differs`` flag and the
  chosen policy from the rows.
- ``routing_report_recompute`` (routing report): every routing regenerated from the report's shape,
  routing seed and parameters: edges, fan-in, span and gap statistics, the closed form, the equal-edge
  record; ``generation_s`` and the host are unverified.
- ``validation_report_consistent`` (validation report): ``passed`` from the checks, failure counts; with
  the validated file at hand, the report re-made by ``validate`` and compared (kind, checks, verdicts,
  unverified list).
- ``created_after_sources``: a derived document is not dated before the documents it was computed from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..analysis.bootstrap import analyse
from ..analysis.compare import FAIL_ON, VERDICTS, compare_results, verdict
from ..analysis.flush_study import choose_policy, study_of
from ..analysis.noise_table import committed_sources, table_document
from ..core.config import Pattern, Shape
from ..core.families import family
from ..core.records import BenchResult, SweepPoint
from ..errors import UserError
from ..io.metadata import nvidia_gpu_visible
from ..routing.edges import closed_form_edges
from ..routing.packing import packed_closed_form_edges
from .checks import Add, Context, Problems, close
from .routing_checks import _routing_stats
from .sources import created_after_sources, deep_diff, read_source

# --- compare ---------------------------------------------------------------------------------------

def compare_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    floors = doc["noise_floor"]["per_stage"]
    for i, r in enumerate(doc["rows"]):
        path = f"$.rows[{i}]"
        if not close(r["ratio"], r["b_median"] / r["a_median"]):
            problems.append((f"{path}.ratio", f"{r['ratio']}, b_median / a_median = {r['b_median'] / r['a_median']}"))
        if r["floor"] != floors.get(r["stage"]):
            problems.append((f"{path}.floor", f"{r['floor']}, the recorded floor of {r['stage']} is "
                             f"{floors.get(r['stage'])}"))
        if r["verdict"] != verdict(tuple(r["ci95"]), r["floor"]):
            problems.append((f"{path}.verdict", f"{r['verdict']!r}, CI {r['ci95']} with floor {r['floor']} reads "
                             f"{verdict(tuple(r['ci95']), r['floor'])!r}"))
        if not r["ci95"][0] <= r["ci95"][1]:
            problems.append((f"{path}.ci95", "low above high"))
    counts = {v: sum(r["verdict"] == v for r in doc["rows"]) for v in VERDICTS}
    if doc["counts"] != counts:
        problems.append(("$.counts", f"{doc['counts']}, the rows give {counts}"))
    failed = doc["fail_on"] is not None and any(r["verdict"] in FAIL_ON[doc["fail_on"]] for r in doc["rows"])
    if doc["failed"] != failed:
        problems.append(("$.failed", f"{doc['failed']}, but fail_on {doc['fail_on']!r} and the verdicts give {failed}"))
    nf = doc["noise_floor"]
    if nf["kind"] == "default" and len(set(floors.values())) > 1:
        problems.append(("$.noise_floor.per_stage", "a default floor is one value for every stage"))
    a, b = (read_source(ctx, doc[k]["path"], ("bench_result", "release_result")) for k in ("a", "b"))
    kinds = ("noise_table",) if nf["kind"] == "table" else ("bench_result",)
    pair = [read_source(ctx, p, kinds) for p in nf["paths"]]
    if a[1] is None or b[1] is None or any(d is None for _, d in pair):
        missing = [p for p, (_, d) in zip([doc["a"]["path"], doc["b"]["path"], *nf["paths"]], (a, b, *pair),
                                          strict=True) if d is None]
        ctx.unverifiable("$.rows[*] (medians, CIs), $.noise_floor, $.a, $.b",
                         f"unverified (source not found): {', '.join(missing)}; only the internal rules are checked")
        add("compare_recompute", problems)
        return
    floor = next(iter(floors.values()), 0.02) if nf["kind"] == "default" else None
    table = pair[0][0] if nf["kind"] == "table" else None
    if table is not None and ctx.revalidate is not None:  # the floors' own source must hold too (a forged table)
        report = ctx.revalidate(str(table))  # once per table file and process (validate_path's served cache)
        if bad := ", ".join(c["name"] for c in report["checks"] if not c["passed"]):
            problems.append(("$.noise_floor.paths[0]", f"{nf['paths'][0]}: the noise table these floors come from "
                             f"does not validate ({bad}); the verdicts rest on floors no committed result backs"))
    try:
        want = compare_results(a[0], b[0], noise_from=[str(p) for p, _ in pair] if nf["kind"] == "repeat" else None,
                               floor=floor, cycles=doc["space"] == "cycles", fail_on=doc["fail_on"],
                               resamples=doc["bootstrap"]["resamples"], noise_table=table)
    except UserError as exc:
        problems.append(("$", f"cannot be recomputed from its sources: {exc}"))
    else:
        want["a"]["path"], want["b"]["path"] = doc["a"]["path"], doc["b"]["path"]  # as given, not as located
        if nf["kind"] in ("repeat", "table"):
            want["noise_floor"]["paths"] = nf["paths"]
            want["noise_floor"]["rule"] = want["noise_floor"]["rule"].replace(str(table), nf["paths"][0]) \
                if table is not None else want["noise_floor"]["rule"]
        deep_diff(doc, want, "$", problems)
    add("compare_recompute", problems)


# --- noise table -----------------------------------------------------------------------------------

def noise_table_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    by_stage = {(r["gpu"], r["stage"]): r for r in doc["floors"]}
    for i, r in enumerate(doc["floors"]):
        q, path = r["set_by"], f"$.floors[{i}]"
        if r["rule"] == "borrowed":
            src = r["borrowed_from"] or {}
            lender = by_stage.get((src.get("gpu"), src.get("stage")))
            want = max(doc["min_floor"], lender["floor"]) if lender else doc["min_floor"]
        else:
            want = max(doc["min_floor"], q["spread"]) if q else None
            if q and (r["rule"] == "minimum") != (q["spread"] < doc["min_floor"]):
                problems.append((f"{path}.rule", f"{r['rule']!r}, but the spread {q['spread']} is "
                                 f"{'below' if q['spread'] < doc['min_floor'] else 'at least'} {doc['min_floor']}"))
        if want is None or not close(r["floor"], want):
            problems.append((f"{path}.floor", f"{r['floor']}, its {r['rule']} derivation gives {want}"))
    found = [read_source(ctx, p, ("bench_result", "sweep_point")) for p in doc["sources"]]
    missing = [p for p, (_, d) in zip(doc["sources"], found, strict=True) if d is None]
    if missing:
        ctx.unverifiable("$.floors", f"unverified (source not found or not a result): {', '.join(missing[:5])}"
                         + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
                         + "; only each floor against its set_by spread is checked")
        add("noise_table_recompute", problems)
        return
    located = [s for s in found if s[1] is not None]  # every source (none is missing)
    first = located[0][0]
    root = first.resolve().parents[len(Path(doc["sources"][0]).parts) - 1]
    excluded = {e["path"]: e["why"] for e in doc["excluded"]}
    for p in committed_sources(root):
        if p not in excluded and p not in doc["sources"]:
            problems.append(("$.sources", f"{p} is committed under {root} but neither a source nor excluded "
                             "(regenerate with `python -m nsa_exp noise-table --overwrite`)"))
    for p in excluded:
        there = root / p
        if not there.is_file():
            problems.append(("$.excluded", f"{p}: no such file under {root}"))
        elif ctx.revalidate is not None and ctx.revalidate(str(there))["passed"]:
            problems.append(("$.excluded", f"{p} passes validate; it belongs among the sources"))
    runs = [(p, (BenchResult if d["kind"] == "bench_result" else SweepPoint).from_json(d))
            for p, (_, d) in zip(doc["sources"], located, strict=True)]
    deep_diff(doc, table_document(runs, excluded), "$", problems)
    add("noise_table_recompute", problems)


# --- analysis --------------------------------------------------------------------------------------

def analysis_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
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
    sources = [read_source(ctx, f"results/raw/{n}.json", ("bench_result",)) if n else (None, None)
               for n in (doc["source"], doc.get("repeat_source"))]
    (_, result), (_, repeat) = sources
    if result is None or (doc.get("repeat_source") and repeat is None):
        ctx.unverifiable("$.rows, $.fanin, $.memory, $.stage_sum_vs_full_bwd, $.autotune",
                         f"unverified (source not found): results/raw/{doc['source']}.json"
                         + (f" / results/raw/{doc['repeat_source']}.json" if doc.get("repeat_source") else ""))
        add("analysis_recompute", problems)
        return
    want = analyse(result, repeat)
    deep_diff({k: v for k, v in doc.items() if k != "metadata"}, want, "$", problems)
    add("analysis_recompute", problems)
    created_after_sources(doc, [d for d in (result, repeat) if d], add)


# --- flush study -----------------------------------------------------------------------------------

def flush_study_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
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
    if source[1] is None:
        if source[0] is not None:
            problems.append(("$.source", f"{doc['source']} is not a method study"))
        else:
            ctx.unverifiable("$.rows (medians, CIs), $.rounds, $.gpu_name",
                             f"unverified (source not found): {doc['source']}")
        add("flush_study_recompute", problems)
        return
    found, raw = source
    try:
        want = study_of(found)
    except UserError as exc:
        problems.append(("$.source", f"{doc['source']}: {exc}"))
    else:
        want["source"] = doc["source"]
        deep_diff({k: v for k, v in doc.items() if k != "metadata"}, want, "$", problems)
    add("flush_study_recompute", problems)
    created_after_sources(doc, [raw], add)


# --- routing report --------------------------------------------------------------------------------

def routing_report_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    shape = Shape(**doc["shape"])
    cu = tuple(doc["packing"]["cu_seqlens"]) if doc.get("packing") else None
    try:
        closed = closed_form_edges(shape) if cu is None else packed_closed_form_edges(shape.H, shape.S,
                                                                                       shape.block_size, list(cu))
    except (UserError, ValueError, TypeError) as exc:
        add("routing_report_recompute", [("$.shape", f"cannot compute the closed form: {exc}")])
        return
    for where in ("$.closed_form_edges", "$.equal_edges.closed_form"):
        value = doc["closed_form_edges"] if where == "$.closed_form_edges" else doc["equal_edges"]["closed_form"]
        if value != closed:
            problems.append((where, f"{value}, the shape gives {closed}"))
    edges: dict[str, int] = {}
    for name, p in doc["patterns"].items():
        path = f"$.patterns.{name}"
        entry = dict(p["params"])
        if entry.get("name") != name:
            problems.append((f"{path}.params.name", f"{entry.get('name')!r} is not the pattern's name {name!r}"))
        edges[name] = p["edges"]
        if p["invariant_violations"]:
            problems.append((f"{path}.invariant_violations", "a generated routing meets every invariant; the report "
                             f"lists {len(p['invariant_violations'])}"))
        row = family(entry.get("name", name))
        if row.external is not None and not nvidia_gpu_visible():
            ctx.unverifiable(f"{path}.edges|fanin|query_span|adjacent_gap", f"{name} is computed by FLA's kernels: "
                             "regenerated only where a CUDA GPU is visible")
            continue
        params = {k: v for k, v in entry.items() if k != "name"}
        try:
            stats = _routing_stats(json.dumps(Pattern(row.name, **params).to_dict(), sort_keys=True),
                                   json.dumps(shape.to_dict(), sort_keys=True), doc["routing_seed"], cu)
        except (UserError, ValueError, TypeError) as exc:
            problems.append((path, f"cannot be regenerated: {exc}"))
            continue
        if p["edges"] != stats["edges"]:
            problems.append((f"{path}.edges", f"{p['edges']}, the regenerated routing has {stats['edges']}"))
        for section in ("fanin", "query_span", "adjacent_gap"):
            deep_diff(p[section], stats[section], f"{path}.{section}", problems)
    gate = doc["equal_edges"]
    if gate["per_pattern"] != edges:
        problems.append(("$.equal_edges.per_pattern", f"{gate['per_pattern']} != the patterns' edges {edges}"))
    if gate["equal"] != all(e == closed for e in edges.values()):
        problems.append(("$.equal_edges.equal", f"{gate['equal']}, the counts give "
                         f"{all(e == closed for e in edges.values())}"))
    exempt = [n for n in doc["patterns"] if not family(doc["patterns"][n]["params"].get("name", n)).equal_edges]
    if gate.get("exempt", []) != exempt:
        problems.append(("$.equal_edges.exempt", f"{gate.get('exempt', [])}, the family table exempts {exempt}"))
    ctx.unverifiable("$.patterns.*.generation_s, $.config_name, $.metadata", "host facts of the run that wrote it")
    add("routing_report_recompute", problems)


# --- validation report -----------------------------------------------------------------------------

def validation_report_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    for i, c in enumerate(doc["checks"]):
        n = len(c.get("failures", []))
        if c["passed"] != (n == 0) or c.get("n_failures", 0) < n or (n and c.get("n_failures") is None):
            problems.append((f"$.checks[{i}]", f"check {c['name']!r}: passed {c['passed']} with {n} failure(s) "
                             f"(n_failures {c.get('n_failures')})"))
    passed = all(c["passed"] for c in doc["checks"])
    if doc["passed"] != passed:
        problems.append(("$.passed", f"{doc['passed']}, the checks give {passed}"))
    found = ctx.locate(doc["path"])
    if found is None or ctx.revalidate is None or ctx.depth > 0:
        ctx.unverifiable("$.checks, $.unverified, $.document_kind", f"unverified (file not found or not re-validated "
                         f"here): {doc['path']}")
        add("validation_report_consistent", problems)
        return
    try:
        want = ctx.revalidate(str(found))
    except UserError as exc:
        problems.append(("$.path", f"{doc['path']}: validate refuses it ({exc})"))
    else:
        want["path"] = doc["path"]
        deep_diff(doc, want, "$", problems)
    add("validation_report_consistent", problems)
