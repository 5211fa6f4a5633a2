"""Packed variable-length batches: a ``packing`` config section -> ``cu_seqlens``; routings per document.

NSA is trained on packed documents: one row of ``T`` tokens (``B = 1``) whose documents start at
``cu_seqlens[i]`` (int32, ``cu_seqlens[0] = 0``, ``cu_seqlens[-1] = T``, strictly increasing), each
restarting its causal block ids at 0 — FLA's ``cu_seqlens`` path (``fla/ops/nsa/parallel.py``, 0a9b9f2).

A ``packing`` section is one of:

- ``{"documents": L}``: ``T / L`` documents of ``L`` tokens (``L`` divides ``T``);
- ``{"lengths": [L0, L1, ...]}``: those documents, in that order (they sum to ``T``);
- ``{"distribution": "lognormal", "mean": m, "sigma": s, "seed": k}``: lengths drawn from a seeded
  log-normal whose *mean* is ``m`` tokens (``mu = ln m - s^2/2``), rounded to a multiple of
  ``block_size`` and clipped to ``[block_size, T]``, drawn until they cover ``T``; the last document
  is cut to what is left.

Rule (enforced, one line naming the field otherwise): every document length is a positive multiple
of ``block_size``. FLA handles partial blocks, but whole blocks keep the packed closed form exact
(:func:`packed_closed_form_edges`) and every CSR row a whole block.

Routings: each document gets the registered generator at its own length (document-local block ids,
``n(t) = min(S, t_local // BS + 1)`` slots); document 0 uses the routing seed itself (so one document of
``T`` reproduces the dense routing), document ``i > 0`` a seed derived from ``(seed, i)``.

>>> cu_seqlens({"documents": 64}, T=256, block_size=32).tolist()
[0, 64, 128, 192, 256]
>>> packed_closed_form_edges(H=1, S=2, block_size=2, cu_seqlens=np.array([0, 4, 8]))
12
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core.config import Pattern, Shape
from ..core.families import family
from ..errors import UserError
from .patterns import generate_routing, routing_violations

MAX_DOCUMENTS = 1 << 20


def _int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise UserError(f"{field}: {value!r} is not an integer")
    return int(value)


def _check_lengths(lengths: np.ndarray, T: int, block_size: int, field: str) -> None:
    bad = np.flatnonzero((lengths <= 0) | (lengths % block_size != 0))
    if bad.size:
        i = int(bad[0])
        raise UserError(f"{field}[{i}]: {int(lengths[i])} is not a positive multiple of block_size {block_size}")
    if int(lengths.sum()) != T:
        raise UserError(f"{field}: the lengths sum to {int(lengths.sum())}, not T={T}")


MAX_SIGMA = 10.0  #: beyond it exp(N(mu, sigma)) overflows float64 for a useful share of draws


def _positive(entry: Mapping[str, Any], key: str, where: str) -> float:
    """``entry[key]``, a finite number > 0 (an int stays an int); UserError naming ``where.key`` otherwise."""
    v = entry.get(key)
    if v is None:
        raise UserError(f"{where}.{key}: missing; a lognormal packing needs mean, sigma and seed")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v <= 0:
        raise UserError(f"{where}.{key}: {v!r} must be a finite number > 0")
    return v


def _lognormal(entry: Mapping[str, Any], T: int, block_size: int, where: str) -> np.ndarray:
    if entry.get("distribution") != "lognormal":
        raise UserError(f"{where}.distribution: {entry.get('distribution')!r}; only 'lognormal' is supported")
    mean, sigma = _positive(entry, "mean", where), _positive(entry, "sigma", where)
    if mean > T:  # documents are clipped to [block_size, T]: a larger mean is one document of T, say so
        raise UserError(f"{where}.mean: {mean!r} exceeds T={T}; documents are clipped to [block_size, T]")
    if sigma > MAX_SIGMA:
        raise UserError(f"{where}.sigma: {sigma!r} exceeds {MAX_SIGMA} (log-normal draws overflow; lengths are "
                        "clipped to [block_size, T] anyway)")
    seed = _int(entry.get("seed"), f"{where}.seed")
    if seed < 0:
        raise UserError(f"{where}.seed: {seed} must be >= 0")
    rng = np.random.default_rng(seed)
    mu = np.log(float(mean)) - float(sigma) ** 2 / 2
    draws = rng.lognormal(mu, float(sigma), size=T // block_size)  # at most T/BS documents of >= BS tokens
    lengths = np.clip(np.rint(draws / block_size).astype(np.int64) * block_size, block_size, T)
    ends = np.cumsum(lengths)
    n = int(np.searchsorted(ends, T)) + 1
    lengths = lengths[:n]
    lengths[-1] -= int(ends[n - 1]) - T
    return lengths


def document_lengths(entry: Mapping[str, Any], T: int, block_size: int, where: str = "config.packing") -> np.ndarray:
    """int64 document lengths of a ``packing`` section (see the module docstring); UserError naming the field."""
    if not isinstance(entry, Mapping):
        raise UserError(f"{where}: {entry!r} must be an object (documents, lengths or distribution)")
    kinds = [k for k in ("documents", "lengths", "distribution") if k in entry]
    if len(kinds) != 1:
        raise UserError(f"{where}: give exactly one of documents, lengths, distribution (got {sorted(entry)})")
    allowed = {"documents": {"documents"}, "lengths": {"lengths"},
               "distribution": {"distribution", "mean", "sigma", "seed"}}[kinds[0]]
    extra = sorted(set(entry) - allowed)
    if extra:
        raise UserError(f"{where}.{extra[0]}: not a field of a {kinds[0]!r} packing")
    if kinds[0] == "documents":
        L = _int(entry["documents"], f"{where}.documents")
        if L <= 0 or L % block_size or T % L:
            raise UserError(f"{where}.documents: {L} must be a positive multiple of block_size {block_size} "
                            f"that divides T={T}")
        return np.full(T // L, L, dtype=np.int64)
    if kinds[0] == "lengths":
        raw = entry["lengths"]
        if not isinstance(raw, (list, tuple)) or not raw or len(raw) > MAX_DOCUMENTS:
            raise UserError(f"{where}.lengths: must be a non-empty list of document lengths")
        values = [_int(v, f"{where}.lengths[{i}]") for i, v in enumerate(raw)]
        for i, v in enumerate(values):  # as Python ints, before numpy: 10**30 cannot overflow, 4 x 2**62 cannot wrap
            if not 0 < v <= T:
                raise UserError(f"{where}.lengths[{i}]: {v} is not a document length in 1..T={T}")
        if sum(values) != T:
            raise UserError(f"{where}.lengths: the lengths sum to {sum(values)}, not T={T}")
        lengths = np.array(values, dtype=np.int64)
        _check_lengths(lengths, T, block_size, f"{where}.lengths")
        return lengths
    lengths = _lognormal(entry, T, block_size, where)
    _check_lengths(lengths, T, block_size, f"{where}.lengths")
    return lengths


def cu_seqlens(entry: Mapping[str, Any], T: int, block_size: int, where: str = "config.packing") -> np.ndarray:
    """int32 ``[N + 1]`` document boundaries (0, ..., T; strictly increasing) of a ``packing`` section."""
    return np.concatenate([[0], np.cumsum(document_lengths(entry, T, block_size, where))]).astype(np.int32)


#: the dK/dV program order of each path (fla/ops/nsa/parallel.py and csr.py at 0a9b9f2)
PROGRAM_ORDER = {"dense": "(b*H + h)*M + s (head-major)", "varlen": "(global_block)*H + h (chunk-major)"}


def packing_record(cu: np.ndarray, closed_form_edges: int) -> dict[str, Any]:
    """What a result records about a packing (schema ``packing`` in result/sweep_point): document count
    and lengths, ``cu_seqlens`` (int32, as a list) and the sha256 of its bytes, the packed closed-form
    edges and the dK/dV program order used."""
    cu = np.asarray(cu, dtype=np.int32)
    lengths = np.diff(cu)
    return {"documents": int(lengths.size), "min_length": int(lengths.min()), "max_length": int(lengths.max()),
            "cu_seqlens": cu.tolist(), "cu_seqlens_sha256": hashlib.sha256(cu.tobytes()).hexdigest(),
            "closed_form_edges": int(closed_form_edges), "program_order": PROGRAM_ORDER["varlen"]}


def document_seed(seed: int, doc: int) -> int:
    """Routing seed of document ``doc``: the routing seed itself for document 0, else derived from both."""
    return seed if doc == 0 else int(np.random.SeedSequence([seed, doc]).generate_state(1)[0])


def generate_packed_routing(pattern: Pattern, shape: Shape, seed: int, cu: np.ndarray) -> np.ndarray:
    """block_indices int32 ``[1, T, H, S]``: ``pattern`` generated per document, document-local block ids.

    Raises:
        ValueError: ``shape.B != 1`` (FLA's varlen path takes one packed row) or ``cu`` not ending at ``T``.
        UserError: an external pattern (fla-topk: FLA's top-k on the dense layout), not packed yet.
    """
    if family(pattern.name).external is not None:
        raise UserError(f"config.packing: pattern {pattern.name!r} is generated on the dense layout only; "
                        "drop the packing or the pattern")
    cu = np.asarray(cu, dtype=np.int64)
    if shape.B != 1 or cu[0] != 0 or cu[-1] != shape.T:
        raise ValueError(f"packed routing needs B=1 and cu_seqlens 0..T={shape.T} (got B={shape.B}, {cu[[0, -1]]})")
    out = np.empty((1, shape.T, shape.H, shape.S), dtype=np.int32)
    cache: dict[tuple[int, int], np.ndarray] = {}
    for i, (start, end) in enumerate(zip(cu[:-1], cu[1:], strict=True)):
        key = (int(end - start), document_seed(seed, i))
        if key not in cache:
            cache[key] = generate_routing(pattern, replace(shape, T=key[0]), key[1])
        out[:, start:end] = cache[key]
    return out


def packed_routing_violations(block_indices: np.ndarray, shape: Shape, cu: np.ndarray) -> list[str]:
    """:func:`nsa_exp.routing.patterns.routing_violations` of every document at its own length (local ids)."""
    if tuple(block_indices.shape) != (1, shape.T, shape.H, shape.S):
        return [f"shape is {list(block_indices.shape)}, expected {[1, shape.T, shape.H, shape.S]} ([1,T,H,S])"]
    for i, (start, end) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)):
        problems = routing_violations(block_indices[:, start:end], replace(shape, T=end - start))
        if problems:
            return [f"document {i} (tokens {start}..{end - 1}): {problems[0]}"]
    return []


def document_edges(length: np.ndarray, S: int, block_size: int) -> np.ndarray:
    """Edges per (document, KV head): ``BS * sum_{j<M_d} min(S, j + 1)`` with ``M_d = length / BS``."""
    M = np.asarray(length, dtype=np.int64) // block_size
    k = np.minimum(M, S)
    return block_size * (k * (k + 1) // 2 + (M - k) * S)


def packed_closed_form_edges(H: int, S: int, block_size: int, cu_seqlens: npt.ArrayLike) -> int:
    """``H * sum_docs sum_{t_local} min(S, t_local // BS + 1)`` (docs/METHOD.md derives it)."""
    return int(H * document_edges(np.diff(np.asarray(cu_seqlens, dtype=np.int64)), S, block_size).sum())


def packing_token(packing: dict[str, Any] | None) -> str:
    """A file-name-safe label of a ``packing`` section (``dense`` for None).

    >>> packing_token({"documents": 8192}), packing_token(None)
    ('docs8192', 'dense')
    >>> packing_token({"distribution": "lognormal", "mean": 4096, "sigma": 1.0, "seed": 0})
    'lognormal4096s1seed0'
    """
    if packing is None:
        return "dense"
    if "documents" in packing:
        return f"docs{packing['documents']}"
    if "lengths" in packing:
        return "lens" + hashlib.sha256(json.dumps(packing["lengths"]).encode()).hexdigest()[:8]
    mean, sigma = packing.get("mean", 0), packing.get("sigma", 0)
    return f"{packing.get('distribution')}{mean:g}s{sigma:g}seed{packing.get('seed')}"
