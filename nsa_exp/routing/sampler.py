"""Weighted sampling of distinct causal blocks without replacement (successive sampling), in O(rows * S) memory.

Row ``r`` draws ``n[r]`` distinct blocks from ``0..cur[r]``; each draw is proportional to ``weights`` over the
blocks not drawn yet (successive sampling). Rows that must take every causal block (``n == cur + 1``) take them
all.

Algorithm, per slot (Python loops run over the ``S`` slots, rejection rounds and row chunks only):

1. **Rejection** (``routing._sample_distinct`` of commit 92dd52b, unchanged): every row still drawing takes
   an inverse-CDF draw over ``0..cur`` and keeps it unless it collides with an earlier slot; colliding rows
   redraw, up to :data:`MAX_REJECTION_ROUNDS` rounds. A collision-free redraw is exactly a draw from the
   conditional distribution over the blocks not drawn yet. A round that leaves more than
   :data:`STALL_FRACTION` of its rows pending, on a pending set of more than :data:`FIRST_ROUND_STALL_BUDGET`
   (first round) or :data:`STALL_BUDGET` (later rounds) rows x support width, has **stalled** (steep
   weights: the drawn blocks hold almost all the mass) and stops.
2. Rows still pending then finish exactly:

   - **legacy Gumbel-max** (today's fallback: the same random numbers, the same argmax) for this slot, when
     rejection did not stall and pending rows x widest support is at most :data:`LEGACY_FALLBACK_BUDGET`.
     It uses an ``[rows, width]`` mask instead of today's ``[rows, slots, width]`` one.
   - otherwise the **exponential race** (:func:`finish_rows`) draws ALL the row's remaining slots at once:
     explicit keys ``E_b / w_b`` on a window of low blocks plus a lazily raced tail (exact by
     memorylessness; tail blocks drawn by a tail-accurate segment inverse CDF). Memory ``O(rows * S)``.
     After a stall the rows that did get this slot are raced too (they would stall on the next slot).

Every path is exact successive sampling, so the distribution does not depend on the path; the draws are a
pure function of the generator state (deterministic from the seed). Where rejection never stalls and the
fallback stays within its budget the draws are today's bit for bit: this includes the committed e1
``uniform`` and ``zipf`` (exponent 1) routings, whose sha256 tests/routing/test_sampler.py pins (today's fallback
touched at most 3,388 elements there).
"""

from __future__ import annotations

import numpy as np

MAX_REJECTION_ROUNDS = 32  # today's routing.MAX_REJECTION_ROUNDS
STALL_BUDGET = 1 << 24  # ... and rejection only counts as stalled on a pending set larger than this
FIRST_ROUND_STALL_BUDGET = 1 << 18  # ... or larger than this when the slot's very first round stalls
STALL_FRACTION = 0.5  # a round leaving more than this fraction of its rows pending has stalled
LEGACY_FALLBACK_BUDGET = 1 << 18  # pending rows x support width handled by today's Gumbel-max fallback
WINDOW_FACTOR, WINDOW_EXTRA = 2, 32  # the exponential race keys blocks 0..L-1, L = (k + m) * FACTOR + EXTRA
_CHUNK = 1 << 15  # rows per chunk of the exponential race (bounds its temporaries)


def most_recent(cur: np.ndarray, n: np.ndarray, S: int) -> np.ndarray:
    """Slots ``j < n`` hold ``cur - j``; the others -1 (int64 ``[rows, S]``)."""
    j = np.arange(S, dtype=np.int64)[None, :]
    return np.where(j < n[:, None], cur[:, None] - j, -1)


def _legacy_gumbel(rng: np.random.Generator, drawn: np.ndarray, cur: np.ndarray,
                   log_w: np.ndarray) -> np.ndarray:
    """Today's Gumbel-max fallback, same random numbers and result, with a ``[rows, width]`` mask."""
    rows = cur.shape[0]
    width = int(cur.max()) + 1
    logits = np.broadcast_to(log_w[:width], (rows, width)).copy()
    logits[np.arange(width)[None, :] > cur[:, None]] = -np.inf
    if drawn.shape[1]:
        logits[np.repeat(np.arange(rows), drawn.shape[1]), drawn.reshape(-1)] = -np.inf
    return np.argmax(logits + rng.gumbel(size=(rows, width)), axis=1)


