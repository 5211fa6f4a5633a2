"""Profile one stage under Nsight Compute: the launches sit in an NVTX push/pop range
``nsa_<pattern>_<stage>`` (``pattern`` may be ``A-vs-B``: both patterns' launches, A first, in one
range), so ``ncu --nvtx --nvtx-include "nsa_<pattern>_<stage>/"`` profiles exactly those.

Everything else — routing, inputs, forward outputs, delta, CSR, one warm-up call of the stage — runs
outside the range. ``--benchmark-result`` replays the autotune config a bench recorded (each FLA
autotuner is restricted to that one config, so nothing is tuned under the profiler); the result's
shape, FLA commit and GPU must match this run or it is refused.

    >>> parse_patterns("local-vs-sink-heavy")
    ['local', 'sink-heavy']
    >>> range_name("local-vs-sink-heavy", "dkv_core")
    'nsa_local-vs-sink-heavy_dkv_core'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .. import PINNED_COMMIT
from ..core.config import Config
from ..core.nvtx import parse_patterns, range_name
from ..errors import UserError
from ..io.store import load_document
from .gates import run_gates


def load_benchmark_result(path: str | Path, config: Config, gpu_name: str) -> dict[str, Any]:
    """Read a bench result and refuse it when its shape, FLA commit or GPU differ from this run."""
    result = load_document(path, ("bench_result",), f"--benchmark-result {path}",
                           missing_hint="run `invoke bench` first")
    if result.get("shape") != config.shape.to_dict():
        raise UserError(f"--benchmark-result {path}: its shape {result.get('shape')} differs from the config's "
                        f"{config.shape.to_dict()}; profile with the config the bench used")
    commit = (result.get("fla") or {}).get("commit")
    if commit != PINNED_COMMIT:
        raise UserError(f"--benchmark-result {path}: FLA commit {commit} is not the pinned {PINNED_COMMIT}")
    recorded_gpu = ((result.get("metadata") or {}).get("gpu") or {}).get("name")
    if recorded_gpu != gpu_name:
        raise UserError(f"--benchmark-result {path}: tuned on {recorded_gpu!r}, this GPU is {gpu_name!r}; "
                        f"autotune configs do not transfer between GPUs")
    return result


def replay_autotune(result: dict[str, Any]) -> dict[str, Any]:
    """Restrict each autotuned FLA kernel to the config the bench recorded; returns what was set."""
    from .launcher import pin_autotune_configs  # noqa: PLC0415 - FLA is imported only after the env gate

    chosen = {stage: k["best_config"] for stage, k in result["autotune"]["kernels"].items()}
    missing = [stage for stage, cfg in chosen.items() if cfg is None]
    if missing:
        raise UserError(f"--benchmark-result: no autotune config recorded for {', '.join(missing)}")
    pin_autotune_configs(chosen)
    return chosen


def profile_stage(config: Config, pattern_spec: str, stage: str, benchmark_result: str | None,
                  allow_gpu: bool) -> dict[str, Any]:
    """Prepare everything outside the NVTX range, then launch ``stage`` once per pattern inside it. ``stage`` and
    ``pattern_spec``'s patterns are the config's, checked by the door (argparse's choices, ``arguments._profile``)."""
    names = parse_patterns(pattern_spec)
    gates, routings = run_gates(config, allow_gpu=allow_gpu, strict=True)
    # Deferred on purpose: FLA/triton may only be imported once the env gate above has passed.
    from .launcher import StagedBackward, make_inputs, make_problem  # noqa: PLC0415

    replayed = None
    if benchmark_result:
        replayed = replay_autotune(load_benchmark_result(benchmark_result, config, torch.cuda.get_device_name(0)))
    inputs = make_inputs(config.shape, config.seeds.inputs, "cuda")
    stage_fns = {}
    for name in names:
        staged = StagedBackward(make_problem(config.shape, routings[name], inputs))
        fns = staged.stage_callables()
        for fn in fns.values():  # the whole data flow once (tunes here if nothing was replayed)
            fn()
        stage_fns[name] = fns[stage]
    for fn in stage_fns.values():  # warm-up of the profiled stage itself
        fn()
    torch.cuda.synchronize()
    label = range_name(pattern_spec, stage)
    with torch.cuda.nvtx.range(label):
        for name in names:
            stage_fns[name]()
        torch.cuda.synchronize()
    return {"range": label, "patterns_in_launch_order": names, "stage": stage,
            "autotune_replayed_from": benchmark_result, "autotune_replayed": replayed}
