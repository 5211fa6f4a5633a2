"""The release arm's per-kernel CUPTI records: each call's window on the GPU timeline, the next call's flush and spin
dropped, the kernels grouped into the pinned stages by name (the Stage table's ``kernel`` / ``kernel_span``)."""

from __future__ import annotations

from nsa_exp.analysis.release_kernels import STAGE_KERNELS, kernel_calls, stage_groups
from nsa_exp.core.stages import STAGES


class _R:
    def __init__(self, a, b):
        self.start, self.end = a, b


class _E:
    def __init__(self, name, a, b, device="CUDA"):
        self.name, self.time_range, self.device_type = name, _R(a, b), device


def test_a_training_steps_backward_kernels_outside_its_range_are_its_own_until_the_next_calls_flush():
    """The range opened on the calling thread spans the forward kernels only; the autograd thread's backward
    kernels follow; the next call's flush and spin (learned from before the first range) are dropped."""
    ev = [_E("flush", 0, 5), _E("spin_kernel", 5, 100),
          _E("nsa_cupti/local/train_step/0", 100, 120), _E("parallel_nsa_fwd_kernel", 100, 120),
          _E("parallel_nsa_bwd_kernel_dq", 125, 160), _E("parallel_nsa_bwd_kernel_dkv", 161, 200),
          _E("flush", 201, 205), _E("spin_kernel", 205, 300),
          _E("nsa_cupti/local/train_step/1", 300, 320), _E("parallel_nsa_fwd_kernel", 300, 320),
          _E("parallel_nsa_bwd_kernel_dq", 321, 360), _E("parallel_nsa_bwd_kernel_dkv", 361, 400),
          _E("nsa_cupti/local/train_step/1", 300, 320, device="CPU")]
    names, calls, markers = kernel_calls(ev)
    assert markers == {"names": ["flush", "spin_kernel"], "per_call": 2, "consistent": True}
    groups = stage_groups(calls["local"]["train_step"], names, ["parallel_nsa_bwd_kernel_dq",
                                                                "parallel_nsa_bwd_kernel_dkv"])
    assert groups == {"dq_core": [0.035, 0.039], "dkv_core": [0.039, 0.039]}
    shifted = ev[:6] + [_E("other", 201, 205)] + ev[7:]  # a window that does not end with the learned markers
    assert kernel_calls(shifted)[2]["consistent"] is False


def test_the_kernel_groups_come_from_the_stage_table():
    assert STAGE_KERNELS == {"delta_preprocess": ("parallel_attn_bwd_kernel_preprocess", "sum", "exact"),
                             "csr": ("prepare_block_csr_kernel", "span", "partial"),
                             "dq_core": ("parallel_nsa_bwd_kernel_dq", "sum", "exact"),
                             "dkv_core": ("parallel_nsa_bwd_kernel_dkv", "sum", "exact")}
    assert all(s.kernel == s.fla_callable for s in STAGES if s.name in ("dq_core", "dkv_core"))
