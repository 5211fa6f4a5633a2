"""The answer first: RESULTS.md's summary (at most :data:`MAX_LINES` lines under its heading) and README's
results block, both generated from the loaded data.

The summary holds, per panel stage, each skewed routing's ratio to ``local`` on both GPUs with its CI and the
rule's verdict (bold: differs measurably; plain: same within noise; italic: unresolved), the cross-session
spread that sets the dK/dV floor, the mechanism in two sentences, what the split what-if and a routing-aware
autotune key recover, the release table's verdict, two lines of advice for FLA's maintainers and the scope.
Every verdict word goes through the claims guard.
"""

from __future__ import annotations

from typing import Any

from ..analysis.autotune_matrix import StageMatrix
from ..analysis.noise import judge
from ..core.families import BASELINE_PATTERN
from ..core.stages import PANEL_ORDER, TITLES
from ..io.store import load_document
from .autotune import gain
from .data import ReportData
from .markdown import anchor, md_table, ms
from .mechanism import TITLE as MECHANISM
from .mechanism import slots
from .model import whatif_rows
from .releases import verdict_line
from .spread import RULE_TITLE, headline_quantity
from .sweeps import point_of

MAX_LINES = 15
ANSWER = "Answer"


def _mark(data: ReportData, r: dict[str, Any], stage: str, gpu: str) -> str:
    """``**4.10×** (4.07–4.13)``: bold differs, plain same, italic unresolved (the rule)."""
    j = judge(r["ratio_vs_local_ci95"], data.floor(stage, gpu))
    v = f"{r['ratio_vs_local']:.2f}×"
    v = {"differs": f"**{v}**", "same": v, "unresolved": f"*{v}*"}[j]
    lo, hi = r["ratio_vs_local_ci95"]
    return f"{v} ({lo:.2f}–{hi:.2f})"


def verdict_table(data: ReportData) -> str:
    others = [p for p in data.formal[0].run.patterns if p != BASELINE_PATTERN]
    rows = []
    for st in PANEL_ORDER:
        cells = []
        for p in others:
            parts = [f"{f.label} {_mark(data, f.row(p, st), st, f.gpu)}" for f in data.formal if f.row(p, st)]
            cells.append(" · ".join(parts))
        rows.append([TITLES[st], *cells])
    return md_table(["stage", *[f"{p} × local" for p in others]], rows)


def _judged(data: ReportData, st: str) -> list[tuple[Any, str, dict[str, Any], str]]:
    return [(f, p, f.row(p, st), judge(f.row(p, st)["ratio_vs_local_ci95"], data.floor(st, f.gpu)))
            for f in data.formal for p in f.run.patterns if p != BASELINE_PATTERN and f.row(p, st)]


def stage_phrases(data: ReportData, stages: tuple[str, ...] = ("dkv_core", "csr", "full_bwd", "dq_core")) -> str:
    """One clause per kind of answer: the stages where every skewed routing differs on every GPU, together;
    each other stage with how far it strays from local and where it differs."""
    gpus = " and ".join(f.label for f in data.formal)
    every = [st for st in stages if all(j == "differs" for *_, j in _judged(data, st))]
    out = []
    if every:
        names = [TITLES[st] for st in every]
        verb = data.claims.holds("differ measurably" if len(every) > 1 else "differs measurably",
                                 all(j == "differs" for st in every for *_, j in _judged(data, st)), "a stage's cell")
        out.append(", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]
                   + f" {verb} from `local` for every skewed routing on the {gpus}")
    for st in (st for st in stages if st not in every):
        judged = _judged(data, st)
        far = max(abs(r["ratio_vs_local"] - 1) for _, _, r, _ in judged)
        diff = [f"{p} on the {f.label} ({r['ratio_vs_local']:.3f}×)" for f, p, r, j in judged if j == "differs"]
        if not diff:
            out.append(f"{TITLES[st]} " + data.claims.holds("does not differ", all(j != "differs" for *_, j in judged),
                                                            f"{TITLES[st]} differs for a routing")
                       + f" measurably (within {100 * far:.1f}% of local)")
        else:
            out.append(f"{TITLES[st]} stays within {100 * far:.1f}% of local and "
                       + data.claims.holds("differs measurably", bool(diff), "no cell differs") + " only for "
                       + ", ".join(diff))
    return "; ".join(out)


