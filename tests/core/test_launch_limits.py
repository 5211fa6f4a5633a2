"""Item 2 of issue 16: shapes whose launch grids exceed CUDA's limits are refused at config load."""

from __future__ import annotations

import pytest

from nsa_exp.core.config import Shape
from nsa_exp.core.stages import GRID_LIMITS, check_launch_limits, launch_grids
from nsa_exp.errors import UserError
from nsa_exp.io.config_files import config_from_dict, load_config
from tests.helpers import REPO, assert_one_line_error, run_cli

REPROS = REPO / "tests" / "data" / "repros"
REFUSED = REPROS / "cfg_dkv_grid_y_65536.json"
ACCEPTED = REPROS / "cfg_dkv_grid_y_65472.json"


@pytest.mark.parametrize("command", ["routing", "check", "smoke", "bench"])
def test_dkv_grid_y_65536_is_refused_by_every_command_before_any_gpu_work(command, tmp_path):
    out = tmp_path / "out.json"
    proc = run_cli(command, "--config", str(REFUSED), *(["--output", str(out)] if command != "check" else []))
    assert_one_line_error(proc, "config.shape", "dkv_core launch grid (1, 65536)", "B*H*M = 65536",
                          "grid-y limit 65535")
    assert "environment" not in proc.stderr  # refused before the first gate
    assert not out.exists()


def test_dkv_grid_y_65472_loads_and_gpu_commands_get_past_config_load(tmp_path):
    config = load_config(ACCEPTED)
    assert launch_grids(config.shape)["dkv_core"] == (1, 65472)
    for command in ("smoke", "bench"):
        proc = run_cli(command, "--config", str(ACCEPTED), "--output", str(tmp_path / f"{command}.json"))
        assert "launch grid" not in proc.stderr and "config.shape" not in proc.stderr, proc.stderr


def test_smoke_shapes_are_checked_like_the_primary_shape():
    raw = load_config(ACCEPTED).raw
    staged = raw["shape"] | {"T": 16384}
    raw = {**raw, "shape": {**raw["shape"], "T": 1024}, "smoke": {**raw["smoke"], "staged": staged}}
    with pytest.raises(UserError, match=r"config.smoke.staged: the dkv_core launch grid \(1, 65536\)"):
        config_from_dict(raw)


@pytest.mark.parametrize(("shape", "kernel", "axis"), [
    # dq_core / selection_fwd z = B*H over 65535
    (Shape(1, 64, 1048576, 65536, 16, 16, 1, 64, "float16"), "selection_fwd", "z"),
    # delta_preprocess x = B*T*HQ over 2**31 - 1
    (Shape(1, 2**21, 1024, 64, 16, 16, 1, 2**21, "float16"), "delta_preprocess", "x"),
])
def test_every_launch_grid_axis_is_checked(shape, kernel, axis):
    grid = launch_grids(shape)[kernel]
    assert grid["xyz".index(axis)] > GRID_LIMITS["xyz".index(axis)]
    with pytest.raises(UserError, match=f"the {kernel} launch grid .* has {axis} = .* over CUDA's grid-{axis} limit"):
        check_launch_limits(shape, "config.shape")
