"""The equal-edge check of a result and the re-check of its routing files (``validate --routing-file``).

A result that timed routing files (``bench``/``sweep --routing-file``) records, under ``routing_files``, per
pattern ``file:<stem>``: the path as given, the sha256 of the file's bytes, its edges by FLA's CSR rule, the
closed form and their equality, and its fan-in / CSR-row statistics. Only someone holding the file can
re-check them: given the file, ``routing_file_recompute`` re-reads and re-validates it at the recorded shape
and compares every figure (a mismatch names the field); without it they are listed under ``unverified``
as "unverified (file not supplied)" — never as passed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core.config import Shape
from ..errors import UserError
from ..routing.edges import closed_form_edges
from ..routing.files import file_pattern_name, routing_file_report
from ..routing.packing import cu_seqlens, packed_closed_form_edges
from .recompute_records import _same

Add = Callable[[str, list[tuple[str, str]]], bool]
NOT_SUPPLIED = "unverified (file not supplied): pass it with validate --routing-file PATH"
COMPARED = ("sha256", "edges", "closed_form_edges", "equal_to_closed_form", "dtype", "format", "key")


def edge_problems(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """``edges_equal``: every gated pattern's edges equal each other and the closed form of the recorded
    shape (packed: the packed closed form of the config's packing); the exempt ones (routing files,
    fla-topk; ``$.edges.exempt``) need only match their record."""
    problems = []
    try:
        shape, packing = Shape(**doc["shape"]), doc.get("config", {}).get("packing")
        expected = closed_form_edges(shape) if packing is None else packed_closed_form_edges(
            shape.H, shape.S, shape.block_size, cu_seqlens(packing, shape.T, shape.block_size))
    except UserError as exc:  # the config's packing no longer yields cu_seqlens (config_semantics names it too)
        expected = None
        problems.append(("$.config.packing", f"cannot compute the packed closed form: {exc}"))
    except (TypeError, ZeroDivisionError) as exc:
        expected = None
        problems.append(("$.shape", f"cannot compute the closed form: {exc}"))
    exempt = set(doc["edges"].get("exempt", ()))
    per_pattern = {name: p["edges"] for name, p in doc["patterns"].items()}
    gated = {n: e for n, e in per_pattern.items() if n not in exempt}
    if len(set(gated.values())) > 1:
        problems.append(("$.patterns", f"edges differ across patterns: {gated}"))
    for name, edges in per_pattern.items():
        if expected is not None and edges != expected and name not in exempt:
            problems.append((f"$.patterns.{name}.edges", f"{edges} != closed form {expected} for the recorded shape"))
        if doc["edges"]["per_pattern"].get(name) != edges:
            problems.append((f"$.edges.per_pattern.{name}", "differs from the pattern's own edge count"))
    if expected is not None and doc["edges"]["closed_form"] != expected:
        problems.append(("$.edges.closed_form", f"{doc['edges']['closed_form']} != {expected}"))
    return problems


def _compare(name: str, rec: dict[str, Any], pattern: dict[str, Any] | None, got: dict[str, Any],
             path: str) -> list[tuple[str, str]]:
    problems = [(f"$.routing_files.{name}.{k}", f"recorded {rec.get(k)!r}, the file {path} gives {got[k]!r}")
                for k in COMPARED if rec.get(k) != got[k]]
    for section in ("fanin", "query_span", "adjacent_gap"):
        for key, value in got[section].items():
            for where, holder in ((f"$.routing_files.{name}", rec), (f"$.patterns.{name}", pattern or {})):
                if section in holder and not _same(holder[section].get(key), value):
                    problems.append((f"{where}.{section}.{key}", f"recorded {holder[section].get(key)}, the file "
                                     f"{path} gives {value}"))
    if pattern is not None and pattern.get("edges") != got["edges"]:
        problems.append((f"$.patterns.{name}.edges", f"recorded {pattern.get('edges')}, the file gives {got['edges']}"))
    return problems


def routing_file_recompute(doc: dict[str, Any], paths: Sequence[str], add: Add) -> list[dict[str, str]]:
    """Re-check every recorded routing file that ``paths`` supplies (matched by pattern name ``file:<stem>``);
    returns the unverified entries of those not supplied. Adds the check ``routing_file_recompute`` only when
    files were supplied."""
    recorded = doc.get("routing_files") or {}
    supplied = {file_pattern_name(p): p for p in paths}
    if not recorded and not supplied:
        return []
    problems = [("$.routing_files", f"--routing-file {p}: the result records no pattern {n!r} "
                 f"(it has {sorted(recorded) or 'none'})") for n, p in supplied.items() if n not in recorded]
    unverified = []
    for name, rec in recorded.items():
        if name not in supplied:
            unverified.append({"path": f"$.routing_files.{name} (sha256, edges, fanin, query_span, adjacent_gap)",
                               "why": NOT_SUPPLIED})
            continue
        try:
            got = routing_file_report(supplied[name], Shape(**doc["shape"]))
        except UserError as exc:
            problems.append((f"$.routing_files.{name}", str(exc)))
            continue
        problems += _compare(name, rec, doc["patterns"].get(name), got, supplied[name])
    if supplied:  # nothing supplied: nothing re-checked, so no check may pass
        add("routing_file_recompute", problems)
    return unverified
