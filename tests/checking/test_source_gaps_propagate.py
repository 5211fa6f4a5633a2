"""A document rebuilt from a source inherits that source's unverifiable check groups: ``validate --strict`` fails
the derived document as it fails the source (nsa_exp/checking/sources.rebuilt_from). Both cases are an attacker's
of 2026-12-07: forged verdicts and forged predictions PASSed ``--strict``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nsa_exp.cli import main
from nsa_exp.model.fit import Params, predict_ms
from nsa_exp.model.points import pattern_fanin
from tests.helpers import REPO, run_cli


def _strict(path: Path) -> tuple[int, str]:
    proc = run_cli("validate", "--strict", str(path))
    return proc.returncode, proc.stdout + proc.stderr


def test_a_compare_judged_by_a_table_whose_source_is_found_nowhere_fails_strict(tmp_path):
    """Every verdict turned to "same" under 50 % floors, from a noise table naming one results file that does not
    exist (so its floors are not rebuilt): the compare's own rebuild agrees with the forged table."""
    for folder in ("compare", "noise", "raw"):
        (tmp_path / "results" / folder).mkdir(parents=True)
    for run in ("e1_h100.json", "e1_h200.json"):
        shutil.copyfile(REPO / "results" / "raw" / run, tmp_path / "results" / "raw" / run)
    table = json.loads((REPO / "results/noise/floors.json").read_text())
    table["sources"] = sorted([*table["sources"], "results/raw/zz_missing.json"])
    table["min_floor"] = 0.5
    for row in table["floors"]:
        row["floor"] = 0.5
        row["rule"] = row["rule"] if row["rule"] == "borrowed" else "minimum"
    (tmp_path / "results/noise/floors.json").write_text(json.dumps(table))
    compare = json.loads((REPO / "results/compare/e1_h100_vs_e1_h200.json").read_text())
    compare["noise_floor"]["per_stage"] = {k: 0.5 for k in compare["noise_floor"]["per_stage"]}
    for row in compare["rows"]:
        row["floor"], row["verdict"] = 0.5, "same"
    compare["counts"] = {"same": len(compare["rows"]), "faster": 0, "slower": 0, "unclear": 0}
    forged = tmp_path / "results/compare/e1_h100_vs_e1_h200.json"
    forged.write_text(json.dumps(compare))
    code, said = _strict(forged)
    assert code == 1, said
    assert "$.noise_floor.paths[0]: unverified (its source results/noise/floors.json has 1 check group(s) " \
           "unverifiable, first $.floors" in said and "zz_missing.json" in said, said


def test_a_validation_predicted_from_a_calibration_whose_point_is_found_nowhere_fails_strict(tmp_path, capsys):
    """c x1.3 with the fitted values and residuals made to match, and one point's source renamed away so that the
    calibration is not refitted: the validation's predictions are the forged model's, and it agrees with them."""
    cal = json.loads((REPO / "results/model/h200_BQ1_w4_s2.json").read_text())
    params, occ = cal["model"]["parameters"], cal["occupancy"]
    params["c_ms"] *= 1.3
    errors = []
    for point in cal["points"]:
        fanin = pattern_fanin(point["pattern"], cal["shape"], point["T"], cal["seed"])
        point["fitted_ms"] = predict_ms(fanin, Params(**params), occ["sm_count"], occ["slots_per_sm"], 1)
        point["error_pct"] = 100 * (point["fitted_ms"] / point["measured_ms"] - 1)
        errors.append(abs(point["error_pct"]))
    cal["points"][3]["source"] = "results/sweeps/sweep_T_h200_GONE/T8192-local.json"
    cal["residuals"] = {"n": len(errors), "mean_abs_pct": sum(errors) / len(errors), "max_abs_pct": max(errors)}
    (tmp_path / "cal.json").write_text(json.dumps(cal))
    assert main(["model-validate", "--calibration", str(tmp_path / "cal.json"), "--points",
                 "results/raw/e1_h200_pre.json", "--output", str(tmp_path / "val.json"), "--figures", ""]) == 0
    capsys.readouterr()
    code, said = _strict(tmp_path / "val.json")
    assert code == 1, said
    assert "$.calibration.path: unverified (its source" in said and "sweep_T_h200_GONE" in said, said
