"""Autotune arms: which routing FLA's autotuners tune on, per-pattern configs, and config pinning.

FLA's autotune key for the NSA kernels is ``['BS', 'BK', 'BV', 'G']`` (``['BS','BK','BV','G']`` for
``parallel_nsa_bwd_kernel_dkv`` at FLA 0a9b9f2): the routing is not in it, so whichever routing
reaches a kernel first fixes its config for all that follow. The arms (``bench --tune-on``,
``--tune per-pattern``, ``--autotune-from``) make that choice explicit and recorded.

Nothing here changes FLA's code: a kernel is "pinned" by restricting its ``triton.Autotuner``'s
``configs`` to one ``triton.Config`` (one config = no tuning, ``Autotuner.run`` launches it
directly) and "reset" by restoring the full autotune space and clearing ``Autotuner.cache``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import triton

from ..errors import GateFailure, UserError
from ..io.paths import recorded_path
from .launcher import LaunchParams, _autotuner, autotune_record, autotuned_kernels, config_record
from .profiler import load_benchmark_result, replay_autotune

ConfigRecord = dict[str, Any]  # config_record form: {"kwargs": {...}, "num_warps": n, "num_stages": n}


def autotune_space(tuner: Any) -> list[Any]:
    """The kernel's full autotune space as FLA declared it (stashed on the tuner the first time it is
    read, so a later pin cannot shrink it): a list of ``triton.Config``."""
    if not hasattr(tuner, "_nsa_exp_space"):
        tuner._nsa_exp_space = list(tuner.configs)
    return tuner._nsa_exp_space


def pruned_space(stage: str, params: LaunchParams) -> tuple[list[ConfigRecord], list[ConfigRecord]]:
    """``(kept, pruned)`` config records of ``stage``'s kernel after FLA's own ``early_config_prune``
    (called with the launch's ``BS, BK, BV, G`` exactly as ``Autotuner.prune_configs`` passes them)."""
    tuner = _autotuner(autotuned_kernels()[stage])
    space = autotune_space(tuner)
    prune = getattr(tuner, "early_config_prune", None)
    kept = prune(space, {"G": params.G, "BS": params.BS, "BK": params.BK, "BV": params.BV}) if prune else space
    return [config_record(c) for c in kept], [config_record(c) for c in space if c not in kept]


def pin_stage(stage: str, record: ConfigRecord) -> None:
    """Restrict ``stage``'s autotuned kernel to the one config ``record`` (no tuning on its next call)."""
    tuner = _autotuner(autotuned_kernels()[stage])
    autotune_space(tuner)
    tuner.configs = [triton.Config(dict(record["kwargs"]), num_warps=record["num_warps"],
                                   num_stages=record["num_stages"])]
    tuner.cache.clear()


def reset_autotuners() -> None:
    """Give every autotuned kernel its full space back and forget what it tuned (``cache`` and
    ``best_config``), so the next call re-tunes from scratch."""
    for kernel in autotuned_kernels().values():
        tuner = _autotuner(kernel)
        tuner.configs = list(autotune_space(tuner))
        tuner.cache.clear()
        tuner.best_config = None


def launched_configs() -> dict[str, ConfigRecord | None]:
    """The config each autotuned kernel launched last (``Autotuner.best_config``), by stage."""
    return {stage: k["best_config"] for stage, k in autotune_record().items()}


def tune_per_pattern(stage_fns: Mapping[str, Mapping[str, Callable[[], Any]]],
                     synchronize: Callable[[], None]) -> dict[str, dict[str, Any]]:
    """Tune every routing on itself: for each pattern, reset the autotuners, run its stages once (FLA
    tunes on that routing), and record :func:`autotune_record`. Returns ``{pattern: record}``."""
    out = {}
    for pattern, fns in stage_fns.items():
        reset_autotuners()
        for fn in fns.values():
            fn()
        synchronize()
        out[pattern] = autotune_record()
    return out


class PerPatternPins:
    """One pinned config set per pattern, swapped in before that pattern's stage calls (outside the
    timed region: :func:`nsa_exp.gpu.timing.run_rounds` calls :meth:`before` before the first flush)
    and checked after them (:meth:`after`, once the pattern's calls are synchronised)."""

    def __init__(self, configs: Mapping[str, Mapping[str, ConfigRecord]]):
        self.configs = {p: dict(c) for p, c in configs.items()}
        self.launches: dict[str, int] = dict.fromkeys(self.configs, 0)

    def before(self, pattern: str) -> None:
        for stage, record in self.configs[pattern].items():
            pin_stage(stage, record)

    def after(self, pattern: str) -> None:
        """Raise :class:`GateFailure` unless every kernel launched the pattern's recorded config."""
        launched = launched_configs()
        for stage, record in self.configs[pattern].items():
            if launched.get(stage) != record:
                raise GateFailure(f"autotune: {pattern} {stage} launched {launched.get(stage)}, not its "
                                  f"recorded config {record}; the per-pattern arm would mix configs")
        self.launches[pattern] += 1


def best_configs(records: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, ConfigRecord]]:
    """``{pattern: {stage: best_config}}`` from :func:`tune_per_pattern`'s records."""
    return {p: {stage: k["best_config"] for stage, k in rec.items()} for p, rec in records.items()}


def tuning_arm(config: Any, stage_fns: Mapping[str, Mapping[str, Callable[[], Any]]], tune_on: str,
               per_pattern: bool, autotune_from: str | None, gpu_name: str,
               synchronize: Callable[[], None] = torch.cuda.synchronize) -> dict[str, Any]:
    """Run bench's tuning arm; returns the ``autotune`` fields it records (``tuned_on``, ``mode``,
    ``per_pattern`` = ``{pattern: {stage: config}}`` the timed calls will launch, ``replayed_from``)
    plus ``pins`` (a :class:`PerPatternPins` when configs differ by pattern, else ``None``).

    Raises :class:`~nsa_exp.errors.UserError` when ``autotune_from`` cannot be replayed here.
    """
    names = list(stage_fns)
    if autotune_from is not None:
        source = load_benchmark_result(autotune_from, config, gpu_name)
        chosen = replay_autotune(source)
        recorded = source["autotune"].get("per_pattern")
        pins = None
        if source["autotune"].get("mode") == "per-pattern" and recorded:
            missing = [p for p in names if p not in recorded]
            if missing:
                raise UserError(f"--autotune-from {autotune_from}: no per-pattern configs for {', '.join(missing)}")
            pins = PerPatternPins({p: recorded[p] for p in names})
        for fn in stage_fns[tune_on].values():  # compiles the pinned configs; tunes nothing
            fn()
        synchronize()
        source_arm = {"path": recorded_path(autotune_from), "name": source["name"],
                      "created_utc": source["metadata"]["created_utc"],
                      "mode": source["autotune"].get("mode", "tune-on"), "tuned_on": source["autotune"]["tuned_on"]}
        return {"tuned_on": "replayed", "mode": "replay", "replayed_from": source_arm, "pins": pins,
                "per_pattern": pins.configs if pins else dict.fromkeys(names, chosen)}
    if per_pattern:
        per = best_configs(tune_per_pattern(stage_fns, synchronize))
        return {"tuned_on": "per-pattern", "mode": "per-pattern", "per_pattern": per, "pins": PerPatternPins(per)}
    for fn in stage_fns[tune_on].values():
        fn()
    synchronize()
    return {"tuned_on": tune_on, "mode": "tune-on", "per_pattern": dict.fromkeys(names, launched_configs()),
            "pins": None}
