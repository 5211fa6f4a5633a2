"""Every named value set the schemas enumerate, by the name a schema cites it with.

A schema node carrying ``"x-vocabulary": {"enum": "stages"}`` has its ``enum`` generated from
:data:`VOCABULARY` ``["stages"]`` (likewise ``required``; ``properties`` gets one entry per name, each the
node's common property schema). ``python -m nsa_exp schemas --write`` regenerates schemas/ from here
and a test fails when they drift, so a registered family or a new stage is always writable.

>>> VOCABULARY["stages.autotuned"]()
['selection_fwd', 'dq_core', 'dkv_core']
>>> "hot-block" in VOCABULARY["families"]()
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import peers, protocol, stages
from .families import FAMILIES

#: name -> the values, computed when asked (a family registered at run time is included).
VOCABULARY: dict[str, Callable[[], list[Any]]] = {
    "stages": lambda: list(stages.STAGE_NAMES),
    "stages.required": lambda: list(stages.LEGACY_STAGE_NAMES),
    "stages.autotuned": lambda: list(stages.AUTOTUNED_STAGES),
    "stages.sweepable": lambda: list(stages.SWEEPABLE_STAGES),
    "stage_lists": stages.recorded_stage_lists,
    "stages.release": lambda: list(stages.RELEASE_STAGE_LISTS[-1]),
    "stages.release.required": lambda: list(stages.RELEASE_STAGES),
    "stage_lists.release": lambda: [list(s) for s in stages.RELEASE_STAGE_LISTS],
    "families": lambda: list(FAMILIES),
    "round_orders": lambda: list(protocol.ORDER_MODES),
    "flush_policies": lambda: list(protocol.FLUSH_POLICIES),
    "stop_reasons": lambda: list(protocol.STOP_REASONS),
    "stop_sources": lambda: list(protocol.STOP_SOURCES),
    "stop_drops": lambda: list(protocol.STOP_DROPS),
    "autotune_modes": lambda: list(protocol.AUTOTUNE_MODES),
    "gates": lambda: list(protocol.GATE_NAMES),
    "gates.release": lambda: list(protocol.RELEASE_GATE_NAMES),
    "whatif_layouts": lambda: list(protocol.WHATIF_LAYOUTS),
    "peers": lambda: list(peers.PEER_NAMES),
    "stages.peer": lambda: list(peers.PEER_STAGES),
}
