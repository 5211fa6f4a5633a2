"""The release arm's tables (issue 22), CPU only: ``release-table`` (any release results, a Markdown table) and
RESULTS.md's FLA-releases section (every committed ``release_result`` under ``results/releases/``,
:meth:`.manifest.Inputs.releases`, or one line saying none is measured yet).

A release result times one FLA release or source tree (NOT the pinned experiment) through its public API at one
point, per routing:

- wrapper: ``full_bwd`` (the official ``parallel_nsa_bwd``, CUDA events over the timed rounds); dK/dV: the
  ``parallel_nsa_bwd_kernel_dkv`` launches of each profiled ``parallel_nsa_bwd`` call (CUPTI; the
  ``dkv_core`` group of :mod:`nsa_exp.analysis.release_kernels`, ``kernels.groups.<routing>.full_bwd.dkv_core``);
- CIs: :func:`nsa_exp.analysis.bootstrap.bootstrap_median_ci` of the median; the skew penalty
  ``median(routing) / median(local)`` with :func:`~nsa_exp.analysis.bootstrap.bootstrap_ratio_ci`, rounds
  resampled as pairs (every round, and every profiled round, ran every routing);
- between releases (the CSR rewrite's gain, the older release's dK/dV over the newer's at the same T and GPU):
  :func:`nsa_exp.analysis.compare.ratio_ci`, the two samples resampled independently.

The section judges each penalty with the rule (:func:`nsa_exp.analysis.noise.judge`) and the GPU's floor of the
stage, and writes the maintainers' paragraph from those numbers: the tail in the newest release, the rewrite's
gain per routing, the command that times a source tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from packaging.version import InvalidVersion, Version
from tabulate import tabulate

from ..analysis.bootstrap import RESAMPLES, bootstrap_median_ci, bootstrap_ratio_ci
from ..analysis.compare import ratio_ci
from ..analysis.noise import judge
from ..core.families import BASELINE_PATTERN
from ..core.records import ReleaseResult
from ..errors import UserError
from ..io.store import load_record
from .benches import rejudged
from .data import ReportData, short_gpu
from .markdown import md_table, ms, times

RELEASES_NOT_MEASURED = ("not yet measured: no `release_result` is committed under `results/releases/` (issue 22's "
                         "release arm times FLA releases on the GPU; this section fills from its files)")
#: The command a maintainer runs on a working tree (README's release-arm row, nsa_exp/gpu/release.py).
SOURCE_COMMAND = "python -m nsa_exp release-bench --config configs/release_h200.json --fla-source PATH"


def _stats(x: Sequence[float] | None, base: Sequence[float] | None, resamples: int) -> dict[str, Any] | None:
    """Median and bootstrap 95% CI of ``x`` (None under two values); with ``base`` (same rounds, paired) the
    ratio ``median(x) / median(base)`` and its paired CI."""
    if not x or len(x) < 2:
        return None
    out: dict[str, Any] = {"median": float(np.median(x)), "ci": bootstrap_median_ci(x, resamples=resamples),
                           "raw": list(x)}
    if base is not None and len(base) == len(x):
        out["ratio"] = float(np.median(x) / np.median(base))
        out["ratio_ci"] = bootstrap_ratio_ci(x, base, resamples=resamples)
    return out


def release_stats(run: ReleaseResult, resamples: int = RESAMPLES) -> list[dict[str, Any]]:
    """Per routing of one release result: ``{"routing", "wrapper", "dkv"}``, each :func:`_stats` (module doc)."""
    groups = (run.kernels or {}).get("groups", {})
    base = run.patterns.get(BASELINE_PATTERN)

    def dkv(name: str) -> list[float] | None:
        return groups.get(name, {}).get("full_bwd", {}).get("dkv_core")

    rows = []
    for name, p in run.patterns.items():
        against = base if name != BASELINE_PATTERN else None  # a skewed routing's local, when recorded
        rows.append({"routing": name,
                     "wrapper": _stats(p.stages["full_bwd"].raw_ms,
                                       against.stages["full_bwd"].raw_ms if against is not None else None, resamples),
                     "dkv": _stats(dkv(name), dkv(BASELINE_PATTERN) if against is not None else None, resamples)})
    return rows


def _cells(c: dict[str, Any] | None) -> list[str]:
    if c is None:
        return ["—", "—"]
    return [ms(c["median"], c["ci"]), times(c["ratio"], c["ratio_ci"], 2) if "ratio" in c else "—"]


def release_rows(run: ReleaseResult, resamples: int) -> list[list[str]]:
    """One row of strings per routing of one release result (``release-table``)."""
    return [[run.release["label"], str(run.shape["T"]), r["routing"], *_cells(r["wrapper"]), *_cells(r["dkv"])]
            for r in release_stats(run, resamples)]


def release_table(paths: Sequence[str], resamples: int = RESAMPLES) -> str:
    """The Markdown table of every release result in ``paths`` (UserError for any other document)."""
    rows, notes = [], []
    for path in paths:
        run = load_record(path, ReleaseResult, str(path))
        if run.timing.timer != "cuda-events":
            raise UserError(f"{path}: a {run.timing.timer} run (CPU interpreter), not a GPU measurement")
        rows += release_rows(run, resamples)
        notes.append(f"{run.name}: {run.timing.repetitions} rounds, {(run.kernels or {}).get('rounds', 0)} profiled; "
                     f"{path}")
    table = tabulate(rows, headers=["release", "T", "routing", "wrapper ms (95% CI)", "wrapper × local",
                                    "dK/dV kernel ms (95% CI)", "dK/dV × local"], tablefmt="github")
    return "\n".join([table, "", *[f"- {n}" for n in notes]])


def _version(run: ReleaseResult) -> Version:
    try:
        return Version(str(run.release.get("version_imported") or run.release.get("version_declared")))
    except InvalidVersion:
        return Version("0")


def releases(data: ReportData) -> list[tuple[str, ReleaseResult, list[dict[str, Any]]]]:
    """``(path, record, stats)`` of every committed release result measured on a GPU (CUDA events), oldest
    release first, then by T; the layer study's files (:data:`.manifest.RELEASE_LAYERS`, "When it matters") left
    out."""
    out = []
    layers = set(data.inputs.release_layers())
    for path in (p for p in data.inputs.releases() if p not in layers):
        run = ReleaseResult.from_json(data.load(path, (ReleaseResult.KIND,)))
        if run.timing.timer != "cuda-events":
            continue
        out.append((data.inputs.relative(path), run, release_stats(run)))
    return sorted(out, key=lambda e: (_version(e[1]), int(e[1].shape["T"])))


def _gpu(run: ReleaseResult) -> str:
    return (run.metadata.get("gpu") or {}).get("name") or "?"


def _pinned(data: ReportData, gpu: str, T: int, routing: str, stage: str) -> dict[str, Any] | None:
    f = next((f for f in data.formal if f.gpu == gpu and f.run.shape["T"] == T), None)
    return f.row(routing, stage) if f is not None else None


def _penalty(data: ReportData, c: dict[str, Any] | None, stage: str, gpu: str) -> str:
    if c is None or "ratio" not in c:
        return "—"
    return f"{times(c['ratio'], c['ratio_ci'], 2)}: {data.claims.judged(c['ratio_ci'], data.floor(stage, gpu))}"


def _at(found, T: int) -> list[tuple[str, ReleaseResult, list[dict[str, Any]]]]:
    return [e for e in found if int(e[1].shape["T"]) == T]


def _main_T(found) -> int:
    """The T every release was measured at (the most releases; the largest such T)."""
    counts: dict[int, int] = {}
    for _, run, _ in found:
        counts[int(run.shape["T"])] = counts.get(int(run.shape["T"]), 0) + 1
    return max(counts, key=lambda T: (counts[T], T))


def _by_routing(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["routing"]: r for r in rows}


def verdict_line(data: ReportData) -> str:
    """The release table's verdict in one line (the summary's release line, README's release line): per release
    at the T all were measured at, the dK/dV penalty of each routing but local that the rule says differs, and the CSR
    rewrite's gain for ``local`` and the skewed routing it helps least."""
    found = releases(data)
    if not found:
        return RELEASES_NOT_MEASURED + "."
    T = _main_T(found)
    parts, any_differs = [], False
    for _, run, rows in _at(found, T):
        gpu = _gpu(run)
        cells = [f"{r['routing']} {times(r['dkv']['ratio'], r['dkv']['ratio_ci'], 2)}" for r in rows
                 if r["dkv"] is not None and "ratio" in r["dkv"] and r["routing"] != BASELINE_PATTERN
                 and judge(r["dkv"]["ratio_ci"], data.floor("dkv_core", gpu)) == "differs"]
        any_differs |= bool(cells)
        parts.append(f"{run.release['label'].removeprefix('fla-core-')}: " + (", ".join(cells) or "none"))
    words = data.claims.holds("differ measurably", True, "") if any_differs else "are outside the floor"
    line = (f"dK/dV penalties × local (T={T}, {short_gpu(_gpu(_at(found, T)[-1][1]))}) that {words}, per release: "
            f"{'; '.join(parts)}")
    rw = _rewrite(found, T)
    if rw is not None and BASELINE_PATTERN in rw[2]:
        old, new, gains = rw
        least = min((k for k in gains if k != BASELINE_PATTERN), key=lambda k: gains[k][0], default=None)
        line += (f"; the CSR rewrite ({old.release['label'].removeprefix('fla-core-')} → "
                 f"{new.release['label'].removeprefix('fla-core-')}) made dK/dV {times(*gains[BASELINE_PATTERN], 2)} "
                 f"faster on local" + (f" but {times(*gains[least], 2)} on {least}" if least else ""))
    return line + " ([FLA releases](#fla-releases))."


