"""Build the forged documents of ``forged_documents.json`` from committed files, at test time.

Each case names a ``source`` (a committed file, repo-relative, or ``derived:<name>``: a document a CPU
command writes, built by :data:`DERIVED`), a list of ``edits`` (small mutations, applied in order) and
the check(s) that must catch the forgery. :func:`build` writes the forged file at
``<out>/<case id>/<source path>`` (the repository layout kept, so file stems and sibling files such as
a summary's raw CSV resolve as they do in ``results/``), copies the case's ``context`` (pristine
committed files the forged one refers to) beside it and returns what ``validate`` must be given.

Edits on a JSON document address values by JSON pointer (RFC 6901) with two extensions: ``*`` matches
every key or index, ``{k=v}`` (or ``{k=v,k2=v2}``) every list element whose fields equal those values.
A pointer that matches nothing is an error (a stale case must not silently become a no-op).

- ``{"op": "set", "path": P, "value": V}``: set (a missing last key is added);
- ``{"op": "scale", "path": P, "factor": F}``: multiply a number;
- ``{"op": "delete", "path": P}``;
- ``{"op": "truncate", "path": P, "keep": N}``: keep a list's first N items;
- ``{"op": "restat", "path": P}``: recompute a stage's median/p10/p90/p95/min/mean/n_obs from its
  ``raw_ms`` (numpy, linear percentiles), so that only the check the case names can see the change;
- ``{"op": "csv_cell", "row": {col: value, ...} | index | "*", "column": C, "value": S | "rewrite": R}``:
  a CSV cell (of one row, or of every row), replaced by ``value`` or rewritten by ``R`` in :data:`REWRITES`
  (row index 0 is the first row after the header);
- ``{"op": "csv_delete_row", "row": ...}``;
- ``{"op": "text", "old": S, "new": S}``: textual replacement (exactly one occurrence) in the bytes.

>>> doc = {"a": [{"n": "x", "v": 1}, {"n": "y", "v": 2}]}
>>> apply_json_edit(doc, {"op": "set", "path": "/a/{n=y}/v", "value": 5}); doc["a"][1]["v"]
5
>>> REWRITES["arabic_digits"]("2066432")
'٢٠٦٦٤٣٢'
"""

from __future__ import annotations

import copy
import csv
import hashlib
import importlib.util
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
TABLE = Path(__file__).with_name("forged_documents.json")
STAT_KEYS = ("median_ms", "p10_ms", "p90_ms", "p95_ms", "min_ms", "mean_ms", "n_obs")

REWRITES: dict[str, Callable[[str], str]] = {
    # Digits another script's: float() and int() read them as numbers; a strict CSV reader must not.
    "arabic_digits": lambda s: s.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")),
    "fullwidth_digits": lambda s: s.translate(str.maketrans("0123456789", "０１２３４５６７８９")),
    # Python's numeric literal separators: int("2_066_432") == 2066432.
    "underscores": lambda s: f"{int(s):_}",
    # Padding: float(" 15.3 ") == 15.3.
    "padded": lambda s: f" {s} ",
    "plus_sign": lambda s: f"+{s}",
}


def load_cases() -> list[dict[str, Any]]:
    """The case table (``forged_documents.json``), each case with its ``id``."""
    return json.loads(TABLE.read_text())["cases"]


# --- JSON pointers with wildcards ---------------------------------------------------------------

def _segments(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"{pointer!r}: a JSON pointer starts with '/'")
    return [s.replace("~1", "/").replace("~0", "~") for s in pointer[1:].split("/")]


def _selector(segment: str) -> dict[str, Any] | None:
    if not (segment.startswith("{") and segment.endswith("}")):
        return None
    out = {}
    for part in segment[1:-1].split(","):
        key, _, value = part.partition("=")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def _children(node: Any, segment: str, last: bool) -> list[tuple[Any, Any]]:
    """(container, key) pairs that ``segment`` names in ``node``."""
    select = _selector(segment)
    if isinstance(node, list):
        if segment == "*":
            return [(node, i) for i in range(len(node))]
        if select is not None:
            return [(node, i) for i, item in enumerate(node)
                    if isinstance(item, dict) and all(item.get(k) == v for k, v in select.items())]
        index = int(segment)
        return [(node, index)] if -len(node) <= index < len(node) else []
    if isinstance(node, dict):
        if segment == "*":
            return [(node, k) for k in node]
        return [(node, segment)] if segment in node or last else []
    return []