def _segments(excluded: np.ndarray, cur: np.ndarray, start: int, rcum: np.ndarray):
    """Free segments of ``start..cur`` minus ``excluded`` (entries below ``start``, e.g. -1, are ignored).

    Returns ``lo, hi`` (segment ``j`` is ``lo[:, j] .. hi[:, j] - 1``, possibly empty) and its weight ``mass``,
    computed from the reverse cumulative weights ``rcum`` so that steep tails keep their precision.
    """
    m = cur.shape[0]
    d = np.maximum(np.sort(excluded, axis=1), start - 1)
    lo = np.concatenate([np.full((m, 1), start, dtype=np.int64), d + 1], axis=1)
    hi = np.concatenate([d, cur[:, None] + 1], axis=1)
    mass = np.where(hi > lo, rcum[np.minimum(lo, hi)] - rcum[hi], 0.0)
    return lo, hi, mass


def _draw_in_segments(u0: np.ndarray, u1: np.ndarray, lo: np.ndarray, hi: np.ndarray, mass: np.ndarray,
                      rcum: np.ndarray) -> np.ndarray:
    """Inverse CDF over the free segments (rows with positive total mass): block ``x`` w.p. ``w[x] / total``."""
    cmass = np.cumsum(mass, axis=1)
    total = cmass[:, -1]
    # target < total strictly, so the chosen segment (first with cmass > target) has positive mass
    target = np.minimum(u0 * total, np.nextafter(total, 0.0))
    seg = (cmass <= target[:, None]).sum(axis=1)
    idx = np.arange(lo.shape[0])
    a, e = lo[idx, seg], hi[idx, seg]
    inner = rcum[e] + u1 * mass[idx, seg]  # in [rcum[e], rcum[a])
    x = np.searchsorted(-rcum, -inner, side="left") - 1  # the last x with rcum[x] > inner
    return np.minimum(np.maximum(x, a), e - 1)


def exact_draw(rng: np.random.Generator, drawn: np.ndarray, cur: np.ndarray, rcum: np.ndarray) -> np.ndarray:
    """One successive-sampling draw per row from ``0..cur`` minus ``drawn`` (reference for the tests).

    ``rcum[x] = sum(weights[x:])`` (length ``M + 1``, ``rcum[M] = 0``); every row must have remaining mass.
    """
    u = rng.random((2, cur.shape[0]))
    lo, hi, mass = _segments(drawn, cur, 0, rcum)
    return _draw_in_segments(u[0], u[1], lo, hi, mass, rcum)


def finish_rows(rng: np.random.Generator, drawn: np.ndarray, cur: np.ndarray, m: int, weights: np.ndarray,
                rcum: np.ndarray, window: int | None = None) -> np.ndarray:
    """The next ``m`` successive-sampling draws of each row at once (int64 ``[rows, m]``, any order).

    Exponential race: block ``b`` gets key ``E_b / w_b`` (``E_b`` standard exponential); the ``m`` smallest
    keys over the blocks not yet drawn are exactly ``m`` successive draws. Keys are drawn explicitly for the
    window ``0..L-1`` (``L = 2S + 32`` at most), and the tail ``L..cur`` is raced lazily: by memorylessness its
    smallest remaining key is the previous one plus ``Exp(1) / (remaining tail mass)``, at a block drawn with
    probability proportional to its weight (:func:`_draw_in_segments`), so tail blocks are generated in key
    order only while they can still enter the ``m`` smallest (``window`` overrides ``L``, for tests).
    Work ``O(rows * (L + S * tail entries))``.
    """
    rows, k = drawn.shape
    out = np.empty((rows, m), dtype=np.int64)
    L = min(int(cur.max()) + 1, max(m, (k + m) * WINDOW_FACTOR + WINDOW_EXTRA if window is None else window))
    for r0 in range(0, rows, _CHUNK):
        sl = slice(r0, min(rows, r0 + _CHUNK))
        d, c = drawn[sl], cur[sl]
        p = c.shape[0]
        with np.errstate(divide="ignore"):
            keys = rng.standard_exponential((p, L)) / weights[:L]
        short = np.flatnonzero(c < L - 1)  # rows whose support ends inside the window
        if short.size:
            keys[short] = np.where(np.arange(L)[None, :] > c[short, None], np.inf, keys[short])
        in_win = d < L
        keys[np.repeat(np.arange(p), k)[in_win.reshape(-1)], d[in_win]] = np.inf
        best = np.argpartition(keys, m - 1, axis=1)[:, :m]
        best_key = np.take_along_axis(keys, best, axis=1)
        tau = np.zeros(p)
        active = np.flatnonzero(c >= L)
        generated: np.ndarray = np.empty((p, 0), dtype=np.int64)  # int64 [p, j]: grows a column per pass
        while active.size:
            excl = np.concatenate([d[active], generated[active]], axis=1)
            lo, hi, mass = _segments(excl, c[active], L, rcum)
            total = mass.sum(axis=1)
            e = rng.standard_exponential(active.size)
            with np.errstate(divide="ignore"):
                tau[active] += np.where(total > 0, e / np.where(total > 0, total, 1.0), np.inf)
            worst = best_key[active].argmax(axis=1)
            go = tau[active] < best_key[active, worst]
            active, worst, lo, hi, mass = active[go], worst[go], lo[go], hi[go], mass[go]
            if not active.size:
                break
            u = rng.random((2, active.size))
            x = _draw_in_segments(u[0], u[1], lo, hi, mass, rcum)
            best[active, worst] = x
            best_key[active, worst] = tau[active]
            col = np.full(p, -1, dtype=np.int64)
            col[active] = x
            generated = np.concatenate([generated, col[:, None]], axis=1)
        out[sl] = best
    return out


