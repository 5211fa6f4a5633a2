"""The ``sweep_autotune`` kind: the autotune configs a sweep's first point tuned, which its other points pin
(results/sweeps/<sweep>/_autotune.json). Its builder (:func:`build`; ``gpu/sweep_point.SweepPointArm`` calls it)
and its checks (:func:`checks`: ``sweep_autotune_configs``, each stage's config one of FLA's, the Stage table's
``autotune_space``), in one module.
"""

from __future__ import annotations

from typing import Any

from ..core.kinds import schema_version
from .autotune_checks import autotune_configs
from .checks import Add, Context

KIND = "sweep_autotune"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def build(best_config: dict[str, Any]) -> dict[str, Any]:
    """The document of ``best_config`` (``{autotuned kernel's stage: FLA's chosen config}``)."""
    return {"schema_version": schema_version("sweep_autotune"), "kind": "sweep_autotune", "best_config": best_config}


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    autotune_configs(doc, add, "sweep_autotune_configs")
