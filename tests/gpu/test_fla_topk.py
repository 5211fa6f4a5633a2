"""fla-topk: FLA's own parallel_nsa_topk routing, run for real under the Triton interpreter at a tiny shape."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.core.families import pattern_from_entry
from nsa_exp.errors import UserError
from nsa_exp.model.points import regenerable
from nsa_exp.routing.patterns import generate_routing, routing_violations
from tests.helpers import REPO, assert_one_line_error, primary_config_dict, run_cli

# G = 16, M = 8 blocks of 8, S = 4: BS >= 2*S as FLA's top-k asserts; 64 queries keep the interpreter ~5 s a call
TOPK_TINY = Shape(B=1, T=64, HQ=16, H=1, K=16, V=16, S=4, block_size=8, dtype="float16")


@pytest.mark.interpreter
def test_fla_topk_is_causal_distinct_forces_block_0_and_recent_and_is_seeded_and_salience_moves_it():
    from nsa_exp.gpu import topk  # noqa: F401, PLC0415 - the GPU tier registers fla-topk's routing when imported

    plain = generate_routing(Pattern("fla-topk", salience=0.0), TOPK_TINY, seed=0)
    again = generate_routing(Pattern("fla-topk", salience=0.0), TOPK_TINY, seed=0)
    salient = generate_routing(Pattern("fla-topk", salience=4.0), TOPK_TINY, seed=0)
    for bi in (plain, salient):
        assert routing_violations(bi, TOPK_TINY) == []  # int32, n(t) valid slots then -1, causal, distinct
        rows = bi[0, :, 0]
        cur = np.arange(TOPK_TINY.T) // TOPK_TINY.block_size
        assert all(0 in r for r in rows)                                    # block 0 forced
        assert all(c in r and (c == 0 or c - 1 in r) for r, c in zip(rows, cur, strict=True))  # two most recent
    np.testing.assert_array_equal(plain, again)
    assert (plain != salient).any()


def test_fla_topk_parameters_are_checked_without_torch_and_refuse_a_shape_fla_asserts_on():
    assert pattern_from_entry({"name": "fla-topk", "salience": 2}, "c").salience == 2.0
    with pytest.raises(UserError, match=r"c\.salience: -1 is below the minimum 0"):
        pattern_from_entry({"name": "fla-topk", "salience": -1}, "c")
    with pytest.raises(UserError, match=r"c\.salience: .*not finite"):
        pattern_from_entry({"name": "fla-topk", "salience": float("nan")}, "c")
    small = Shape(B=1, T=64, HQ=16, H=1, K=16, V=16, S=8, block_size=8, dtype="float16")
    with pytest.raises(UserError, match=r"c\.name: fla-topk needs block_size >= 2\*S"):
        pattern_from_entry({"name": "fla-topk"}, "c", small)


def test_routing_command_without_gpu_or_interpreter_names_what_fla_topk_needs(tmp_path):
    cfg = primary_config_dict()
    cfg["patterns"] = [{"name": "local"}, {"name": "fla-topk", "salience": 1.0}]
    path = tmp_path / "topk.json"
    path.write_text(json.dumps(cfg))
    proc = run_cli("routing", "--config", str(path), env={"TRITON_INTERPRET": "0", "CUDA_VISIBLE_DEVICES": ""})
    assert_one_line_error(proc, "fla-topk", "needs a CUDA GPU or TRITON_INTERPRET=1")


def test_the_interpreter_refuses_fla_topk_at_a_shape_it_cannot_run_in_one_line():
    """Under TRITON_INTERPRET=1 the shipped peers config (T 32768, K 192) ran silently for minutes, then met FLA's
    AssertionError (a new user, 2026-12-07): refused at once, naming the limits and the GPU."""
    proc = run_cli("routing", "--config", str(REPO / "configs" / "peers_h200.json"),
                   env={"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""})
    assert_one_line_error(proc, "fla-topk", "T=32768, K=192", "run it on a CUDA GPU")


def test_the_routing_tier_computes_fla_topk_only_through_what_a_higher_tier_registered():
    """No tier names a module above it (issue 29): the routing tier keeps a registry the GPU tier (importing
    nsa_exp.gpu.topk) or the command line (a deferred call) fills; a process that loaded neither is told so."""
    code = ("from nsa_exp.core.config import Pattern, Shape\n"
            "from nsa_exp.errors import UserError\n"
            "from nsa_exp.routing.patterns import EXTERNAL, generate_routing\n"
            "assert 'fla-topk' not in EXTERNAL\n"
            "try:\n"
            "    generate_routing(Pattern('fla-topk'), Shape(B=1, T=64, HQ=16, H=1, K=16, V=16, S=4, block_size=8,"
            " dtype='float16'), 0)\n"
            "except UserError as exc:\n"
            "    print(exc)\n"
            "import nsa_exp.cli\n"
            "print(EXTERNAL['fla-topk'].__module__)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.strip().splitlines()
    assert first.startswith("pattern fla-topk: computed by FLA's parallel_nsa_topk on the GPU tier") and \
        "import nsa_exp.gpu.topk" in first
    assert second == "nsa_exp.cli"  # the command line's deferred call; torch is imported only when it runs
    assert "torch" not in proc.stderr


def test_the_cpu_model_skips_routings_it_cannot_regenerate():
    assert regenerable({"name": "zipf", "exponent": 0.5})
    assert not regenerable({"name": "fla-topk", "salience": 2.0})  # FLA's top-k: GPU (or interpreter) only
    assert not regenerable({"name": "file:mine"})                  # a routing file: only its holder has it
