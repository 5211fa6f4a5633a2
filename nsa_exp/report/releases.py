"""RESULTS.md's FLA-releases section (issue 22's release arm): every committed ``release_result`` under
``results/releases/`` (:meth:`.manifest.Inputs.releases`), or one line saying none is measured yet.

A release result times one FLA release or source tree (NOT the pinned experiment) through its public API at one
point: per routing the official ``parallel_nsa_bwd`` (``full_bwd``, CUDA events over the timed rounds) and, when
the profiled rounds ran, the ``parallel_nsa_bwd_kernel_dkv`` launches inside it (``kernels.groups.<routing>.
full_bwd.dkv_core``, one value per profiled call). Each median has its bootstrap 95% CI, each skew penalty
(routing over ``local``, rounds paired) its paired CI and the rule's verdict with the GPU's floor of the stage.
The verdict of the table: in how many releases the wrapper's skew penalty of each skewed routing differs
measurably from 1, and how it compares with the pinned formal run's at the same T on the same GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.bootstrap import bootstrap_median_ci, bootstrap_ratio_ci
from ..analysis.noise import judge
from ..core.families import BASELINE_PATTERN
from .data import ReportData
from .markdown import md_table, ms, times

KIND = "release_result"
NOT_MEASURED = ("not yet measured: no `release_result` is committed under `results/releases/` (issue 22's release "
                "arm times FLA releases on the GPU; this section fills from its files)")


def _cell(x: list[float] | None, base: list[float] | None) -> dict[str, Any] | None:
    if not x or len(x) < 2:
        return None
    out = {"median": float(np.median(x)), "ci": bootstrap_median_ci(x)}
    if base is not None and len(base) == len(x):
        out["ratio"] = float(np.median(x) / np.median(base))
        out["ratio_ci"] = bootstrap_ratio_ci(x, base)
    return out


def release_rows(data: ReportData, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per routing of one release result: wrapper and dK/dV kernel cells (median, CI, ratio, ratio CI)."""
    groups = (doc.get("kernels") or {}).get("groups", {})
    base = doc["patterns"].get(BASELINE_PATTERN)

    def dkv(name: str) -> list[float] | None:
        return groups.get(name, {}).get("full_bwd", {}).get("dkv_core")

    rows = []
    for name, p in doc["patterns"].items():
        skewed = name != BASELINE_PATTERN and base is not None
        rows.append({"routing": name,
                     "wrapper": _cell(p["stages"]["full_bwd"]["raw_ms"],
                                      base["stages"]["full_bwd"]["raw_ms"] if skewed else None),
                     "dkv": _cell(dkv(name), dkv(BASELINE_PATTERN) if skewed else None)})
    return rows


def releases(data: ReportData) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """``(path, document, rows)`` of every committed release result measured on a GPU (CUDA events)."""
    out = []
    for path in data.inputs.releases():
        doc = data.load(path, (KIND,))
        if doc["timing"]["timer"] != "cuda-events":
            continue
        out.append((data.inputs.relative(path), doc, release_rows(data, doc)))
    return out


def _pinned(data: ReportData, gpu: str, T: int, routing: str) -> dict[str, Any] | None:
    f = next((f for f in data.formal if f.gpu == gpu and f.run.shape["T"] == T), None)
    return f.row(routing, "full_bwd") if f is not None else None


def verdict_line(data: ReportData) -> str:
    """The table's verdict in one sentence (the summary's release line)."""
    found = releases(data)
    if not found:
        return NOT_MEASURED + "."
    parts, differs, total = [], 0, 0
    for _, doc, rows in found:
        gpu = doc["metadata"]["gpu"]["name"]
        floor = data.floor("full_bwd", gpu)
        for r in rows:
            w = r["wrapper"]
            if r["routing"] == BASELINE_PATTERN or w is None or "ratio" not in w:
                continue
            total += 1
            differs += judge(w["ratio_ci"], floor) == "differs"
            parts.append(f"{doc['release']['label']} {r['routing']} {times(w['ratio'], w['ratio_ci'], 2)}")
    head = data.claims.holds("differs measurably", differs > 0, "no release's skew penalty is outside the floor") \
        if differs else "is within the floor"
    return (f"wrapper skew penalty (× local) in {len(found)} measured release(s): {'; '.join(parts)}; it {head} in "
            f"{differs} of {total} release × routing cells.")


def release_section(data: ReportData) -> list[str]:
    out = ["## FLA releases", ""]
    found = releases(data)
    if not found:
        return out + [NOT_MEASURED + ".", ""]
    table = []
    for path, doc, rows in found:
        gpu = doc["metadata"]["gpu"]["name"]
        T = int(doc["shape"]["T"])
        for r in rows:
            cells = []
            for key, stage in (("wrapper", "full_bwd"), ("dkv", "dkv_core")):
                c = r[key]
                cells.append("—" if c is None else ms(c["median"], c["ci"]))
                cells.append("—" if c is None or "ratio" not in c else
                             f"{times(c['ratio'], c['ratio_ci'], 2)}: "
                             f"{data.claims.judged(c['ratio_ci'], data.floor(stage, gpu))}")
            pinned = _pinned(data, gpu, T, r["routing"])
            ref = ("—" if pinned is None or r["routing"] == BASELINE_PATTERN else
                   times(pinned["ratio_vs_local"], pinned["ratio_vs_local_ci95"], 2))
            table.append([doc["release"]["label"], str(T), r["routing"], *cells, ref, f"`{path}`"])
    return out + [
        "Each release result times one FLA release or source tree through its public API (NOT the pinned experiment), "
        "CUDA events over its timed rounds for the wrapper, the dK/dV kernel's CUPTI time over its profiled rounds; "
        "medians with bootstrap 95% CIs, penalties × local with paired CIs and the rule's verdict; the last numeric "
        "column is the pinned formal run's wrapper penalty at the same T on the same GPU.", "",
        md_table(["release", "T", "routing", "wrapper ms (95% CI)", "wrapper × local", "dK/dV kernel ms (95% CI)",
                  "dK/dV × local", "pinned wrapper × local", "file"], table), "",
        f"Verdict: {verdict_line(data)}", ""]
