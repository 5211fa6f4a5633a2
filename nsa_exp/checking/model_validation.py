"""The ``model_validation`` kind: the calibrated model's predictions against held-out measured points (results/model;
docs/MODEL.md). Its builder (:func:`build`; ``model_commands.model_validate`` calls it) and its check
(:func:`model_validation_recompute`), in one module.

- ``model_validation_recompute``: the calibration it names (sha256); each row recomputed by
  :func:`nsa_exp.model.whatif.validation_row` from its source point, which must itself validate (prediction, error,
  busy fraction, lower bound, heaviest-first and split what-ifs); without the source, the prediction still from the
  calibration and the routing; the summary and ``meets_target`` from the rows and the pinned target; no calibration
  routing among the rows; with the ``--points`` its recorded command names at hand, which rows and exclusions there
  are, in order (every regenerable point read again: a row dropped, added or moved is named), else the set is
  unverified.
- ``created_after_sources``: dated after its calibration.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from ..core.kinds import schema_version
from ..errors import UserError
from ..io.store import file_sha256
from ..model.points import POINT_KINDS, MeasuredPoint, point_name, read_points, regenerable, result_files
from ..model.whatif import TARGET, held_out, validation_row, validation_summary
from .checks import Add, Context, Problems, close, first_difference, one_check
from .model_calibration import source_point
from .record_checks import host_problems, recorded_command_problems
from .sources import created_after_sources, deep_diff, read_source, source_problems

KIND = "model_validation"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def _other_shape(row: dict[str, Any]) -> bool:
    """Whether a validation row is at another B, H or G than its calibration (it then records them): a routing
    that calibrated the model may validate it at another shape."""
    return any(k in row for k in ("B", "H", "G"))


def points_named(command: str) -> list[str]:
    """The ``--points`` values of a recorded ``model-validate`` command line (empty when it names none).

    >>> points_named("python -m nsa_exp model-validate --calibration c.json --points a b/c.json --overwrite")
    ['a', 'b/c.json']
    """
    words = shlex.split(command)
    at = next((i for i, w in enumerate(words) if w == "--points" or w.startswith("--points=")), None)
    if at is None:
        return []
    first = [words[at].split("=", 1)[1]] if "=" in words[at] else []  # --points=DIR (argparse reads it so too)
    rest = words[at + 1:]
    return first + rest[:next((i for i, w in enumerate(rest) if w.startswith("--")), len(rest))]


def row_set_problems(doc: dict[str, Any], cal: dict[str, Any], ctx: Context) -> Problems:
    """The rows and exclusions ``model-validate`` makes of the points its recorded command read (the same rule:
    regenerable points; a calibration routing at the calibration's shape excluded, else held out), against the
    recorded ones, by name and source sha256 in order; unverified when a ``--points`` path is not at hand."""
    named = points_named(doc["command"])
    located = [ctx.locate(p, folder=True) or ctx.locate(p) for p in named]
    if not named or any(p is None for p in located):
        ctx.unverifiable("$.rows[*] (which points), $.excluded", "unverified (source not found): the --points of "
                         f"its command {named or '(none recorded)'}")
        return []
    try:
        points = [p for f in result_files([str(p) for p in located]) for p in read_points(f) if regenerable(p.pattern)]
    except UserError as exc:
        return [("$.command", f"its --points cannot be read again: {exc}")]
    validated, excluded = held_out(cal, points)
    want = [(p.name, p.sha256) for p in validated]
    got = [(r["name"], r["sha256"]) for r in doc["rows"]]
    problems: Problems = []
    if got != want:
        i = first_difference(got, want)
        problems.append((f"$.rows[{i}]", f"{len(got)} rows; the points of its --points give {len(want)} held-out "
                         f"rows, first different here ({want[i][0] if i < len(want) else 'none'} expected)"))
    if doc["excluded"] != excluded:
        problems.append(("$.excluded", f"{doc['excluded']}, the points of its --points exclude {excluded}"))
    return problems


#: calibration sha256 -> validation_row's cache for that calibration (see model_validation_recompute)
_MODELLED: dict[str, dict] = {}


def model_validation_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = host_problems(doc.get("metadata", {}))
    summary, meets = validation_summary(doc["rows"])
    deep_diff(doc["summary"], summary, "$.summary", problems)
    if doc["target"] != TARGET:
        problems.append(("$.target", f"{doc['target']}, model-validate's target is {TARGET}"))
    if doc["meets_target"] != meets:
        problems.append(("$.meets_target", f"{doc['meets_target']}, the rows give {meets} against {TARGET}"))
    for i, r in enumerate(doc["rows"]):
        if not close(r["error_pct"], 100.0 * (r["predicted_ms"] / r["measured_ms"] - 1.0)):
            problems.append((f"$.rows[{i}].error_pct", f"{r['error_pct']}, predicted / measured - 1 = "
                             f"{100.0 * (r['predicted_ms'] / r['measured_ms'] - 1.0)} %"))
    problems += recorded_command_problems(doc["command"], "model-validate", ("--points", "--calibration"), doc=doc)
    cal_source = read_source(ctx, doc["calibration"]["path"], ("model_calibration",))
    if cal_source[1] is None or file_sha256(cal_source[0]) != doc["calibration"]["sha256"]:
        if cal_source[0] is not None:
            problems.append(("$.calibration.sha256", f"{doc['calibration']['path']} at hand is another file"))
        else:
            ctx.unverifiable("$.rows[*] (predictions)", f"unverified (calibration not found): "
                             f"{doc['calibration']['path']}")
        add("model_validation_recompute", problems)
        return
    cal = cal_source[1]
    problems += source_problems(ctx, "$.calibration.path", doc["calibration"]["path"], cal_source,
                                ("model_calibration",))
    if cal["name"] != doc["calibration"]["name"]:
        problems.append(("$.calibration.name", f"{doc['calibration']['name']!r}, the calibration is {cal['name']!r}"))
    used = {p["label"] for p in cal["points"]}
    problems += [(f"$.rows[{i}].name", f"{r['name']} calibrated the model: it cannot also validate it")
                 for i, r in enumerate(doc["rows"]) if r["name"] in used and not _other_shape(r)]
    problems += [("$.excluded", f"{e} is not a calibration routing") for e in doc["excluded"] if e not in used]
    problems += row_set_problems(doc, cal, ctx)
    unseen = []
    # the modelled rows of one calibration file (by its bytes' sha256) are kept for the process: validating
    # several validations of one calibration (a corpus, a folder) models each routing once
    cache = _MODELLED.setdefault(doc["calibration"]["sha256"], {})
    for i, r in enumerate(doc["rows"]):
        where = f"$.rows[{i}]"
        if not regenerable(r["pattern"]):
            problems.append((f"{where}.pattern", f"{r['pattern']} cannot be regenerated; model-validate skips it"))
            continue
        point = source_point(ctx, r, r["name"], where, problems)
        if point is not None:  # the source that measured the row validates (its sha256 alone is the file's own)
            problems += source_problems(ctx, f"{where}.source", r["source"],
                                        read_source(ctx, r["source"], POINT_KINDS), POINT_KINDS)
        if point is None:
            unseen.append(r["source"])
            if r["name"] != point_name(r["pattern"], r["T"]):  # a packed point: its packing is in the source only
                continue
            shape = {**cal["shape"], **{k: r[k] for k in ("B", "H") if k in r}}
            if "G" in r:
                shape["HQ"] = shape["H"] * r["G"]
            point = MeasuredPoint(r["name"], r["pattern"], r["T"], r["measured_ms"], r["source"], r["sha256"],
                                  cal["gpu"]["name"], cal["gpu"]["sm_count"], shape, cal["seed"],
                                  cal["autotune_config"], None)
        try:
            want = {**validation_row(cal, point, doc["split_max_fanin"], cache), "source": r["source"]}  # as recorded
        except UserError as exc:  # the row's pattern or shape breaks a config rule (e.g. sinks 15.0): this row fails
            problems.append((f"{where}.pattern", f"cannot be regenerated: {exc}"))
            continue
        deep_diff(r, want, where, problems)
    if unseen:
        ctx.unverifiable("$.rows[*].measured_ms", f"unverified (source not found): {', '.join(sorted(set(unseen)))}")
    add("model_validation_recompute", problems)
    created_after_sources(doc, [cal], add)


checks = one_check("model_validation_recompute", model_validation_recompute)


def build(*, name: str, calibration_path: str, calibration_name: str, rows: Sequence[dict[str, Any]],
          excluded: list[str], split_max_fanin: int, command: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """The validation ``name`` of the calibration at ``calibration_path``: its ``rows``
    (:func:`nsa_exp.model.whatif.validation_row`, at least one), their summary against the pinned target, the
    calibration routings ``excluded``; ``split_max_fanin`` 0: no split what-if."""
    summary, meets = validation_summary(rows)
    return {"schema_version": schema_version("model_validation"), "kind": "model_validation", "name": name,
            "calibration": {"path": calibration_path, "sha256": file_sha256(calibration_path),
                            "name": calibration_name},
            "rows": rows, "excluded": excluded, "summary": summary, "target": TARGET,
            "meets_target": meets, "split_max_fanin": split_max_fanin or None, "command": command,
            "metadata": metadata}
