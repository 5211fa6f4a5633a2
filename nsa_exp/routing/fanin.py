"""Fan-in and CSR-row statistics of a routing, computed on the CPU from block_indices.

A CSR *row* is one (batch, KV head, KV block): the list of queries that selected that block, exactly
what FLA's ``prepare_block_csr`` builds and ``parallel_nsa_bwd_kernel_dkv`` loops over (one program
per row). Its *fan-in* is the row's length. Zero rows (blocks nobody selected) are included in
fan-in statistics; query-span and adjacent-gap statistics use the non-empty rows.

Worked example (B=H=1, T=4, block_size=1, S=2; csr.py's docstring example)::

    block 0 <- queries 0, 1, 3   fan-in 3, span 3, gaps [1, 2]
    block 1 <- queries 1, 2      fan-in 2, span 1, gaps [1]
    block 2 <- query 2           fan-in 1, span 0
    block 3 <- query 3           fan-in 1, span 0

>>> import numpy as np
>>> bi = np.array([[[[0, -1]], [[0, 1]], [[1, 2]], [[0, 3]]]], dtype=np.int32)
>>> rows = csr_rows(bi, block_size=1)
>>> rows.fanin.tolist(), rows.span.tolist(), rows.gaps.tolist()
([3, 2, 1, 1], [3, 1, 0, 0], [1, 2, 1])
>>> fanin_summary(rows.fanin)["max"], round(fanin_summary(rows.fanin)["gini"], 4)
(3.0, 0.25)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.protocol import PERCENTILE_METHOD

# The per-row fan-in statistics figures plot latency against (summary/sweep column -> axis label).
X_STATS = {"fanin_cv": "fan-in CV (std / mean)", "fanin_gini": "fan-in Gini coefficient",
           "fanin_max": "max fan-in (queries per KV block)", "fanin_p99": "p99 fan-in (queries per KV block)"}


@dataclass(frozen=True)
class CsrRows:
    """Per-row fan-in (all rows), per non-empty-row query span, and every adjacent query gap."""

    fanin: np.ndarray
    span: np.ndarray
    gaps: np.ndarray


def csr_rows(block_indices: np.ndarray, block_size: int, cu_seqlens: np.ndarray | None = None) -> CsrRows:
    """Invert ``block_indices`` ``[B,T,H,S]`` into CSR rows with FLA's validity rule (see edges.py).

    Rows are indexed by the dK/dV program id: dense ``(b*H + h)*M + block``; packed (``cu_seqlens``
    int ``[N+1]``, ``B = 1``, document-local block ids) ``(global_block)*H + h`` with ``global_block =
    chunk_offsets[doc] + block`` and ``M = ceil(max document length / BS)`` (``prepare_block_csr``).

    A dense routing is inverted one (batch, KV head) at a time: its rows are the consecutive program ids
    ``(b*H + h)*M .. (b*H + h)*M + M - 1``, so the rows of the whole are those of the parts in (b, h) order, and
    each part's temporaries stay below glibc's mmap threshold (32 MiB), where freed memory is reused instead of
    being mapped and faulted in again (sink-heavy at the primary shape with B = 8 on this project's 2-CPU VM:
    0.46-0.59 -> 0.39-0.41 s; 0.54-0.57 -> 0.32-0.34 s under the test suite's malloc settings, tasks.py).
    """
    B, T, H, S = block_indices.shape
    if cu_seqlens is None and B * H > 1:
        parts = [_csr_rows(block_indices[b:b + 1, :, h:h + 1], block_size, None) for b in range(B) for h in range(H)]
        return CsrRows(fanin=np.concatenate([p.fanin for p in parts]), span=np.concatenate([p.span for p in parts]),
                       gaps=np.concatenate([p.gaps for p in parts]))
    return _csr_rows(block_indices, block_size, cu_seqlens)


def _csr_rows(block_indices: np.ndarray, block_size: int, cu_seqlens: np.ndarray | None) -> CsrRows:
    """:func:`csr_rows` in one piece."""
    B, T, H, S = block_indices.shape
    b = block_indices
    t = np.arange(T, dtype=np.int64)[None, :, None, None]
    head = np.arange(H, dtype=np.int64)[None, None, :, None]
    keep = (b >= 0) & (b.astype(np.int64) * block_size <= t)  # with b < M below: FLA's validity rule
    if cu_seqlens is None:
        M = -(-T // block_size)
        batch = np.arange(B, dtype=np.int64)[:, None, None, None]
        row = (batch * H + head) * M + b  # FLA's program id: (b*H + h)*M + block
        n_rows = B * H * M
    else:
        lengths = np.diff(np.asarray(cu_seqlens, dtype=np.int64))
        M = -(-int(lengths.max()) // block_size)
        chunk_offsets = np.concatenate([[0], np.cumsum(-(-lengths // block_size))])
        doc = np.repeat(np.arange(lengths.size), lengths)[None, :, None, None]
        row = (chunk_offsets[doc] + b) * H + head  # FLA's varlen program id: (global_block)*H + h
        n_rows = int(chunk_offsets[-1]) * H
    keep &= b < M  # prepare_block_csr_kernel's mask (dense and varlen)
    # A launchable shape has at most 65535 rows (CUDA's grid-y limit): uint16 row ids, which numpy's stable sort
    # orders by radix (~4x faster than a lexsort at T=131072). The entries come in C order, t ascending within
    # every row, so a *stable* sort by row alone is the (row, query) order. Only the queries are gathered in that
    # order (int32): the sorted row ids are each row's id repeated fan-in times (2-3x faster at B=8 than gathering
    # both as int64; the same arrays, docs/METHOD.md's CI time, eighth session).
    row = row[keep].astype(np.uint16 if n_rows <= 1 << 16 else np.int64)
    query_dtype = np.int32 if T < 2**31 else np.int64
    query: np.ndarray = np.broadcast_to(t, b.shape)[keep].astype(query_dtype)[np.argsort(row, kind="stable")]
    fanin = np.bincount(row, minlength=n_rows)
    if not query.size:
        return CsrRows(fanin=fanin, span=np.array([], dtype=np.int64), gaps=np.array([], dtype=np.int64))
    row_sorted = np.repeat(np.arange(n_rows, dtype=np.int64), fanin)
    same_row = row_sorted[1:] == row_sorted[:-1]
    gaps = (query[1:] - query[:-1])[same_row].astype(np.int64)
    starts = np.flatnonzero(np.r_[True, ~same_row])
    ends = np.r_[starts[1:], query.size] - 1
    span = (query[ends] - query[starts]).astype(np.int64)
    return CsrRows(fanin=fanin, span=span, gaps=gaps)


def gini(x: np.ndarray) -> float:
    """Gini coefficient of non-negative values (0 = all equal; -> 1 = one row holds everything).

    >>> gini(np.array([1, 1, 1, 1])), gini(np.array([0, 0, 0, 4]))
    (0.0, 0.75)
    """
    x = np.sort(np.asarray(x, dtype=np.float64))
    n, total = x.size, x.sum()
    if n == 0 or total == 0:
        return 0.0
    i = np.arange(1, n + 1)
    return float(np.sum((2 * i - n - 1) * x) / (n * total))


def fanin_summary(fanin: np.ndarray) -> dict[str, float]:
    """mean, max, p95, p99, CV (sample std / mean), Gini of per-row fan-in (zero rows included)."""
    f = np.asarray(fanin, dtype=np.float64)
    mean = float(f.mean())
    std = float(f.std(ddof=1)) if f.size > 1 else 0.0
    return {
        "rows": int(f.size),
        "zero_rows": int((f == 0).sum()),
        "mean": mean,
        "max": float(f.max()),
        "p95": float(np.percentile(f, 95, method=PERCENTILE_METHOD)),
        "p99": float(np.percentile(f, 99, method=PERCENTILE_METHOD)),
        "cv": std / mean if mean else 0.0,
        "gini": gini(f),
    }


def distribution_summary(values: np.ndarray) -> dict[str, float]:
    """mean, median, p95, max (``count`` too); all zeros for an empty input."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {"count": 0, "mean": 0.0, "median": 0.0, "p95": 0.0, "max": 0.0}
    return {
        "count": int(v.size),
        "mean": float(v.mean()),
        "median": float(np.median(v)),
        "p95": float(np.percentile(v, 95, method=PERCENTILE_METHOD)),
        "max": float(v.max()),
    }


def routing_statistics(block_indices: np.ndarray, block_size: int,
                       cu_seqlens: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """``{"fanin": ..., "query_span": ..., "adjacent_gap": ...}`` for one routing (packed: ``cu_seqlens``)."""
    return rows_statistics(csr_rows(block_indices, block_size, cu_seqlens))


def rows_statistics(rows: CsrRows) -> dict[str, dict[str, float]]:
    """:func:`routing_statistics` of CSR rows already inverted (:func:`csr_rows`)."""
    return {
        "fanin": fanin_summary(rows.fanin),
        "query_span": distribution_summary(rows.span),
        "adjacent_gap": distribution_summary(rows.gaps),
    }


def row_fanin(block_indices: np.ndarray, block_size: int) -> np.ndarray:
    """Queries per CSR row ``int64 [B*H*M]`` in FLA's program-id order ``(b*H + h)*M + block``, with FLA's
    validity rule (``0 <= block < M`` and ``block*BS <= t``); equals ``csr_rows(...).fanin`` without its
    sort (spans and gaps are not needed here): ~50 ms instead of ~260 ms at T=32768.

    >>> row_fanin(np.array([[[[0, -1]], [[0, 1]]]]), block_size=1).tolist()
    [2, 1]
    """
    B, T, H, _ = block_indices.shape
    M = -(-T // block_size)
    b = block_indices.astype(np.int64)
    t = np.arange(T, dtype=np.int64)[None, :, None, None]
    row = ((np.arange(B, dtype=np.int64)[:, None, None, None] * H + np.arange(H, dtype=np.int64)[None, None, :, None])
        * M + b)
    keep = (b >= 0) & (b < M) & (b * block_size <= t)
    return np.bincount(row[keep], minlength=B * H * M)
