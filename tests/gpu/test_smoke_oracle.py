"""Issue 16 item 1 (CPU part): smoke's all-routings oracle shape is a config field with a default
where the routings differ, checked at load, and its per-routing metrics are in the smoke report schema."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nsa_exp.core.config import DEFAULT_ORACLE
from nsa_exp.errors import UserError
from nsa_exp.gpu.smoke import judge_naive
from nsa_exp.io.config_files import config_from_dict, load_config
from nsa_exp.io.schemas import schema_errors
from nsa_exp.routing.patterns import generate_routing
from tests.helpers import REPO, primary_config_dict


def test_absent_oracle_defaults_to_t1024_s8_where_the_four_routings_differ():
    config = load_config(REPO / "configs" / "e1_h100.json")
    assert "oracle" not in config.raw["smoke"]
    o = config.smoke_oracle
    assert (o.T, o.S, o.H, o.HQ, o.K, o.V, o.block_size) == (1024, 8, 4, 64, 192, 128, 64)
    routings = [generate_routing(p, o, config.seeds.routing) for p in config.patterns]
    assert all(not np.array_equal(a, b) for i, a in enumerate(routings) for b in routings[i + 1:])
    # ... while at smoke.naive (M = S = 4) they are all the same: why the oracle shape exists.
    naive = [generate_routing(p, config.smoke_naive, config.seeds.routing) for p in config.patterns]
    assert all(np.array_equal(naive[0], b) for b in naive[1:])


def test_committed_results_embedded_configs_load_with_the_default_oracle():
    for path in sorted((REPO / "results" / "raw").glob("*.json")):
        doc = json.loads(path.read_text())
        assert config_from_dict(doc["config"]).smoke_oracle.to_dict() == DEFAULT_ORACLE


def test_an_oracle_shape_with_m_not_above_s_is_refused_naming_the_field():
    raw = primary_config_dict()
    raw["smoke"]["oracle"] = {**DEFAULT_ORACLE, "T": 512}  # M = 8 = S
    with pytest.raises(UserError, match=r"config.smoke.oracle.S: S=8 must be below M=T/block_size=8"):
        config_from_dict(raw)


def test_oracle_failures_name_the_routing_and_the_smoke_report_schema_holds_per_routing_metrics():
    ok = {"rel_l2": 3e-3, "max_abs": 0.01, "ref_max_abs": 3.0, "max_abs_rel": 3e-3, "numel": 8, "max_ulp": 1.0,
          "n_different": 1, "bit_exact": False}
    bad = {**ok, "rel_l2": 0.5}
    metrics = {"o": ok, "dq": ok, "dk": bad, "dv": ok}
    assert [f.split(":")[0] for f in judge_naive(metrics, 0.02, 0.05, label="oracle zipf")] == ["oracle zipf dk"]
    report = json.loads((REPO / "results" / "reports" / "e1_h200_pre_smoke.json").read_text())
    assert not schema_errors(report, "smoke_report", "r")  # committed reports (no oracle) stay valid
    report["oracle"] = {"shape": DEFAULT_ORACLE, "patterns": {"zipf": metrics}}
    assert not schema_errors(report, "smoke_report", "r")
    report["oracle"]["patterns"]["zipf"] = {"o": ok}
    assert schema_errors(report, "smoke_report", "r")
