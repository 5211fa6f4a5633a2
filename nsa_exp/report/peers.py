"""RESULTS.md's "Peers" section and the answer's peers line (issue 31), CPU only: every committed ``peer_result``
under ``results/peers/`` (:meth:`.manifest.Inputs.peers`; one line saying none is measured yet otherwise).

Per result (one T): per routing and implementation the backward and fwd+bwd medians with bootstrap 95% CIs, each
implementation's own skew penalty (its backward over its backward on ``local``, paired CI), FLA's and every peer's
backward over dense causal SDPA's (paired CI), the work each computes over FLA's, the fastest backward; all read
from the result's ``summary`` (:func:`nsa_exp.analysis.peers.peer_summary`, which ``validate`` recomputes). Then
whether the peer arm's FLA row reproduces bench's ``full_bwd`` (the committed ``compare`` of the two, its rule and
floors), and two lines of advice computed from those numbers: which backward is fastest on which routings, and
where NSA's selection backward stops paying against dense attention.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.peers import DENSE_CELL, NOT_TIMED, REFERENCE_PEER, cell_name
from .data import ReportData, short_gpu
from .markdown import anchor, md_table, ms, times

TITLE = "Peers: which selection backward to use (FLA, FlexAttention, dense SDPA)"
PEERS_NOT_MEASURED = ("not yet measured: no `peer_result` is committed under `results/peers/` (`peer-bench` times "
                      "FLA, FlexAttention and dense SDPA on the GPU; this section fills from its files)")
#: The committed compares of bench against the peer arm's FLA row on the formal config: does the peer arm reproduce
#: bench's ``full_bwd``? The formal H200 bench against FLA through peer-bench on another day (150 rounds each), and
#: the two one after the other on one machine (``scripts/h200_session.sh peers_formal``, PAIR_REPS=60).
REPRODUCTION = ("results/compare/e1_h200_vs_e1_h200_fla.json", "results/compare/e1_h200_pair_vs_e1_h200_fla_pair.json")


def _peer_docs(data: ReportData) -> list[tuple[str, dict[str, Any]]]:
    """``(path, document)`` of every committed peer result with dense attention timed, by T (then name)."""
    docs = [(data.inputs.relative(p), data.load(p, ("peer_result",))) for p in data.inputs.peers()]
    return sorted(docs, key=lambda d: (d[1]["shape"]["T"], d[0]))


def _ratio(x: Mapping[str, Any] | None, digits: int = 2) -> str:
    return "—" if x is None else times(x["ratio"], x["ci"], digits)


def _memory(doc: Mapping[str, Any], cell: str) -> list[str]:
    """The cell's fwd+bwd allocation above its baseline, MiB (a column only where the result records memory)."""
    memory = doc.get("memory")
    return [] if memory is None else [f"{memory[cell]['peak_minus_baseline_bytes'] / 2**20:,.0f}"]


def _table(doc: Mapping[str, Any]) -> str:
    s, several = doc["summary"], _compared(doc)
    rows = [[f"`{r}`", p, ms(v["bwd"]["median_ms"], v["bwd"]["ci_ms"], 1),
             ms(v["fwd_bwd"]["median_ms"], v["fwd_bwd"]["ci_ms"], 1), _ratio(v["skew_penalty"]), _ratio(v["vs_dense"]),
             f"{v['extra_work']:.2f}", *_memory(doc, cell_name(r, p)),
             "yes" if several and s["fastest_bwd"][r] == p else ""]
            for r, ps in s["routings"].items() for p, v in ps.items()]
    if s["dense"] is not None:
        d = s["dense"]
        work = next(iter(doc["routings"].values()))["work"]   # every routing has the same edges, so FLA's work
        rows.append(["any", "sdpa-dense", ms(d["bwd"]["median_ms"], d["bwd"]["ci_ms"], 1),
                     ms(d["fwd_bwd"]["median_ms"], d["fwd_bwd"]["ci_ms"], 1), "—", "1",
                     f"{work['dense'] / work['fla']:.2f}", *_memory(doc, DENSE_CELL), ""])
    memory = ["fwd+bwd MiB above baseline"] if doc.get("memory") is not None else []
    return md_table(["routing", "implementation", "backward ms (95% CI)", "fwd+bwd ms", "its bwd ÷ its own `local` "
                     "bwd", "bwd ÷ dense bwd", "work ÷ FLA's", *memory, "fastest bwd"], rows)


