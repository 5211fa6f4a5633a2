"""Every Triton launch grid our launcher builds, and CUDA's grid limits, per shape (pure Python).

CUDA limits a launch grid to x <= 2**31 - 1 and y, z <= 65535 (CUDA C Programming Guide, "Features
and Technical Specifications": maximum x-, y- and z-dimension of a grid of thread blocks); Triton
passes its grid tuple straight through as (x, y, z). A shape whose grid exceeds a limit fails on the
GPU at launch with "invalid argument" (H200: dK/dV grid (1, 65536) fails, (1, 65472) launches and
matches the wrapper; ``results/studies/h200_method_study_flush.raw.json`` key ``grid``), so
:func:`check_launch_limits` refuses it at config load instead.

The grids, as fla-core 0.5.2 (commit 0a9b9f2) builds them for dense inputs (``cu_seqlens=None``):

* ``selection_fwd``: ``parallel_nsa_fwd`` (``fla/ops/nsa/parallel.py`` l.625):
  ``(TQ, NV_fwd, B*H)`` with ``NV_fwd = cdiv(V, min(C, next_pow2(V)))``, ``C`` = 256 on Hopper and 128
  elsewhere (l.615-620); we take ``C`` = 128, the larger NV.
* ``delta_preprocess``: ``parallel_attn_bwd_preprocess`` (``fla/ops/attn/parallel.py`` l.591):
  ``(B*T*HQ,)``.
* ``csr``: ``prepare_block_csr`` (``fla/ops/utils/csr.py`` l.146-169) launches
  ``prepare_block_csr_kernel`` twice on ``(cdiv(T, BT), B*H)`` with
  ``BT = max(1, min(128, next_pow2(max(1, 2048 // S))))``; its fills and ``cumsum_`` are torch ops.
* ``dq_core``: ``parallel_nsa_bwd_kernel_dq`` (``fla/ops/nsa/parallel.py`` l.685): ``(T, NV, B*H)``.
* ``dkv_core``: ``parallel_nsa_bwd_kernel_dkv`` (``fla/ops/nsa/parallel.py`` l.730-731):
  ``(NV, B*H*M)``, ``M = cdiv(T, block_size)``.

Backward ``NV = cdiv(V, BV)``, ``BV = max(next_pow2(V), 16)`` (``parallel_nsa_bwd``), as in
:class:`nsa_exp.gpu.launcher.LaunchParams`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import UserError

if TYPE_CHECKING:
    from .config import Shape

#: CUDA's per-dimension grid limits (x, y, z), in thread blocks (programs).
GRID_LIMITS = (2**31 - 1, 65535, 65535)
AXES = "xyz"


def next_pow2(n: int) -> int:
    """``triton.next_power_of_2`` for ``n >= 1``: ``1 << (n - 1).bit_length()``."""
    return 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def launch_grids(shape: Shape) -> dict[str, tuple[int, ...]]:
    """Each kernel's launch grid (programs per axis) for ``shape``; keys name the kernel.

    >>> from nsa_exp.routing.config import Shape
    >>> launch_grids(Shape(1, 16368, 1024, 64, 16, 16, 16, 16, "bfloat16"))["dkv_core"]
    (1, 65472)
    """
    B, T, HQ, H, V, S = shape.B, shape.T, shape.HQ, shape.H, shape.V, shape.S
    nv_bwd = cdiv(V, max(next_pow2(V), 16))
    nv_fwd = cdiv(V, min(128, next_pow2(V)))
    bt_csr = max(1, min(128, next_pow2(max(1, 2048 // S))))
    return {
        "selection_fwd": (T, nv_fwd, B * H),
        "delta_preprocess": (B * T * HQ,),
        "csr (prepare_block_csr_kernel)": (cdiv(T, bt_csr), B * H),
        "dq_core": (T, nv_bwd, B * H),
        "dkv_core": (nv_bwd, B * H * cdiv(T, shape.block_size)),
    }


def check_launch_limits(shape: Shape, where: str) -> None:
    """Raise :class:`UserError` (one line: kernel, grid, axis, product, limit) if any grid exceeds CUDA's limits.

    >>> from nsa_exp.routing.config import Shape
    >>> check_launch_limits(Shape(1, 16384, 1024, 64, 16, 16, 16, 16, "bfloat16"), "config.shape")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: config.shape: the dkv_core launch grid (1, 65536) has y = B*H*M = 65536 programs, ...
    """
    products = {"selection_fwd": ("T", "NV", "B*H"), "delta_preprocess": ("B*T*HQ",),
                "csr (prepare_block_csr_kernel)": ("cdiv(T, BT)", "B*H"), "dq_core": ("T", "NV", "B*H"),
                "dkv_core": ("NV", "B*H*M")}
    for kernel, grid in launch_grids(shape).items():
        for axis, (n, limit) in enumerate(zip(grid, GRID_LIMITS, strict=False)):
            if n > limit:
                raise UserError(f"{where}: the {kernel} launch grid {grid} has {AXES[axis]} = "
                                f"{products[kernel][axis]} = {n} programs, over CUDA's grid-{AXES[axis]} "
                                f"limit {limit}; lower B, H or T/block_size")
