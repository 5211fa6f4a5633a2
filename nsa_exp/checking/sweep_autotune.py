"""The ``sweep_autotune`` kind: the autotune configs a sweep's first point tuned, which its other points pin
(results/sweeps/<sweep>/_autotune.json). Its record (:class:`SweepAutotune`, from which its schema file is
generated), its builder (:func:`build`; ``gpu/sweep_point.SweepPointArm`` calls it) and its checks (:func:`checks`:
``sweep_autotune_configs``, each stage's config one of FLA's, the Stage table's ``autotune_space``), in one module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from ..core.kinds import schema_version
from ..core.records import Keywords, Record
from .autotune_checks import autotune_configs
from .checks import Add, Context

KIND = "sweep_autotune"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


@dataclass(frozen=True)
class AutotuneConfig(Record):
    """One of FLA's autotune configs as the bench result records it (``triton.Config``: its kwargs, warps, stages);
    typed, so that ``num_warps: true`` or ``4.0`` is no config (both matched FLA's 1 and 4: a re-attacker,
    2026-12-07)."""

    kwargs: dict[str, int]
    num_warps: Annotated[int, Keywords(minimum=1)]
    num_stages: Annotated[int, Keywords(minimum=0)]


@dataclass(frozen=True)
class SweepAutotune(Record):
    """The document: ``best_config``, ``{autotuned kernel's stage: FLA's chosen config}``, every autotuned stage."""

    schema_version: str
    kind: str
    best_config: Annotated[dict[str, AutotuneConfig], Keywords(**{"x-vocabulary": {"required": "stages.autotuned"}})]


RECORD = SweepAutotune


def build(best_config: dict[str, Any]) -> dict[str, Any]:
    """The document of ``best_config`` (``{autotuned kernel's stage: FLA's chosen config}``)."""
    return SweepAutotune(schema_version(KIND), KIND, {k: AutotuneConfig(**v) for k, v in best_config.items()}).to_json()


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    autotune_configs(doc, add, "sweep_autotune_configs")
