"""The model at other shapes (issue 32): predict's --B/--H/--G, the per-query cost scaled by G / G_cal, the
break-even B*H at which the heaviest CSR row stops deciding the makespan, and model-validate's points at another
B, H or G. Against the committed H200 calibration (B=1, T=32768, HQ=64, H=4: G=16; 132 SMs x 2 slots)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from nsa_exp.cli import main
from nsa_exp.core.config import Pattern
from nsa_exp.errors import UserError
from nsa_exp.io.progress import is_progress_line
from nsa_exp.io.schemas import schema_errors
from nsa_exp.model.calibration import params_of, predict
from nsa_exp.model.makespan import break_even, lower_bounds, program_work, simulate
from nsa_exp.model.points import FREE_SHAPE_KEYS, MeasuredPoint, check_same_setup, pattern_fanin, shape_at
from nsa_exp.model.whatif import validation_row
from nsa_exp.routing.fanin import row_fanin
from nsa_exp.routing.patterns import generate_routing
from tests.helpers import REPO

CAL_PATH = "results/model/h200_BQ1_w4_s2.json"
CAL = json.loads((REPO / CAL_PATH).read_text())
SHAPE = CAL["shape"]
SINKS4 = ["--pattern", "sink-heavy", "--param", "sinks=4"]


def _predict(capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    assert main(["predict", "--calibration", CAL_PATH, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _schedule_ms(fanin: np.ndarray, c_ms: float) -> float:
    """The makespan of ``fanin`` simulated straight from the calibration's parameters (not through predict)."""
    p, occ = params_of(CAL), CAL["occupancy"]
    work = program_work(fanin, p.a_ms, c_ms, CAL["model"]["bq"])
    return simulate(work, occ["sm_count"], occ["slots_per_sm"], p.gamma).makespan


def test_the_per_query_cost_scales_with_the_group_size_and_the_intercept_stays(capsys):
    at16 = _predict(capsys, *SINKS4, "--T", "8192")
    at4 = _predict(capsys, *SINKS4, "--T", "8192", "--G", "4")
    assert (at16["c_scale"], at4["c_scale"]) == (1.0, 0.25)
    assert at4["shape"] == {"B": 1, "T": 8192, "H": 4, "G": 4}
    # the routing does not depend on HQ: the same fan-in, scheduled with c * 4/16 and the same a and gamma
    fanin = pattern_fanin({"name": "sink-heavy", "sinks": 4}, SHAPE, 8192, CAL["seed"])
    c = params_of(CAL).c_ms
    assert at16["predicted_ms"] == pytest.approx(_schedule_ms(fanin, c), rel=1e-12)
    assert at4["predicted_ms"] == pytest.approx(_schedule_ms(fanin, c * 4 / 16), rel=1e-12)
    # with a > 0 the prediction falls by less than the factor 4 on c
    assert at16["predicted_ms"] / 4 < at4["predicted_ms"] < at16["predicted_ms"]