def sample_distinct(rng: np.random.Generator, cur: np.ndarray, n: np.ndarray, S: int,
                    weights: np.ndarray) -> np.ndarray:
    """int64 ``[rows, S]``: ``n[r]`` distinct blocks of ``0..cur[r]`` by successive sampling, then -1.

    ``weights`` (float64, length ``M > cur.max()``, non-negative, ``weights[0] > 0``) is shared by all rows.
    """
    rows = cur.shape[0]
    weights = np.asarray(weights, dtype=np.float64)
    out = np.full((rows, S), -1, dtype=np.int64)
    takes_all = n == cur + 1
    out[takes_all] = most_recent(cur[takes_all], n[takes_all], S)
    cdf = np.cumsum(weights, dtype=np.float64)
    rcum = np.concatenate([np.cumsum(weights[::-1])[::-1], [0.0]])
    positive = bool(np.all(weights > 0))
    log_w = None
    drawn = np.flatnonzero(~takes_all)  # these rows have n == S < cur + 1
    cur_d = cur[drawn]
    # The drawn rows' slots, slot-major and as narrow as the blocks allow (block ids < M): a slot of every row is one
    # contiguous array, so a round over all rows tests its draws against the earlier slots without gathering them,
    # and a partial round gathers a quarter of the bytes. Rows are positions in ``drawn`` here; the random numbers
    # and every draw are those of the row-major int64 loop this replaces (docs/METHOD.md, CI's own time).
    taken = np.full((S, drawn.size), -1, dtype=np.int16 if cdf.size <= np.iinfo(np.int16).max else np.int32)
    live: np.ndarray = np.arange(drawn.size)  # positions still drawn slot by slot (the others were raced to the end)

    def prior(pos: np.ndarray, upto: int) -> np.ndarray:
        """int64 ``[len(pos), upto]``: the first ``upto`` slots of the rows at ``pos``."""
        return np.ascontiguousarray(taken[:upto, pos].T, dtype=np.int64)

    for slot in range(S):
        pending, before, stalled = live, live.size, False
        for round_ in range(MAX_REJECTION_ROUNDS):
            c = cur_d[pending]
            u = rng.random(pending.shape[0]) * cdf[c]
            b = np.minimum(np.searchsorted(cdf, u, side="right"), c)
            narrow = b.astype(taken.dtype)
            if pending.size == taken.shape[1]:  # every row, in order: slot j of them is taken[j] itself
                clash = np.zeros(pending.size, dtype=bool)
                for j in range(slot):
                    clash |= taken[j] == narrow
            else:
                clash = (taken[:slot, pending] == narrow).any(axis=0)
            taken[slot, pending[~clash]] = narrow[~clash]
            pending = pending[clash]
            if pending.size == 0:
                break
            if pending.size > STALL_FRACTION * before and (
                    pending.size * (int(cur_d[pending].max()) + 1) > (FIRST_ROUND_STALL_BUDGET if round_ == 0
                                                                      else STALL_BUDGET)):
                stalled = True
                break  # rejection has stalled on a large pending set: finish these rows with the race
            before = pending.size
        if pending.size == 0:
            continue
        if not stalled and positive and pending.size * (int(cur_d[pending].max()) + 1) <= LEGACY_FALLBACK_BUDGET:
            if log_w is None:
                log_w = np.log(weights)
            taken[slot, pending] = _legacy_gumbel(rng, prior(pending, slot), cur_d[pending], log_w)
        else:  # too many pending rows for the Gumbel-max matrix: finish these rows in one exact race
            taken[slot:, pending] = finish_rows(rng, prior(pending, slot), cur_d[pending], S - slot, weights, rcum).T
            live = live[~np.isin(live, pending, assume_unique=True)]
            if stalled and slot + 1 < S and live.size:  # the rows that got this slot would stall next: race too
                taken[slot + 1:, live] = finish_rows(rng, prior(live, slot + 1), cur_d[live], S - slot - 1, weights,
                                                     rcum).T
                live = live[:0]
    out[drawn] = taken.T
    return out


