"""Resident programs (CTAs) per SM from a compiled kernel's resources and the GPU's limits.

The dK/dV kernel's time is a makespan over *slots*: the programs the GPU holds at once. A program
(CTA) of ``num_warps`` warps using ``regs_per_thread`` registers and ``shared_bytes`` of shared
memory fits ``min(by registers, by shared memory, by warps, by the CTA cap)`` times on one SM.

Sources: CUDA C Programming Guide, "Compute Capabilities" table (compute capability 9.0: 64 K
32-bit registers, 64 resident warps, 32 resident blocks and 228 KB of shared memory per SM, of
which 227 KB usable by one block; 1 KB of shared memory reserved per block), and the CUDA
Occupancy Calculator's allocation rules (registers allocated per warp in units of 256, shared
memory in units of 128 bytes on sm_90).

Worked example (FLA's dK/dV kernel at the primary shape, config BQ=1, 4 warps, 2 stages, as
compiled on the H200: 255 registers per thread, 73,920 bytes of shared memory)::

    >>> slots_per_sm(255, 4, 73920, HOPPER)
    {'registers': 2, 'shared_memory': 3, 'warps': 16, 'blocks': 32, 'slots': 2, 'limited_by': 'registers'}

2 programs of 4 warps per SM is 8 of 64 warps: the 12.5% theoretical occupancy Nsight Compute
reported for this kernel on the H100 (results/ncu/e1_h100_local-vs-sink-heavy_dkv_core.json).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits of one GPU architecture (see the module docstring for the source)."""

    registers: int
    max_warps: int
    max_blocks: int
    shared_bytes: int
    reserved_shared_per_block: int
    register_unit: int  # registers are allocated per warp in multiples of this
    shared_unit: int  # shared memory is allocated in multiples of this


HOPPER = SmLimits(registers=65536, max_warps=64, max_blocks=32, shared_bytes=233472,
                  reserved_shared_per_block=1024, register_unit=256, shared_unit=128)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def slots_per_sm(regs_per_thread: int, num_warps: int, shared_bytes: int, limits: SmLimits = HOPPER) -> dict:
    """Programs of one kernel resident on one SM, and which resource limits them.

    Args:
        regs_per_thread: registers per thread of the compiled kernel (Triton ``compiled.n_regs``).
        num_warps: warps per program (the autotune config's ``num_warps``).
        shared_bytes: dynamic + static shared memory per program in bytes (Triton ``metadata.shared``).
        limits: the SM's limits (default :data:`HOPPER`, compute capability 9.0).

    Returns:
        ``{"registers", "shared_memory", "warps", "blocks": programs allowed by each limit,
        "slots": the minimum, "limited_by": the binding limit}``.

    Raises:
        ValueError: a non-positive ``regs_per_thread`` or ``num_warps``, or a program that cannot fit.
    """
    if regs_per_thread <= 0 or num_warps <= 0 or shared_bytes < 0:
        raise ValueError(f"kernel resources must be positive: regs {regs_per_thread}, warps {num_warps}, "
                         f"shared {shared_bytes}")
    regs_per_warp = _round_up(regs_per_thread * 32, limits.register_unit)
    by = {
        "registers": limits.registers // (regs_per_warp * num_warps),
        "shared_memory": (limits.shared_bytes // _round_up(shared_bytes + limits.reserved_shared_per_block,
                                                           limits.shared_unit)),
        "warps": limits.max_warps // num_warps,
        "blocks": limits.max_blocks,
    }
    slots = min(by.values())
    if slots < 1:
        raise ValueError(f"a program ({regs_per_thread} regs x {num_warps} warps, {shared_bytes} B shared) "
                         "does not fit on one SM")
    return {**by, "slots": slots, "limited_by": min(by, key=lambda k: by[k])}


def theoretical_occupancy_pct(slots: int, num_warps: int, limits: SmLimits = HOPPER) -> float:
    """Resident warps over the SM's maximum, in percent (what ncu calls theoretical occupancy).

    >>> theoretical_occupancy_pct(2, 4)
    12.5
    """
    return 100.0 * slots * num_warps / limits.max_warps
