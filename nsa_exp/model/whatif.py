"""Model what-ifs of a scheduling fix for FLA's dK/dV kernel (predicted, not measured).

- heaviest-first: the same programs dispatched longest-first (LPT, Graham 1969: within 4/3 of optimal
  for identical machines);
- split: rows longer than ``F`` queries cut into ``ceil(len/F)`` programs, laid out exactly as the
  measured what-if arm launches them (:func:`.split.split_routing`, layout ``split-heavy-first``: B'
  batches, empty programs included, in FLA's program-id order), plus the reduction
  ``dK = sum_b dK_b``, ``dV = sum_b dV_b``, priced as a memory-bound pass at HBM bandwidth.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .calibration import predict
from .points import pattern_fanin, pattern_split_fanin

# H200 HBM3e bandwidth, 4.8 TB/s (NVIDIA H200 datasheet); the reduction reads B' partials and writes one.
HBM_BYTES_PER_MS = 4.8e12 / 1e3


def reduction_ms(batches: int, shape: Mapping[str, Any], T: int) -> float:
    """Estimated ms of summing ``batches`` partial dK ``[NV, B', T, H, K]`` and dV ``[B', T, H, V]`` (2-byte
    bf16/fp16; ``NV = 1`` since FLA's ``BV = next_pow2(V) >= V``): read once, the sums written once.
    0 for one batch (no reduction)."""
    if batches <= 1:
        return 0.0
    nv = 1
    elems = T * shape["H"] * (nv * shape["K"] + shape["V"])
    return (batches + 1) * elems * 2 / HBM_BYTES_PER_MS


def model_whatif(cal: Mapping[str, Any], pattern: Mapping[str, Any], shape: Mapping[str, Any], T: int, seed: int,
                 max_fanin: int | None) -> dict[str, Any]:
    """``{"heaviest_first_ms", "split_ms" (None without ``max_fanin``), "split_batches", "reduction_ms"}`` for one
    generated routing (``pattern`` at ``T``, routing seed ``seed``). The split launch is priced from its per-program
    fan-in (:func:`.points.pattern_split_fanin`, from the routing's cached fan-in): the B'-batch routing itself is
    never built."""
    fanin = pattern_fanin(pattern, shape, T, seed)
    out = {"heaviest_first_ms": predict(cal, fanin, "heaviest-first")["predicted_ms"],
           "split_ms": None, "split_batches": 1, "reduction_ms": 0.0}
    if max_fanin:
        programs = pattern_split_fanin(pattern, shape, T, seed, max_fanin, "split-heavy-first")
        batches = len(programs) // (shape["H"] * -(-T // shape["block_size"]))
        red = reduction_ms(batches, shape, T)
        out.update(split_ms=predict(cal, programs)["predicted_ms"] + red, split_batches=batches, reduction_ms=red)
    return out