def _rounds(doc: Mapping[str, Any]) -> str:
    """The timed rounds, and under the stop rule how many each cell got and what stopped the run."""
    t = doc["timing"]
    stop = t.get("stop")
    if stop is None:
        return f"{t['repetitions']} timed rounds"
    per_cell = stop.get("cell_rounds") or {}
    spread = f", each cell {min(per_cell.values())}–{max(per_cell.values())}" if per_cell else ""
    return (f"{t['repetitions']} timed rounds under the stop rule (at most {stop['max_rounds']}{spread}; stopped by "
            f"{stop['stopped_by']})")


def _cupti(doc: Mapping[str, Any]) -> list[str]:
    """The CUPTI cross-check of a result that has one: its kernel-time medians over the same calls' event medians."""
    block = doc.get("cupti")
    if block is None:
        return []
    ratios = [k / block["median_event_ms"][c][st] for c, by in block["median_kernel_ms"].items()
              for st, k in by.items() if block["median_event_ms"][c][st] > 0]
    return [f"Kernel times (CUPTI, {block['rounds']} profiled rounds after the timed ones, every cell and stage): "
            f"kernel-busy median ÷ the same calls' CUDA-event median {min(ratios):.3f}–{max(ratios):.3f} "
            "(`validate` holds each to bench's agreement rule).", ""]


def _control(data: ReportData, path: str) -> list[str]:
    """The conclusion of a control (FLA alone) against the full run at its T, from the committed compare."""
    stem = Path(path).stem
    found = [p for p in data.inputs.glob("results/compare", f"{stem}_vs_*.json")]
    out = []
    for p in found:
        doc = data.load(p, ("compare",))
        counts = ", ".join(f"{n} {v}" for v, n in doc["counts"].items() if n)
        floors = sorted({f"{100 * r['floor']:.1f}%" for r in doc["rows"]})
        fallback = (" (compare's documented fallback: the noise table has no floor for a peer's stages)"
                    if doc["noise_floor"].get("lacking") else "")
        out.append(f"Against `{doc['b']['path']}` (the same cells with the peers interleaved; "
                   f"`{data.inputs.relative(p)}`, floor {', '.join(floors)}{fallback}): {counts} of {len(doc['rows'])} "
                   f"cells × stages; the ratios lie in {min(r['ratio'] for r in doc['rows']):.3f}–"
                   f"{max(r['ratio'] for r in doc['rows']):.3f}×.")
    return [*out, ""] if out else []


def _reproduction_verdict(verdicts: list[str]) -> str:
    """The clause that ends a reproduction line: what its verdicts say about the floor (docs/METHOD.md's rule)."""
    if any(v in ("faster", "slower") for v in verdicts):
        return "."
    if all(v == "same" for v in verdicts):
        return ", and every CI lies inside the floor: reproduced within the noise floor."
    return ", and no CI lies outside the floor (each `unclear` crosses it)."


def _floor_set_by(data: ReportData, doc: Mapping[str, Any]) -> str:
    """A caveat where the compare's bench file is one of the files whose spread sets the floor it is judged by (the
    noise table's ``set_by.members``): the verdict then rests partly on that run's own spread."""
    rows = [r for r in data.noise_table.get("floors", [])
            if r["gpu"] == doc["a"]["gpu"] and r["stage"] == "full_bwd" and r.get("set_by")]
    members = [m["path"] for r in rows for m in r["set_by"]["members"]]
    if doc["a"]["path"] not in members:
        return ""
    reach = max(max(1 - r["ci95"][0], r["ci95"][1] - 1) for r in doc["rows"])
    return (f" Caveat: `{doc['a']['path']}` is one of the {len(members)} files whose full-backward spread "
            f"(`{rows[0]['set_by']['routing']}`) sets that floor, so the verdict rests partly on its own spread; "
            f"the CIs reach {100 * reach:.1f}% from 1.")


def _reproduction(data: ReportData) -> list[str]:
    out = []
    for path in REPRODUCTION:
        if not data.inputs.committed(path):
            continue
        doc = data.load(path, ("compare",))
        cells = ", ".join(f"`{r['pattern']}` {times(r['ratio'], r['ci95'], 3)} ({r['verdict']})" for r in doc["rows"])
        floor = {f"{100 * r['floor']:.1f}%" for r in doc["rows"]}
        rounds = {f"{r['a_n']} and {r['b_n']}" for r in doc["rows"]}
        far = max(abs(r["ratio"] - 1) for r in doc["rows"])
        when = (f"{doc['a']['created_utc'][:10]} and {doc['b']['created_utc'][:10]}"
                if doc["a"]["created_utc"][:10] != doc["b"]["created_utc"][:10] else
                f"one after the other on {doc['a']['created_utc'][:10]}")
        out.append(f"- `{path}` (bench `{doc['a']['path']}` against FLA alone through `peer-bench`, "
                   f"`{doc['b']['path']}`; run {when}; {', '.join(sorted(rounds))} rounds; floor "
                   f"{', '.join(sorted(floor))}, the H200's `full_bwd` floor): {cells}; the medians differ by "
                   f"{100 * far:.1f}% or less" + _reproduction_verdict([r["verdict"] for r in doc["rows"]])
                   + _floor_set_by(data, doc))
    if not out:
        return []
    return ["Does the peer arm's FLA row reproduce bench's `full_bwd`? The same `parallel_nsa_bwd`, here through "
            "`parallel_nsa`'s autograd, on the formal config:", "", *out, ""]


