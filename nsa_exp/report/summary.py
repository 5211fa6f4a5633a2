"""The answer first: RESULTS.md's summary (at most :data:`MAX_LINES` lines under its heading) and README's
results block, both generated from the loaded data.

The summary holds the answer in one sentence with its scale (absolute ms), a table with, per panel stage, each
GPU's noise floor and `local` median and each skewed routing's ratio to ``local`` on both GPUs with its CI and
the rule's verdict (bold: differs measurably; plain: same within noise; italic: unresolved; three decimals),
the legend and the rule on their own lines with the cross-session spread that sets the dK/dV floor, the
mechanism, what the split what-if and a routing-aware
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
from .autotune import Gain, gain
from .data import Formal, ReportData
from .manifest import SKEW_SWEEP
from .markdown import anchor, md_table, ms, times
from .mechanism import TITLE as MECHANISM
from .mechanism import busy_fractions, skew_busy, slots, start_order
from .model import whatif_rows
from .peers import answer_line as peers_answer_line
from .penalty import answer_line
from .releases import verdict_line
from .spread import RULE_TITLE, headline_quantity
from .sweeps import point_of

MAX_LINES = 21  # 20, and the peers line (issue 31)
ANSWER = "Answer"


def _mark(data: ReportData, r: dict[str, Any], stage: str, gpu: str) -> str:
    """``**4.098×** (4.067–4.127)``: bold differs, plain same, italic unresolved (the rule); three decimals, so
    an italic 1.006× and a bold 1.010× do not print as the same number."""
    j = judge(r["ratio_vs_local_ci95"], data.floor(stage, gpu))
    v = f"{r['ratio_vs_local']:.3f}×"
    v = {"differs": f"**{v}**", "same": v, "unresolved": f"*{v}*"}[j]
    lo, hi = r["ratio_vs_local_ci95"]
    return f"{v} ({lo:.3f}–{hi:.3f})"


def verdict_table(data: ReportData) -> str:
    """The answer's table: per panel stage, each GPU's floor f and `local` median (the scale), then each skewed
    routing's ratio × local on each GPU."""
    others = [p for p in data.formal[0].run.patterns if p != BASELINE_PATTERN]
    rows = []
    for st in PANEL_ORDER:
        floors = " · ".join(f"{f.label} {100 * data.floor(st, f.gpu):.1f}%" for f in data.formal if f.row(
            BASELINE_PATTERN, st))
        local = " · ".join(f"{f.label} {r['median_ms']:.2f}" for f in data.formal
                           if (r := f.row(BASELINE_PATTERN, st)))
        cells = []
        for p in others:
            parts = [f"{f.label} {_mark(data, r, st, f.gpu)}" for f in data.formal if (r := f.row(p, st))]
            cells.append(" · ".join(parts))
        rows.append([TITLES[st], floors, local, *cells])
    return md_table(["stage", "floor f", "local ms", *[f"{p} × local" for p in others]], rows)


def _judged(data: ReportData, st: str) -> list[tuple[Formal, str, dict[str, Any], str]]:
    return [(f, p, r, judge(r["ratio_vs_local_ci95"], data.floor(st, f.gpu)))
            for f in data.formal for p in f.run.patterns if p != BASELINE_PATTERN and (r := f.row(p, st))]


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
        ends = [x for _, _, r, _ in judged for x in (r["ratio_vs_local"], *r["ratio_vs_local_ci95"])]
        bound = data.claims.within(ends, "%", 1)  # every ratio and CI end inside it (rounded up)
        diff = [f"{p} on the {f.label} ({times(r['ratio_vs_local'], r['ratio_vs_local_ci95'], 4)})"
                for f, p, r, j in judged if j == "differs"]
        if not diff:
            out.append(f"{TITLES[st]} " + data.claims.holds("does not differ", all(j != "differs" for *_, j in judged),
                                                            f"{TITLES[st]} differs for a routing")
                       + f" measurably ({bound} of local, CIs included)")
        else:
            out.append(f"{TITLES[st]} stays {bound} of local (CIs included) and "
                       + data.claims.holds("differs measurably", bool(diff), "no cell differs") + " only for "
                       + ", ".join(diff))
    return "; ".join(out)


