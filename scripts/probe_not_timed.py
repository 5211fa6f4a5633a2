"""Issue 31: call the two peers ``peer-bench`` does not time through their public APIs on a GPU, at the primary
shape (q [1,T,64,192], k [1,T,4,192], v [1,T,4,128] BF16, 16 selected 64-key blocks per query, causal), and print
what each does: the evidence for ``nsa_exp.core.peers.NOT_TIMED``, not a measurement (nothing is timed or written).

The wheels (pure Python; the GPU host has no network, so they are carried):

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform any -d .whl-probe native-sparse-attention-pytorch==0.2.3 \
      flash-sparse-attn==2.0.6 einops einx frozendict jaxtyping wadler-lindig local-attention \
      rotary-embedding-torch hyper-connections torch-einops-utils

then on the GPU host ``pip install --no-index --no-deps --target DIR .whl-probe/*.whl`` and
``PYTHONPATH=DIR python3 scripts/probe_not_timed.py`` (``bash scripts/h200_session.sh probe_peers OUTDIR``).
Exit 0 whatever each peer does; 1 without CUDA.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
from importlib.metadata import version
from pathlib import Path

import torch

DEV = "cuda"
B, HQ, H, S, BS = 1, 64, 4, 16, 64   # the primary shape's heads, slots and block size


def routing(T: int) -> torch.Tensor:
    """Causal block indices [B, H, T, S] int64: each query's own block, then random earlier blocks."""
    own = (torch.arange(T, device=DEV) // BS).view(1, 1, T, 1)
    idx = (torch.rand(B, H, T, S, device=DEV) * (own + 1)).floor().long()
    idx[..., 0] = own[..., 0]
    return idx


def native_sparse_attention_pytorch(T: int, K: int, V: int) -> None:
    """native_sparse_attend (layout b h n d) forward and backward at T, K, V; prints what it did or raised."""
    from native_sparse_attention_pytorch.triton_native_sparse_attention import (  # noqa: PLC0415 - carried wheel
        native_sparse_attend,
    )

    q = torch.randn(B, HQ, T, K, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(B, H, T, K, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(B, H, T, V, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    idx = routing(T)
    try:
        out = native_sparse_attend(q, k, v, BS, idx, torch.ones_like(idx, dtype=torch.bool))
        out.float().sum().backward()
        torch.cuda.synchronize()
        print(f"native-sparse-attention-pytorch T={T} K={K} V={V}: forward and backward ran, out {tuple(out.shape)}")
    except Exception as e:  # noqa: BLE001 - the refusal is the evidence
        print(f"native-sparse-attention-pytorch T={T} K={K} V={V}: {type(e).__name__}: {e}")


def flash_sparse_attn_parameters() -> list[str]:
    """The parameters of flash_sparse_attn_func: from the module, or read from its source where it cannot import."""
    try:
        import flash_sparse_attn  # noqa: PLC0415 - carried wheel

        return list(inspect.signature(flash_sparse_attn.flash_sparse_attn_func).parameters)
    except Exception as e:  # noqa: BLE001 - 2.0.6 imports triton_kernels, which it does not declare
        print(f"import flash_sparse_attn: {type(e).__name__}: {e}")
    spec = importlib.util.find_spec("flash_sparse_attn")
    if spec is None or not spec.submodule_search_locations:
        return ["<flash_sparse_attn is not installed>"]
    root = Path(list(spec.submodule_search_locations)[0])
    tree = ast.parse((root / "ops" / "triton" / "interface.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "flash_sparse_attn_func")
    return [a.arg for a in fn.args.args]


def main() -> int:
    if not torch.cuda.is_available():
        print("probe_not_timed: needs a CUDA GPU (it calls each peer's kernels)", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    print("torch", torch.__version__, "GPU", torch.cuda.get_device_name(0))
    print("native-sparse-attention-pytorch", version("native-sparse-attention-pytorch"), "flash-sparse-attn",
          version("flash-sparse-attn"))
    native_sparse_attention_pytorch(32768, 192, 128)   # the primary shape
    native_sparse_attention_pytorch(32768, 192, 192)   # V widened to K: the head-dim assert alone
    native_sparse_attention_pytorch(8192, 128, 128)    # a shape it supports: the refusals above are the shape's
    params = flash_sparse_attn_parameters()
    print("flash_sparse_attn_func(" + ", ".join(params) + ")")
    named = [p for p in params if any(w in p for w in ("indic", "block", "mask", "select", "topk"))]
    print("flash_sparse_attn_func parameters naming a selection (indices/block/mask/select/topk):", named or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
