"""Autotune checks shared by kinds: bench's tuning arm and every recorded config one of FLA's.

``autotune_arm_problems`` (bench results): the arm's recorded configs agree with its mode, and so do its
derived fields (``same_config_all_patterns``; ``tuned_on``, against the recorded ``--tune-on``).
``autotune_configs``: each recorded config is one of FLA's (the Stage table's ``autotune_space``). The matrix's
own checks are its kind's (:mod:`.autotune_matrix`).

>>> autotune_arm_problems({"autotune": {"tuned_on": "local", "same_config_all_patterns": True},
...                        "patterns": {"local": {}}})
[]
"""

from __future__ import annotations

import json
from typing import Any

from ..core.families import TUNE_PATTERN
from ..core.stages import AUTOTUNED_STAGES, stage
from .checks import Add, Problems
from .record_checks import argv_option


def config_key(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, sort_keys=True)


def autotune_arm_problems(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """A bench result's tuning arm: ``per_pattern`` names every pattern; in ``tune-on`` and single-source
    ``replay`` mode all patterns share one config set; ``same_config_all_patterns`` says whether they
    do; a replay names its source."""
    a = doc["autotune"]
    mode, per = a.get("mode"), a.get("per_pattern")
    problems = _tuned_on_problems(doc)
    if mode is None:  # recorded before the field (= tune-on): one tune served every pattern
        if a["same_config_all_patterns"] is not True:
            problems.append(("$.autotune.same_config_all_patterns", f"says {a['same_config_all_patterns']}, but a "
                             "run without autotune.mode tuned once and reused that config set for every pattern"))
        return problems
    if per is None:
        return [("$.autotune.per_pattern", f"mode {mode!r} must record the configs each pattern launched")]
    if sorted(per) != sorted(doc["patterns"]):
        problems.append(("$.autotune.per_pattern", f"patterns {sorted(per)} != {sorted(doc['patterns'])}"))
    distinct = len({config_key(c) for c in per.values()})
    if a["same_config_all_patterns"] != (distinct == 1):
        problems.append(("$.autotune.same_config_all_patterns", f"says {a['same_config_all_patterns']} but "
                         f"per_pattern holds {distinct} distinct config sets"))
    if mode == "tune-on" and distinct > 1:
        problems.append(("$.autotune.per_pattern", "tune-on reuses one config set for every pattern"))
    if mode == "replay" and "replayed_from" not in a:
        problems.append(("$.autotune.replayed_from", "a replayed run must name the result it replayed"))
    if mode != "replay" and "replayed_from" in a:
        problems.append(("$.autotune.replayed_from", f"recorded although mode is {mode!r}"))
    return problems


def _tuned_on_problems(doc: dict[str, Any]) -> Problems:
    """``tuned_on`` is what the arm's mode makes it: ``per-pattern``, ``replayed``, or (tune-on, the default
    arm) one of the timed patterns, the one the recorded command line's ``--tune-on`` names (default
    :data:`~nsa_exp.core.families.TUNE_PATTERN`)."""
    a = doc["autotune"]
    mode, tuned = a.get("mode") or "tune-on", a["tuned_on"]
    fixed = {"per-pattern": "per-pattern", "replay": "replayed"}.get(mode)
    if fixed is not None:
        return [] if tuned == fixed else [("$.autotune.tuned_on", f"{tuned!r}, but a {mode} arm records {fixed!r}")]
    if tuned not in doc["patterns"]:
        return [("$.autotune.tuned_on", f"{tuned!r} is not one of the timed patterns {sorted(doc['patterns'])}")]
    argv = (doc.get("metadata") or {}).get("argv") or []
    want = argv_option(argv, "--tune-on") or TUNE_PATTERN
    if argv and tuned != want:
        return [("$.autotune.tuned_on", f"{tuned!r}, but the recorded command line tuned on {want!r} "
                 f"({'--tune-on' if want != TUNE_PATTERN else 'the default, no --tune-on'})")]
    return []


def config_problems(stage_name: str, cfg: Any, path: str) -> Problems:
    """``cfg`` (``{kwargs, num_warps, num_stages}``) is one of FLA's configs for ``stage_name``'s kernel."""
    if stage_name not in AUTOTUNED_STAGES:
        return [(path, f"{stage_name!r} has no autotuned kernel ({', '.join(AUTOTUNED_STAGES)})")]
    space = stage(stage_name).autotune_space
    if cfg not in space:
        kwargs = sorted({k for c in space for k in c["kwargs"]})
        return [(path, f"{cfg} is not one of FLA's {len(space)} configs for {stage(stage_name).autotuned_kernel} "
                       f"(kwargs {kwargs or 'none'}, num_warps {sorted({c['num_warps'] for c in space})}, "
                       f"num_stages {sorted({c['num_stages'] for c in space})})")]
    return []


def recorded_configs(doc: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(JSON path, stage, config) of every autotune config a document records: a run's
    ``autotune.kernels.<stage>`` best config and cache (a what-if's ``autotune.<stage>``), a bench arm's
    ``per_pattern``, a sweep's ``best_config``, an analysis's ``autotune``, a calibration's
    ``autotune_config``, an autotune matrix's cells."""
    out: list[tuple[str, str, Any]] = []
    autotune = doc.get("autotune")
    if doc.get("kind") == "analysis" and isinstance(autotune, dict):
        return [(f"$.autotune.{s}", s, c) for s, c in autotune.items()]
    if doc.get("kind") == "model_calibration":
        return [("$.autotune_config", "dkv_core", doc["autotune_config"])]
    if doc.get("kind") == "autotune_matrix":
        for s, st in doc["stages"].items():
            out += [(f"$.stages.{s}.cells[{i}].config", s, c["config"]) for i, c in enumerate(st["cells"])]
        return out
    if isinstance(autotune, dict):
        kernels = autotune if doc.get("kind") == "whatif_result" else autotune.get("kernels") or {}
        for s, k in kernels.items():
            if isinstance(k, dict) and "best_config" in k:
                out.append((f"$.autotune.kernels.{s}.best_config", s, k["best_config"]))
                cache = (k.get("cache") or {}).values()
                out += [(f"$.autotune.kernels.{s}.cache[{i}]", s, c) for i, c in enumerate(cache)]
        for p, configs in (autotune.get("per_pattern") or {}).items():
            out += [(f"$.autotune.per_pattern.{p}.{s}", s, c) for s, c in configs.items()]
    out += [(f"$.best_config.{s}", s, c) for s, c in (doc.get("best_config") or {}).items()]
    return out


def recorded_kernels(doc: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(JSON path, stage, kernel name) of every autotuned kernel a document names beside its configs: a run's
    ``autotune.kernels.<stage>.kernel`` (a what-if's ``autotune.<stage>.kernel``), an autotune matrix's
    ``stages.<stage>.kernel``."""
    if doc.get("kind") == "autotune_matrix":
        return [(f"$.stages.{s}.kernel", s, st.get("kernel")) for s, st in doc["stages"].items()]
    autotune = doc.get("autotune")
    if not isinstance(autotune, dict) or doc.get("kind") in ("analysis", "model_calibration"):
        return []
    kernels = autotune if doc.get("kind") == "whatif_result" else autotune.get("kernels") or {}
    return [(f"$.autotune.kernels.{s}.kernel", s, k["kernel"]) for s, k in kernels.items()
            if isinstance(k, dict) and "kernel" in k]


def autotune_configs(doc: dict[str, Any], add: Add, name: str = "autotune_configs") -> None:
    """Every autotune config a document records is one of FLA's for its stage (:func:`config_problems`), and every
    kernel it names is the Stage table's for that stage (a sweep point's dK/dV relabelled with dQ's kernel, a
    matrix's stage renamed ``evil_kernel``, PASSed: an attacker and a re-attacker, 2026-12-07)."""
    add(name, [p for path, s, cfg in recorded_configs(doc) for p in config_problems(s, cfg, path)]
        + [(path, f"{kernel!r}, the Stage table's {stage(s).autotuned_kernel!r}") for path, s, kernel
           in recorded_kernels(doc) if s in AUTOTUNED_STAGES and kernel != stage(s).autotuned_kernel])
