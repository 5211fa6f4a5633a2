"""Config files as strict JSON: bounded size, UTF-8, no NUL bytes, no duplicate keys, no NaN/Infinity.

:func:`read_config_file` reads an experiment or sweep config (or a calibration set) to a dict; the rules
of its contents are the routing tier's (:func:`nsa_exp.routing.config.config_from_dict`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import REPO_ROOT
from ..errors import UserError
from .reader import read_bounded, show_path
from .strict_json import parse_strict

MAX_CONFIG_BYTES = 1024 * 1024
#: Each kind of config (``what``, as its reader names it) and a key only it has at the top level: a config of one
#: kind given where another belongs is named as such, not refused as "Additional properties are not allowed".
CONFIG_SIGNATURES = {"config file": "shape", "sweep config": "lengths", "release config": "points"}


def read_config_file(path: str | Path, what: str = "config file", missing_hint: str = "") -> dict[str, Any]:
    """The JSON object in ``path`` (:func:`parse_config_bytes`), read by the one bounded reader
    (:func:`nsa_exp.io.reader.read_bounded`: a regular file of at most :data:`MAX_CONFIG_BYTES`); a missing or
    unreadable file is one line naming it (``<what> <path> does not exist; <missing_hint>``), and so is a document
    the bundle wrote (a result, a report: it has a ``kind``) given where a config belongs."""
    shown = show_path(path)
    if not Path(path).is_absolute() and not Path(path).exists() and (REPO_ROOT / path).is_file() \
            and Path.cwd().resolve() != REPO_ROOT.resolve():
        # a relative path that names a file of the repository from its root (the default configs/e1_h100.json): run
        # from configs/, the hint "see configs/" misled a new user (2026-12-07)
        missing_hint = f"it is a path from the repository's root: run the command from there ({REPO_ROOT})"
    data = read_bounded(path, f"{what} {shown}", MAX_CONFIG_BYTES,
                        not_found=f"{what} {shown} does not exist" + (f"; {missing_hint}" if missing_hint else ""))
    raw = parse_config_bytes(data, shown)
    if isinstance(raw.get("kind"), str):  # every document the bundle writes names its kind; no config has one
        raise UserError(f"{what} {shown}: a {raw['kind']} document (its \"kind\"), not a {what}"
                        + (f"; {missing_hint}" if missing_hint else ""))
    own = CONFIG_SIGNATURES.get(what)
    other = next((k for k, key in CONFIG_SIGNATURES.items() if k != what and key in raw), None)
    if own is not None and own not in raw and other is not None:
        raise UserError(f"{what} {shown}: {_a(other)} (its \"{CONFIG_SIGNATURES[other]}\"), not {_a(what)}"
                        + (f"; {missing_hint}" if missing_hint else ""))
    return raw


def _a(kind: str) -> str:
    """A config kind in a sentence: ``"config file"`` is the experiment's."""
    return "an experiment config" if kind == "config file" else f"a {kind}"


def parse_config_bytes(data: bytes, where: str) -> dict[str, Any]:
    """Strict JSON for a config: UTF-8 text, no NUL bytes, no duplicate keys, no NaN/Infinity/overflow."""
    if len(data) > MAX_CONFIG_BYTES:
        raise UserError(f"config file {where}: {len(data)} bytes is not a config (limit {MAX_CONFIG_BYTES})")
    nul = data.find(b"\0")
    if nul >= 0:
        raise UserError(f"config file {where}: binary data (NUL byte at offset {nul}), not a JSON config")
    if data.startswith(b"\xef\xbb\xbf"):  # a byte-order mark from an editor: harmless, dropped
        data = data[3:]
    try:
        raw = parse_strict(data)  # the one strict parser (duplicate keys, NaN/Infinity, overflow, depth)
    except ValueError as exc:
        raise UserError(f"config file {where}: {exc}") from None
    if not isinstance(raw, dict):
        raise UserError(f"config file {where}: top level must be a JSON object")
    return raw
