"""The ``model_calibration`` kind: the dK/dV makespan model fitted to measured points (results/model; docs/MODEL.md).
Its builder (:func:`build`; ``model_commands.calibrate`` calls it) and its check (:func:`calibration_recompute`),
in one module; :func:`source_point` also serves :mod:`.model_validation`.

- ``calibration_recompute``: each point's measured median from its source file (same sha256, same GPU, shape,
  seed and autotune config); its fitted ms re-predicted from the recorded parameters on the regenerated routing;
  error_pct and the residuals from them; the parameters re-fitted (:func:`nsa_exp.model.calibration.fit_calibration`)
  and held to the refit at the solver's tolerance (:func:`nsa_exp.model.fit.refit_problems`: objective and
  predictions); kernel resources and the occupancy section from the study and the ncu summary they cite
  (:func:`nsa_exp.model.calibration.kernel_resources`, :func:`~nsa_exp.model.calibration.occupancy_section`); the
  calibration set by its sha256 and routings; ``bq`` from the autotune config; the GPU against the table and the
  points.
- ``created_after_sources``: dated after the results its points come from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.kinds import schema_version
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
from ..model.fit import Params, predict_ms, refit_problems
from ..model.points import POINT_KINDS, MeasuredPoint, check_same_setup, pattern_fanin, point_name, read_points
from ..model.whatif import validation_summary
from .checks import Add, Context, Problems, close, one_check
from .record_checks import host_problems, recorded_command_problems
from .sources import created_after_sources, deep_diff, read_source, rebuilt_from, source_problems

KIND = "model_calibration"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS

MODEL_FAMILY = "processor-sharing makespan, work = a + c*ceil(fanin/BQ), solo speed-up gamma"


def source_point(ctx: Context, rec: dict[str, Any], label: str, where: str, problems: Problems) -> MeasuredPoint | None:
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


def calibration_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = host_problems(doc.get("metadata", {}))
    problems += recorded_command_problems(doc["command"], "calibrate", ("--points", "--set"), doc=doc)
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
    if doc["points"] and shape.get("T") != doc["points"][0]["T"]:  # build: the first point's shape at its T
        problems.append(("$.shape.T", f"{shape.get('T')}, the calibration's shape is its first point's, at T="
                         f"{doc['points'][0]['T']}"))
    points, fanins, sources, unseen = [], [], [], []
    broken = False
    for i, rec in enumerate(doc["points"]):
        where = f"$.points[{i}]"
        try:
            fanin = pattern_fanin(rec["pattern"], shape, rec["T"], seed)
        except UserError as exc:  # a pattern or T a config refuses: this point cannot be recomputed, nor the refit
            problems.append((f"{where}.pattern", str(exc)))
            broken = True
            continue
        fitted = predict_ms(fanin, params, occ["sm_count"], occ["slots_per_sm"], bq)
        if not close(rec["fitted_ms"], fitted):
            problems.append((f"{where}.fitted_ms", f"{rec['fitted_ms']}, the parameters predict {fitted}"))
        if not close(rec["error_pct"], 100.0 * (rec["fitted_ms"] / rec["measured_ms"] - 1.0)):
            problems.append((f"{where}.error_pct", f"{rec['error_pct']}, fitted / measured - 1 = "
                             f"{100.0 * (rec['fitted_ms'] / rec['measured_ms'] - 1.0)} %"))
        if rec["label"] != point_name(rec["pattern"], rec["T"]):
            problems.append((f"{where}.label", f"{rec['label']!r}, pattern and T give "
                             f"{point_name(rec['pattern'], rec['T'])!r}"))
        point = source_point(ctx, rec, rec["label"], where, problems)
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
        source = read_source(ctx, rec["source"], POINT_KINDS)
        problems += source_problems(ctx, f"{where}.source", rec["source"], source, POINT_KINDS)
        sources += [source[1]] if source[1] else []
    errs = [abs(r["error_pct"]) for r in doc["points"]]
    for key, value in (("n", len(errs)), ("mean_abs_pct", sum(errs) / len(errs)), ("max_abs_pct", max(errs))):
        if not close(doc["residuals"][key], value):
            problems.append((f"$.residuals.{key}", f"{doc['residuals'][key]}, the points give {value}"))
    if unseen:
        ctx.unverifiable("$.points[*].measured_ms, $.model.parameters (refit)",
                         f"unverified (source not found): {', '.join(sorted(set(unseen)))}")
    elif not broken:
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


checks = one_check("calibration_recompute", calibration_recompute)


#: Shared memory a thread block can have on Hopper (NVIDIA's Hopper tuning guide: 227 KB): the calibrated dK/dV
#: config ran, so its kernel fit in it.
HOPPER_BLOCK_SHARED = 227 * 1024


def _calibration_inputs(doc: dict[str, Any], ctx: Context, problems: Problems) -> None:
    """Kernel resources and occupancy from the study and ncu summary cited; the calibration set."""
    res = doc["kernel_resources"]
    found = ctx.locate(res["source"])
    if found is None or file_sha256(found) != res["sha256"]:
        if found is not None:
            problems.append(("$.kernel_resources.sha256", f"{res['source']} at hand has another sha256"))
        ctx.unverifiable("$.kernel_resources, $.occupancy", f"unverified (source not found): {res['source']}")
    else:
        # the study's compiled metadata must hold too (e.g. 1-255 registers per thread)
        problems += rebuilt_from(ctx, "$.kernel_resources.source", res["source"], found)
        if isinstance(res.get("shared"), int) and res["shared"] > HOPPER_BLOCK_SHARED:
            problems.append(("$.kernel_resources.shared", f"{res['shared']} bytes: the calibrated config ran, and a "
                             f"Hopper block has at most {HOPPER_BLOCK_SHARED} (227 KB)"))
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


def build(*, name: str, chosen: Sequence[tuple[str, MeasuredPoint]], rows: Sequence[Mapping[str, Any]], params: Params,
          bq: int, resources: dict[str, Any], occupancy: dict[str, Any], set_path: str, set_name: str, command: str,
          metadata: dict[str, Any]) -> dict[str, Any]:
    """The calibration ``name``: the model's ``params`` fitted to the ``chosen`` points (``(name in the set, point)``,
    all of one setup: the first one's) with their ``rows`` (:func:`nsa_exp.model.calibration.fit_calibration`);
    the kernels' ``resources`` and ``occupancy`` (:func:`~nsa_exp.model.calibration.occupancy_section`); the set at
    ``set_path``."""
    ref = chosen[0][1]
    return {"schema_version": schema_version("model_calibration"), "kind": "model_calibration", "name": name,
            "gpu": {"name": ref.gpu, "sm_count": ref.sm_count},
            "shape": {**ref.shape, "T": ref.T}, "seed": ref.seed, "autotune_config": dict(ref.autotune_config),
            "kernel_resources": resources, "occupancy": occupancy,
            "model": {"family": MODEL_FAMILY, "bq": bq, "parameters": params.as_dict()},
            "calibration_set": {"path": set_path, "sha256": file_sha256(set_path), "name": set_name},
            "points": [{"name": label, "label": p.name, "pattern": dict(p.pattern), "T": p.T, "source": p.source,
                        "sha256": p.sha256, "measured_ms": p.measured_ms, "fitted_ms": r["fitted_ms"],
                        "error_pct": r["error_pct"]} for (label, p), r in zip(chosen, rows, strict=True)],
            "residuals": validation_summary(rows)[0],  # n, mean and max of |error_pct|
            "command": command, "metadata": metadata}
