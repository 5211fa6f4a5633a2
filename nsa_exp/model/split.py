"""A split schedule expressed as a routing over B' batches, so FLA's unmodified kernels can run it.

FLA's dK/dV kernel (commit 0a9b9f2) reads K/V of batch ``b`` at ``b*T + block*BS`` and gathers q/dO
at the CSR's absolute positions within batch ``b``. Give it B' copies of q, k, v, dO (and lse,
delta) and let batch ``j``'s ``block_indices`` keep only chunk ``j`` of each long CSR row (the rest
``-1``): the launch then runs every chunk as its own program, and ``dK = sum_j dK_j`` (``dV`` too).
This is a *what-if* arm: it changes the schedule FLA's kernel sees, never the kernel.

Chunks: the queries of a row, in ascending position, cut every ``max_fanin``. Two layouts:

- ``"split"``: chunk ``j`` of every row in batch ``j`` (short rows whole in batch 0, so batch 0
  is the original launch minus the long rows' tails);
- ``"split-heavy-first"``: chunk ``j`` of every *long* row in batch ``j``, every short row in the
  last batch: the long rows' chunks are dispatched first (a heaviest-first order).

Worked example (T=4, BS=1, H=1, S=2; block 0 is selected by queries 0, 1, 3; max_fanin 2)::

    >>> import numpy as np
    >>> bi = np.array([[[[0, -1]], [[0, 1]], [[1, 2]], [[0, 3]]]], dtype=np.int32)
    >>> out = split_routing(bi, block_size=1, max_fanin=2, layout="split")
    >>> out.shape, out[1, :, 0].tolist()
    ((2, 4, 1, 2), [[-1, -1], [-1, -1], [-1, -1], [0, -1]])
"""

from __future__ import annotations

import numpy as np

from ..core.protocol import WHATIF_LAYOUTS


def split_routing(block_indices: np.ndarray, block_size: int, max_fanin: int, layout: str = "split") -> np.ndarray:
    """``[1, T, H, S]`` routing -> ``[B', T, H, S]`` int32 whose batches hold the chunks (see module doc).

    Raises:
        ValueError: ``B != 1``, ``max_fanin < 1`` or an unknown ``layout``.
    """
    if block_indices.ndim != 4 or block_indices.shape[0] != 1:
        raise ValueError(f"split_routing takes one batch [1,T,H,S]; got shape {list(block_indices.shape)}")
    if max_fanin < 1:
        raise ValueError(f"max_fanin must be >= 1 (got {max_fanin})")
    if layout not in WHATIF_LAYOUTS:
        raise ValueError(f"layout must be one of {WHATIF_LAYOUTS} (got {layout!r})")
    _, T, H, S = block_indices.shape
    M = -(-T // block_size)
    b = block_indices[0].astype(np.int64)  # [T, H, S]
    t = np.broadcast_to(np.arange(T)[:, None, None], b.shape)
    h = np.broadcast_to(np.arange(H)[None, :, None], b.shape)
    valid = (b >= 0) & (b < M) & (b * block_size <= t)
    flat = np.flatnonzero(valid)
    row = (h.reshape(-1) * M + b.reshape(-1))[flat]
    order = np.lexsort((t.reshape(-1)[flat], row))
    row_sorted = row[order]
    starts = np.searchsorted(row_sorted, row_sorted, side="left")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size) - starts
    chunk = rank // max_fanin
    fanin = np.bincount(row, minlength=H * M)
    long_row = fanin[row] > max_fanin
    if layout == "split":
        batch = chunk
    else:
        last = int(chunk.max()) + 1 if long_row.any() else 0
        batch = np.where(long_row, chunk, last)
    n_batches = int(batch.max()) + 1 if batch.size else 1
    out = np.full((n_batches, T, H, S), -1, dtype=np.int32)
    tt, hh, ss = np.unravel_index(flat, b.shape)
    out[batch, tt, hh, ss] = b.reshape(-1)[flat]
    return out


def batched_fanin(split: np.ndarray, block_size: int) -> np.ndarray:
    """Fan-in per program of the B'-batch launch, in FLA's program-id order ``(b*H + h)*M + s``."""
    Bp, T, H, _ = split.shape
    M = -(-T // block_size)
    b = split.astype(np.int64)
    t = np.arange(T)[None, :, None, None]
    valid = (b >= 0) & (b < M) & (b * block_size <= t)
    batch = np.arange(Bp)[:, None, None, None]
    head = np.arange(H)[None, None, :, None]
    row = ((batch * H + head) * M + b)[valid]
    return np.bincount(row, minlength=Bp * H * M)
