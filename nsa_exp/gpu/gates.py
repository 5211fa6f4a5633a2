"""Gates every GPU task passes before it measures anything. Each returns a record or raises
:class:`GateFailure` with the fix in its message.

``environment`` (the seed's env vars) -> ``gpu`` (an H100 unless ``--allow-gpu``) -> ``versions``
(triton 3.6.0) -> ``fla_sources`` (imported files hash to the pinned commit; one FLA install) ->
``routings`` (invariants + equal-edge gate at the config's shape).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from ..core.config import Config
from ..core.environment import REQUIRED_TRITON, no_gpu, require_device_node, require_env
from ..core.families import family
from ..errors import GateFailure, UserError
from ..io.progress import progress
from ..routing.edges import equal_edge_gate
from ..routing.files import validate_block_indices
from ..routing.packing import generate_packed_routing, packed_routing_violations
from ..routing.patterns import generate_routing, routing_violations
from . import topk  # noqa: F401 - registers fla-topk's routing (every arm's equal-edge gate may generate it)
from .fla_source import verify_imported_fla


def environment_gate() -> dict[str, Any]:
    return {"env": require_env()}


def gpu_gate(required_name: str, allow_gpu: bool) -> dict[str, Any]:
    """A CUDA GPU is visible (an NVIDIA device node, :func:`~nsa_exp.core.environment.require_device_node`, then
    torch) and its name contains ``required_name`` (unless ``allow_gpu``)."""
    require_device_node(required_name)
    if not torch.cuda.is_available():
        raise no_gpu(required_name, "to torch")
    name = torch.cuda.get_device_name(0)
    if required_name not in name and not allow_gpu:
        raise GateFailure(f"gpu: found {name!r}, the experiment is defined on an {required_name}; "
                          f"pass --allow-gpu to run anyway (the report will record it)")
    return {"name": name, "required": required_name, "allow_gpu": allow_gpu,
            "matches_required": required_name in name}


def versions_gate() -> dict[str, Any]:
    import triton  # noqa: PLC0415 - FLA/triton only after the env gate

    if triton.__version__ != REQUIRED_TRITON:
        raise GateFailure(f"versions: triton {triton.__version__} is installed; FLA 0a9b9f2 is pinned with "
                          f"triton=={REQUIRED_TRITON}: pip install triton=={REQUIRED_TRITON}")
    return {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda}


def fla_sources_gate() -> dict[str, Any]:
    """Import FLA's NSA path (through our launcher) and verify every imported file's blob hash."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FLA warns that flash-attn is absent; NSA selection never uses it
        import fla.ops.nsa.naive  # noqa: F401, PLC0415 - FLA only after the env gate

        # imports fla.ops.nsa.parallel, fla.ops.utils, fla.ops.attn
        from . import launcher  # noqa: F401, PLC0415 - FLA only after the env gate
    return verify_imported_fla()


def routings_gate(config: Config, files: Mapping[str, np.ndarray] | None = None,
                  ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Generate every pattern at the config's shape (per document when packed); invariants and the
    equal-edge gate (packed closed form when packed) must hold.

    A pattern whose spec has ``equal_edges=False`` (fla-topk) and the already validated routing
    ``files`` (``{"file:<stem>": block_indices}``) are checked for range, causality and duplicates only;
    their edges are counted and recorded under ``exempt``, never gated."""
    cu, seed = config.cu_seqlens, config.seeds.routing
    if cu is not None and (files or any(not family(p.name).equal_edges for p in config.patterns)):
        raise UserError("config.packing: routing files and fla-topk are not supported with a packing yet")
    routings = {p.name: generate_routing(p, config.shape, seed) if cu is None else
                generate_packed_routing(p, config.shape, seed, cu) for p in config.patterns}
    exempt = [n for n in routings if not family(n).equal_edges] + list(files or {})
    for name, bi in routings.items():
        if name in exempt:
            try:
                validate_block_indices(bi, config.shape, f"routing {name}")
            except UserError as exc:
                raise GateFailure(f"{exc}; do not time this") from None
            continue
        problems = (routing_violations(bi, config.shape) if cu is None else
            packed_routing_violations(bi, config.shape, cu))
        if problems:
            raise GateFailure(f"routing {name}: {problems[0]}; the generator is broken (do not time this)")
    routings.update(files or {})
    return equal_edge_gate(routings, config.shape, cu, exempt), routings


def run_gates(config: Config, allow_gpu: bool, strict: bool = True,
              files: Mapping[str, np.ndarray] | None = None,
              passed: Callable[[str], None] | None = None) -> tuple[list[dict[str, Any]], dict]:
    """Run every gate in order. ``strict`` raises at the first failure; otherwise each failure is
    recorded and the rest still run. ``files``: validated routing files timed beside the patterns
    (:func:`routings_gate`). ``passed(name)`` is called after each gate that passed (the engine starts drawing
    the inputs once ``gpu`` has). Returns (gate records, routings)."""
    records: list[dict[str, Any]] = []
    routings: dict[str, np.ndarray] = {}

    def routings_only() -> dict[str, Any]:
        record, generated = routings_gate(config, files)
        routings.update(generated)
        return record

    steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("environment", environment_gate),
        ("gpu", lambda: gpu_gate(config.required_gpu, allow_gpu)),
        ("versions", versions_gate),
        ("fla_sources", fla_sources_gate),
        ("equal_edges", routings_only),
    ]
    for name, step in steps if strict else progress(steps, "check: running the gates", unit="gate"):
        try:
            records.append({"name": name, "passed": True, "detail": step()})
            if passed is not None:
                passed(name)
        except GateFailure as exc:
            if strict:
                raise
            records.append({"name": name, "passed": False, "message": str(exc)})
    return records, routings


def gate_detail(records: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for rec in records:
        if rec["name"] == name:
            return rec.get("detail", {})
    return {}
