"""Error metrics between two tensors: relative L2, max-abs, and scaled ULP error for 16/32-bit floats; the
config's dtype names as torch dtypes (:data:`DTYPES`, one table for every GPU module).

>>> import torch
>>> a = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
>>> b = torch.nextafter(a, torch.full_like(a, 10))
>>> compare(b, a)["max_ulp"], compare(a, a)["bit_exact"]
(1.0, True)
"""

from __future__ import annotations

from typing import Any

import torch

#: The config's dtype names (``shape.dtype``) as torch dtypes: the launcher's inputs and fla-topk's q and k.
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def rel_l2(actual: torch.Tensor, reference: torch.Tensor) -> float:
    """``||actual - reference|| / ||reference||`` in float64 (0 when both are zero)."""
    a, r = actual.double(), reference.double()
    denom = torch.linalg.vector_norm(r).item()
    num = torch.linalg.vector_norm(a - r).item()
    return num / denom if denom else num


def max_abs(actual: torch.Tensor, reference: torch.Tensor) -> float:
    return (actual.double() - reference.double()).abs().max().item()


_MANTISSA_BITS = {torch.bfloat16: 7, torch.float16: 10, torch.float32: 23}
# Elements below max|reference| / 256 are judged in ULPs of that floor: a value that cancels to near
# zero carries the absolute fp32 error of its (much larger) summands, not an error relative to itself.
ULP_FLOOR_REL = 2.0 ** -8


def ulp_of(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of ``dtype`` at magnitude ``|x|`` (``2**(floor(log2|x|) - mantissa_bits)``), in fp64."""
    x = x.double().abs().clamp_min(torch.finfo(dtype).tiny)
    return torch.exp2(torch.floor(torch.log2(x)) - _MANTISSA_BITS[dtype])


def scaled_ulp_error(actual: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Elementwise ``|a - r|`` in ULPs of ``dtype`` at ``max(|a|, |r|, max|r| / 256)``.

    >>> r = torch.tensor([4.0, 1e-6, 0.0], dtype=torch.bfloat16)
    >>> a = torch.tensor([4.03125, -1e-6, 0.0], dtype=torch.bfloat16)   # +1 ulp at 4; a sign flip near 0
    >>> scaled_ulp_error(a, r).tolist()
    [1.0, 0.016357421875, 0.0]
    """
    dtype = reference.dtype
    a, r = actual.double(), reference.double()
    floor = r.abs().max() * ULP_FLOOR_REL
    scale = torch.maximum(torch.maximum(a.abs(), r.abs()), floor)
    return (a - r).abs() / ulp_of(scale, dtype)


def compare(actual: torch.Tensor, reference: torch.Tensor) -> dict[str, Any]:
    """rel_l2, max_abs (also over max|reference|); for two tensors of one 16/32-bit float dtype also the
    largest :func:`scaled_ulp_error`, the count of differing elements and ``bit_exact``."""
    ref_max = reference.double().abs().max().item()
    err = max_abs(actual, reference)
    out: dict[str, Any] = {"rel_l2": rel_l2(actual, reference), "max_abs": err, "ref_max_abs": ref_max,
                           "max_abs_rel": err / ref_max if ref_max else err, "numel": int(reference.numel())}
    if actual.dtype == reference.dtype and actual.dtype in _MANTISSA_BITS:
        out["max_ulp"] = float(scaled_ulp_error(actual, reference).max().item())
        out["n_different"] = int((actual != reference).sum().item())
        out["bit_exact"] = out["n_different"] == 0
    return out
