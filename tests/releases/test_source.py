"""What a release's ``parallel_nsa_bwd`` launches, read from its source (never executed), and how its kernels map
onto the pinned bench's stages — including what does not correspond (0.5.1's block mask)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from nsa_exp.analysis.release_kernels import group_table
from nsa_exp.errors import UserError
from nsa_exp.releases.source import read_launches, read_module_launches

PINNED_ROOT = Path(importlib.util.find_spec("fla").submodule_search_locations[0]).parent

# The shape of fla-core 0.5.1's wrapper (before the CSR rewrite): a dense block mask and a 3-D dK/dV grid.
BEFORE_CSR = '''
def parallel_nsa_block_mask(block_indices, block_counts, cu_seqlens, block_size):
    parallel_nsa_kernel_mask[(T, B, H*S)](block_indices=block_indices, block_mask=block_mask, T=T)
    return block_mask

@triton.autotune(configs=[triton.Config({}, num_warps=w) for w in [1, 2, 4]], key=['BS', 'BK', 'BV'])
@triton.jit(do_not_specialize=['T'])
def parallel_nsa_bwd_kernel_dkv(q, k, block_mask, T, BS: tl.constexpr):
    pass

def parallel_nsa_bwd(q, k, v, o, lse, do, block_indices, block_counts, block_size=64):
    NS = triton.cdiv(T, BS)
    block_mask = parallel_nsa_block_mask(block_indices, block_counts, None, block_size)
    grid = (NV, NS, B * H)
    parallel_nsa_bwd_kernel_dkv[grid](q=q, k=k, block_mask=block_mask, T=T, BS=BS)
'''


def test_the_pinned_wrapper_is_read_as_it_launches():
    facts = read_launches(PINNED_ROOT)
    launches = [(x["kernel"], x["grid"], x["via"]) for x in facts["launches"]]
    assert launches[:2] == [("parallel_nsa_bwd_kernel_dq", "(T, NV, B * H)", "parallel_nsa_bwd"),
                            ("parallel_nsa_bwd_kernel_dkv", "(NV, NB)", "parallel_nsa_bwd")]
    assert [x[0] for x in launches[2:]] == ["parallel_attn_bwd_kernel_preprocess", "prepare_block_csr_kernel",
                                            "prepare_block_csr_kernel"]
    assert facts["helpers"] == {"parallel_attn_bwd_preprocess": "fla.ops.attn.parallel",
                                "prepare_block_csr": "fla.ops.utils.csr"}  # followed through fla.ops.utils
    values = {a["target"]: a["value"] for a in facts["assignments"]}
    assert values["BV"] == "max(triton.next_power_of_2(v.shape[-1]), 16)" and values["NV"] == "triton.cdiv(V, BV)"
    dkv = facts["kernels"]["parallel_nsa_bwd_kernel_dkv"]
    assert dkv["autotune_key"] == ["BS", "BK", "BV", "G"] and "csr_offsets" in dkv["params"]
    assert dkv["prune_configs_by"] == "{'early_config_prune': _prune_dkv_bq}" and "BQ" in dkv["autotune_configs"]
    csr = (PINNED_ROOT / "fla/ops/utils/csr.py").read_bytes()
    assert facts["files"]["fla/ops/utils/csr.py"] == hashlib.sha256(csr).hexdigest()


def test_a_wrapper_before_the_csr_rewrite_maps_its_block_mask_to_no_pinned_stage():
    facts = read_module_launches(BEFORE_CSR, "before_csr.py")
    assert [(x["kernel"], x["grid"]) for x in facts["launches"]] == [
        ("parallel_nsa_bwd_kernel_dkv", "(NV, NS, B * H)"), ("parallel_nsa_kernel_mask", "(T, B, H * S)")]
    assert facts["kernels"]["parallel_nsa_bwd_kernel_dkv"]["autotune_key"] == ["BS", "BK", "BV"]
    table = {r["group"]: r for r in group_table([x["kernel"] for x in facts["launches"]])}
    assert set(table) == {"dkv_core", "kernel:parallel_nsa_kernel_mask"}
    assert table["kernel:parallel_nsa_kernel_mask"]["correspondence"] == "none"
    assert table["kernel:parallel_nsa_kernel_mask"]["pinned_stage"] is None


@pytest.mark.parametrize("text, fragment", [("def f():\n    pass\n", "defines no parallel_nsa_bwd")])
def test_a_module_without_the_wrapper_is_refused(text, fragment):
    with pytest.raises(UserError, match=fragment):
        read_module_launches(text, "m.py")


def test_a_tree_without_the_nsa_module_or_with_broken_source_is_refused(tmp_path):
    with pytest.raises(UserError, match="has no fla/ops/nsa/parallel.py"):
        read_launches(tmp_path)
    (tmp_path / "fla/ops/nsa").mkdir(parents=True)
    (tmp_path / "fla/ops/nsa/parallel.py").write_text("def parallel_nsa_bwd(:\n")
    with pytest.raises(UserError, match="not Python source"):
        read_launches(tmp_path)
