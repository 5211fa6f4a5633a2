"""Issue 11 / issue 16 item 4 on the CPU: the autotune-matrix document validates (stats recomputed from
raw observations), the report's autotune section computes penalties (a)/(b)/(c), the per-config verdicts of the
one rule and the gain of a routing-aware key from the JSON, the heatmap draws from it, and a repeat's config
drift is named."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from nsa_exp.analysis.autotune_matrix import StageMatrix
from nsa_exp.analysis.config_drift import drift_of
from nsa_exp.checking.autotune_checks import autotune_arm_problems
from nsa_exp.checking.autotune_matrix import cell_key
from nsa_exp.checking.validate import validate_bytes
from nsa_exp.core.protocol import round_orders, summarize
from nsa_exp.figures.autotune_heatmap import heatmap_arrays, plot_autotune_heatmap
from nsa_exp.io.store import load_document, write_json
from nsa_exp.report.autotune import autotune_section, stage_lines
from nsa_exp.report.claims import Claims
from tests.helpers import REPO

PATTERNS = ["local", "uniform", "sink-heavy", "zipf"]
CFGS = [{"kwargs": {"BQ": bq}, "num_warps": 4, "num_stages": 1} for bq in (1, 2, 4)]
FAILED = {"kwargs": {"BQ": 8}, "num_warps": 4, "num_stages": 2}
# median ms per config (rows CFGS) and routing: zipf is 1.5x local under local's config (BQ=1) but
# fastest under BQ=4, where it is only 1.1x local's best.
MEDIANS = np.array([[10.0, 11.0, 15.0, 15.0],
                    [10.5, 11.0, 14.0, 13.0],
                    [12.0, 12.0, 13.0, 11.0]])
ROUNDS, WARMUP = 20, 2


def matrix_doc() -> dict:
    """The committed H200 matrix's record (config, shape, gates, metadata, timing protocol) with one synthetic
    dK/dV stage: CFGS timed over PATTERNS at MEDIANS (0.2 % noise), FAILED out of shared memory."""
    rng = np.random.default_rng(0)
    cells = []
    for cfg, row in zip(CFGS, MEDIANS, strict=True):
        pats = {}
        for p, med in zip(PATTERNS, row, strict=True):
            raw = [float(x) for x in med * (1 + 0.002 * rng.standard_normal(ROUNDS))]
            pats[p] = {"raw_ms": raw, "warmup_ms": [med * 2] * WARMUP, "rounds": list(range(WARMUP, WARMUP + ROUNDS)),
                       **summarize(raw)}
        cells.append({"config": cfg, "status": "ok", "compile_seconds": 2.0, "patterns": pats})
    cells.append({"config": FAILED, "status": "failed", "compile_seconds": 1.0,
                  "reason": "OutOfResources: out of resource: shared memory, Required: 252928, Hardware limit: 232448"})
    stage = {"kernel": "parallel_nsa_bwd_kernel_dkv", "autotune_key": ["BS", "BK", "BV", "G"], "space_size": 4,
             "pruned_by_fla": [], "fla_choice": {"local": CFGS[0], "uniform": CFGS[0], "sink-heavy": CFGS[1],
                                                 "zipf": CFGS[1]}, "cells": cells}
    doc = json.loads((REPO / "results" / "autotune" / "e1_h200.json").read_text())
    assert doc["patterns"] == PATTERNS
    # the rounds' orders the engine's plan gives these cells (core/measurement.RoundPlan.orders)
    stage["round_orders"] = round_orders([cell_key(i, p) for i in range(len(CFGS)) for p in PATTERNS],
                                         WARMUP + ROUNDS, doc["timing"]["order_mode"], doc["timing"]["order_seed"])
    # a dK/dV-only matrix: its command asked for that stage alone
    metadata = {**doc["metadata"], "argv": [*doc["metadata"]["argv"], "--stages", "dkv_core"]}
    return {**doc, "timing": {**doc["timing"], "warmup_rounds": WARMUP, "rounds": ROUNDS},
            "stages": {"dkv_core": stage}, "metadata": metadata}


def _checks(doc: dict) -> dict:
    report = validate_bytes(json.dumps(doc).encode(), "m.json")
    return {c["name"]: c for c in report["checks"]}


def test_a_matrix_result_validates_and_recomputes_its_statistics():
    checks = _checks(matrix_doc())
    assert all(c["passed"] for c in checks.values()), checks
    assert {"matrix_stats_recompute", "matrix_observations", "matrix_cells"} <= set(checks)


def test_a_changed_median_a_missing_round_and_a_foreign_fla_choice_are_named():
    doc = matrix_doc()
    cell = doc["stages"]["dkv_core"]["cells"][0]["patterns"]["zipf"]
    cell["median_ms"] *= 1.01
    doc["stages"]["dkv_core"]["cells"][1]["patterns"]["local"]["rounds"][0] = 0
    doc["stages"]["dkv_core"]["fla_choice"]["zipf"] = FAILED | {"num_warps": 8}
    checks = _checks(doc)
    stats = checks["matrix_stats_recompute"]["failures"]
    assert stats[0]["path"] == "$.stages.dkv_core.cells[0].patterns.zipf.median_ms"
    assert checks["matrix_observations"]["failures"][0]["path"].startswith("$.stages.dkv_core.cells[1].patterns.local")
    assert checks["matrix_cells"]["failures"][0]["path"] == "$.stages.dkv_core.fla_choice.zipf"


@pytest.mark.parametrize("edit", ["reason_dropped", "timings_on_failed"])
def test_a_failed_config_must_give_its_reason_and_carry_no_timings(edit):
    doc = matrix_doc()
    failed = doc["stages"]["dkv_core"]["cells"][3]
    if edit == "reason_dropped":
        del failed["reason"]
    else:
        failed["patterns"] = copy.deepcopy(doc["stages"]["dkv_core"]["cells"][0]["patterns"])
    assert not _checks(doc)["schema"]["passed"]


def test_section_states_each_protocols_penalty_and_the_gain_of_a_routing_aware_key():
    text = "\n".join(stage_lines(StageMatrix(matrix_doc(), "dkv_core"), 0.02))
    zipf = next(ln for ln in text.splitlines() if ln.startswith("| zipf | 1."))
    abc = [float(cell.split("×")[0]) for cell in zipf.split("|")[2:5]]
    assert abc == pytest.approx([1.5, 1.3, 1.1], abs=0.005)
    assert zipf.count("differs measurably") == 3
    gain = next(ln for ln in text.splitlines() if ln.startswith("| zipf | 4."))
    assert float(gain.split("|")[3].strip(" %")) == pytest.approx(100 * 4 / 15, abs=0.3)  # (15 - 11) / 15
    assert "BQ=8,w4,s2 (OutOfResources" in text and "worth a routing-aware key" in text
    uniform = next(ln for ln in text.splitlines() if ln.startswith("- `uniform`"))
    # uniform == local on BQ=4 (12 vs 12 ms): same within noise there, and 1.1x / 1.048x elsewhere
    assert "same within noise under 1 (BQ=4,w4,s1)" in uniform and "differs measurably under 2" in uniform


def test_the_per_config_verdicts_follow_the_floor():
    m = StageMatrix(matrix_doc(), "dkv_core")
    wide = "\n".join(stage_lines(m, 0.6))  # a floor wider than every effect: nothing differs, no key is worth it
    assert "differs measurably" not in wide and "within the floor: the routing-blind key costs little" in wide


def test_section_is_skipped_when_no_matrix_was_committed():
    assert autotune_section(None, [], lambda p: {}, "docs/figures", lambda s, g: 0.02, Claims()) == []


def test_heatmap_draws_every_config_and_blanks_the_failed_one(tmp_path):
    path = tmp_path / "synthetic.json"
    write_json(path, matrix_doc(), "autotune_matrix")
    labels, ms, ratio = heatmap_arrays(StageMatrix(load_document(path, ("autotune_matrix",)), "dkv_core"))
    assert labels[-1].endswith("(failed)") and np.isnan(ms[-1]).all()
    assert ratio[0, 3] == pytest.approx(1.5, rel=0.01) and ratio[:3, 0].tolist() == [1.0, 1.0, 1.0]
    out = plot_autotune_heatmap(path, tmp_path / "fig")
    assert [p.suffix for p in out] == [".png", ".svg"] and all(p.stat().st_size > 1000 for p in out)


def _committed(name: str) -> dict:
    return json.loads((REPO / "results" / "raw" / f"{name}.json").read_text())


def test_the_committed_repeat_is_reported_as_retuned_with_the_kernels_whose_configs_differ():
    d = drift_of(_committed("e1_h100"), _committed("e1_h100_repeat"))
    assert d["replayed"] is False and d["differing_kernels"] == ["selection_fwd", "dq_core"]
    assert d["affected_stages"] == ["selection_fwd", "dq_core", "full_bwd"]


def test_a_replayed_repeat_is_named_as_such():
    first, repeat = _committed("e1_h100"), copy.deepcopy(_committed("e1_h100"))
    repeat["autotune"] |= {"mode": "replay", "replayed_from": {"path": "x", "name": first["name"],
                                                               "created_utc": "t", "mode": "tune-on",
                                                               "tuned_on": "local"}}
    d = drift_of(first, repeat)
    assert d["replayed"] and d["differing_kernels"] == [] and d["affected_stages"] == []


def test_a_tuning_arm_whose_recorded_configs_contradict_its_mode_is_named():
    doc = _committed("e1_h100")
    cfg = {k: v["best_config"] for k, v in doc["autotune"]["kernels"].items()}
    doc["autotune"] |= {"mode": "per-pattern", "per_pattern": dict.fromkeys(doc["patterns"], cfg),
                        "tuned_on": "per-pattern"}  # what a per-pattern arm records (validate holds tuned_on to it)
    assert autotune_arm_problems(doc) == []
    doc["autotune"]["per_pattern"]["zipf"] = {**cfg, "dq_core": {"kwargs": {}, "num_warps": 8, "num_stages": 1}}
    assert [p for p, _ in autotune_arm_problems(doc)] == ["$.autotune.same_config_all_patterns"]
    doc["autotune"]["mode"] = "replay"
    assert "$.autotune.replayed_from" in [p for p, _ in autotune_arm_problems(doc)]


def test_report_adds_the_section_from_a_committed_matrix(tmp_path):
    matrix = tmp_path / "synthetic.json"
    write_json(matrix, matrix_doc(), "autotune_matrix")
    claims = Claims()
    section = autotune_section(str(matrix), [], json_load, tmp_path, lambda stage, gpu: 0.02, claims)
    assert section[0] == "## Does the answer depend on the autotune config?" and "### dK/dV core" in section
    claims.audit("\n".join(section), "R.md")  # every verdict word of the section is backed by a check


def json_load(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def test_a_matrix_whose_stages_option_the_door_cleaned_validates():
    """``--stages dq_core,dkv_core,`` (a trailing comma, or a stage twice) is what the door reads as dq_core,
    dkv_core: the check reads the recorded option the same way (a re-attacker, 2026-12-07)."""
    doc = json.loads((REPO / "results" / "autotune" / "e1_h200.json").read_text())
    for stages in ("dq_core,dkv_core,", " dq_core , dkv_core,dq_core"):
        doc["metadata"]["argv"] = [*doc["metadata"]["argv"][:2], "--stages", stages, *doc["metadata"]["argv"][2:]]
        assert _checks(doc)["matrix_stages"]["passed"], stages
        doc["metadata"]["argv"] = [a for i, a in enumerate(doc["metadata"]["argv"]) if i not in (2, 3)]
