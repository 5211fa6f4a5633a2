"""The dK/dV kernel as a scheduling makespan: CSR rows handed to resident slots in program-id order.

FLA's ``parallel_nsa_bwd_kernel_dkv`` runs one program per CSR row — one (batch, KV head, KV block),
program id ``(b*H + h)*M + s`` (``fla/ops/nsa/parallel.py`` at commit 0a9b9f2) — and each program
loops over its row's queries ``BQ`` at a time. The GPU holds ``slots`` programs per SM
(:mod:`.occupancy`) and starts the next program, in program-id order, whenever one ends.

Model (docs/MODEL.md derives and tests it):

- a program over a row of fan-in ``f`` costs ``work = a + c * ceil(f / BQ)`` milliseconds when its
  SM is full (``slots`` programs resident);
- the programs on one SM share it (processor sharing): with ``j`` of ``slots`` resident, each
  advances at rate ``r(j) = 1 + (gamma - 1) * (slots - j) / (slots - 1)`` (``r(slots) = 1``,
  ``r(1) = gamma``): a program alone on its SM runs ``gamma`` times faster than when sharing;
- the first ``n_sm * slots`` programs start at once, program ``i`` on SM ``i mod n_sm``; each later
  program starts on the SM whose program ended, the moment it ends.

Worked example (2 SMs, 1 slot each, gamma 1: plain list scheduling; one heavy row first vs last)::

    >>> simulate([4.0, 1.0, 1.0, 1.0, 1.0], n_sm=2, slots=1, gamma=1.0).makespan
    4.0
    >>> simulate([1.0, 1.0, 1.0, 1.0, 4.0], n_sm=2, slots=1, gamma=1.0).makespan
    6.0
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Schedule:
    """One simulated launch. Times in ms from the launch's start; arrays indexed by program id."""

    makespan: float
    start: np.ndarray
    end: np.ndarray
    busy_fraction: float  # sum of program durations / (makespan * n_sm * slots)


def program_work(fanin: np.ndarray, a: float, c: float, bq: int = 1) -> np.ndarray:
    """Per-program work ``a + c * ceil(fanin / bq)`` (ms at a full SM) for fan-in per CSR row.

    >>> program_work(np.array([0, 3, 4]), a=0.5, c=0.25, bq=2).tolist()
    [0.5, 1.0, 1.0]
    """
    f = np.asarray(fanin, dtype=np.float64)
    return a + c * np.ceil(f / bq)


def share_rates(slots: int, gamma: float) -> np.ndarray:
    """``r(j)`` for ``j = 0..slots`` resident programs (``r(0) = 0``).

    >>> share_rates(2, 1.5).tolist()
    [0.0, 1.5, 1.0]
    """
    if slots == 1:
        return np.array([0.0, 1.0])
    j = np.arange(1, slots + 1)
    return np.r_[0.0, 1.0 + (gamma - 1.0) * (slots - j) / (slots - 1)]


def simulate(work, n_sm: int, slots: int, gamma: float = 1.0) -> Schedule:
    """Event-driven makespan of programs ``work`` (ms at a full SM) dispatched in index order.

    Args:
        work: per-program work in dispatch order, float ``[P]``, each ``>= 0``.
        n_sm: streaming multiprocessors; slots: resident programs per SM (both ``>= 1``).
        gamma: speed of a program alone on its SM relative to a full SM (``1 <= gamma <= slots``).

    Returns:
        :class:`Schedule`.

    Raises:
        ValueError: negative or non-finite work, ``n_sm``/``slots`` < 1, or ``gamma`` outside ``[1, slots]``.

    Method: the programs resident on one SM share it equally, so they all advance at the same rate and
    a per-SM *virtual clock* (work done by each resident program since the launch) orders their ends;
    an event changes only its own SM's rate, so one heap of each SM's next end gives
    ``O(P log n_sm)`` (2,048 programs on 132 x 2 slots: ~5 ms). Ties go to the lower SM index.
    """
    w = np.asarray(work, dtype=np.float64)
    if n_sm < 1 or slots < 1:
        raise ValueError(f"n_sm and slots must be >= 1 (got {n_sm}, {slots})")
    if not 1.0 <= gamma <= max(slots, 1):
        raise ValueError(f"gamma must lie in [1, slots={slots}] (got {gamma})")
    if (w < 0).any() or not np.isfinite(w).all():
        raise ValueError("program work must be finite and >= 0")
    P = w.size
    rate_of = share_rates(slots, gamma).tolist()
    wl = w.tolist()
    start, end = [0.0] * P, [0.0] * P
    first = min(P, n_sm * slots)
    resident: list[list[tuple[float, int]]] = [[] for _ in range(n_sm)]  # (virtual end, program id) heaps
    for i in range(first):
        heapq.heappush(resident[i % n_sm], (wl[i], i))
    clock = [0.0] * n_sm  # virtual clock of each SM
    last = [0.0] * n_sm  # real time of the clock's last update
    events = [(resident[m][0][0] / rate_of[len(resident[m])], m) for m in range(n_sm) if resident[m]]
    heapq.heapify(events)
    # An event ends the program at the top of its SM's heap; while programs wait, the next one takes its place
    # (one heapreplace: the same heap contents as a pop then a push, and every entry is unique, so the same order of
    # events) and the SM's next event replaces this one (its one entry in ``events``). 6.9 M heap operations of a
    # cold validate of the committed model files took 7.9 s as pops and pushes (docs/METHOD.md, CI's own time).
    heappop, heapreplace = heapq.heappop, heapq.heapreplace
    nxt, now = first, 0.0
    while events:
        now, m = events[0]
        here = resident[m]
        n_here = len(here)
        clock_m = clock[m] + (now - last[m]) * rate_of[n_here]
        clock[m], last[m] = clock_m, now
        if nxt < P:
            end[heapreplace(here, (clock_m + wl[nxt], nxt))[1]] = now
            start[nxt] = now
            nxt += 1
        else:
            end[heappop(here)[1]] = now
            n_here -= 1
        if n_here:
            ahead = here[0][0] - clock_m
            heapreplace(events, (now + (ahead if ahead > 0.0 else 0.0) / rate_of[n_here], m))
        else:
            heappop(events)
    s, e = np.array(start), np.array(end)
    busy = float((e - s).sum() / (now * n_sm * slots)) if now > 0 else 0.0
    return Schedule(makespan=float(now), start=s, end=e, busy_fraction=busy)