def first_line(data: ReportData) -> str:
    f0 = data.formal[0]
    edges = f0.run.edges["closed_form"]
    runs = ", ".join(f"{f.gpu} ({f.run.metadata['created_utc'][:10]}, {f.run.timing.repetitions} rounds)"
                     for f in data.formal)
    spread = ""
    if data.by_gpu("H200"):
        q = headline_quantity(data, data.by_gpu("H200").gpu, "sink-heavy")
        if q is not None:
            med = [m.median_ms for m in q.members]
            rat = [m.ratio for m in q.members if m.ratio is not None]
            spread = (f"; one H200 number measured {len(q.members)} times, sink-heavy dK/dV, spans "
                      f"{min(med):.2f}–{max(med):.2f} ms ({min(rat):.2f}–{max(rat):.2f}× local), so its floor is "
                      f"f = {100 * data.floor('dkv_core', q.gpu):.1f}%")
    return (f"Equal edges ({edges:,}), different fan-in per KV block, on {runs}: "
            + stage_phrases(data) + ". "
            + data.claims.define("Ratios × local with 95% CIs; **bold**: differs measurably, plain: same within "
                                 "noise, *italic*: unresolved, ")
            + f"by [the rule]({anchor(RULE_TITLE)}) (CI outside ±f, f the GPU's noise floor{spread}).")


def mechanism_line(data: ReportData) -> str:
    s = slots(data)
    hot = point_of(data, "sweep_skew_h200", "hot-block", {"block": 0})
    busy = {}
    for p in data.inputs.model_validations():
        doc = load_document(p, ("model_validation",))
        if "packing" not in doc["name"]:
            busy = {r["name"]: r["busy_fraction"] for r in doc["rows"]}
            break
    line = ("- **Mechanism**: dK/dV runs one program per (KV head, KV block) CSR row"
            + (f", {s[0]} resident per SM" if s else "") + "; a skewed routing gives a few rows up to "
            f"{int(max(p.fanin['max'] for p in data.formal[0].run.patterns.values())):,} queries, and the launch "
            "lasts as long as its longest row")
    sk, lo = busy.get("sink-heavy(sinks=4)@T=32768"), busy.get("local@T=32768")
    if sk is not None and lo is not None:
        line += f" (model: SM slots busy {sk:.2f} of the time for sink-heavy, {lo:.2f} for local)"
    if hot:
        d = hot[1]["dkv"]
        line += (f". One hot block per head, every other row local, already costs {d['ratio']:.2f}× "
                 f"({d['ratio_ci'][0]:.2f}–{d['ratio_ci'][1]:.2f}) local")
    return line + f" ([evidence]({anchor(MECHANISM)}))."


def _best_arms(data: ReportData) -> dict[str, dict[str, Any]]:
    best: dict[str, dict[str, Any]] = {}
    for p in data.inputs.whatifs():
        rows = whatif_rows(data, load_document(p, ("whatif_result",)))
        base = {r["pattern"]: r for r in rows if r["arm"] == "baseline"}
        for r in rows:
            if r["arm"] != "baseline" and (r["pattern"] not in best or r["median"] < best[r["pattern"]]["median"]):
                best[r["pattern"]] = {**r, "base": base[r["pattern"]]}
    return best


def _autotune_gains(data: ReportData) -> dict[str, dict[str, float]]:
    path = data.inputs.path(data.inputs.autotune_matrix)
    if path is None:
        return {}
    m = StageMatrix(data.load(path, ("autotune_matrix",)), "dkv_core")
    return {p: gain(m, p) for p in m.patterns if p != BASELINE_PATTERN}


