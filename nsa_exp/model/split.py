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

from collections.abc import Mapping, Sequence

import numpy as np

from ..core.config import HEADROOM, Shape
from ..core.protocol import WHATIF_LAYOUTS
from ..errors import UserError
from ..routing.fanin import row_fanin


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
    """``row_fanin(split_routing(bi, BS, max_fanin, layout), BS)`` from the per-row fan-in of ``bi`` alone
    (``fanin``: ``[H*M]`` in program order ``h*M + s``, one batch), without building the B'-batch routing: a row's
    chunks are its queries cut every ``max_fanin`` (``F``), so chunk ``j`` holds ``min(F, f - j*F)`` queries.
    Returns the fan-in per program of the B'-batch launch, ``[B'*H*M]`` in ``(b*H + h)*M + s`` (B' =
    ``len // (H*M)``). The what-if model needs only this; B' copies of a T=131072 routing are GBs.

    >>> bi = np.array([[[[0, -1]], [[0, 1]], [[1, 2]], [[0, 3]]]], dtype=np.int32)
    >>> f = row_fanin(bi, 1)
    >>> all(split_fanin(f, 2, lay).tolist() == row_fanin(split_routing(bi, 1, 2, lay), 1).tolist()
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


def split_batches(fanin: np.ndarray, max_fanin: int, layout: str = "split") -> int:
    """B', the batches :func:`split_routing` makes, from the CSR rows' fan-in alone (no routing built).

    ``fanin``: queries per CSR row (``row_fanin`` of a ``[1, T, H, S]`` routing). With ``k = ceil(max / F)``:
    ``split`` makes ``k`` batches; ``split-heavy-first`` makes ``k`` for the long rows' chunks plus one for the
    short rows (when there are any); a routing with no row longer than F is one batch.

    >>> split_batches(np.array([3, 1, 0]), 2, "split"), split_batches(np.array([3, 1, 0]), 2, "split-heavy-first")
    (2, 3)
    """
    if max_fanin < 1:
        raise ValueError(f"max_fanin must be >= 1 (got {max_fanin})")
    fanin = np.asarray(fanin, dtype=np.int64)
    longest = int(fanin.max()) if fanin.size else 0
    if longest <= max_fanin:
        return 1
    k = -(-longest // max_fanin)
    short = bool(((fanin > 0) & (fanin <= max_fanin)).any())
    return k + 1 if layout == "split-heavy-first" and short else k


#: Device memory (bytes) torch reports as ``total_memory`` on the GPUs the configs name (``gpu.required_name``),
#: as recorded in ``metadata.gpu.total_memory_bytes`` of the committed results (results/raw/e1_h100.json,
#: results/raw/e1_h200.json; a test holds the two together). The what-if's memory check uses it on a CPU,
#: where no GPU can be asked; on the GPU it uses the free memory ``torch.cuda.mem_get_info`` reports.
GPU_MEMORY_BYTES = {"H100": 85_017_493_504, "H200": 150_109_880_320}


def _bytes(shape: Shape) -> tuple[int, int]:
    """``(per B'-batch copy, resident once)`` device bytes of one pattern's what-if at ``shape`` (B = 1), from
    the tensors :class:`nsa_exp.gpu.whatif.SplitArm` and the staged launcher allocate:

    - per copy (SplitArm tiles q, k, v, dO, lse, delta B' times and its B'-batch problem pre-allocates dq,
      dk, dv like ``parallel_nsa_bwd``; NV = 1 since BV = next_pow2(V) >= V): ``T(HQ K + H K + H V + HQ V) e``
      + ``T(HQ K + H K + H V) e`` + ``2 T HQ 4`` + ``T H S 4`` (block_indices) + ``T H S 4 + (H M + 1) 4``
      (the CSR);
    - once: the shared inputs, the original launch's o, lse, delta, its dq, dk, dv and the official
      wrapper's dq, dk, dv.
    """
    e = 4 if shape.dtype == "float32" else 2
    T, HQ, H, K, V, S = shape.T, shape.HQ, shape.H, shape.K, shape.V, shape.S
    inputs = T * (HQ * K + H * K + H * V + HQ * V) * e
    grads = T * (HQ * K + H * K + H * V) * e
    aux = 2 * T * HQ * 4 + 2 * T * H * S * 4 + (H * shape.num_blocks + 1) * 4
    return inputs + grads + aux, inputs + T * HQ * V * e + 2 * grads + aux


def whatif_bytes(shape: Shape, batches: Sequence[int]) -> int:
    """Estimated peak device bytes of one pattern's what-if whose arms (all resident at once, as
    :func:`nsa_exp.gpu.whatif_run.run_whatif` keeps them) have ``batches`` B' each, times
    :data:`nsa_exp.core.config.HEADROOM` (a sweep point's: the same allocator, the same launcher)."""
    per_copy, once = _bytes(shape)
    return int(HEADROOM * (once + sum(batches) * per_copy))


def check_whatif_memory(shape: Shape, routings: Mapping[str, np.ndarray], max_fanins: Sequence[int],
                        layouts: Sequence[str], budget: int, budget_text: str) -> dict[str, int]:
    """Refuse (one :class:`UserError` line naming ``--max-fanin``) what-if arms whose B' copies of the inputs
    cannot fit ``budget`` bytes, before anything is allocated; returns ``{pattern: estimated bytes}``.

    ``routings``: each pattern's ``[1, T, H, S]`` block_indices (B' from their CSR rows' fan-in,
    :func:`split_batches`); ``budget_text`` says where the budget came from (e.g. "the H200's 139.8 GiB").
    The line names the smallest F that fits (a larger F: fewer, longer chunks, fewer copies)."""
    need = {}
    for pattern, bi in routings.items():
        fanin = row_fanin(bi, shape.block_size)
        batches = [split_batches(fanin, F, layout) for F in max_fanins for layout in layouts]
        need[pattern] = whatif_bytes(shape, batches)
        if need[pattern] <= budget:
            continue
        per_copy = _bytes(shape)[0]
        fits = [F for F in _candidate_fanins(fanin)
                if whatif_bytes(shape, [split_batches(fanin, F, la) for la in layouts]) <= budget]
        alone = [F for F in max_fanins
                 if whatif_bytes(shape, [split_batches(fanin, F, la) for la in layouts]) <= budget]
        text = ",".join(map(str, max_fanins))
        hint = ("each F fits alone: run them in separate whatif calls" if len(alone) == len(max_fanins) else
                f"the smallest F that fits is {min(fits)} (B' = "
                f"{' + '.join(str(split_batches(fanin, min(fits), la)) for la in layouts)})" if fits else
                "not even one B' copy fits: lower T or free the GPU")
        raise UserError(f"--max-fanin {text}: the what-if arms of {pattern} hold B' = {' + '.join(map(str, batches))} "
                        f"copies of the inputs ({per_copy / 2**30:.2f} GiB each), ~{need[pattern] / 2**30:.1f} GiB "
                        f"with the original launch, more than {budget_text}; {hint}")
    return need


def _candidate_fanins(fanin: np.ndarray) -> list[int]:
    """Every F at which B' changes (``ceil(max / k)`` for k = 1 .. max), largest first."""
    longest = int(np.max(fanin)) if np.size(fanin) else 1
    return sorted({-(-longest // k) for k in range(1, longest + 1)}, reverse=True)