def _rewrite(found, T: int) -> tuple[ReleaseResult, ReleaseResult, dict[str, tuple[float, tuple[float, float]]]] | None:
    """The oldest release against the newest release older than or equal to the pinned one (fla-core 0.5.2) at
    ``T``: per routing, ``median(old dK/dV) / median(new dK/dV)`` with its unpaired CI (module doc)."""
    at = _at(found, T)
    if len(at) < 2:
        return None
    old = at[0]
    pinned = [e for e in at if _version(e[1]) <= Version("0.5.2") and e is not old]
    if not pinned:
        return None
    new = pinned[-1]
    gains = {}
    a, b = _by_routing(old[2]), _by_routing(new[2])
    for name in a:
        if name in b and a[name]["dkv"] is not None and b[name]["dkv"] is not None:
            gains[name] = (a[name]["dkv"]["median"] / b[name]["dkv"]["median"],
                           ratio_ci(b[name]["dkv"]["raw"], a[name]["dkv"]["raw"]))
    return old[1], new[1], gains


def maintainers_paragraph(data: ReportData, found) -> str:
    """The paragraph for FLA's maintainers (issue 22's Report), every number from the committed release results."""
    T = _main_T(found)
    at = _at(found, T)
    _, newest, rows = at[-1]
    gpu = _gpu(newest)
    tail = [f"{r['routing']} {times(r['dkv']['ratio'], r['dkv']['ratio_ci'], 2)}" for r in rows
            if r["dkv"] is not None and "ratio" in r["dkv"]]
    differs = [r for r in rows if r["dkv"] is not None and "ratio" in r["dkv"]
               and judge(r["dkv"]["ratio_ci"], data.floor("dkv_core", gpu)) == "differs"]
    still = (f"the tail is still there in the newest release measured, {newest.release['label']}: its dK/dV kernel "
             f"{data.claims.holds('differs measurably', bool(differs), 'no penalty of the newest release differs')} "
             f"from `local` for {', '.join(r['routing'] for r in differs)} ({'; '.join(tail)} × local, T={T}, "
             f"{short_gpu(gpu)})" if differs else
             f"the newest release measured, {newest.release['label']}, shows no dK/dV penalty outside the floor "
             f"({'; '.join(tail)} × local, T={T}, {short_gpu(gpu)})")
    out = f"**For FLA's maintainers.** At the primary shape, {still}."
    rw = _rewrite(found, T)
    if rw is not None:
        old, new, gains = rw
        grids = {r.release["label"]: next((la["grid"] for la in (r.source.get("launches") or [])
                                           if la.get("kernel") == "parallel_nsa_bwd_kernel_dkv"), "?")
                 for r in (old, new)}
        g = "; ".join(f"{name} {times(v, ci, 2)}" for name, (v, ci) in gains.items())
        base = gains.get(BASELINE_PATTERN)
        skewed = {k: v for k, v in gains.items() if k != BASELINE_PATTERN}
        worst = min(skewed, key=lambda k: skewed[k][0]) if skewed else None
        keep = (f"; under skew the gain shrinks to {worst}'s {skewed[worst][0]:.2f}×, "
                f"{skewed[worst][0] / base[0]:.0%} of `local`'s {base[0]:.2f}× (point estimates)"
                if base is not None and worst is not None else "")
        out += (f" The CSR dK/dV rewrite (PR #961, between {old.release['label']} and {new.release['label']}; dK/dV "
                f"grid {grids[old.release['label']]} → {grids[new.release['label']]} as read from each release's "
                f"source) made the kernel faster by (old ms / new ms, unpaired 95% CI) {g}{keep}"
                + (": the rewrite's gain is largest for the routing with no long CSR rows." if base is not None
                   and max(gains, key=lambda k: gains[k][0]) == BASELINE_PATTERN else "."))
    return out + (f" To check a fix on your own branch, time your working tree with the same routings, inputs and "
                  f"protocol: `{SOURCE_COMMAND}` (PATH: the folder holding your `fla/` package; the result lands in "
                  f"`results/releases/release_h200/`, and `python -m nsa_exp release-table FILE` prints this table "
                  f"for it).")


