"""The peers of FLA's NSA selection attention (issue 31): one declarative row per implementation ``peer-bench``
times on the same routings, inputs and protocol, and the ones it lists without timing them, with the reason.

Each timed peer is called through its public API (never a copied or modified kernel) in three stages:
``fwd`` (the forward, recording the autograd graph as training does), ``bwd`` (``torch.autograd.grad`` of this
round's forward output with bench's dO) and ``fwd_bwd`` (both in one timed region). The gpu tier binds each row to
its calls by name (:mod:`nsa_exp.gpu.peers`); the work each one computes for a routing is counted in the routing
tier (:func:`nsa_exp.routing.block_mask.score_pairs`, by ``work``).

>>> [p.name for p in PEERS], PEER_STAGES
(['fla', 'flex', 'flex-tile', 'sdpa-dense'], ('fwd', 'bwd', 'fwd_bwd'))
>>> peer("flex-tile").tile_shared_only, peer("sdpa-dense").routing_free
(True, True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import UserError

#: The stages timed per peer and routing, in call order (each round: fwd, then bwd of that forward, then both).
PEER_STAGES: tuple[str, ...] = ("fwd", "bwd", "fwd_bwd")
#: The stage a peer's skew penalty and its ratio to dense attention are read from.
PEER_BACKWARD = "bwd"
#: The peer every other is compared with, and that must reproduce bench's ``full_bwd``.
REFERENCE_PEER = "fla"
#: The routing-free cell's name (dense attention computes every causal pair, whatever the routing).
DENSE_CELL = "dense"


@dataclass(frozen=True)
class Peer:
    """One implementation: its name, what it calls, how its work is counted (a key of
    :func:`nsa_exp.routing.block_mask.score_pairs`), and which routings it runs."""

    name: str
    title: str
    calls: str                      # the public API it is timed through
    work: str                       # "fla", "block_mask" or "dense"
    tile_shared_only: bool = False  # runs only routings whose tiles share one selection (full blocks)
    routing_free: bool = False      # one cell for every routing (dense attention)


PEERS: tuple[Peer, ...] = (
    Peer("fla", "FLA parallel_nsa (pinned)", "fla.ops.nsa.parallel.parallel_nsa at commit 0a9b9f2", "fla"),
    Peer("flex", "FlexAttention, per-token port", "torch.nn.attention.flex_attention.flex_attention (torch.compile), "
         "BlockMask.from_kv_blocks: every 64-query tile's union of selected blocks as partial blocks, a mask_mod "
         "admitting exactly the selected (query, block) pairs and causality", "block_mask"),
    Peer("flex-tile", "FlexAttention, tile-shared blocks", "flex_attention (torch.compile) with the tile's selected "
         "blocks below the diagonal as full blocks and the diagonal causal", "block_mask", tile_shared_only=True),
    Peer("sdpa-dense", "dense causal SDPA", "torch.nn.functional.scaled_dot_product_attention(is_causal=True, "
         "enable_gqa=True) under the cuDNN backend (FLASH and EFFICIENT refuse head dims 192/128)", "dense",
         routing_free=True),
)
PEER_NAMES: tuple[str, ...] = tuple(p.name for p in PEERS)

#: Peers considered and not timed, with the reason (recorded in every peer result). Read from each release's public
#: API in its PyPI wheel (file and line cited) and called on the H200 through it (``scripts/probe_not_timed.py``,
#: docs/PROVENANCE.md): neither can run the routings under test at the primary shape, so neither is timed.
NOT_TIMED: dict[str, str] = {
    "flash-sparse-attn": "2.0.6 (Triton): its public API, flash_sparse_attn_func(query, key, value, is_causal, ..., "
                         "softmax_threshold, ...), takes no selection (no block indices, no mask): its kernel skips a "
                         "key block whose scores fall under a softmax threshold, so it cannot be given the routings "
                         "under test (ops/triton/interface.py:1326, activations.py online_sparse_softmax); on the H200 "
                         "it does not even import (it needs triton_kernels, which it does not declare)",
    "native-sparse-attention-pytorch": "0.2.3 (a Triton selection kernel): native_sparse_attend refuses the primary "
                                       "shape, asserting v's shape equal to k's (V=128, K=192) and head dim <= 128 "
                                       "(triton_native_sparse_attention.py:623-624; on the H200 it raises at K=192, "
                                       "and runs at K=V=128); its backward also casts dO to float16 (:1897)",
    "Liger-Kernel NSA": "no NSA in a release (PR #1288 open)",
}

#: The lists earlier versions of the peer arm recorded (before the reasons were read from each wheel's API):
#: ``validate`` accepts a committed result that carries one of them or :data:`NOT_TIMED`.
NOT_TIMED_EARLIER: tuple[dict[str, str], ...] = (
    {"flash-sparse-attn": "pure-Python wheel on PyPI (2.0.6, Triton), not installed on the GPU host (no network "
                          "there) and not carried in this version",
     "native-sparse-attention-pytorch": "pure-Python wheel on PyPI (0.2.3, a Triton selection kernel), not installed "
                                        "on the GPU host and not carried in this version",
     "Liger-Kernel NSA": "no NSA in a release (PR #1288 open)"},
)


def peer(name: str, where: str = "--peers") -> Peer:
    """The row of ``name``; one UserError line naming ``where`` and the choices otherwise."""
    for p in PEERS:
        if p.name == name:
            return p
    raise UserError(f"{where}: unknown peer {name!r}; choose from {', '.join(PEER_NAMES)}")


def cell_name(routing: str, peer_name: str) -> str:
    """The round loop's cell of ``peer_name`` on ``routing`` (the dense peer's one cell: :data:`DENSE_CELL`).

    >>> cell_name("zipf", "flex"), cell_name("zipf", "sdpa-dense")
    ('zipf|flex', 'dense')
    """
    return DENSE_CELL if peer(peer_name).routing_free else f"{routing}|{peer_name}"


#: Why a tile-shared-only peer is not timed on a routing whose tiles do not share one selection.
NOT_TILE_SHARED = "not tile-shared: full blocks would compute pairs it never selects"


def skip_reason(peer_name: str, routing: str | None, tile_shared: bool,
                oracle_failures: Mapping[str, Sequence[str]]) -> str | None:
    """Why ``peer-bench`` does not time ``peer_name`` on ``routing`` (None for the routing-free cell), or None when
    it does: a tile-shared-only peer on a routing that is not tile-shared, or a cell that failed the oracle check
    (``oracle_failures``: ``{cell: [lines]}``). The arm and ``validate`` both ask this one rule.

    >>> skip_reason("flex-tile", "uniform", False, {}) == NOT_TILE_SHARED
    True
    >>> skip_reason("flex", "zipf", False, {"zipf|flex": ["dk rel_l2 0.5 > 0.02"]})
    'failed the oracle check: dk rel_l2 0.5 > 0.02'
    >>> skip_reason("sdpa-dense", None, False, {}) is None
    True
    """
    row = peer(peer_name)
    if row.tile_shared_only and routing is not None and not tile_shared:
        return NOT_TILE_SHARED
    failed = oracle_failures.get(cell_name(routing or "", peer_name))
    return None if not failed else "failed the oracle check: " + "; ".join(failed)