def resolve(doc: Any, pointer: str) -> list[tuple[Any, Any]]:
    """Every (container, key) the pointer names; raises ``LookupError`` when it names nothing."""
    segments = _segments(pointer)
    if not segments:
        raise ValueError("the empty pointer (the whole document) cannot be edited")
    nodes = [doc]
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        found = [(c, k) for n in nodes for c, k in _children(n, segment, last)]
        if not found:
            raise LookupError(f"{pointer}: nothing at segment {segment!r}")
        if last:
            return found
        nodes = [c[k] for c, k in found]
    raise AssertionError("unreachable")


def _restat(stage: dict[str, Any]) -> None:
    raw = np.asarray(stage["raw_ms"], dtype=np.float64)
    values = {"median_ms": float(np.median(raw)), "p10_ms": float(np.percentile(raw, 10)),
              "p90_ms": float(np.percentile(raw, 90)), "p95_ms": float(np.percentile(raw, 95)),
              "min_ms": float(raw.min()), "mean_ms": float(raw.mean()), "n_obs": int(raw.size)}
    stage.update({k: v for k, v in values.items() if k in stage})


def apply_json_edit(doc: Any, edit: dict[str, Any]) -> None:
    """Apply one edit (see the module docstring) to a parsed JSON document, in place."""
    op = edit["op"]
    targets = resolve(doc, edit["path"])
    if op == "delete" and len(targets) > 1 and any(isinstance(c, list) for c, _ in targets):
        raise ValueError(f"{edit['path']}: deleting several list items by index is ambiguous")
    for container, key in targets:
        if op == "set":
            container[key] = copy.deepcopy(edit["value"])
        elif op == "scale":
            container[key] = container[key] * edit["factor"]
        elif op == "delete":
            del container[key]
        elif op == "truncate":
            container[key] = container[key][: edit["keep"]]
        elif op == "restat":
            _restat(container[key])
        else:
            raise ValueError(f"unknown JSON edit {op!r}")


# --- CSV cells -----------------------------------------------------------------------------------

def _read_csv(text: str) -> tuple[list[list[str]], int]:
    quoting = csv.QUOTE_ALL if text.startswith('"') else csv.QUOTE_MINIMAL
    return list(csv.reader(io.StringIO(text, newline=""))), quoting


