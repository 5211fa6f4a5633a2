"""The model commands' argument values (``predict --param``, ``--packing``, ``--T``, ``--B``/``--H``/``--G``),
parsed and checked; the options themselves are rows of :data:`nsa_exp.commands.COMMANDS`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.config import Shape, check_fits_machine
from ..core.stages import check_launch_limits
from ..errors import UserError
from ..io.schemas import load_schema
from ..io.strict_json import parse_strict
from .points import shape_at


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


#: predict's shape options and the config schema's ``shape`` field each one bounds (``--G`` through HQ = H*G).
SHAPE_OPTIONS = (("--B", "B"), ("--H", "H"), ("--G", "HQ"))


def model_shape(base: Mapping[str, Any], T: int, B: int | None, H: int | None, G: int | None) -> Shape:
    """The shape ``predict`` models: the calibration's ``base`` at ``T`` with ``B``, ``H`` and the group size
    ``G`` (HQ = H*G) replaced where given (None keeps ``base``'s).

    The rules, each a one-line :class:`UserError` naming its option: every value a positive integer; B, H and
    HQ within ``schemas/config.schema.json``'s ``shape`` bounds (read from the schema); G a power of two (FLA
    loads a KV head's G query heads as one Triton block; :func:`nsa_exp.core.config.check_shape`'s rule);
    CUDA's launch limits (:func:`nsa_exp.core.stages.check_launch_limits`) and this machine's memory for the
    routing (:func:`nsa_exp.core.config.check_fits_machine`). A G below FLA's NSA minimum of 16 is allowed:
    the model extrapolates there (its ``c`` scaling, docs/MODEL.md); ``check_shape`` refuses it in a config.

    >>> base = {"B": 1, "HQ": 64, "H": 4, "K": 192, "V": 128, "S": 16, "block_size": 64, "dtype": "bfloat16"}
    >>> model_shape(base, 8192, None, 8, 4).HQ
    32
    >>> model_shape(base, 8192, None, None, 3)
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: --G: 3 is not a power of two (FLA loads a KV head's G query heads as one Triton block)
    >>> model_shape(base, 8192, None, 128, None)
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: --H: HQ = H*G = 128*16 = 2048 exceeds the config schema's maximum 1024 for shape.HQ ...
    """
    g_base = int(base["HQ"]) // int(base["H"])
    for option, value in (("--B", B), ("--H", H), ("--G", G)):
        if value is not None and (isinstance(value, bool) or value < 1):
            raise UserError(f"{option}: {value} is not a positive integer")
    h, g = H or int(base["H"]), G or g_base
    if g & (g - 1):
        raise UserError(f"--G: {g} is not a power of two (FLA loads a KV head's G query heads as one "
                        "Triton block)")
    shape = shape_at(base, T, B=B, H=h, HQ=h * g)
    limits = load_schema("config")["$defs"]["shape"]["properties"]
    for option, field in SHAPE_OPTIONS:
        value, top = getattr(shape, field), limits[field]["maximum"]
        if value > top:
            what = f"HQ = H*G = {h}*{g} = {value}" if field == "HQ" else str(value)
            if field == "HQ":  # the options the user gave (a default G is not what went wrong)
                option = "/".join(o for o, v in (("--H", H), ("--G", G)) if v is not None) or option
            raise UserError(f"{option}: {what} exceeds the config schema's maximum {top} for shape.{field} "
                            f"(schemas/config.schema.json)")
    where = f"--B {shape.B} --H {shape.H} --G {g} at T={T}"
    check_launch_limits(shape, where)
    check_fits_machine(shape, where)
    return shape
