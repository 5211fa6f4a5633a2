"""Effective edges and the equal-edge gate.

An *edge* is one (query, KV head, selected block) triple that FLA's backward actually uses. We count
it with the validity rule of FLA's own CSR kernel (``prepare_block_csr_kernel``): slot ``< S``
(``block_counts = S``), ``0 <= b < M`` and ``b * BS <= t``.

Closed form: query ``t`` has ``min(S, t//BS + 1)`` valid slots, so per (batch, head) the count is
``BS * (S(S+1)/2 + (M - S) * S)`` for ``M >= S``.

>>> from nsa_exp.core.config import Shape
>>> closed_form_edges(Shape(B=1, T=32768, HQ=64, H=4, K=192, V=128, S=16, block_size=64, dtype="bfloat16"))
2066432
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from ..core.config import Shape
from ..errors import GateFailure
from .packing import packed_closed_form_edges


def closed_form_edges(shape: Shape) -> int:
    """``B * H * sum_t min(S, t // BS + 1)`` in closed form (requires ``T % BS == 0``, ``M >= S``)."""
    S, M, BS = shape.S, shape.num_blocks, shape.block_size
    per_head = BS * (S * (S + 1) // 2 + (M - S) * S)
    return shape.B * shape.H * per_head


def effective_edges(block_indices: np.ndarray, block_size: int, cu_seqlens: np.ndarray | None = None) -> int:
    """Edges FLA's CSR kernel keeps for ``block_indices`` ``[B,T,H,S]`` (block_counts = S); packed
    (``cu_seqlens``): ``M = ceil(max document length / BS)``, the varlen kernel's ``TC``.

    >>> import numpy as np
    >>> bi = np.array([[[[0, -1]], [[0, 1]], [[1, 2]], [[0, 3]]]], dtype=np.int32)  # B=1,T=4,H=1,S=2
    >>> effective_edges(bi, block_size=1)  # the csr.py docstring's example: 7 selections
    7
    """
    B, T, H, S = block_indices.shape
    longest = T if cu_seqlens is None else int(np.diff(np.asarray(cu_seqlens, dtype=np.int64)).max())
    M = -(-longest // block_size)
    t = np.arange(T, dtype=np.int64)[None, :, None, None]
    b = block_indices.astype(np.int64)
    keep = (b >= 0) & (b < M) & (b * block_size <= t)
    return int(keep.sum())


def equal_edge_gate(routings: Mapping[str, np.ndarray], shape: Shape, cu_seqlens: np.ndarray | None = None,
                    exempt: Collection[str] = ()) -> dict:
    """Count every pattern's edges; all must equal each other and the closed form, or raise.

    Packed (``cu_seqlens``): the packed closed form ``H * sum_docs sum_{t_local} min(S, t_local//BS + 1)``.
    ``exempt`` names routings whose edges may differ (routing files, fla-topk): counted and recorded,
    never a failure. Returns ``{"closed_form": int, "per_pattern": {name: int}, "equal": bool}`` (``equal``:
    every count, exempt ones included, is the closed form) plus ``"exempt": [names]`` when any.
    """
    expected = (closed_form_edges(shape) if cu_seqlens is None else
        packed_closed_form_edges(shape.H, shape.S, shape.block_size, cu_seqlens))
    counts = {name: effective_edges(bi, shape.block_size, cu_seqlens) for name, bi in routings.items()}
    bad = {name: c for name, c in counts.items() if c != expected and name not in exempt}
    if bad:
        detail = ", ".join(f"{n}={c}" for n, c in counts.items())
        raise GateFailure(f"equal-edge gate failed: closed form {expected} edges, got {detail}; "
                          f"the routing generator broke the equal-edge guarantee (do not time this)")
    record = edge_gate_record(counts, expected)
    return {**record, "exempt": [n for n in counts if n in exempt]} if exempt else record


def edge_gate_record(counts: Mapping[str, int], closed_form: int) -> dict:
    """The equal-edge gate's record of per-pattern edge ``counts`` against the ``closed_form``: ``{"closed_form",
    "per_pattern", "equal"}`` (``equal``: every count is the closed form); what :func:`equal_edge_gate` records and
    what a check recomputes from regenerated routings.

    >>> edge_gate_record({"local": 7, "zipf": 7}, 7)
    {'closed_form': 7, 'per_pattern': {'local': 7, 'zipf': 7}, 'equal': True}
    """
    return {"closed_form": closed_form, "per_pattern": dict(counts),
            "equal": all(c == closed_form for c in counts.values())}
