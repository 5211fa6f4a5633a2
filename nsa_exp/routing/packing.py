"""Packed variable-length batches: routings per document of a ``packing`` config section.

NSA is trained on packed documents: one row of ``T`` tokens (``B = 1``) whose documents start at
``cu_seqlens[i]`` (int32, ``cu_seqlens[0] = 0``, ``cu_seqlens[-1] = T``, strictly increasing), each
restarting its causal block ids at 0 — FLA's ``cu_seqlens`` path (``fla/ops/nsa/parallel.py``, 0a9b9f2).

A ``packing`` section is one of (its documents: :func:`nsa_exp.core.config.cu_seqlens`, a rule of the config):

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

>>> packed_closed_form_edges(H=1, S=2, block_size=2, cu_seqlens=np.array([0, 4, 8]))
12
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core.config import Pattern, Shape
from ..core.families import family
from ..errors import UserError
from .patterns import generate_routing, routing_violations

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
    # '+' of an exponent (1e+300) failed the point name's pattern before the packing's own rule named its field
    return f"{packing.get('distribution')}{mean:g}s{sigma:g}seed{packing.get('seed')}".replace("+", "")