def lower_bounds(work: np.ndarray, n_sm: int, slots: int, gamma: float = 1.0) -> dict[str, float]:
    """Two floors no schedule beats: total work over all slots, and the heaviest program alone.

    >>> lower_bounds(np.array([4.0, 1.0, 1.0]), n_sm=1, slots=2, gamma=1.5)
    {'total_work_over_slots_ms': 3.0, 'heaviest_row_alone_ms': 2.6666666666666665}
    """
    w = np.asarray(work, dtype=np.float64)
    return {"total_work_over_slots_ms": float(w.sum() / (n_sm * slots)),
            "heaviest_row_alone_ms": float(w.max() / gamma) if w.size else 0.0}


#: :func:`break_even`'s regimes: below the break-even the heaviest CSR row decides the makespan, above it the
#: total work over the slots does.
REGIMES = ("tail-bound", "throughput-bound")


def break_even(work: np.ndarray, pairs: int, n_sm: int, slots: int, gamma: float = 1.0) -> dict[str, Any]:
    """The number of (batch, KV head) pairs ``(B*H)*`` at which the heaviest CSR row stops deciding the makespan
    (docs/MODEL.md, "Break-even: when the heaviest row stops deciding").

    Of :func:`lower_bounds`' two floors, total work / slots grows with the ``B*H`` copies of a (b, h)'s rows and
    the heaviest row alone does not, so they cross at::

        (B*H)* = (w_max / gamma) * n_sm * slots / W_bh,   W_bh = sum(work) / pairs

    ``W_bh`` is the mean work of one (b, h) pair's ``M`` programs (equal for every pair of an equal-edge routing
    at ``BQ = 1``), ``w_max`` the heaviest program of all ``pairs``.

    Args:
        work: per-program work, float ms at a full SM, ``[pairs * M]`` (any order: only its sum and max count).
        pairs: the (b, h) pairs ``work`` holds, ``B*H`` (``>= 1``).
        n_sm, slots, gamma: as :func:`simulate`.

    Returns:
        ``{"BH": (B*H)*, "heaviest_row_ms": w_max / gamma, "work_per_bh_ms": W_bh, "regime"}``: ``regime`` is
        ``"tail-bound"`` when ``pairs < (B*H)*`` (the heaviest row's floor is the higher), else
        ``"throughput-bound"``. ``BH`` is a count of pairs (dimensionless); ``inf`` for zero work.

    Raises:
        ValueError: ``pairs < 1`` or empty ``work``.

    >>> break_even(np.array([4.0, 1.0, 1.0, 2.0, 1.0, 1.0]), pairs=2, n_sm=1, slots=2)
    {'BH': 1.6, 'heaviest_row_ms': 4.0, 'work_per_bh_ms': 5.0, 'regime': 'throughput-bound'}
    """
    w = np.asarray(work, dtype=np.float64)
    if pairs < 1 or w.size == 0:
        raise ValueError(f"break_even needs pairs >= 1 and some work (got pairs={pairs}, {w.size} programs)")
    heaviest = lower_bounds(w, n_sm, slots, gamma)["heaviest_row_alone_ms"]
    per_bh = float(w.sum() / pairs)
    bh = heaviest * n_sm * slots / per_bh if per_bh > 0 else float("inf")
    return {"BH": bh, "heaviest_row_ms": heaviest, "work_per_bh_ms": per_bh,
            "regime": REGIMES[0] if pairs < bh else REGIMES[1]}


def split_rows(fanin: np.ndarray, max_fanin: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows longer than ``max_fanin`` cut into ``ceil(f / max_fanin)`` chunks of at most that length.

    Returns ``(chunk_fanin, parent_row)``, chunks of a row consecutive and in row order.

    >>> split_rows(np.array([5, 2, 0]), 2)
    (array([2, 2, 1, 2, 0]), array([0, 0, 0, 1, 2]))
    """
    f = np.asarray(fanin, dtype=np.int64)
    if max_fanin < 1:
        raise ValueError(f"max_fanin must be >= 1 (got {max_fanin})")
    pieces = np.maximum(1, -(-f // max_fanin))
    parent = np.repeat(np.arange(f.size), pieces)
    k = np.arange(parent.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    chunk = np.minimum(max_fanin, f[parent] - k * max_fanin)
    return np.maximum(chunk, 0), parent


def heaviest_first(work: np.ndarray) -> np.ndarray:
    """The dispatch order of longest-processing-time-first (LPT): a stable descending sort.

    >>> heaviest_first(np.array([1.0, 3.0, 2.0, 3.0])).tolist()
    [1, 3, 2, 0]
    """
    return np.argsort(-np.asarray(work, dtype=np.float64), kind="stable")