def test_local_breaks_even_below_one_kv_head_at_about_slots_over_blocks():
    out = predict(CAL, pattern_fanin({"name": "local"}, SHAPE, SHAPE["T"], CAL["seed"]))
    be = out["break_even"]
    # local's rows are all (nearly) the heaviest: (B*H)* = slots * w_max / (M * w_mean) ~ slots / M = 264 / 512
    assert be["BH"] == pytest.approx(out["slots"] / (SHAPE["T"] // SHAPE["block_size"]), rel=0.02)
    assert be["BH"] < 1 and be["regime"] == "throughput-bound"


def test_sink_heavy_breaks_even_above_one_pair_and_the_regime_flips_past_it(capsys):
    one = _predict(capsys, *SINKS4, "--B", "1", "--H", "1")
    be = one["break_even"]
    assert be["BH"] > 1 and be["regime"] == "tail-bound"
    lb = one["lower_bounds"]
    assert lb["heaviest_row_alone_ms"] > lb["total_work_over_slots_ms"]  # the heaviest row's floor decides
    # the formula, by hand: heaviest row alone x slots / one (b, h)'s work
    assert be["BH"] == pytest.approx(lb["heaviest_row_alone_ms"] * one["slots"] / be["work_per_bh_ms"])
    below, past = math.floor(be["BH"]), math.ceil(be["BH"])
    for h, regime in ((below, "tail-bound"), (past, "throughput-bound")):
        out = _predict(capsys, *SINKS4, "--H", str(h))
        # sink-heavy's (b, h) copies are equal: the break-even is one number whatever the shape
        assert out["break_even"]["BH"] == pytest.approx(be["BH"], rel=1e-9)
        assert out["break_even"]["regime"] == regime
        lb = out["lower_bounds"]
        assert (lb["heaviest_row_alone_ms"] > lb["total_work_over_slots_ms"]) == (regime == "tail-bound")


def test_a_batch_of_two_predicts_as_the_concatenated_fanin_of_two_copies(capsys):
    for pattern, argv in (({"name": "sink-heavy", "sinks": 4}, SINKS4), ({"name": "local"}, ["--pattern", "local"])):
        shape = shape_at(SHAPE, 8192)
        one = row_fanin(generate_routing(Pattern(**pattern), shape, CAL["seed"]), shape.block_size)
        got = _predict(capsys, *argv, "--T", "8192", "--B", "2")
        assert got["programs"] == 2 * one.size
        assert got["predicted_ms"] == pytest.approx(_schedule_ms(np.r_[one, one], params_of(CAL).c_ms), rel=1e-12)


def test_random_routings_give_every_kv_head_the_same_total_fanin():
    # the per-(b, h) mean of break_even is every pair's work: equal edges per (b, h), only the rows differ
    shape = shape_at(SHAPE, 4096, B=2, H=3, HQ=48)
    for pattern in ({"name": "uniform"}, {"name": "zipf", "exponent": 1.0}):
        per_pair = pattern_fanin(pattern, shape.to_dict(), 4096, CAL["seed"]).reshape(6, -1)
        assert len(set(per_pair.sum(axis=1).tolist())) == 1
        assert len({tuple(r) for r in per_pair.tolist()}) > 1  # the copies themselves differ


def test_break_even_refuses_no_pairs():
    with pytest.raises(ValueError, match="pairs >= 1"):
        break_even(np.ones(4), 0, n_sm=1, slots=1)
    w = np.array([3.0, 1.0, 1.0, 1.0])
    be = break_even(w, 2, n_sm=1, slots=2, gamma=1.5)
    assert be["heaviest_row_ms"] == lower_bounds(w, 1, 2, 1.5)["heaviest_row_alone_ms"] == 2.0
    assert be["BH"] == pytest.approx(2.0 * 2 / 3.0) and be["regime"] == "throughput-bound"


@pytest.mark.parametrize(("extra", "fragments"), [
    (["--B", "0"], ["--B", "not a positive integer"]),
    (["--H", "-1"], ["--H", "not a positive integer"]),
    (["--G", "3"], ["--G", "power of two"]),
    (["--B", "65"], ["--B", "maximum 64"]),
    (["--H", "64", "--G", "32"], ["--G", "HQ = H*G = 64*32 = 2048", "maximum 1024"]),
    (["--B", "8", "--H", "16"], ["dkv_core launch grid", "--B 8 --H 16", "65535"]),
    (["--B", "2", "--packing", '{"documents": 8192}'], ["--B", "packing needs B=1"]),
])
def test_predict_refuses_a_bad_shape_in_one_line_naming_the_option(capsys, extra, fragments):
    assert main(["predict", "--calibration", CAL_PATH, "--pattern", "local", *extra]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not is_progress_line(ln)]
    assert len(err) == 1 and all(f in err[0] for f in fragments), err


def test_a_group_size_below_flas_minimum_is_predicted_with_a_note(capsys):
    assert main(["predict", "--calibration", CAL_PATH, "--pattern", "local", "--T", "8192", "--G", "4"]) == 0
    cap = capsys.readouterr()
    assert "c x 0.250 (G / G_cal = 4/16)" in cap.out and "break-even B*H" in cap.out
    assert "below FLA's NSA minimum group size 16" in cap.err


def _point(**shape: int) -> MeasuredPoint:
    return MeasuredPoint("sink-heavy(sinks=4)@T=8192", {"name": "sink-heavy", "sinks": 4}, 8192, 10.0, "p.json",
                         "0" * 64, CAL["gpu"]["name"], CAL["gpu"]["sm_count"], {**SHAPE, **shape}, CAL["seed"],
                         CAL["autotune_config"])


def test_model_validate_takes_points_at_another_b_h_g_and_refuses_any_other_shape_change():
    ref = {"gpu": CAL["gpu"]["name"], "sm_count": CAL["gpu"]["sm_count"], "shape": SHAPE, "seed": CAL["seed"],
           "autotune_config": CAL["autotune_config"]}
    other = _point(B=2, H=8, HQ=128)
    check_same_setup([other], ref, free=FREE_SHAPE_KEYS)
    with pytest.raises(UserError, match=r"shape.B is 2 .* shape \(T aside\)"):
        check_same_setup([other], ref)  # calibrate: one shape, T aside
    with pytest.raises(UserError, match=r"shape.S is 8 .* shape \(T, B, HQ, H aside\)"):
        check_same_setup([replace(other, shape={**other.shape, "S": 8})], ref, free=FREE_SHAPE_KEYS)


def test_a_validation_row_at_another_shape_records_it_and_one_at_the_calibrations_does_not():
    at_cal = validation_row(CAL, _point(), 4096)
    assert not {"B", "H", "G"} & at_cal.keys() and at_cal["split_ms"] is not None
    row = validation_row(CAL, _point(B=2, H=2, HQ=16), 4096)
    assert (row["B"], row["H"], row["G"]) == (2, 2, 8) and row["split_ms"] is None  # the split: one batch only
    shape = {**SHAPE, "B": 2, "H": 2, "HQ": 16}
    assert row["predicted_ms"] == predict(CAL, pattern_fanin(row["pattern"], shape, 8192, CAL["seed"]),
                                          shape=shape)["predicted_ms"]
    doc = json.loads((REPO / "results/model/h200_BQ1_w4_s2_validation.json").read_text())
    doc["rows"].append({**row, "sha256": "0" * 64})
    assert schema_errors(doc, "model_validation", "v") == []
