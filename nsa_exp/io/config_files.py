"""Config files: strict JSON -> schema check -> semantic checks -> a frozen :class:`~nsa_exp.core.config.Config`.

:func:`read_config_file` reads an experiment, sweep or release config (or a calibration set) to a dict: bounded
size, UTF-8, no NUL bytes, no duplicate keys, no NaN/Infinity. :func:`load_config` and :func:`config_from_dict` make
an experiment config's dict a :class:`~nsa_exp.core.config.Config` by the rules of the vocabulary's tier (the
shape's, :mod:`nsa_exp.core.config`; the launch limits, :mod:`nsa_exp.core.stages`; the patterns',
:mod:`nsa_exp.core.families`): the one config loader.

>>> cfg = load_config("configs/e1_h100.json")
>>> cfg.shape.T, cfg.shape.num_blocks, cfg.shape.group_size
(32768, 512, 16)
>>> [p.name for p in cfg.patterns]
['local', 'uniform', 'sink-heavy', 'zipf']
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import REPO_ROOT
from ..core.config import (
    DEFAULT_ORACLE,
    Config,
    Seeds,
    Shape,
    TimingConfig,
    Tolerances,
    check_fits_machine,
    check_routings_differ,
    check_shape,
    cu_seqlens,
)
from ..core.families import pattern_from_entry
from ..core.stages import check_launch_limits
from ..errors import UserError
from .paths import recorded_path
from .reader import read_bounded, show_path
from .schemas import validate_or_raise
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
    if (not Path(path).is_absolute() and not Path(path).exists() and (REPO_ROOT / path).is_file()
            and Path.cwd().resolve() != REPO_ROOT.resolve()):
        # a relative path that names a file of the repository from its root (the default configs/e1_h100.json): run
        # from configs/, the hint "see configs/" misled a new user (2026-12-07)
        missing_hint = f"it is a path from the repository's root: run the command from there ({REPO_ROOT})"
    data = read_bounded(path, f"{what} {shown}", MAX_CONFIG_BYTES,
                        not_found=f"{what} {shown} does not exist" + (f"; {missing_hint}" if missing_hint else ""))
    raw = parse_config_bytes(data, shown)
    if isinstance(raw.get("kind"), str):  # every document the bundle writes names its kind; no config has one
        raise UserError(f'{what} {shown}: a {show_path(raw["kind"])} document (its "kind"), not a {what}'
                        + (f"; {missing_hint}" if missing_hint else ""))
    own = CONFIG_SIGNATURES.get(what)
    other = next((k for k, key in CONFIG_SIGNATURES.items() if k != what and key in raw), None)
    if own is not None and own not in raw and other is not None:
        raise UserError(f'{what} {shown}: {_a(other)} (its "{CONFIG_SIGNATURES[other]}"), not {_a(what)}'
                        + (f"; {missing_hint}" if missing_hint else ""))
    return raw


def _a(kind: str) -> str:
    """A config kind in a sentence (``"config file"``: an experiment config)."""
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


def checked_shape(shape: Shape, where: str) -> Shape:
    """``shape`` when every shape rule of a config holds (:func:`check_shape`, CUDA's launch limits, this
    machine's memory for the routing); one :class:`UserError` line starting with ``where`` otherwise."""
    check_shape(shape, where)
    check_launch_limits(shape, where)
    check_fits_machine(shape, where)
    return shape


def checked_shape_at(shape: Shape, T: int, where: str) -> Shape:
    """``shape`` at sequence length ``T``, every rule of :func:`checked_shape` held (e.g. ``routing-time
    --lengths``)."""
    return checked_shape(replace(shape, T=T), where)


def _shape(d: dict[str, Any], where: str) -> Shape:
    return checked_shape(Shape(**d), where)


def config_from_dict(raw: dict[str, Any], source: str = "<dict>") -> Config:
    """Validate ``raw`` (schema, then semantics) and build a :class:`Config`."""
    validate_or_raise(raw, "config", label="config")
    shape = _shape(raw["shape"], "config.shape")
    patterns = tuple(pattern_from_entry(p, f"config.patterns[{i}]", shape) for i, p in enumerate(raw["patterns"]))
    names = [p.name for p in patterns]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"config.patterns: pattern {dup[0]!r} is listed twice; list each pattern once (a result "
                        "names its routings by family; to time several parameterisations of one family, sweep them: "
                        "README, Sweeps)")
    tolerances = Tolerances(**raw["tolerances"])
    for key, value, pinned in tolerances.loosened():
        raise UserError(f"config.tolerances.{key}: {value} is looser than the pinned {pinned} (PINNED_TOLERANCES); "
                        "a config may tighten a gate, never loosen it")
    packing = raw.get("packing")
    if packing is not None and shape.B != 1:
        raise UserError(f"config.shape.B: a packing needs B=1 (one packed row, FLA's cu_seqlens path), got {shape.B}")
    cu = None if packing is None else cu_seqlens(packing, shape.T, shape.block_size)
    if cu is not None:  # each document is routed at its own length (document-local blocks): the patterns' rules
        # hold in the longest one (a hot block past every document's last block was accepted and routed as local)
        longest = replace(shape, T=int(max(b - a for a, b in zip(cu[:-1], cu[1:], strict=True))))
        if longest.num_blocks < shape.S:  # as a dense shape's M < S: every routing selects every causal block
            raise UserError(f"config.packing: the longest document has M={longest.num_blocks} KV blocks (T="
                            f"{longest.T}), fewer than S={shape.S}, so every routing selects every causal block of "
                            "every document (all routings alike); use longer documents or lower S")
        for i, p in enumerate(raw["patterns"]):
            pattern_from_entry(p, f"config.patterns[{i}] (packed: in the longest document, T={longest.T})", longest)
    timing = TimingConfig.from_raw(raw["timing"])
    naive = _shape(raw["smoke"]["naive"], "config.smoke.naive")
    staged = _shape(raw["smoke"]["staged"], "config.smoke.staged")
    oracle = _shape(raw["smoke"].get("oracle", DEFAULT_ORACLE), "config.smoke.oracle")
    check_routings_differ(oracle, "config.smoke.oracle")
    return Config(name=raw["name"], shape=shape, patterns=patterns, seeds=Seeds(**raw["seeds"]), timing=timing,
                  tolerances=tolerances, smoke_naive=naive, smoke_staged=staged,
                  required_gpu=raw["gpu"]["required_name"], source=source, raw=raw, smoke_oracle=oracle, cu_seqlens=cu)


def load_config(path: str | Path) -> Config:
    """Read and validate a config file; any problem is a one-line :class:`UserError`."""
    source = recorded_path(path)
    raw = read_config_file(path, "config file", "pass --config with one of the files under configs/ (ls configs/)")
    return config_from_dict(raw, source)