def recovered_line(data: ReportData) -> str:
    arms, gains = _best_arms(data), _autotune_gains(data)
    parts = []
    if arms:
        parts.append("the split what-if (FLA's own kernels on an emulated schedule that splits long rows) cuts csr + "
                     "dK/dV " + "; ".join(f"{p} {ms(a['base']['median'], a['base']['ci'], 2)} → "
                                           f"{ms(a['median'], a['ci'], 2)} ms (`{a['arm']}`)" for p, a in arms.items()))
    if gains:
        parts.append("a routing-aware autotune key (each routing on its fastest dK/dV config instead of local's) "
                     "saves " + ", ".join(f"{p} {g['ms']:.2f} ms ({g['lo']:.2f}–{g['hi']:.2f}, {g['pct']:.1f}%)"
                                          for p, g in gains.items()))
    return ("- **Recovered** (H200): " + "; ".join(parts) + "." if parts
            else "- **Recovered**: no what-if or autotune matrix is committed.")


def advice_lines(data: ReportData) -> list[str]:
    arms, gains = _best_arms(data), _autotune_gains(data)
    saved = ", ".join(f"{p} −{a['saved']:.1f} ms" for p, a in arms.items())
    split = f" (measured above: {saved})" if arms else ""
    top = max(gains, key=lambda p: gains[p]["pct"]) if gains else None
    key = (f" (up to {gains[top]['pct']:.0f}% for {top})" if top else "")
    return [f"- **For FLA's maintainers (1)**: split CSR rows longer than F queries of `parallel_nsa_bwd_kernel_dkv` "
            f"into several programs (an atomic or two-pass reduction of the partial dK/dV){split}; dispatching heavy "
            "rows first alone cannot beat the longest row.",
            "- **For FLA's maintainers (2)**: key the dK/dV autotuner on a fan-in statistic of the CSR rows, or "
            f"re-tune "
            f"when it changes: its key `['BS','BK','BV','G']` lets the first routing fix the config{key}."]


def scope_line(data: ReportData) -> str:
    f = data.formal[0]
    s = f.run.shape
    v = f.run.metadata["versions"]
    return (f"- **Scope**: one shape (q [{s['B']}, {s['T']}, {s['HQ']}, {s['K']}], H={s['H']}, S={s['S']}, block "
            f"{s['block_size']}, {s['dtype']}), FLA `{f.run.fla['commit'][:7]}` (fla-core {v.get('fla_core')}), "
            f"Triton {v.get('triton')}, configs tuned on `local`, clocks free, one GPU of each kind; other routings, "
            "T, configs and packed documents on the H200 only (below); not the compression or sliding-window "
            "branches.")


def summary_lines(data: ReportData) -> list[str]:
    """The answer, at most :data:`MAX_LINES` lines (under its heading)."""
    body = [first_line(data), "", verdict_table(data), "", mechanism_line(data), recovered_line(data),
            f"- **FLA releases**: {verdict_line(data)}", *advice_lines(data), scope_line(data)]
    lines = "\n".join(body).splitlines()
    if len(lines) > MAX_LINES:
        raise AssertionError(f"the answer is {len(lines)} lines, more than {MAX_LINES}")
    return [f"## {ANSWER}", "", *lines, ""]


def readme_block(data: ReportData, results_md: str) -> str:
    """README's results block: the answer's first line and table (links into ``results_md``), then where the rest is."""
    line = first_line(data).replace("](#", f"]({results_md}#")
    figure = [f"![latency vs fan-in CV, {f.label}](docs/figures/{f.path.split('/')[-1][:-5]}_fanin_cv_latency.png)"
              for f in data.formal[-1:]
              if data.inputs.committed(data.inputs.figures / f"{f.path.split('/')[-1][:-5]}_fanin_cv_latency.png")]
    return "\n".join([line, "", verdict_table(data), "",
                      f"Mechanism, uncertainty, what a split schedule and a routing-aware autotune key recover, FLA "
                      f"releases, advice for FLA's maintainers and every table: [{results_md}]({results_md}); "
                      "each committed file's commit, time, GPU and command: "
                      "[docs/PROVENANCE.md](docs/PROVENANCE.md).", "",
                      "FLA releases (release arm, not the pinned experiment; `release-bench --fla-source PATH` times "
                      "your own tree): " + verdict_line(data).replace("](#", f"]({results_md}#"), "", *figure])
