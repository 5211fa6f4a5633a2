"""The model commands' arguments (``calibrate``, ``predict``, ``model-validate``), registered on the CLI
without importing the model's handlers (:mod:`.commands`) until one of them runs."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from ..core.protocol import DISPATCH_ORDERS
from ..errors import UserError
from ..io.strict_json import parse_strict

DEFAULT_KERNELS = "results/studies/h200_method_study_flush.raw.json"
DEFAULT_NCU = "results/ncu/e1_h100_local-vs-sink-heavy_dkv_core.json"


def add_commands(command: Any, common: argparse.ArgumentParser, bind: Callable[[str, str], Any]) -> None:
    """Register ``calibrate``, ``predict`` and ``model-validate`` through cli's ``command`` helper; ``bind(module,
    name)`` gives a handler imported when its command runs (so ``--help`` and the other commands stay light)."""
    handler = "nsa_exp.model.commands"
    p = command("calibrate", bind(handler, "calibrate"),
                "CPU only: fit the dK/dV makespan model to designed calibration routings", common)
    p.add_argument("--points", nargs="+", required=True, help="result files or sweep folders (*.json)")
    p.add_argument("--set", required=True, help="calibration-set config naming the designed routings")
    p.add_argument("--output", help="calibration path (default results/model/<gpu>_<config>.json)")
    p.add_argument("--kernels", default=DEFAULT_KERNELS, help="study JSON with kernels.dkv_core compiled metadata")
    p.add_argument("--ncu", default=DEFAULT_NCU, help="ncu summary to cross-check occupancy ('' for none)")
    p = command("predict", bind(handler, "predict_command"),
                "CPU only: predicted dK/dV ms of a routing from a calibration", common)
    p.add_argument("--calibration", required=True)
    p.add_argument("--pattern", help="a registered pattern name")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="pattern parameter (repeatable)")
    p.add_argument("--T", type=int, help="sequence length (default the calibration's)")
    p.add_argument("--routing-file", help="block_indices .npy/.npz/.pt [B,T,H,S]")
    p.add_argument("--packing", help="packed documents, a config packing section as JSON (e.g. "
                   "'{\"documents\": 8192}'): varlen program order; a .npz routing may carry cu_seqlens instead")
    p.add_argument("--order", choices=DISPATCH_ORDERS, default="program-id")
    p.add_argument("--json", action="store_true")
    p = command("model-validate", bind(handler, "model_validate"),
                "CPU only: predicted vs measured dK/dV for non-calibration points", common)
    p.add_argument("--calibration", required=True)
    p.add_argument("--points", nargs="+", required=True, help="result files or sweep folders (*.json)")
    p.add_argument("--output", help="validation path (default results/model/<calibration>_validation.json)")
    p.add_argument("--max-fanin", type=int, default=4096, help="F of the modelled split what-if (0: none)")
    p.add_argument("--figures", default="docs/figures", help="folder of the predicted-vs-measured figure ('' for none)")


def parse_params(texts: list[str]) -> dict[str, Any]:
    """``--param k=v`` values: JSON where it parses (``exponent=0.5``, ``heads=[0,1]``), a comma list of
    integers as a list (``heads=0,1``, ``heads=0,``), ``heads=0`` as the one-head list ``[0]``, else the text;
    a key given twice is refused."""
    out: dict[str, Any] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise UserError(f"--param {text!r}: write key=value (e.g. --param sinks=4, --param heads=0,1)")
        if key in out:
            raise UserError(f"--param {key}: given twice ({out[key]!r} and {value!r}); give it once")
        try:
            out[key] = json.loads(value)
        except ValueError:
            parts = value.split(",")
            out[key] = [int(p) for p in parts if p.strip()] if len(parts) > 1 and all(
                p.strip().lstrip("-").isdigit() for p in parts if p.strip()) else value
    if isinstance(out.get("heads"), int) and not isinstance(out["heads"], bool):  # heads=0: the one head 0
        out["heads"] = [out["heads"]]
    return out


def parse_packing(text: str | None) -> dict[str, Any] | None:
    """``--packing`` JSON text (a config ``packing`` section) or None."""
    if text is None:
        return None
    try:
        value = parse_strict(text.encode("utf-8"))  # duplicate keys, NaN and Infinity refused like a config's
    except ValueError as exc:
        raise UserError(f"--packing: not JSON ({getattr(exc, 'msg', exc)}); e.g. --packing "
                        "'{\"documents\": 8192}'") from None
    if not isinstance(value, dict):
        raise UserError("--packing: must be a JSON object (documents, lengths or distribution)")
    return value


def require_enough_blocks(T: int, base: dict[str, Any], where: str) -> None:
    """T must hold at least S blocks (M >= S), as a config's shape must (the closed form assumes it)."""
    if base["S"] * base["block_size"] > T:
        raise UserError(f"{where}: T={T} holds fewer than S={base['S']} blocks of {base['block_size']} "
                        f"(the calibration's shape needs T >= {base['S'] * base['block_size']})")