def _scale(data: ReportData, stage: str = "dkv_core") -> str:
    """The absolute times behind the headline ratios: ``stage``'s `local` median and its slowest skewed routing's,
    per GPU (``dK/dV core: local 15.07 ms → sink-heavy 61.77 ms on the H100, ...``)."""
    parts = []
    for f in data.formal:
        local = f.row(BASELINE_PATTERN, stage)
        rows = {p: r for p in f.run.patterns if p != BASELINE_PATTERN and (r := f.row(p, stage))}
        if local is None or not rows:
            continue
        top = max(rows, key=lambda p: rows[p]["median_ms"])
        parts.append(f"local {local['median_ms']:.2f} ms → {top} {rows[top]['median_ms']:.2f} ms on the {f.label}")
    return f"{TITLES[stage]}: " + ", ".join(parts) if parts else ""


def first_line(data: ReportData) -> str:
    """The answer in one sentence: what differs, at what scale (absolute ms of local and the slowest routing)."""
    f0 = data.formal[0]
    edges = f0.run.edges["closed_form"]
    runs = ", ".join(f"{f.gpu} ({f.run.metadata['created_utc'][:10]}, {f.run.timing.repetitions} rounds)"
                     for f in data.formal)
    scale = _scale(data)
    return (f"Equal edges ({edges:,}), different fan-in per KV block, on {runs}: "
            + stage_phrases(data) + (f". Scale: {scale}." if scale else "."))


def legend_line(data: ReportData) -> str:
    return data.claims.define("Ratios × local with 95% CIs; **bold**: differs measurably, plain: same within "
                              "noise, *italic*: unresolved; floor f and local ms: each GPU's (H100 · H200).")


def rule_line(data: ReportData) -> str:
    """The rule in one line, with one repeated H200 number (sink-heavy dK/dV) and the spread that sets the H200's
    dK/dV floor (the noise table's ``set_by``: another routing's, when that one's spread is the larger)."""
    spread = ""
    h200 = data.by_gpu("H200")
    if h200 is not None:
        q = headline_quantity(data, h200.gpu, "sink-heavy")
        if q is not None:
            med = [m.median_ms for m in q.members]
            rat = [m.ratio for m in q.members if m.ratio is not None]
            row: dict[str, Any] = next((r for r in data.noise_table["floors"]
                                        if r["gpu"] == q.gpu and r["stage"] == "dkv_core"), {})
            f, setter = f"f = {100 * data.floor('dkv_core', q.gpu):.1f}%", row.get("set_by")
            spread = (f" One H200 number measured {len(q.members)} times, sink-heavy dK/dV, spans "
                      f"{min(med):.2f}–{max(med):.2f} ms ({min(rat):.2f}–{max(rat):.2f}× local); ")
            if row.get("rule") != "spread" or setter is None:
                spread += f"the H200's dK/dV floor is {f} ({row.get('rule', 'not in the noise table')})."
            elif setter["routing"] == q.label:
                spread += f"it sets the H200's dK/dV floor, {f}."
            else:
                sm = [m["median_ms"] for m in setter["members"]]
                spread += (f"the largest such spread of the H200's dK/dV, {setter['routing']}'s "
                           f"{min(sm):.2f}–{max(sm):.2f} ms over {len(sm)} files, sets its floor, {f}.")
    return (f"[The rule]({anchor(RULE_TITLE)}): "
            + data.claims.define("a ratio differs measurably when its whole 95% CI lies outside 1 ± f, is the same "
                                 "within noise when the whole CI lies inside, else unresolved; f is the stage's "
                                 "noise floor on that GPU (the largest spread of any quantity measured in several "
                                 "committed files).")
            + spread)


