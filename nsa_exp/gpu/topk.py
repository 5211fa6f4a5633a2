"""``fla-topk``: the routing FLA's own NSA selects, from seeded synthetic q, k, v.

Called exactly as FLA's official ``fla.ops.nsa.parallel.parallel_nsa`` (fla-core 0.5.2, commit 0a9b9f2,
``g_cmp`` given, no ``block_indices``) computes its selection, no kernel copied or changed::

    k_cmp, v_cmp = mean_pooling(k, block_size), mean_pooling(v, block_size)     # [B, M, H, K|V]
    _, lse_cmp = parallel_nsa_compression(q, k_cmp, v_cmp, TK=T, block_size=BS, scale=K**-0.5)
    block_indices = parallel_nsa_topk(q, k_cmp, lse_cmp, TK=T, block_counts=S, block_size=BS, scale=K**-0.5)

``parallel_nsa_topk`` sums, over the ``G`` query heads of a KV head, each block's normalised compressed
attention ``exp(q·k_cmp_b · scale - lse)`` and keeps the ``S`` best blocks; block 0 and the two most
recent blocks ``t//BS - 1, t//BS`` are forced (score 1.0 per query head); blocks past ``t//BS`` are
``-1``. We then sort each (query, head) row in descending block order (``-1`` last), as every
generated pattern is written; the selected *set* is FLA's.

Inputs (seeded by the routing seed and the name ``fla-topk``, drawn on the generating device with a
``torch.Generator``): q, k, v standard normal in the config's dtype. ``salience`` s >= 0 plants one block
per (batch, query t, KV head h): a block ``c`` drawn uniformly from the causal blocks ``0..t//BS`` (a
numpy generator of the same seed), and every query head of h's group gets
``q += s * sqrt(K) * k_cmp[c] / ||k_cmp[c]||`` (the pooled key direction of ``c`` at the norm of a
random query, in float32, then cast back), raising its score by ``s * ||k_cmp[c]||`` before the
softmax scale. ``s = 0`` leaves q random.

Needs a CUDA GPU, or ``TRITON_INTERPRET=1`` (FLA's kernels on the CPU through Triton's interpreter:
tiny shapes only); otherwise a one-line :class:`UserError`.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import torch

from ..core.config import Pattern, Shape
from ..errors import UserError
from ..routing.patterns import pattern_rng, register_external
from .numerics import DTYPES

#: The largest shape FLA's top-k runs at under the Triton interpreter: T 256 took 19 s on one CPU core, T 1024 209 s
#: (B 1, HQ 16, H 1, S 4, block 16; 2026-12-07); at K > 128 FLA's compression asserts one key block (its CPU block
#: size is smaller), an AssertionError deep in FLA.
INTERPRETER_MAX_T = 256
INTERPRETER_MAX_K = 128


def topk_device(shape: Shape) -> str:
    """``"cuda"`` when a GPU is visible, ``"cpu"`` under ``TRITON_INTERPRET=1`` at a tiny ``shape``
    (:data:`INTERPRETER_MAX_T`, :data:`INTERPRETER_MAX_K`); else a one-line UserError."""
    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("TRITON_INTERPRET") == "1":
        if shape.T > INTERPRETER_MAX_T or shape.K > INTERPRETER_MAX_K:
            raise UserError(f"pattern fla-topk: under TRITON_INTERPRET=1 (FLA's kernels on the CPU) only tiny shapes "
                            f"run (T <= {INTERPRETER_MAX_T}, K <= {INTERPRETER_MAX_K}; T 1024 took 3.5 minutes), "
                            f"not T={shape.T}, K={shape.K}: run it on a CUDA GPU")
        return "cpu"
    raise UserError("pattern fla-topk: it is FLA's parallel_nsa_topk and needs a CUDA GPU or TRITON_INTERPRET=1 "
                    "(the Triton interpreter on the CPU; tiny shapes only)")


def _interpreter_single_config() -> None:
    """Under the Triton interpreter an autotuner cannot benchmark (no GPU driver): restrict the three
    autotuned kernels this routing launches to their first config, as tests/conftest.py does for the
    launcher's. Configs change speed only, never the selected blocks; the GPU path is untouched."""
    import fla.ops.nsa.compression as comp  # noqa: PLC0415 - FLA after the interpreter setup
    import fla.ops.nsa.parallel as par  # noqa: PLC0415
    import fla.ops.utils.pooling as pool  # noqa: PLC0415

    for kernel in (pool.mean_pooling_fwd_kernel, comp.parallel_nsa_compression_fwd_kernel,
                   par.parallel_nsa_kernel_topk):
        tuner = kernel.fn if hasattr(kernel, "fn") and hasattr(kernel.fn, "configs") else kernel
        if hasattr(tuner, "configs"):
            tuner.configs = tuner.configs[:1]