def _write_csv(rows: list[list[str]], quoting: int) -> str:
    out = io.StringIO()
    csv.writer(out, quoting=quoting, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _row_indices(rows: list[list[str]], row: dict[str, str] | int | str) -> list[int]:
    """Row numbers (0 = the first data row) that ``row`` names: an index, ``"*"`` (every data row) or
    ``{column: value}`` (exactly one row)."""
    header = rows[0]
    if row == "*":
        return list(range(1, len(rows)))
    if isinstance(row, int):
        return [row + 1]
    matches = [i for i, r in enumerate(rows[1:], 1) if all(r[header.index(k)] == v for k, v in row.items())]
    if len(matches) != 1:
        raise LookupError(f"row {row}: {len(matches)} rows match")
    return matches


def apply_csv_edit(text: str, edit: dict[str, Any]) -> str:
    """Apply one ``csv_cell`` / ``csv_delete_row`` edit to CSV text."""
    rows, quoting = _read_csv(text)
    indices = _row_indices(rows, edit["row"])
    if edit["op"] == "csv_delete_row":
        rows = [r for i, r in enumerate(rows) if i not in indices]
    elif edit["op"] == "csv_cell":
        j = rows[0].index(edit["column"])
        for i in indices:
            rows[i][j] = edit["value"] if "value" in edit else REWRITES[edit["rewrite"]](rows[i][j])
    else:
        raise ValueError(f"unknown CSV edit {edit['op']!r}")
    return _write_csv(rows, quoting)


def csv_roundtrip(text: str) -> str:
    """The CSV re-written with no edit (the generator's writer must reproduce committed CSVs exactly)."""
    rows, quoting = _read_csv(text)
    return _write_csv(rows, quoting)


# --- sources a CPU command writes ----------------------------------------------------------------

def _sweep_autotune(_: Path) -> tuple[str, bytes]:
    """What ``gpu/sweep_point.py`` stores as ``results/sweeps/<sweep>/_autotune.json`` after the first point
    tuned: the best configs of that point, here those recorded by a committed sweep point."""
    point = json.loads((REPO / "results/sweeps/sweep_x2_h200/T32768-local.json").read_text())
    best = {stage: k["best_config"] for stage, k in point["autotune"]["kernels"].items()}
    doc = {"schema_version": "1.0", "kind": "sweep_autotune", "best_config": best}
    return "results/sweeps/sweep_x2_h200/_autotune.json", json.dumps(doc, indent=1).encode()


def _cli_output(argv: list[str], scratch: Path) -> bytes:
    from .runner import run_main  # noqa: PLC0415 - only the derived sources need the CLI

    result = run_main(argv, cwd=REPO)
    if result.code != 0:
        raise RuntimeError(f"{argv}: exit {result.code}: {result.stderr}")
    return result.stdout.encode()


def tiny_config(path: Path) -> Path:
    """``configs/e1_h100.json`` at T=2048 (the routing report's source; routing it takes a second). M = 32 > S = 16:
    at T=1024 (M = S = 16) every query selects every causal block, so all routings are one and no seed shows."""
    cfg = json.loads((REPO / "configs/e1_h100.json").read_text())
    cfg["shape"]["T"] = 2048
    path.write_text(json.dumps(cfg, indent=1))
    return path


def _routing_report(scratch: Path) -> tuple[str, bytes]:
    """``python -m nsa_exp routing --config <e1_h100 at T=2048> --json``."""
    cfg = tiny_config(scratch / "e1_h100_T2048.json")
    return "results/routing/e1_h100_T2048.json", _cli_output(["routing", "--config", str(cfg), "--json"], scratch)


def _routing_report_packed(scratch: Path) -> tuple[str, bytes]:
    """``python -m nsa_exp routing --config <e1_h200_docs8192 at T=2048, documents of 1024> --json``: two documents
    (M = 16 = S per document, so every routing selects the same blocks: the packing record is what is forged)."""
    cfg = json.loads((REPO / "configs/e1_h200_docs8192.json").read_text())
    cfg["shape"]["T"], cfg["packing"] = 2048, {"documents": 1024}
    path = scratch / "e1_h200_docs1024_T2048.json"
    path.write_text(json.dumps(cfg, indent=1))
    return "results/routing/e1_h200_docs1024_T2048.json", _cli_output(["routing", "--config", str(path), "--json"],
                                                                      scratch)


def _validation_report(scratch: Path) -> tuple[str, bytes]:
    """``python -m nsa_exp validate --json results/raw/e1_h200_pre.json`` (its one report)."""
    reports = json.loads(_cli_output(["validate", "--json", "results/raw/e1_h200_pre.json"], scratch))
    return "results/validation/e1_h200_pre.json", json.dumps(reports[0], indent=1).encode()


RELEASE_REPS, RELEASE_WARM = 20, 2
RELEASE_KERNELS = ["parallel_attn_bwd_kernel_preprocess", "parallel_nsa_bwd_kernel_dq", "prepare_block_csr_kernel",
                   "parallel_nsa_bwd_kernel_dkv", "parallel_nsa_kernel_mask"]


def _release_calls(cupti: dict, dkv_scale: float = 1.0, block_mask: bool = False) -> list:
    """One call's kernels per CUPTI round, from the pinned stage times: preprocess, dQ, the CSR as two launches
    spanning its time (or 0.5.1's block-mask kernel), dK/dV."""
    out = []
    for c in range(len(cupti["dkv_core"])):
        d, q, r, k = (cupti[s][c] for s in ("delta_preprocess", "dq_core", "csr", "dkv_core"))
        mid = [[4, d + q, r]] if block_mask else [[2, d + q, r / 2], [2, d + q + r / 2, r / 2]]
        out.append([[0, 0.0, d], [1, d, q], *mid, [3, d + q + r, k * dkv_scale]])
    return out


def release_doc(pinned: dict, dkv_scale: float = 1.0, block_mask: bool = False) -> dict:
    """A release result of fla-core 0.5.2 (the pinned files) at the pinned run's point, built by the real builder
    from ``pinned``'s own observations (its first rounds as the release's event rounds, its CUPTI stage times as
    the kernels of one ``parallel_nsa_bwd`` call per round); ``dkv_scale`` slows the dK/dV kernel,
    ``block_mask`` swaps the CSR kernels for 0.5.1's block mask."""
    # Only the release sources need the package (and torch, for throttled): imported when one is built.
    from nsa_exp.checking import release_result  # noqa: PLC0415
    from nsa_exp.core.measurement import Measurement, RoundPlan  # noqa: PLC0415
    from nsa_exp.gpu.telemetry import throttled  # noqa: PLC0415
    from nsa_exp.io.config_files import config_from_dict  # noqa: PLC0415
    from nsa_exp.releases.source import read_launches  # noqa: PLC0415
    from nsa_exp.routing.patterns import generate_routing  # noqa: PLC0415

    warm, reps = RELEASE_WARM, RELEASE_REPS
    config = config_from_dict({**pinned["config"], "name": "release_h200-T32768",  # the release config's point
                               "timing": {**pinned["config"]["timing"], "warmup_rounds": warm,
                                                              "repetitions": reps}})
    names = [p.name for p in config.patterns]
    plan = RoundPlan.of(names, config, stop=False)
    orders = plan.orders()
    assert orders == pinned["timing"]["round_orders"][:warm + reps]  # same names and seed: the pinned order
    tel = {(s["round"], s["pattern"]): s for s in pinned["telemetry"]["samples"]}
    records = []
    for r, order in enumerate(orders):
        for p in order:
            st = pinned["patterns"][p]["stages"]
            i, key = (r, "warmup_ms") if r < warm else (r - warm, "raw_ms")
            fwd, bwd = st["selection_fwd"][key][i], st["full_bwd"][key][i]
            records.append({"round": r, "pattern": p, "warmup": r < warm, "ms": {
                "selection_fwd": fwd, "full_bwd": bwd, "train_step": fwd + bwd},
                "telemetry": {k: v for k, v in tel[r, p].items() if k not in ("round", "pattern", "warmup")}})
    root = Path(importlib.util.find_spec("fla").submodule_search_locations[0]).parent  # the pinned files
    source = read_launches(root)
    if block_mask:  # 0.5.1's launches: a dense block mask instead of the CSR kernels
        source["launches"] = [x for x in source["launches"] if x["kernel"] != "prepare_block_csr_kernel"] + [
            {"kernel": "parallel_nsa_kernel_mask", "grid": "(T, B, H * S)", "line": 1, "via": "m", "args": {}}]
    calls = {p: {"full_bwd": _release_calls(pinned["cupti"]["kernel_ms"][p], dkv_scale, block_mask)} for p in names}
    wall = 1.0 + sum(sum(r["ms"].values()) for r in records) / 1e3  # the latencies it timed, plus a second
    point = {"measurement": Measurement(plan, orders, records), "memory": None, "wall_seconds": wall,
             "autotune": {"tune_seconds": 1.0, "kernels": {}, "tuned_at_this_point": True},
             "cupti_rounds": len(pinned["cupti"]["kernel_ms"]["local"]["dkv_core"]), "kernel_names": RELEASE_KERNELS,
             "kernel_calls": calls, "kernels_unavailable": None,
             "kernel_markers": {"names": ["reduce", "spin_kernel"], "per_call": 2, "consistent": True}}
    files = {rel: hashlib.sha256((root / rel).read_bytes()).hexdigest() for rel in source["files"]}
    child = {"timer": "cuda-events", "sys_path": [str(root)], "telemetry_available": True, "env": {},
             "versions": pinned["metadata"]["versions"], "fla": {
                 "version_imported": "0.5.2", "package_dir": str(root / "fla"), "files": files,
                 "distributions": ["fla-core==0.5.2"], "fla_roots_on_path": [str(root)]}}
    gates = [g for g in pinned["gates"] if g["name"] != "equal_edges"] + [
        {"name": "equal_edges", "passed": True, "detail": pinned["edges"]},
        {"name": "release_fla", "passed": True, "detail": {}}]
    target = {"label": "fla-core-0.5.2", "kind": "release", "version": "0.5.2", "path": None,
              "origin": {"kind": "wheel-dir", "wheel": "fla_core-0.5.2-py3-none-any.whl", "wheel_sha256": "0" * 64}}
    routings = {p.name: generate_routing(p, config.shape, config.seeds.routing) for p in config.patterns}
    return release_result.build(name="fla-core-0.5.2-T32768", target=target, source=source, config=config,
                                release_config={"path": "configs/release_h200.json", "raw": json.loads(
                                    (REPO / "configs/release_h200.json").read_text())},
                                gates=gates, routings=routings, child=child, point=point,
                                metadata={**pinned["metadata"], "argv": [  # the command that writes a release result
                                    pinned["metadata"]["argv"][0], "release-bench", "--config",
                                    "configs/release_h200.json", "--release", "0.5.2"]},
                                throttled=throttled).to_json()


def _release_result(_: Path) -> tuple[str, bytes]:
    """What ``release-bench`` writes for fla-core 0.5.2 at the pinned H200 point (:func:`release_doc`)."""
    doc = release_doc(json.loads((REPO / "results/raw/e1_h200.json").read_text()))
    return "results/releases/release_h200/fla-core-0.5.2-T32768.json", json.dumps(doc, indent=1).encode()


DERIVED: dict[str, Callable[[Path], tuple[str, bytes]]] = {
    "sweep_autotune": _sweep_autotune,
    "release_result": _release_result,
    "routing_report": _routing_report,
    "routing_report_packed": _routing_report_packed,
    "validation_report": _validation_report,
}


class Sources:
    """Source bytes by name (committed path or ``derived:<name>``), each derived source built once."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self._cache: dict[str, tuple[str, bytes]] = {}

    def get(self, source: str) -> tuple[str, bytes]:
        """(repo-relative path the forged file takes, the source's bytes)."""
        if source not in self._cache:
            if source.startswith("derived:"):
                self.scratch.mkdir(parents=True, exist_ok=True)
                self._cache[source] = DERIVED[source.removeprefix("derived:")](self.scratch)
            else:
                self._cache[source] = (source, (REPO / source).read_bytes())
        return self._cache[source]


def forge_bytes(data: bytes, relpath: str, edits: list[dict[str, Any]]) -> bytes:
    """The source's bytes with every edit applied (JSON edits on the parsed document, then text edits)."""
    json_edits = [e for e in edits if e["op"] in ("set", "scale", "delete", "truncate", "restat")]
    csv_edits = [e for e in edits if e["op"].startswith("csv_")]
    text_edits = [e for e in edits if e["op"] == "text"]
    if len(json_edits) + len(csv_edits) + len(text_edits) != len(edits):
        raise ValueError(f"unknown edit in {edits}")
    if json_edits:
        doc = json.loads(data)
        for edit in json_edits:
            apply_json_edit(doc, edit)
        data = (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode()
    if csv_edits:
        text = data.decode("utf-8")
        for edit in csv_edits:
            text = apply_csv_edit(text, edit)
        data = text.encode("utf-8")
    for edit in text_edits:
        text = data.decode("utf-8")
        if text.count(edit["old"]) != 1:
            raise LookupError(f"text edit: {edit['old']!r} occurs {text.count(edit['old'])} times in {relpath}")
        data = text.replace(edit["old"], edit["new"]).encode("utf-8")
    return data


def build(case: dict[str, Any], out: Path, sources: Sources) -> dict[str, Any]:
    """Write one case's forged file (and its companions and context) under ``out/<id>/``.

    Returns ``{"forged": path, "validate": [paths to give validate], "also": [paths], "source_bytes",
    "forged_bytes"}``."""
    root = out / case["id"]
    relpath, data = sources.get(case["source"])
    forged = forge_bytes(data, relpath, case["edits"])
    target = root / relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(forged)
    for ctx in case.get("context", []):
        for src in sorted(REPO.glob(ctx)) or [REPO / ctx]:
            dst = root / src.relative_to(REPO)
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
    also = []
    for comp in case.get("also", []):  # a companion given with --also: committed, or forged by its own edits
        comp_rel, comp_data = sources.get(comp["source"])
        dst = root / "also" / comp_rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(forge_bytes(comp_data, comp_rel, comp.get("edits", [])))
        also.append(dst)
    validate = [root / v for v in case["validate"]] if "validate" in case else [target]
    return {"forged": target, "validate": validate, "also": also, "source_bytes": data, "forged_bytes": forged}