def release_section(data: ReportData) -> list[str]:
    out = ["## FLA releases", ""]
    found = releases(data)
    if not found:
        return out + [RELEASES_NOT_MEASURED + ".", ""]
    table, notes = [], []
    for path, run, rows in found:
        gpu = _gpu(run)
        T = int(run.shape["T"])
        for r in rows:
            cells = []
            for key, stage in (("wrapper", "full_bwd"), ("dkv", "dkv_core")):
                c = r[key]
                cells += ["—" if c is None else ms(c["median"], c["ci"]), _penalty(data, c, stage, gpu)]
            pinned = _pinned(data, gpu, T, r["routing"], "dkv_core")
            ref = ("—" if pinned is None or r["routing"] == BASELINE_PATTERN else
                   times(pinned["ratio_vs_local"], pinned["ratio_vs_local_ci95"], 2))
            table.append([run.release["label"], str(T), r["routing"], *cells, ref])
        notes.append(f"`{path}`: {run.timing.repetitions} rounds, {(run.kernels or {}).get('rounds', 0)} profiled, "
                     f"{short_gpu(gpu)}")
    return out + [
        "Each release result times one FLA release or source tree through its public API (NOT the pinned experiment): "
        "CUDA events over its timed rounds for the wrapper (`parallel_nsa_bwd`), CUPTI over its profiled rounds for "
        "the dK/dV kernel (`parallel_nsa_bwd_kernel_dkv`); medians with bootstrap 95% CIs, penalties × local with "
        "paired CIs and the rule's verdict; the last column is the pinned formal run's dK/dV penalty at the same T on "
        "the same GPU (fla-core 0.5.2 through the release arm is the control).", "",
        md_table(["release", "T", "routing", "wrapper ms (95% CI)", "wrapper × local", "dK/dV ms (95% CI)",
                  "dK/dV × local", "pinned dK/dV × local"], table), "",
        *[f"- {n}" for n in notes], "", *control_lines(data, found),
        maintainers_paragraph(data, found), ""]


def control_lines(data: ReportData, found) -> list[str]:
    """Each committed ``compare`` of the pinned formal run against a release result, judged by the rule
    (:func:`nsa_exp.report.benches.rejudged`); fla-core 0.5.2 there is the control that must agree."""
    out = []
    for path, run, _ in found:
        cmp_path = f"results/compare/e1_h200_vs_{Path(path).stem}.json"
        if data.inputs.path(cmp_path) is None:
            continue
        counts = rejudged(data, cmp_path, _gpu(run))
        out.append(f"- `{cmp_path}` (pinned formal run vs {run.release['label']}, every stage where the kernels "
                   f"correspond and the wrapper): " + ", ".join(f"{n} {k}" for k, n in counts.items() if n))
    return [*out, ""] if out else []
