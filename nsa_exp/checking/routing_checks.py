"""Checks that regenerate a document's routings: the pattern set, every routing's edges and fan-in
statistics, the packing record, the equal-edge check, and the routing files it timed.

- ``pattern_set``: the result's patterns == the config's patterns, with the config's parameters.
- ``routing_recompute``: each routing regenerated from config shape + ``seeds.routing`` + pattern
  parameters -> edges, fan-in, query-span and adjacent-gap statistics, compared value by value (a
  swapped or renamed pattern fails here).
- ``packing_recompute``: the ``packing`` record from the config's packing section, field by field.
- ``edges_equal``: equal across patterns, to the per-pattern record and to the closed form for the
  recorded shape (packed: the packed closed form).
- ``routing_files_consistent``: the two copies of a routing file's figures a result holds (``routing_files``
  and ``patterns``) agree, edges and every fan-in / span / gap statistic (no file needed).
- ``routing_file_recompute`` (``validate --routing-file``): a result that timed routing files (``bench``/
  ``sweep --routing-file``) records, under ``routing_files``, per pattern ``file:<stem>``: the path as given,
  the sha256 of the file's bytes, its edges by FLA's CSR rule, the closed form and their equality, and its
  fan-in / CSR-row statistics. Only someone holding the file can re-check them: given the file, it is
  re-read and re-validated at the recorded shape and every figure compared (a mismatch names the field);
  not supplied, it is looked for where it must be: its recorded path, else (a file ``routing --save`` wrote)
  the config's pattern of its stem regenerated, when those bytes hash to the recorded sha256; only when
  neither holds it are its figures listed under ``unverified`` as "unverified (file not supplied)" — never
  as passed.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..core.config import Pattern, Shape, cu_seqlens
from ..core.families import family, pattern_from_entry
from ..core.gpus import gpu_spec
from ..errors import UserError
from ..io.config_files import config_from_dict
from ..io.metadata import nvidia_gpu_visible, visible_gpu_name
from ..routing.edges import closed_form_edges, edge_gate_record
from ..routing.facts import regenerate
from ..routing.files import file_pattern_name, routing_file_report
from ..routing.packing import packed_closed_form_edges, packing_record
from ..routing.patterns import generate_routing
from .checks import Add, Context, Problems, guarded, same
from .record_checks import config_semantics, failed_gate, gate, recorded_gpu

NOT_SUPPLIED = "unverified (file not supplied): pass it with validate --routing-file PATH"
COMPARED = ("sha256", "edges", "closed_form_edges", "equal_to_closed_form", "dtype", "format", "key")


@lru_cache(maxsize=256)
def _routing_stats(pattern_json: str, shape_json: str, seed: int, cu: tuple[int, ...] | None = None) -> dict:
    """Regenerate one routing, its statistics and its sha256 (:func:`nsa_exp.routing.facts.regenerate`, which the
    model's fan-in shares, kept on disk when ``NSA_EXP_MEMO_DIR`` is set, :mod:`nsa_exp.io.memo`; cached: the corpus
    validates the same config often); packed (``cu`` = the config's ``cu_seqlens``): per
    document, statistics over the varlen CSR rows."""
    return copy.deepcopy(regenerate(Pattern(**json.loads(pattern_json)), Shape(**json.loads(shape_json)), seed,
                                    cu).stats)


def pattern_stats(p: Pattern, config: Any, recorded_on: str | None = None) -> dict[str, Any] | str:
    """The statistics of the config's pattern ``p`` regenerated (:func:`_routing_stats`: edges, fan-in, sha256;
    drawn once per process, kept on disk by :mod:`nsa_exp.routing.facts`), or why it is not regenerated here: a
    pattern FLA's kernels compute (fla-topk) without a visible CUDA GPU, or on a GPU other than ``recorded_on`` (the
    name of the GPU that computed the recorded routing, when the document names one), or one whose generator refuses.

    FLA's top-k is not the same function on every GPU model: it picks each query's best blocks from bf16 scores whose
    reduction order follows the autotuned configs, so near-tied blocks can swap. An H100 regenerating a routing an
    H200 recorded (``results/sweeps/sweep_penalty_T_h200/T8192-B2-H4-G16-fla-topk-salience0.json``, 2026-12-07) got a
    fan-in CV of 0.98235308 against the recorded 0.98235489, so ``validate`` FAILed a committed file there and
    ``reproduce``, which validates the noise table that reads it, refused to run (docs/PROVENANCE.md)."""
    external = family(p.name).external
    if external is not None and (why := not_regenerated_here(p.name, external, recorded_on)):
        return why
    try:
        return _routing_stats(json.dumps(p.to_dict(), sort_keys=True), json.dumps(config.shape.to_dict(),
                              sort_keys=True), config.seeds.routing,
                              None if config.cu_seqlens is None else tuple(int(x) for x in config.cu_seqlens))
    except (UserError, ImportError) as exc:  # fla-topk is FLA's top-k: it regenerates only on a GPU
        return str(exc)


def not_regenerated_here(name: str, external: str, recorded_on: str | None) -> str | None:
    """Why the routing ``name`` that FLA's kernels compute (``external``, fla-topk) cannot be regenerated in this
    process (None: it can): no CUDA GPU is visible (never in the Triton interpreter), or the visible one is not the GPU
    model ``recorded_on`` that computed the recorded routing (:func:`pattern_stats` says why): not that name, nor a
    name of the same row of the GPU table (:func:`nsa_exp.core.gpus.gpu_spec`)."""
    if not nvidia_gpu_visible():
        return (f"{name} is computed by FLA's kernels ({external}): regenerated only where a CUDA GPU is visible, "
                "never in the Triton interpreter")
    if recorded_on is None:
        return None
    here = visible_gpu_name()
    # one model: the same name, or the same row of the GPU table (a name relabelled "NVIDIA H200 SXM" on an H200
    # would otherwise escape the regeneration that fails its forged fan-in: an attacker, 2026-12-07)
    if here != recorded_on and (gpu_spec(here) is None or gpu_spec(here) != gpu_spec(recorded_on)):
        return (f"{name} is computed by FLA's kernels ({external}), whose choice among near-tied blocks depends on "
                f"the GPU: regenerated only on the GPU model that recorded it ({recorded_on}), not on "
                f"{here or 'a GPU nvidia-smi does not name'}")
    return None


def regenerated(doc: dict[str, Any], config: Any, unverified: list, fields: str) -> Iterator[tuple[Any, dict, dict]]:
    """``(pattern, its record, its routing regenerated: edges, statistics, sha256)`` for each config pattern
    the document records; one that regenerates only on a GPU (fla-topk) is listed under ``unverified`` for
    ``fields`` (``$.patterns.<p>.<fields>``) instead."""
    gpu = recorded_gpu(doc)[1].get("name")
    for p in config.patterns:
        rec = doc["patterns"].get(p.name)
        if rec is None:
            continue
        stats = pattern_stats(p, config, gpu)
        if isinstance(stats, str):
            unverified.append({"path": f"$.patterns.{p.name}.{fields}", "why": stats})
            continue
        yield p, rec, stats


def edge_gate_problems(doc: dict[str, Any], raw_config: dict[str, Any], ctx: Context) -> Problems:
    """The equal_edges gate of a check or smoke report, method study, autotune matrix or what-if result, against its
    config's routings regenerated (:func:`pattern_stats`): the closed form at the config's shape (packed: per
    document), each pattern's effective edges, ``equal`` and the exempt patterns, as
    :func:`nsa_exp.routing.edges.equal_edge_gate` records them. The experiment's premise (every routing has the
    closed form's edges): a report with a pattern's count edited PASSed --strict (an attacker, 2026-12-06), and one
    whose gate was recorded failed with such a count (a re-attacker, 2026-12-06). None of these commands takes a
    routing file, so a ``file:<stem>`` count is refused. A pattern that cannot be regenerated here (fla-topk needs the
    GPU tier) is listed, its count taken as recorded."""
    found = gate(doc, "equal_edges")
    if found is None:
        return [("$.gates", "no equal_edges gate recorded")]
    i, detail = found
    try:
        config = config_from_dict(raw_config, "$.config")
    except UserError as exc:
        return [(f"$.gates[{i}].detail", f"its config does not load: {exc}")]
    shape, cu = config.shape, config.cu_seqlens
    closed = (closed_form_edges(shape) if cu is None else
        packed_closed_form_edges(shape.H, shape.S, shape.block_size, cu))
    edges: dict[str, int] = {}
    gpu = recorded_gpu(doc)[1].get("name")
    for p in config.patterns:
        stats = pattern_stats(p, config, gpu)
        if isinstance(stats, str):
            ctx.unverifiable(f"$.gates[{i}].detail.per_pattern.{p.name}", stats + (
                " (an exempt count, never gated)" if family(p.name).external is not None else ""))
        else:
            edges[p.name] = stats["edges"]
    recorded = detail.get("per_pattern") or {}
    files = [k for k in recorded if str(k).startswith("file:")]
    if files:
        return [(f"$.gates[{i}].detail.per_pattern.{files[0]}", "a routing file's count, but this command takes no "
                 "--routing-file")]
    exempt = [p.name for p in config.patterns if not family(p.name).equal_edges]
    # a count not regenerated here (listed above) is taken as recorded
    counts: dict[str, int] = {p.name: edges[p.name] if p.name in edges else recorded.get(p.name, -1)
                              for p in config.patterns}
    want = edge_gate_record(counts, closed)
    if exempt:
        want["exempt"] = exempt
    broken = any(c != closed for n, c in want["per_pattern"].items() if n not in exempt)
    if failed_gate(doc, found):  # with its counts or its message only: a config's routings are deterministic
        regenerated_all = all(p.name in edges for p in config.patterns if p.name not in exempt)
        return [] if broken or not regenerated_all else [
            (f"$.gates[{i}]", f"recorded failed ({recorded or doc['gates'][i].get('message')}), but the config's "
             f"routings, regenerated, give {want['per_pattern']}: the gate cannot have failed")]
    if json.dumps(detail, sort_keys=True) != json.dumps(want, sort_keys=True):
        return [(f"$.gates[{i}].detail", f"{detail} but the config's routings, regenerated, give {want}")]
    if broken:
        return [(f"$.gates[{i}].detail.per_pattern", "a routing's edges differ from the closed form: the gate "
                 "cannot have passed")]
    return []


def pattern_set(doc: dict[str, Any], config: Any, add: Add) -> None:
    want = {p.name: json.loads(json.dumps(p.to_dict())) for p in config.patterns}  # tuples (heads) as lists
    files = doc.get("routing_files") or {}  # timed beside the config's patterns (--routing-file)
    got = {n: p for n, p in doc["patterns"].items() if n not in files}
    problems: Problems = []
    for name in sorted(set(want) - set(got)):
        problems.append((f"$.patterns.{name}", f"pattern {name!r} is in the config but not in the result"))
    for name in sorted(set(got) - set(want)):
        problems.append((f"$.patterns.{name}", f"pattern {name!r} is in the result but not in its config"))
    if list(got) != [n for n in want if n in got]:
        problems.append(("$.patterns", f"order {list(got)} differs from the config's {list(want)}"))
    for name in sorted(set(got) & set(want)):
        if got[name]["params"] != want[name]:
            problems.append((f"$.patterns.{name}.params", f"{got[name]['params']} != the config's {want[name]}"))
    add("pattern_set", problems)


def routing_recompute(doc: dict[str, Any], config: Any, add: Add, unverified: list) -> None:
    problems: Problems = []
    for p, rec, stats in regenerated(doc, config, unverified, "edges|fanin|query_span|adjacent_gap"):
        path = f"$.patterns.{p.name}"
        if rec["edges"] != stats["edges"]:
            problems.append((f"{path}.edges", f"recorded {rec['edges']}, the regenerated routing has {stats['edges']}"))
        for section in ("fanin", "query_span", "adjacent_gap"):
            for key, value in stats[section].items():
                got = rec[section].get(key)
                if not same(got, value):
                    problems.append((f"{path}.{section}.{key}", f"recorded {got}, the routing regenerated from "
                                     f"the config, seed {config.seeds.routing} and {p.to_dict()} gives {value}"))
    add("routing_recompute", problems)


def packing_recompute(doc: dict[str, Any], config: Any, add: Add) -> None:
    """The ``packing`` record recomputed from the config's packing section: ``cu_seqlens``, its sha256, the
    document count and lengths, the packed closed-form edges and the program order, field by field."""
    got = doc.get("packing")
    if config.cu_seqlens is None:
        add("packing_recompute", [] if got is None else [("$.packing", "recorded, but the config has no packing")])
        return
    if got is None:
        add("packing_recompute", [("$.packing", "missing, but the config packs documents")])
        return
    S, BS = config.shape.S, config.shape.block_size
    want = packing_record(config.cu_seqlens, packed_closed_form_edges(config.shape.H, S, BS, config.cu_seqlens))
    add("packing_recompute", [(f"$.packing.{k}", f"recorded {got.get(k)!r}, the config's packing gives {v!r}")
                              for k, v in want.items() if got.get(k) != v])


def config_rule_checks(doc: dict[str, Any], add: Add, ctx: Context,
                       timing: Callable[[dict[str, Any], Any, Add], None] | None = None) -> None:
    """What a measured document's embedded config implies, for a bench result and a sweep point alike:
    ``config_semantics`` (its rules), then, when it parses, ``pattern_set``, ``routing_recompute``, ``timing``
    (a bench result's ``timing_recompute``: it judges the rounds against that config) and ``packing_recompute``,
    in that order (the order validate reports them in)."""
    config = config_semantics(doc, add)
    if config is None:
        return
    guarded("pattern_set", add, pattern_set, doc, config, add)
    guarded("routing_recompute", add, routing_recompute, doc, config, add, ctx.unverified)
    if timing is not None:
        guarded("timing_recompute", add, timing, doc, config, add)
    guarded("packing_recompute", add, packing_recompute, doc, config, add)


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
                if section in holder and not same(holder[section].get(key), value):
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
    unverified, checked = [], False
    with tempfile.TemporaryDirectory(prefix="nsa_validate_") as tmp:
        for name, rec in recorded.items():
            path = supplied.get(name) or _source_of(doc, name, rec, Path(tmp))
            if path is None:
                unverified.append({"path": f"$.routing_files.{name} (sha256, edges, fanin, query_span, "
                                   "adjacent_gap)", "why": NOT_SUPPLIED})
                continue
            checked = True
            try:
                got = routing_file_report(path, Shape(**doc["shape"]))
            except UserError as exc:
                problems.append((f"$.routing_files.{name}", str(exc)))
                continue
            label = path if path in (supplied.get(name), rec["path"]) else f"{rec['path']} (regenerated)"
            problems += _compare(name, rec, doc["patterns"].get(name), got, label)
    if supplied or checked:  # nothing supplied or found: nothing re-checked, so no check may pass
        add("routing_file_recompute", problems)
    return unverified


def _source_of(doc: dict[str, Any], name: str, rec: dict[str, Any], tmp: Path) -> str | None:
    """Where a routing file that was not supplied must be: at its recorded path, or (a file ``routing --save``
    wrote) the config's own pattern of the file's stem, regenerated and saved as ``routing --save`` saves it,
    when its bytes hash to the recorded sha256. None when neither holds it (the figures stay unverified)."""
    recorded = Path(rec.get("path") or "")
    if rec.get("path") and recorded.is_file():
        return str(recorded)
    stem = name.removeprefix("file:")
    config = doc.get("config") or {}
    entry = next((p for p in config.get("patterns", []) if p.get("name") == stem), None)
    if entry is None or rec.get("format") != "npy" or config.get("packing") is not None:
        return None
    try:
        shape = Shape(**doc["shape"])
        bi = generate_routing(pattern_from_entry(entry, "config.patterns", shape), shape, config["seeds"]["routing"])
    except (UserError, KeyError, TypeError, ValueError):
        return None
    buf = io.BytesIO()
    np.save(buf, bi, allow_pickle=False)  # as routing --save writes it (routing/report.save_routings)
    if hashlib.sha256(buf.getvalue()).hexdigest() != rec.get("sha256"):
        return None
    out = tmp / f"{stem}.npy"
    out.write_bytes(buf.getvalue())
    return str(out)


def routing_files_consistent(doc: dict[str, Any], add: Add) -> None:
    problems: Problems = []
    for name, rec in (doc.get("routing_files") or {}).items():
        pattern = doc["patterns"].get(name)
        if pattern is None:
            problems.append((f"$.routing_files.{name}", f"the result timed no pattern {name!r}"))
            continue
        if rec.get("edges") != pattern.get("edges"):
            problems.append((f"$.routing_files.{name}.edges", f"{rec.get('edges')} != $.patterns.{name}.edges "
                             f"{pattern.get('edges')}"))
        for section in ("fanin", "query_span", "adjacent_gap"):
            for key, value in (rec.get(section) or {}).items():
                if section in pattern and not same(value, pattern[section].get(key)):
                    problems.append((f"$.routing_files.{name}.{section}.{key}", f"{value} != $.patterns.{name}."
                                     f"{section}.{key} {pattern[section].get(key)}: the two copies disagree"))
    add("routing_files_consistent", problems)