def mechanism_line(data: ReportData) -> str:
    s = slots(data)
    hot = point_of(data, SKEW_SWEEP, "hot-block", {"block": 0})
    busy = busy_fractions(data)
    longest = data.claims.up_to([p.fanin["max"] for p in data.formal[0].run.patterns.values()], " queries")
    line = ("- **Mechanism**: dK/dV runs one program per (KV head, KV block) CSR row"
            + (f", {s[0]} resident per SM" if s else "") + f"; a skewed routing gives a few rows {longest}, which "
            "a few SM slots work through while the others idle")
    sk, lo = skew_busy(data, busy, "sink-heavy", {"sinks": 4}), skew_busy(data, busy, "local", {})
    if sk is not None and lo is not None:
        line += f" (model: SM slots busy {sk:.2f} of the time for sink-heavy, {lo:.2f} for local)"
    o = start_order(data)
    if o is not None and len(o["fanin_max"]) == 1:  # the same longest row: only where it starts differs
        line += (f"; so the time follows the long rows and when they start: the same rows (longest "
                 f"{int(o['fanin_max'].pop()):,} queries) take {o['h0']['dkv']['median']:.2f} ms starting first (KV "
                 f"head 0) and {o['h3']['dkv']['median']:.2f} ms starting last (head 3), {times(o['ratio'], o['ci'])}")
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


def _autotune_gains(data: ReportData) -> dict[str, Gain]:
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
    key = (f" ({data.claims.up_to([g['pct'] for g in gains.values()], '%')} for {top})" if top else "")
    o = start_order(data)
    first = ""
    if o is not None:
        d = o["h0"]["dkv"]
        first = (f"; dispatching heavy rows first helps (above) but leaves them {times(d['ratio'], d['ratio_ci'], 2)} "
                 "local (heavy rows on KV head 0, starting first): splitting is what recovers it")
    return [f"- **For FLA's maintainers (1)**: split CSR rows longer than F queries of `parallel_nsa_bwd_kernel_dkv` "
            f"into several programs (an atomic or two-pass reduction of the partial dK/dV){split}{first}.",
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
    body = [first_line(data), "", verdict_table(data), "", legend_line(data), "", rule_line(data), "",
            mechanism_line(data), recovered_line(data),
            f"- **FLA releases**: {verdict_line(data)}", *([w] if (w := answer_line(data)) else []),
            *([p] if (p := peers_answer_line(data)) else []),
            *advice_lines(data), scope_line(data)]
    lines = "\n".join(body).splitlines()
    if len(lines) > MAX_LINES:
        raise AssertionError(f"the answer is {len(lines)} lines, more than {MAX_LINES}")
    return [f"## {ANSWER}", "", *lines, ""]


def readme_block(data: ReportData, results_md: str) -> str:
    """README's results block: the answer's first line and table (links into ``results_md``), then where the rest is."""
    line = "\n\n".join([first_line(data), verdict_table(data), legend_line(data), rule_line(data)])
    line = line.replace("](#", f"]({results_md}#")
    figure = [f"![latency vs fan-in CV, {f.label}](docs/figures/{f.path.split('/')[-1][:-5]}_fanin_cv_latency.png)"
              for f in data.formal[-1:]
              if data.inputs.committed(data.inputs.figures / f"{f.path.split('/')[-1][:-5]}_fanin_cv_latency.png")]
    return "\n".join([line, "",
                      f"Mechanism, uncertainty, what a split schedule and a routing-aware autotune key recover, FLA "
                      f"releases, advice for FLA's maintainers and every table: [{results_md}]({results_md}); "
                      "each committed file's commit, time, GPU and command: "
                      "[docs/PROVENANCE.md](docs/PROVENANCE.md).", "",
                      "FLA releases (release arm, not the pinned experiment; `release-bench --fla-source PATH` times "
                      "your own tree): " + verdict_line(data).replace("](#", f"]({results_md}#"), "",
                      *([p.removeprefix("- ").replace("](#", f"]({results_md}#"), ""]
                        if (p := peers_answer_line(data)) else []), *figure])
