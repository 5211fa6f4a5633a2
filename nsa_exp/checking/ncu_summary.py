"""The ``ncu_summary`` kind: Nsight Compute's per-kernel metrics of one profiled stage (results/ncu/<name>.json), made
from ncu's raw export beside it (``<name>.raw.csv``, the kind ``ncu_raw_csv``). Its builder (:func:`build`;
``gpu/ncu.export_csv_text`` calls it), its check (:func:`ncu_recompute`) and the raw CSV's
(:func:`ncu_raw_csv_checks`, which :mod:`.validate` runs on the CSV), in one module: the summary is recomputed from
the raw CSV.

- ``ncu_recompute`` (summary): the raw CSV it names (``raw_csv``, beside it) re-parsed
  (:func:`nsa_exp.io.ncu_csv.parse_raw_csv`) and its kernels re-labelled by launch order
  (:func:`nsa_exp.io.ncu_csv.assign_patterns`): every kernel row, metric, unit (``value_units`` where the
  summary records it: older exports lack it), grid, device and pattern compared; ``patterns_in_launch_order``
  and ``nvtx_range`` from ``pattern`` and ``stage``
  (:mod:`nsa_exp.core.nvtx`); a re-export names this summary and its CSV and is dated after the profile;
  each kernel's device and SM count against the GPU table and, when at hand, the benchmark result's GPU.
  Without the CSV the metrics are unverified.
- ``created_after_sources`` (summary, with the benchmark result at hand): not dated before the bench whose
  autotune configs it profiled.
- ``ncu_raw_csv`` (raw CSV): an ``ID`` header, a units row, one complete row per kernel, IDs 0..n-1, every
  metric the export reads a number in ncu's dialect with a known unit; ``ncu_recompute`` then runs from
  the summary beside it that names this CSV (``<name>.json``), else the CSV's figures stay unverified.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ..core.gpus import gpu_spec
from ..core.kinds import schema_version
from ..core.nvtx import parse_patterns, range_name
from ..errors import UserError
from ..io.ncu_csv import assign_patterns, parse_raw_csv
from ..io.reader import read_bounded
from ..io.strict_csv import decode_csv
from ..io.strict_json import MAX_BYTES
from .checks import Add, Context, Problems, one_check
from .record_checks import host_problems, parse_utc
from .sources import created_after_sources, deep_diff, read_source, source_problems

KIND = "ncu_summary"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def build(text: str, context: dict[str, Any], metadata: dict[str, Any], raw_csv_name: str | None) -> dict[str, Any]:
    """The summary of ncu's raw CSV ``text`` (named ``raw_csv_name``, None when not kept), its kernels labelled by
    ``context``'s ``patterns_in_launch_order``; ``context``: the profile's (config, pattern, stage, command ...)."""
    kernels = parse_raw_csv(text)
    assign_patterns(kernels, context.get("patterns_in_launch_order") or [])
    return {"schema_version": schema_version("ncu_summary"), "kind": "ncu_summary", **context, "raw_csv": raw_csv_name,
            "kernels": kernels, "metadata": metadata}


def kernels_of(rows: list[list[str]], patterns: list[str]) -> list[dict[str, Any]]:
    """The summary kernels ``ncu-export`` makes of a raw CSV's rows (UserError when it is not one)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    kernels = parse_raw_csv(out.getvalue())
    assign_patterns(kernels, patterns)
    return kernels


def _kernels_diff(recorded: Any, want: list[dict[str, Any]], where: str, problems: Problems) -> None:
    """The recorded kernels against the recomputed ones; a summary exported before ``value_units`` existed
    (the schema: its values in the same units) is not held to that field."""
    for k, w in zip(recorded, want, strict=False):
        if isinstance(k, dict) and "value_units" not in k:
            w.pop("value_units", None)
    deep_diff(recorded, want, where, problems)


def _rows(path: Path) -> list[list[str]]:
    # a FIFO, a device, too large, binary or non-UTF-8: a one-line UserError
    return decode_csv(read_bounded(path, str(path), MAX_BYTES), str(path))[0]


