"""The ``check_report`` kind: the gates' report (results/reports/<config>_check.json). Its builder (:func:`build`;
``gpu/check.run_check`` calls it) and its checks (:func:`checks`), in one module.

- ``check_report_recompute``: ``passed`` = every gate passed; every gate of the protocol recorded, in order, a
  failed one with its message; with the config at hand the required GPU, the patterns and the closed form of the
  equal-edge gate are the config's.
- the run record and the config's provenance every GPU document gets.
"""

from __future__ import annotations

from typing import Any

from ..core.config import Config
from ..core.kinds import schema_version
from ..core.protocol import GATE_NAMES
from . import record_checks
from .checks import Add, Context, Problems, guarded
from .record_checks import config_of, run_record
from .routing_checks import edge_gate_problems

KIND = "check_report"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def check_report_recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    gates = doc["gates"]
    names = [g["name"] for g in gates]
    if names != list(GATE_NAMES):
        problems.append(("$.gates", f"{names}: check runs every gate {list(GATE_NAMES)}"))
    passed = all(g["passed"] for g in gates)
    if doc["passed"] != passed:
        problems.append(("$.passed", f"{doc['passed']}, but the gates {'all passed' if passed else 'did not'}: "
                         f"{[n for n, g in zip(names, gates, strict=True) if not g['passed']]}"))
    problems += [(f"$.gates[{i}].message", "a failed gate carries its message") for i, g in enumerate(gates)
                 if not g["passed"] and not g.get("message")]
    config = config_of(doc, ctx)
    if config is not None:
        for i, g in enumerate(gates):
            d = g.get("detail", {})
            if g["name"] == "gpu" and g["passed"] and d.get("required") != config.get("gpu", {}).get("required_name"):
                problems.append((f"$.gates[{i}].detail.required", f"{d.get('required')!r}, the config requires "
                                 f"{config.get('gpu', {}).get('required_name')!r}"))
        problems += edge_gate_problems(doc, config, ctx)
    add("check_report_recompute", problems)


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    guarded("check_report_recompute", add, check_report_recompute, doc, add, ctx)
    run_record(doc, add, ctx)
    guarded("config_provenance", add, record_checks.config_provenance, doc, add, ctx)


def build(*, config: Config, allow_gpu: bool, gates: list[dict[str, Any]], metadata: dict[str, Any]) -> dict[str, Any]:
    """The report of one ``check``: every gate (non-strict: each failure listed), ``passed`` = every gate
    passed, the host's metadata (with the GPU's identity when one was seen)."""
    return {"schema_version": schema_version("check_report"), "kind": "check_report", "config_name": config.name,
            "config_path": config.source, "passed": all(g["passed"] for g in gates), "allow_gpu": allow_gpu,
            "gates": gates, "metadata": metadata}
