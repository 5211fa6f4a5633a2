"""What ``compare`` pairs when a side is a peer result (``peer-bench``, issue 31); the rule itself (ratio of
medians B/A, its bootstrap CI, the verdict against the stage's floor) is :mod:`.compare`'s.

- a bench result against a peer result (either order): per routing both timed, bench's ``full_bwd`` (the official
  ``parallel_nsa_bwd``) against the peer arm's ``fla`` backward (``parallel_nsa``'s autograd backward, which calls
  that same wrapper): stage ``full_bwd``, ``metric: events``, ``correspondence: exact``; the row the issue's "FLA
  row reproduces bench's full_bwd within the floor" is read from.
- two peer results: every (routing, peer) cell and stage both timed, the stage named ``<peer>:<stage>`` (the
  dense cell's routing is ``dense``).

:func:`peer_same_experiment` names what makes A and B not the same problem: shape, routing or input seeds, a
common routing with another sha256.

>>> stage_label("flex", "bwd")
'flex:bwd'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tabulate import tabulate

from ..core.peers import DENSE_CELL, REFERENCE_PEER

#: ``(pattern, stage, A samples, B samples, note)``: one row to judge.
PeerCell = tuple[str, str, list[float], list[float], str | None]
#: What pairs with bench's full_bwd on a peer side.
REFERENCE_NOTE = ("peer side: parallel_nsa's autograd backward (fla:bwd), which calls the official parallel_nsa_bwd "
                  "timed as bench's full_bwd")


def stage_label(peer_name: str, stage: str) -> str:
    return f"{peer_name}:{stage}"


def gpu_of(doc: Mapping[str, Any]) -> str | None:
    return doc.get("metadata", {}).get("gpu", {}).get("name")


def _routings(doc: Mapping[str, Any]) -> dict[str, str | None]:
    """``{routing: sha256}`` of a bench or peer result."""
    if doc["kind"] == "peer_result":
        return {n: r["sha256"] for n, r in doc["routings"].items()}
    return {n: p.get("routing_sha256") for n, p in doc["patterns"].items()}


def peer_same_experiment(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The routings both sides hold, and every difference that makes A and B not the same problem."""
    diff = [f"shape.{k}: A {a['shape'].get(k)} vs B {b['shape'].get(k)}"
            for k in sorted(set(a["shape"]) | set(b["shape"])) if a["shape"].get(k) != b["shape"].get(k)]
    for seed in ("routing", "inputs"):
        sa, sb = a["config"]["seeds"].get(seed), b["config"]["seeds"].get(seed)
        if sa != sb:
            diff.append(f"config.seeds.{seed}: A {sa} vs B {sb}")
    ra, rb = _routings(a), _routings(b)
    common = [r for r in ra if r in rb]
    diff += [f"routing {r}: sha256 A {ra[r]} vs B {rb[r]}" for r in common
             if ra[r] is not None and rb[r] is not None and ra[r] != rb[r]]
    if not common:
        diff.append(f"routings: none in common (A {list(ra)}, B {list(rb)})")
    return common, diff


def _cell_samples(doc: Mapping[str, Any]) -> dict[tuple[str, str], list[float]]:
    """``{(routing or "dense", "<peer>:<stage>"): raw ms}`` of a peer result."""
    out = {}
    for cell in doc["cells"].values():
        routing = cell["routing"] if cell["routing"] is not None else DENSE_CELL
        for stage, s in cell["stages"].items():
            out[(routing, stage_label(cell["peer"], stage))] = list(s["raw_ms"])
    return out


def peer_cells(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[PeerCell], list[dict[str, str]]]:
    """Every pair of samples to judge (module docstring), and what was not compared (with why)."""
    skipped: list[dict[str, str]] = []
    if a["kind"] == "peer_result" and b["kind"] == "peer_result":
        sa, sb = _cell_samples(a), _cell_samples(b)
        cells: list[PeerCell] = [(r, s, sa[(r, s)], sb[(r, s)], None) for r, s in sa if (r, s) in sb]
        skipped += [{"what": f"{r} {s}", "why": f"only {side} timed it"}
                    for side, x, y in (("A", sa, sb), ("B", sb, sa)) for r, s in x if (r, s) not in y]
        return cells, skipped
    peer_doc, bench_doc = (a, b) if a["kind"] == "peer_result" else (b, a)
    ref = _cell_samples(peer_doc)
    cells = []
    for routing, p in bench_doc["patterns"].items():
        key = (routing, stage_label(REFERENCE_PEER, "bwd"))
        if key not in ref:
            skipped.append({"what": f"{routing} full_bwd", "why": "the peer result has no fla backward of it"})
            continue
        bench = list(p["stages"]["full_bwd"]["raw_ms"])
        pa, pb = (ref[key], bench) if a is peer_doc else (bench, ref[key])
        cells.append((routing, "full_bwd", pa, pb, REFERENCE_NOTE))
    skipped.append({"what": "the peer result's other cells and stages", "why": "bench times none of them"})
    return cells, skipped


def peer_block(a: Mapping[str, Any], b: Mapping[str, Any], common: list[str],
               skipped: list[dict[str, str]]) -> dict[str, Any]:
    """The compare document's ``peers`` block: both kinds, the routings compared and not."""
    ra, rb = _routings(a), _routings(b)
    return {"a_kind": a["kind"], "b_kind": b["kind"], "patterns": common,
            "only_in_a": [r for r in ra if r not in rb], "only_in_b": [r for r in rb if r not in ra],
            "not_compared": skipped}


def format_peer_table(doc: Mapping[str, Any]) -> str:
    """A comparison with a peer result as a plain-text table, with what was not compared and why."""
    rows = [[r["pattern"], r["stage"], r["a_median"], r["b_median"], r["ratio"],
             f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]", f"{100 * r['floor']:.1f}%", r["verdict"]]
            for r in doc["rows"]]
    blk = doc["peers"]
    a, b = doc["a"], doc["b"]   # by path: a control and its run may share one config name
    lines = [f"A = {a['path']} ({a['name']}, {blk['a_kind']}), B = {b['path']} ({b['name']}, {blk['b_kind']}); ms",
             tabulate(rows, headers=["routing", "stage", "A ms", "B ms", "B/A", "95% CI", "floor", "verdict"],
                      floatfmt=".3f"),
             f"rule: {doc['rule']}", "verdicts: " + ", ".join(f"{v} {n}" for v, n in doc["counts"].items())]
    lines += sorted({f"note: {r['note']}" for r in doc["rows"] if r.get("note")})
    lines += [f"not compared: {s['what']}: {s['why']}" for s in blk["not_compared"]]
    return "\n".join(lines)