def ncu_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = host_problems(doc.get("metadata", {}))
    try:
        launch = parse_patterns(doc["pattern"])
    except UserError as exc:
        launch = None
        problems.append(("$.pattern", str(exc)))
    if launch is not None and doc["patterns_in_launch_order"] != launch:
        problems.append(("$.patterns_in_launch_order", f"{doc['patterns_in_launch_order']}, the pattern spec "
                         f"{doc['pattern']!r} launches {launch}"))
    if doc.get("stage") and doc.get("nvtx_range") not in (None, range_name(doc["pattern"], doc["stage"])):
        problems.append(("$.nvtx_range", f"{doc['nvtx_range']!r}, pattern and stage give "
                         f"{range_name(doc['pattern'], doc['stage'])!r}"))
    re_export = doc.get("reexported_from")
    if re_export:
        if re_export.get("raw_csv") != doc.get("raw_csv"):
            problems.append(("$.reexported_from.raw_csv", f"{re_export.get('raw_csv')!r} != raw_csv "
                             f"{doc.get('raw_csv')!r}"))
        if ctx.path != "<bytes>" and re_export.get("summary") != Path(ctx.path).name:
            problems.append(("$.reexported_from.summary", f"{re_export.get('summary')!r}, but this file is "
                             f"{Path(ctx.path).name}"))
        made, profiled = parse_utc(re_export.get("utc")), parse_utc(doc.get("metadata", {}).get("created_utc"))
        if made is not None and profiled is not None and made < profiled:
            problems.append(("$.reexported_from.utc", "re-exported before the profile was taken"))
    for i, k in enumerate(doc["kernels"]):
        spec = gpu_spec(k.get("device"))
        sm = k.get("metrics", {}).get("sm_count")
        if spec is not None and sm is not None and int(sm) not in spec.sm_counts:
            problems.append((f"$.kernels[{i}].metrics.sm_count", f"{sm}: {k['device']} has {list(spec.sm_counts)}"))
    bench_source = read_source(ctx, doc.get("benchmark_result"), ("bench_result",))
    problems += source_problems(ctx, "$.benchmark_result", doc.get("benchmark_result"), bench_source,
                                ("bench_result",))
    bench = bench_source[1]
    if bench is not None:
        name = bench["metadata"]["gpu"]["name"]
        problems += [(f"$.kernels[{i}].device", f"{k.get('device')!r}, but {doc['benchmark_result']} ran on "
                      f"{name!r}") for i, k in enumerate(doc["kernels"]) if k.get("device") != name]
    found = ctx.locate(doc.get("raw_csv"))
    if found is None:
        ctx.unverifiable("$.kernels", f"unverified (raw CSV not found): {doc.get('raw_csv')}")
    else:
        try:
            want = kernels_of(_rows(found), doc["patterns_in_launch_order"])
        except UserError as exc:
            problems.append(("$.raw_csv", f"{doc['raw_csv']}: {exc}"))
        else:
            _kernels_diff(doc["kernels"], want, "$.kernels", problems)
    add("ncu_recompute", problems)
    if bench is not None:
        created_after_sources(doc, [bench], add)


checks = one_check("ncu_recompute", ncu_recompute)


def ncu_raw_csv_checks(rows: list[list[str]], add: Add, ctx: Context) -> None:
    path = ctx.path
    try:
        kernels = kernels_of(rows, [])
    except UserError as exc:
        add("ncu_raw_csv", [("$", str(exc))])
        return
    problems = [(f"$[{i}].ID", f"kernel row {i} has ID {k['id']}: rows are IDs 0..n-1 in launch order")
                for i, k in enumerate(kernels) if k["id"] != i]
    if not add("ncu_raw_csv", problems):
        return
    summary = Path(path).with_name(Path(path).name.removesuffix(".raw.csv") + ".json")
    _, doc = read_source(Context(path=str(summary)), summary.name, ("ncu_summary",))
    if doc is None or doc.get("raw_csv") != Path(path).name:
        ctx.unverifiable("$ (every metric)", f"unverified (summary not found): no summary beside it names this CSV "
                         f"({summary.name}): the export is "
                         "checked as a table only")
        return
    want = kernels_of(rows, doc["patterns_in_launch_order"])
    problems = []
    _kernels_diff(doc["kernels"], want, f"{summary.name} $.kernels", problems)
    add("ncu_recompute", problems)
