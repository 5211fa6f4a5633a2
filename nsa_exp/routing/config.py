"""Experiment config: JSON -> schema check -> semantic checks -> frozen dataclasses.

>>> cfg = load_config("configs/e1_h100.json")
>>> cfg.shape.T, cfg.shape.num_blocks, cfg.shape.group_size
(32768, 512, 16)
>>> [p.name for p in cfg.patterns]
['local', 'uniform', 'sink-heavy', 'zipf']
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.config import DEFAULT_ORACLE, Config, Seeds, Shape, StopRule, TimingConfig, Tolerances
from ..core.families import pattern_from_entry
from ..core.stages import check_launch_limits
from ..errors import UserError
from ..io.config_files import read_config_file
from ..io.paths import recorded_path
from ..io.schemas import validate_or_raise
from .packing import cu_seqlens


def check_routings_differ(shape: Shape, where: str) -> None:
    """The oracle shape must have more KV blocks than slots (M > S), else every routing is the same."""
    if shape.num_blocks <= shape.S:
        raise UserError(f"{where}.S: S={shape.S} must be below M=T/block_size={shape.num_blocks} so the routings "
                        f"differ (at M <= S every routing selects every causal block); raise T or lower S")


def check_shape(shape: Shape, where: str) -> None:
    """Semantic rules FLA's NSA kernels need, each failing with the field and the fix.

    >>> check_shape(Shape(1, 100, 64, 4, 192, 128, 16, 64, "bfloat16"), "config.shape")
    Traceback (most recent call last):
    ...
    nsa_exp.errors.UserError: config.shape.T: 100 is not a multiple of block_size 64; use a multiple of 64
    """
    if shape.T % shape.block_size:
        raise UserError(f"{where}.T: {shape.T} is not a multiple of block_size {shape.block_size}; "
                        f"use a multiple of {shape.block_size}")
    if shape.num_blocks < shape.S:
        raise UserError(f"{where}.S: S={shape.S} exceeds the number of KV blocks M=T/block_size="
                        f"{shape.num_blocks}; lower S or raise T")
    if shape.HQ % shape.H:
        raise UserError(f"{where}.HQ: HQ={shape.HQ} is not a multiple of H={shape.H}")
    g = shape.group_size
    if g < 16 or g & (g - 1):
        raise UserError(f"{where}.HQ: group size G=HQ/H={g} must be a power of two >= 16 "
                        f"(FLA NSA requirement); e.g. HQ={16 * shape.H}")
    if shape.block_size & (shape.block_size - 1):
        raise UserError(f"{where}.block_size: {shape.block_size} must be a power of two")


# The routing of a shape is regenerated on the CPU (int64 working arrays of ~12 words per entry).
ROUTING_BYTES_PER_ENTRY = 96


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits_machine(shape: Shape, where: str) -> None:
    """A shape whose routing cannot be generated in this machine's memory is one line, not a MemoryError."""
    entries = shape.B * shape.T * shape.H * shape.S
    need, have = entries * ROUTING_BYTES_PER_ENTRY, _memory_bytes()
    if have is not None and need > have:
        raise UserError(f"{where}: B*T*H*S = {entries} routing entries need ~{need / 2**30:.1f} GiB to generate, "
                        f"more than this machine's {have / 2**30:.1f} GiB; lower B, T, H or S")


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


def _oracle_shape(d: dict[str, Any]) -> Shape:
    shape = _shape(d, "config.smoke.oracle")
    check_routings_differ(shape, "config.smoke.oracle")
    return shape


def _timing(raw: dict[str, Any]) -> TimingConfig:
    """``config.timing``; a ``stop`` block whose ``min_rounds`` exceeds ``repetitions`` is refused (it could
    never stop on its CI)."""
    stop = raw.get("stop")
    if stop is not None and stop["min_rounds"] > raw["repetitions"]:
        raise UserError(f"config.timing.stop.min_rounds: {stop['min_rounds']} exceeds timing.repetitions "
                        f"{raw['repetitions']} (the most rounds a run times); lower it")
    if stop is not None and stop.get("drop", "routing") != "routing" and stop.get("floor_fraction") is None:
        raise UserError(f"config.timing.stop.drop: {stop['drop']!r} is the verdict rule's; give floor_fraction too "
                        "(or leave drop out)")
    return TimingConfig(**{**raw, "stop": None if stop is None else StopRule(**stop)})


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
        for i, p in enumerate(raw["patterns"]):
            pattern_from_entry(p, f"config.patterns[{i}] (packed: in the longest document, T={longest.T})", longest)
    return Config(
        name=raw["name"],
        shape=shape,
        patterns=patterns,
        seeds=Seeds(**raw["seeds"]),
        timing=_timing(raw["timing"]),
        tolerances=tolerances,
        smoke_naive=_shape(raw["smoke"]["naive"], "config.smoke.naive"),
        smoke_staged=_shape(raw["smoke"]["staged"], "config.smoke.staged"),
        required_gpu=raw["gpu"]["required_name"],
        source=source,
        raw=raw,
        smoke_oracle=_oracle_shape(raw["smoke"].get("oracle", DEFAULT_ORACLE)),
        cu_seqlens=cu,
    )


def load_config(path: str | Path) -> Config:
    """Read and validate a config file; any problem is a one-line :class:`UserError`."""
    raw = read_config_file(path, "config file", "pass --config with one of the files under configs/ (ls configs/)")
    return config_from_dict(raw, source=recorded_path(path))