def _compared(doc: Mapping[str, Any]) -> bool:
    """A result that times more than one implementation (not a control of FLA alone)."""
    return len(doc["peers"]) > 1


def _advice(data: ReportData, docs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Which backward to use where, and per T whether NSA's selection backward pays against dense attention."""
    docs = [d for d in docs if _compared(d[1])]
    which = []
    for _, doc in docs:
        by_peer: dict[str, list[str]] = {}
        for r, p in doc["summary"]["fastest_bwd"].items():
            by_peer.setdefault(p, []).append(f"`{r}`")
        which.append(f"T={doc['shape']['T']}: " + ", ".join(f"{p} on {' '.join(rs)}" for p, rs in by_peer.items()))
    flex = {r: v["flex"]["extra_work"] for _, doc in docs for r, v in doc["summary"]["routings"].items()
            if "flex" in v and not doc["routings"][r]["tile_shared"]}
    token_T = sorted({doc["shape"]["T"] for _, doc in docs
                      if not all(r["tile_shared"] for r in doc["routings"].values())})
    union = (f" ({min(flex.values()):.2f}–{max(flex.values()):.2f}× FLA's work on {', '.join(f'`{r}`' for r in flex)}"
             ", which its backward's ratio to its own `local` mostly reflects)") if flex else ""
    lines = [f"- **Which to use** (fastest backward measured; {'; '.join(which)}): FlexAttention with full blocks "
             "where every 64-query tile shares one selection (a block-sparse routing); where the queries of a tile "
             f"select differently, its per-token port visits each tile's union of blocks{union} and FLA's per-query "
             "kernel is the one to use." + (f" Per-token routings were measured at T={', '.join(map(str, token_T))} "
                                            "only." if token_T else "")]
    pays = []
    for _, doc in docs:
        rows = doc["summary"]["routings"]
        fla = {r: v[REFERENCE_PEER] for r, v in rows.items() if REFERENCE_PEER in v and v[REFERENCE_PEER]["vs_dense"]}
        if not fla:
            continue
        lo, hi = (min(v["vs_dense"]["ratio"] for v in fla.values()), max(v["vs_dense"]["ratio"] for v in fla.values()))
        worst = max(fla, key=lambda r: fla[r]["vs_dense"]["ratio"])
        best = min(((r, p, v["vs_dense"]["ratio"]) for r, ps in rows.items() for p, v in ps.items() if v["vs_dense"]),
                   key=lambda x: x[2])
        verdict = ("never pays" if lo >= 1 else "pays on every routing" if hi < 1 else "pays on some routings")
        text = (f"T={doc['shape']['T']}: FLA's backward {verdict} ({lo:.2f}–{hi:.2f}× dense's, highest on `{worst}`); "
                f"the fastest sparse backward, {best[1]} on `{best[0]}`, {best[2]:.2f}×")
        base = fla.get("local")
        if base is not None and base["vs_dense"]["ratio"] < 1:
            penalties = [v["skew_penalty"]["ratio"] for v in fla.values() if v["skew_penalty"] is not None]
            top = max(penalties, default=1.0)
            even = 1 / base["vs_dense"]["ratio"]
            text += (f"; FLA breaks even at a skew penalty of {even:.2f}× its `local` (1 ÷ local's ratio), "
                     f"{'above' if top < even else 'at or below'} the largest measured, {top:.2f}×")
        pays.append(text)
    if pays:
        lines.append("- **When NSA's selection backward pays** (its backward ÷ dense causal SDPA's backward; below 1 "
                     "it pays): " + "; ".join(pays) + ".")
    return lines


def peers_section(data: ReportData) -> list[str]:
    """RESULTS.md's Peers section (module docstring)."""
    docs = _peer_docs(data)
    head = [f"## {TITLE}", ""]
    if not docs:
        return [*head, PEERS_NOT_MEASURED, ""]
    first = docs[0][1]
    gpu = short_gpu(first["metadata"]["gpu"]["name"])
    out = [*head,
           f"The same routings, inputs, L2 flush and interleaved rounds as bench, through each implementation's public "
           f"API (`python -m nsa_exp peer-bench --config configs/peers_h200.json`; {gpu}, FLA tuned afresh on `local` "
           "at each T): FLA's `parallel_nsa` (pinned), FlexAttention compiled with a block mask of the routing "
           "(`flex`: every 64-query tile's union of selected blocks as partial blocks and a `mask_mod` admitting "
           "exactly the selected pairs; `flex-tile`: full blocks plus the causal diagonal, only where the tile shares "
           "one selection), and dense causal `scaled_dot_product_attention` (cuDNN). Each was first checked against "
           "`naive_nsa_selection` (dense: fp32 attention) at T=1024 on O, dQ, dK, dV within the config's "
           "tolerances. `bwd` is `torch.autograd.grad` of that round's forward. **Work** is the (query, key) score "
           "pairs an implementation computes over FLA's (FLA: every selected block's 64 keys per query; a block "
           "mask: 64 × 64 per (query tile, KV block) it visits; dense: every tile on or below the diagonal; "
           "`nsa_exp/routing/block_mask.py`). `flex-tile` runs only on routings whose tiles share one selection: "
           "`local` and `sink-heavy` are such (their `tile-` variants equal them byte for byte and are not timed "
           "again), `uniform`, `zipf` and `fla-topk` are not, `tile-uniform` and `tile-zipf` are their tile-shared "
           "versions. Not timed, with the reason: "
           + "; ".join(f"{k} ({v})" for k, v in NOT_TIMED.items()) + "."
           + (" Results written before these reasons were read from each release's API (docs/PROVENANCE.md, the probe "
              "of 2026-12-04) record an earlier wording, `core.peers.NOT_TIMED_EARLIER`: the same peers, 'not carried'."
              if any(d["not_timed"] != NOT_TIMED for _, d in docs) else ""), ""]
    for path, doc in docs:
        sh = doc["shape"]
        alone = "" if _compared(doc) else ", FLA alone (a control: the same cells without the peers interleaved)"
        out += [f"**T={sh['T']}{alone}** (B={sh['B']}, HQ={sh['HQ']}, H={sh['H']}, S={sh['S']}, "
                f"{_rounds(doc)}; `{path}`):", "", _table(doc), "", *_cupti(doc),
                *([] if _compared(doc) else _control(data, path))]
    return [*out, *_reproduction(data), *_advice(data, docs), ""]


def answer_line(data: ReportData) -> str | None:
    """The answer's peers line: at the primary T, FLA's backward over dense SDPA's on local and on the worst routing,
    and the fastest backward per routing class; None without a committed peer result at T=32768."""
    docs = [d for _, d in _peer_docs(data) if d["shape"]["T"] == 32768 and _compared(d)
            and d["summary"]["dense"] is not None]
    if not docs:
        return None
    s = docs[0]["summary"]
    fla = {r: v[REFERENCE_PEER]["vs_dense"] for r, v in s["routings"].items() if REFERENCE_PEER in v}
    worst = max(fla, key=lambda r: fla[r]["ratio"])
    shared = sorted({s["fastest_bwd"][r] for r in s["fastest_bwd"] if docs[0]["routings"][r]["tile_shared"]})
    token = sorted({s["fastest_bwd"][r] for r in s["fastest_bwd"] if not docs[0]["routings"][r]["tile_shared"]})
    short = [d for _, d in _peer_docs(data) if d["shape"]["T"] < 32768 and _compared(d)
             and d["summary"]["dense"] is not None and REFERENCE_PEER in d["summary"]["routings"].get("local", {})]
    below = "".join(f"; at T={d['shape']['T']} it takes "
                    f"{_ratio(d['summary']['routings']['local'][REFERENCE_PEER]['vs_dense'], 3)} of dense's even on "
                    "`local`" for d in short[:1])
    dates = sorted({d["metadata"]["created_utc"][:10] for d in (docs[0], *short[:1])})
    return (f"- **Peers** (H200, {' and '.join(dates)}, torch {docs[0]['metadata']['versions']['torch']}; "
            f"{_rounds(docs[0])} at T=32768): at T=32768 FLA's selection backward takes {_ratio(fla['local'], 3)} "
            f"of dense causal SDPA's on `local`, {_ratio(fla[worst], 3)} on `{worst}`{below}; fastest backward at "
            f"T=32768 on tile-shared routings: {', '.join(shared)}, on per-token ones: {', '.join(token)} "
            f"([Peers]({anchor(TITLE)})).")
