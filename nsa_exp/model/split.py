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


def _chunks(block_indices: np.ndarray, block_size: int, max_fanin: int, layout: str):
    """Every valid edge of a ``[1, T, H, S]`` routing with its batch in the split layout: ``(flat, values, row,
    batch, n_batches)`` (``flat`` indexes ``block_indices[0]``, ``row = h*M + block``)."""
    if block_indices.ndim != 4 or block_indices.shape[0] != 1:
        raise ValueError(f"split_routing takes one batch [1,T,H,S]; got shape {list(block_indices.shape)}")
    if max_fanin < 1:
        raise ValueError(f"max_fanin must be >= 1 (got {max_fanin})")
    if layout not in WHATIF_LAYOUTS:
        raise ValueError(f"layout must be one of {WHATIF_LAYOUTS} (got {layout!r})")
    _, T, H, S = block_indices.shape
    M = -(-T // block_size)
    full = block_indices[0].astype(np.int64)  # [T, H, S]
    valid = (full >= 0) & (full < M) & (full * block_size <= np.arange(T, dtype=np.int64)[:, None, None])
    flat = np.flatnonzero(valid)  # (t, h, s) order
    del valid
    b = full.reshape(-1)[flat]
    del full
    t = flat // (H * S)
    row = (flat // S % H) * M + b
    order = np.lexsort((t, row))
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
    return flat, b, row, batch, n_batches


def split_routing(block_indices: np.ndarray, block_size: int, max_fanin: int, layout: str = "split") -> np.ndarray:
    """``[1, T, H, S]`` routing -> ``[B', T, H, S]`` int32 whose batches hold the chunks (see module doc).

    Raises:
        ValueError: ``B != 1``, ``max_fanin < 1`` or an unknown ``layout``.
    """
    _, T, H, S = block_indices.shape
    flat, values, _, batch, n_batches = _chunks(block_indices, block_size, max_fanin, layout)
    out = np.full((n_batches, T * H * S), -1, dtype=np.int32)
    out[batch, flat] = values
    return out.reshape(n_batches, T, H, S)


def split_fanin(fanin: np.ndarray, max_fanin: int, layout: str = "split") -> np.ndarray:
    """``batched_fanin(split_routing(bi, BS, max_fanin, layout), BS)`` from the per-row fan-in of ``bi`` alone
    (``fanin``: ``[H*M]`` in program order ``h*M + s``, one batch), without building the B'-batch routing: a row's
    chunks are its queries cut every ``max_fanin`` (``F``), so chunk ``j`` holds ``min(F, f - j*F)`` queries.
    Returns the fan-in per program of the B'-batch launch, ``[B'*H*M]`` in ``(b*H + h)*M + s`` (B' =
    ``len // (H*M)``). The what-if model needs only this; B' copies of a T=131072 routing are GBs.

    >>> bi = np.array([[[[0, -1]], [[0, 1]], [[1, 2]], [[0, 3]]]], dtype=np.int32)
    >>> f = batched_fanin(bi, 1)
    >>> all(split_fanin(f, 2, lay).tolist() == batched_fanin(split_routing(bi, 1, 2, lay), 1).tolist()
    ...     for lay in WHATIF_LAYOUTS)
    True
    """
    if max_fanin < 1:
        raise ValueError(f"max_fanin must be >= 1 (got {max_fanin})")
    if layout not in WHATIF_LAYOUTS:
        raise ValueError(f"layout must be one of {WHATIF_LAYOUTS} (got {layout!r})")
    f = np.asarray(fanin, dtype=np.int64)
    chunks = -(-f // max_fanin)  # 0 for an empty row
    long_row = f > max_fanin
    if layout == "split":  # chunk j of every row in batch j
        n = max(int(chunks.max(initial=0)), 1)
        j = np.arange(n, dtype=np.int64)[:, None]
        out = np.clip(f[None, :] - j * max_fanin, 0, max_fanin)
    else:  # chunk j of every long row in batch j, the short rows whole in the last batch
        last = int(chunks[long_row].max()) if long_row.any() else 0
        n = last + 1 if (f[~long_row] > 0).any() else max(last, 1)
        j = np.arange(n, dtype=np.int64)[:, None]
        out = np.where(long_row[None, :], np.clip(f[None, :] - j * max_fanin, 0, max_fanin),
                       np.where(j == last, f[None, :], 0))
    return out.reshape(-1)


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
