"""Checks of the dK/dV makespan model's documents (docs/MODEL.md), recomputed with the model's own functions.

- ``calibration_set_semantics`` (calibration set, ``configs/model_calibration*.json``): every routing a
  valid pattern at the experiment's primary shape (:data:`nsa_exp.core.config.PRIMARY_SHAPE`) at its T
  (a positive multiple of the block size), names unique, no routing listed twice.
- ``calibration_recompute`` (calibration): each point's measured median from its source file (same
  sha256, same GPU, shape, seed and autotune config); its fitted ms re-predicted from the recorded
  parameters on the regenerated routing; error_pct and the residuals from them; the parameters re-fitted
  (:func:`nsa_exp.model.calibration.fit_calibration`) and held to the refit at the solver's tolerance
  (:func:`nsa_exp.model.fit.refit_problems`: objective and predictions); kernel resources and the
  occupancy section from the study and the ncu summary they cite (:func:`nsa_exp.model.calibration.kernel_resources`,
  :func:`~nsa_exp.model.calibration.occupancy_section`); the calibration set by its sha256 and routings;
  ``bq`` from the autotune config; the GPU against the table and the points.
- ``model_validation_recompute`` (validation): the calibration it names (sha256); each row recomputed by
  :func:`nsa_exp.model.whatif.validation_row` from its source point (prediction, error, busy fraction,
  lower bound, heaviest-first and split what-ifs); without the source, the prediction still from the
  calibration and the routing; the summary and ``meets_target`` from the rows and the pinned target; no
  calibration routing among the rows.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.config import PRIMARY_SHAPE, Shape
from ..core.families import pattern_from_entry
from ..errors import UserError
from ..io.store import file_sha256
from ..model.calibration import (
    fit_calibration,
    kernel_resources,
    limits_from_device,
    ncu_cross_check,
    occupancy_section,
    params_of,
)
from ..model.fit import predict_ms, refit_problems
from ..model.points import Point, check_same_setup, pattern_fanin, point_name, read_points, regenerable
from ..model.whatif import TARGET, validation_row, validation_summary
from .checks import Add, Context, Problems, close
from .record_checks import host_problems
from .sources import created_after_sources, deep_diff, read_source

MODEL_FAMILY = "processor-sharing makespan, work = a + c*ceil(fanin/BQ), solo speed-up gamma"


def calibration_set_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    names, routings = [], []
    for i, r in enumerate(doc["routings"]):
        where = f"$.routings[{i}]"
        T = r["T"]
        if T < 1 or T % PRIMARY_SHAPE.block_size:
            problems.append((f"{where}.T", f"{T} is not a positive multiple of block_size {PRIMARY_SHAPE.block_size}"))
            continue
        shape = Shape(**{**PRIMARY_SHAPE.to_dict(), "T": T})
        try:
            pattern = pattern_from_entry(r["pattern"], f"{where}.pattern", shape)
        except UserError as exc:
            problems.append((f"{where}.pattern", str(exc)))
            continue
        key = json.dumps([pattern.to_dict(), T], sort_keys=True)
        if key in routings:
            problems.append((where, f"{point_name(pattern.to_dict(), T)} is listed twice"))
        routings.append(key)
        if r["name"] in names:
            problems.append((f"{where}.name", f"{r['name']!r} names two routings"))
        names.append(r["name"])
    add("calibration_set_semantics", problems)


def _source_point(ctx: Context, rec: dict[str, Any], label: str, where: str, problems: Problems) -> Point | None:
    """The point ``label`` of the source file ``rec`` names (None, with a problem, when it cannot be
    trusted: another file by sha256, no such routing)."""
    found = ctx.locate(rec["source"])
    if found is None:
        return None
    if file_sha256(found) != rec["sha256"]:
        problems.append((f"{where}.sha256", f"{rec['source']} at hand has another sha256: not the file it was "
                         "computed from"))
        return None
    try:
        point = next((p for p in read_points(found) if p.name == label), None)
    except UserError as exc:
        problems.append((f"{where}.source", str(exc)))
        return None
    if point is None:
        problems.append((f"{where}.source", f"{rec['source']} holds no routing {label}"))
    return point


def calibration_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = host_problems(doc.get("metadata", {}))
    shape, seed, gpu = doc["shape"], doc["seed"], doc["gpu"]
    occ, model = doc["occupancy"], doc["model"]
    params = params_of(doc)
    bq = int(doc["autotune_config"]["kwargs"].get("BQ", 1))
    if model["bq"] != bq:
        problems.append(("$.model.bq", f"{model['bq']}, the autotune config's BQ is {bq}"))
    if model["family"] != MODEL_FAMILY:
        problems.append(("$.model.family", f"{model['family']!r} is not the model ({MODEL_FAMILY!r})"))
    if occ["sm_count"] != gpu["sm_count"]:
        problems.append(("$.occupancy.sm_count", f"{occ['sm_count']} != $.gpu.sm_count {gpu['sm_count']}"))
    points, fanins, sources, unseen = [], [], [], []
    for i, rec in enumerate(doc["points"]):
        where = f"$.points[{i}]"
        fanin = pattern_fanin(rec["pattern"], shape, rec["T"], seed)
        fitted = predict_ms(fanin, params, occ["sm_count"], occ["slots_per_sm"], bq)
        if not close(rec["fitted_ms"], fitted):
            problems.append((f"{where}.fitted_ms", f"{rec['fitted_ms']}, the parameters predict {fitted}"))
        if not close(rec["error_pct"], 100.0 * (rec["fitted_ms"] / rec["measured_ms"] - 1.0)):
            problems.append((f"{where}.error_pct", f"{rec['error_pct']}, fitted / measured - 1 = "
                             f"{100.0 * (rec['fitted_ms'] / rec['measured_ms'] - 1.0)} %"))
        if rec["label"] != point_name(rec["pattern"], rec["T"]):
            problems.append((f"{where}.label", f"{rec['label']!r}, pattern and T give "
                             f"{point_name(rec['pattern'], rec['T'])!r}"))
        point = _source_point(ctx, rec, rec["label"], where, problems)
        if point is None:
            unseen.append(rec["source"])
            continue
        if not close(point.measured_ms, rec["measured_ms"]):
            problems.append((f"{where}.measured_ms", f"{rec['measured_ms']}, {rec['source']} measured "
                             f"{point.measured_ms}"))
        try:
            check_same_setup([point], {"gpu": gpu["name"], "sm_count": gpu["sm_count"], "shape": shape, "seed": seed,
                                       "autotune_config": doc["autotune_config"]})
        except UserError as exc:
            problems.append((f"{where}.source", str(exc)))
        points.append(point)
        fanins.append(fanin)
        _, src = read_source(ctx, rec["source"], ("bench_result", "sweep_point"))
        sources += [src] if src else []
    errs = [abs(r["error_pct"]) for r in doc["points"]]
    for key, value in (("n", len(errs)), ("mean_abs_pct", sum(errs) / len(errs)), ("max_abs_pct", max(errs))):
        if not close(doc["residuals"][key], value):
            problems.append((f"$.residuals.{key}", f"{doc['residuals'][key]}, the points give {value}"))
    if unseen:
        ctx.unverifiable("$.points[*].measured_ms, $.model.parameters (refit)",
                         f"unverified (source not found): {', '.join(sorted(set(unseen)))}")
    else:
        fit, rows = fit_calibration(points, fanins, occ["sm_count"], occ["slots_per_sm"], bq)
        # the refit lands within the solver's tolerance, not bit for bit (model.fit.refit_problems)
        problems += [("$.model.parameters", f"{msg}: the recorded parameters {doc['model']['parameters']} are not "
                      f"the fit to the points ({fit.as_dict()})")
                     for msg in refit_problems([p.measured_ms for p in points],
                                               [r["fitted_ms"] for r in doc["points"]],
                                               [r["fitted_ms"] for r in rows])]
    _calibration_inputs(doc, ctx, problems)
    add("calibration_recompute", problems)
    created_after_sources(doc, sources, add)


def _calibration_inputs(doc: dict[str, Any], ctx: Context, problems: Problems) -> None:
    """Kernel resources and occupancy from the study and ncu summary cited; the calibration set."""
    res = doc["kernel_resources"]
    found = ctx.locate(res["source"])
    if found is None or file_sha256(found) != res["sha256"]:
        if found is not None:
            problems.append(("$.kernel_resources.sha256", f"{res['source']} at hand has another sha256"))
        ctx.unverifiable("$.kernel_resources, $.occupancy", f"unverified (source not found): {res['source']}")
    else:
        try:
            want, device = kernel_resources(str(found), dict(doc["autotune_config"]))
            ncu_rec = doc["occupancy"].get("ncu_cross_check")
            ncu_path = ctx.locate(ncu_rec["source"]) if ncu_rec else None
            if ncu_rec and ncu_path is None:
                ctx.unverifiable("$.occupancy.ncu_cross_check", f"unverified (source not found): {ncu_rec['source']}")
                ncu: dict[str, Any] | None = {k: ncu_rec[k] for k in ("source", "theoretical_occupancy_pct")}
            else:
                ncu = ncu_cross_check(str(ncu_path)) if ncu_path else None
                if ncu:
                    ncu["source"] = ncu_rec["source"]
            occ = occupancy_section(want, limits_from_device(device), doc["gpu"]["sm_count"], ncu)
        except UserError as exc:
            problems.append(("$.kernel_resources", str(exc)))
        else:
            want["source"] = res["source"]
            deep_diff(res, want, "$.kernel_resources", problems)
            deep_diff(doc["occupancy"], occ, "$.occupancy", problems)
            if device and device.get("name") != doc["gpu"]["name"]:
                problems.append(("$.gpu.name", f"{doc['gpu']['name']!r}, but the kernels were compiled on "
                                 f"{device.get('name')!r}"))
    cset = doc["calibration_set"]
    set_source = read_source(ctx, cset["path"], ("model_calibration_set",))
    if set_source[1] is None or file_sha256(set_source[0]) != cset["sha256"]:
        if set_source[0] is not None:
            problems.append(("$.calibration_set", f"{cset['path']} at hand is another file (sha256 or kind)"))
        else:
            ctx.unverifiable("$.calibration_set", f"unverified (source not found): {cset['path']}")
        return
    set_doc = set_source[1]
    if set_doc["name"] != cset["name"]:
        problems.append(("$.calibration_set.name", f"{cset['name']!r}, the set is {set_doc['name']!r}"))
    routings = [(r["name"], point_name(r["pattern"], r["T"])) for r in set_doc["routings"]]
    got = [(p["name"], p["label"]) for p in doc["points"]]
    if got != routings:
        problems.append(("$.points", f"{got} are not the set's routings {routings}"))


def _other_shape(row: dict[str, Any]) -> bool:
    """Whether a validation row is at another B, H or G than its calibration (it then records them): a routing
    that calibrated the model may validate it at another shape."""
    return any(k in row for k in ("B", "H", "G"))


#: calibration sha256 -> validation_row's cache for that calibration (see validation_checks)
_MODELLED: dict[str, dict] = {}


def validation_checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
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
    if cal["name"] != doc["calibration"]["name"]:
        problems.append(("$.calibration.name", f"{doc['calibration']['name']!r}, the calibration is {cal['name']!r}"))
    used = {p["label"] for p in cal["points"]}
    problems += [(f"$.rows[{i}].name", f"{r['name']} calibrated the model: it cannot also validate it")
                 for i, r in enumerate(doc["rows"]) if r["name"] in used and not _other_shape(r)]
    problems += [("$.excluded", f"{e} is not a calibration routing") for e in doc["excluded"] if e not in used]
    unseen = []
    # the modelled rows of one calibration file (by its bytes' sha256) are kept for the process: validating
    # several validations of one calibration (a corpus, a folder) models each routing once
    cache = _MODELLED.setdefault(doc["calibration"]["sha256"], {})
    for i, r in enumerate(doc["rows"]):
        where = f"$.rows[{i}]"
        if not regenerable(r["pattern"]):
            problems.append((f"{where}.pattern", f"{r['pattern']} cannot be regenerated; model-validate skips it"))
            continue
        point = _source_point(ctx, r, r["name"], where, problems)
        if point is None:
            unseen.append(r["source"])
            if r["name"] != point_name(r["pattern"], r["T"]):  # a packed point: its packing is in the source only
                continue
            shape = {**cal["shape"], **{k: r[k] for k in ("B", "H") if k in r}}
            if "G" in r:
                shape["HQ"] = shape["H"] * r["G"]
            point = Point(r["name"], r["pattern"], r["T"], r["measured_ms"], r["source"], r["sha256"],
                          cal["gpu"]["name"], cal["gpu"]["sm_count"], shape, cal["seed"],
                          cal["autotune_config"], None)
        want = {**validation_row(cal, point, doc["split_max_fanin"], cache), "source": r["source"]}  # as recorded
        deep_diff(r, want, where, problems)
    if unseen:
        ctx.unverifiable("$.rows[*].measured_ms", f"unverified (source not found): {', '.join(sorted(set(unseen)))}")
    add("model_validation_recompute", problems)
    created_after_sources(doc, [cal], add)