def plant_salience(q: torch.Tensor, k_cmp: torch.Tensor, salience: float, block_size: int,
                   rng: np.random.Generator) -> torch.Tensor:
    """``q`` [B,T,HQ,K] with ``salience`` planted (module docstring); ``k_cmp`` [B,M,H,K]. Returns a new tensor."""
    B, T, HQ, K = q.shape
    H = k_cmp.shape[2]
    G = HQ // H
    cur = np.arange(T) // block_size
    planted = np.floor(rng.random((B, T, H)) * (cur[None, :, None] + 1)).astype(np.int64)  # 0..t//BS
    idx = torch.from_numpy(planted).to(q.device)
    b = torch.arange(B, device=q.device)[:, None, None]
    h = torch.arange(H, device=q.device)[None, None, :]
    d = k_cmp.float()[b, idx, h]                                          # [B, T, H, K]
    d = d * (math.sqrt(K) / d.norm(dim=-1, keepdim=True).clamp_min(1e-12))
    return (q.float() + salience * d.repeat_interleave(G, dim=2)).to(q.dtype)


def fla_topk_routing(pattern: Pattern, shape: Shape, seed: int) -> np.ndarray:
    """block_indices int32 ``[B, T, H, S]`` of FLA's top-k selection (module docstring)."""
    device = topk_device(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FLA warns that flash-attn is absent; NSA never uses it
        # Deferred on purpose: FLA/triton are imported only after the env gate (and TRITON_INTERPRET) is set.
        from fla.ops.nsa.compression import parallel_nsa_compression  # noqa: PLC0415
        from fla.ops.nsa.parallel import parallel_nsa_topk  # noqa: PLC0415
        from fla.ops.utils.pooling import mean_pooling  # noqa: PLC0415
    if device == "cpu":
        _interpreter_single_config()
    rng = pattern_rng(seed, pattern.name)
    gen = torch.Generator(device=device).manual_seed(int(rng.integers(2**62)))
    dt = DTYPES[shape.dtype]
    B, T, HQ, H, K, V, BS = shape.B, shape.T, shape.HQ, shape.H, shape.K, shape.V, shape.block_size
    q = torch.randn(B, T, HQ, K, generator=gen, device=device, dtype=torch.float32).to(dt)
    k = torch.randn(B, T, H, K, generator=gen, device=device, dtype=torch.float32).to(dt)
    v = torch.randn(B, T, H, V, generator=gen, device=device, dtype=torch.float32).to(dt)
    scale = K ** -0.5
    with torch.no_grad():
        k_cmp, v_cmp = mean_pooling(k, BS), mean_pooling(v, BS)
        salience = float(dict(pattern.params).get("salience", 0.0))  # default 0 when built without the registry
        if salience > 0:
            q = plant_salience(q, k_cmp, salience, BS, rng)
        _, lse_cmp = parallel_nsa_compression(q=q, k=k_cmp, v=v_cmp, TK=T, block_size=BS, scale=scale)
        bi = parallel_nsa_topk(q=q, k=k_cmp, lse=lse_cmp, TK=T, block_counts=shape.S, block_size=BS, scale=scale)
    out = bi.cpu().numpy().astype(np.int64)
    del q, k, v, k_cmp, v_cmp, lse_cmp, bi
    out = -np.sort(-np.where(out >= 0, out, -1), axis=-1)  # descending, -1 padding last
    return out.astype(np.int32)


register_external("fla-topk", fla_topk_routing)  # the routing tier calls it by family name, never by import path
