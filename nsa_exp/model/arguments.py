"""The model commands' argument values (``predict --param``, ``--packing``, ``--T``), parsed and checked;
the options themselves are rows of :data:`nsa_exp.commands.COMMANDS`."""

from __future__ import annotations

import json
from typing import Any

from ..errors import UserError
from ..io.strict_json import parse_strict


def parse_params(texts: list[str]) -> dict[str, Any]:
    """``--param k=v`` values: JSON where it parses (``exponent=0.5``, ``heads=[0,1]``), a comma list of
    integers as a list (``heads=0,1``, ``heads=0,``), ``heads=0`` as the one-head list ``[0]``, else the text;
    a key given twice, or ``name`` (that is ``--pattern``), is refused (:class:`UserError`)."""
    out: dict[str, Any] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise UserError(f"--param {text!r}: write key=value (e.g. --param sinks=4, --param heads=0,1)")
        if key == "name":
            raise UserError(f"--param {text!r}: the routing's name is --pattern, not a parameter (e.g. --pattern "
                            f"{value or 'zipf'} --param exponent=1.0)")
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
