"""The release arm's child process (issue 22): one FLA release or source tree, timed through its public API.

NOT the pinned experiment. :func:`nsa_exp.release_env.run_child` starts this module in a fresh
interpreter whose ``sys.path`` holds the target's ``fla`` and not the pinned one; the parent
(:mod:`nsa_exp.gpu.release_run`) has already run the experiment's pinned gates, generated every routing
with the pinned code (fla-topk with the pinned FLA) and written them to the job folder. Here, per point:
seeded inputs (:func:`nsa_exp.gpu.launcher.make_inputs`, the bench's) -> one pass of ``local`` so FLA's
autotuners tune on it (their keys hold no routing) -> warm-up + timed rounds through
:func:`nsa_exp.gpu.timing.run_rounds`, patterns interleaved in the seeded order -> the CUPTI per-kernel
pass (:func:`nsa_exp.gpu.cupti.profile_kernel_times`) -> a check that no autotuner re-tuned.

The calls, as a user of that release makes them (dense, ``block_counts = S``, ``scale = K ** -0.5``):

- ``selection_fwd``: ``fla.ops.nsa.parallel.parallel_nsa_fwd(q, k, v, block_indices, S, BS, scale)`` -> o, lse;
- ``full_bwd``: ``fla.ops.nsa.parallel.parallel_nsa_bwd(q, k, v, o, lse, do, block_indices, S, BS, scale)``
  on this round's o, lse (every kernel it launches is timed by CUPTI afterwards);
- ``train_step``: ``fla.ops.nsa.parallel_nsa(q, k, v, block_indices=..., block_counts=S, block_size=BS,
  scale=scale).backward(do)`` on leaf tensors sharing q, k, v's storage, their ``.grad`` set to None first
  (an optimizer's ``zero_grad(set_to_none=True)``).

Under ``TRITON_INTERPRET=1`` without a GPU (the CPU test) the kernels run in Triton's interpreter, each
autotuner is cut to its first config (a CUDA-free autotuner cannot benchmark) and the round loop reads
host time (:class:`HostClockDevice`): such a result says ``timer: host-clock`` and is no GPU measurement.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..environment import require_env
from ..errors import GateFailure, UserError
from ..results.latency import round_orders
from ..results.store import dumps_strict, write_text_atomic
from ..routing.config import Shape, Timing, config_from_dict
from .fla_source import fla_distributions, fla_roots_on_path
from .telemetry import Telemetry
from .timing import run_rounds

STAGES = ("selection_fwd", "full_bwd", "train_step")
HEADROOM = 1.3


class _HostEvent:
    def record(self) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, end: _HostEvent) -> float:
        return (end.t - self.t) * 1000.0


class HostClockDevice:
    """The round loop's device on a CPU under the Triton interpreter: events read ``time.perf_counter``
    (host wall time of the interpreted call, not a GPU measurement); no flush buffer, spin or sync."""

    def flush_buffer(self, nbytes: int) -> None:
        return None

    def flush(self, buffer: Any, value: int) -> None: ...
    def read_flush(self, buffer: Any) -> None: ...
    def spin(self, cycles: int) -> None: ...

    def event(self) -> _HostEvent:
        return _HostEvent()

    def synchronize(self) -> None: ...


def imported_fla() -> dict[str, Any]:
    """The imported ``fla`` package: its folder, version, distributions, roots on ``sys.path`` and the sha256
    of every imported module file (relative to the folder holding ``fla/``)."""
    fla = sys.modules["fla"]
    pkg = Path(fla.__file__).resolve().parent
    files = {}
    for name, module in sorted(sys.modules.items()):
        file = getattr(module, "__file__", None) if name == "fla" or name.startswith("fla.") else None
        if file and file.endswith(".py"):
            path = Path(file).resolve()
            rel = path.relative_to(pkg.parent).as_posix() if path.is_relative_to(pkg.parent) else str(path)
            files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"package_dir": str(pkg), "version_imported": getattr(fla, "__version__", None), "files": files,
            "distributions": fla_distributions(), "fla_roots_on_path": fla_roots_on_path()}


def import_release(expected_fla: str) -> tuple[Any, Any]:
    """Import the target's FLA (``fla.ops.nsa`` and its ``parallel`` module); GateFailure unless it came from
    ``expected_fla`` and this process sees exactly one ``fla`` on ``sys.path`` and at most one distribution."""
    if "fla" in sys.modules:
        raise GateFailure("release child: fla was imported before the target's path was set")
    roots = fla_roots_on_path()
    if len(roots) != 1:
        raise GateFailure(f"release child: {len(roots)} fla packages on sys.path ({', '.join(roots)}); the release "
                          "arm sees exactly the target's")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FLA warns that flash-attn is absent; NSA selection never uses it
        import fla.ops.nsa as nsa  # noqa: PLC0415 - the target's FLA, only after the checks above
        from fla.ops.nsa import parallel  # noqa: PLC0415
    got = str(Path(sys.modules["fla"].__file__).resolve().parent)
    if got != expected_fla:
        raise GateFailure(f"release child: imported fla from {got}, not the target's {expected_fla}")
    if len(fla_distributions()) > 1:
        raise GateFailure(f"release child: several FLA distributions visible ({', '.join(fla_distributions())})")
    return nsa, parallel


def autotuners() -> dict[str, Any]:
    """Every ``triton.Autotuner`` in the imported ``fla`` modules (through ``@triton.heuristics`` wrappers),
    as ``{"module:name": tuner}``."""
    from triton.runtime.autotuner import Autotuner  # noqa: PLC0415 - triton after the env gate

    found: dict[str, Any] = {}
    for mod_name, module in sorted(sys.modules.items()):
        if not (mod_name == "fla" or mod_name.startswith("fla.")) or module is None:
            continue
        for name, obj in sorted(vars(module).items()):
            tuner = obj.fn if isinstance(getattr(obj, "fn", None), Autotuner) else obj
            if isinstance(tuner, Autotuner) and all(t is not tuner for t in found.values()):
                found[f"{mod_name}:{name}"] = tuner
    return found


def autotune_state(tuners: dict[str, Any]) -> dict[str, Any]:
    """The launched config (``best_config``) and cache of each autotuner these calls launched, in
    ``config_record`` form (autotuners never launched are left out)."""
    from .launcher import config_record  # noqa: PLC0415 - imports the target's fla.ops.nsa.parallel (fine here)

    out = {}
    for key, tuner in tuners.items():
        best = getattr(tuner, "best_config", None)
        if best is None and not tuner.cache:  # never launched by these calls
            continue
        out[key] = {"kernel": getattr(getattr(tuner, "base_fn", None), "__name__", key.rpartition(":")[2]),
                    "best_config": config_record(best) if best is not None else None,
                    "cache": {str(k): config_record(c) for k, c in tuner.cache.items()}}
    return out


def release_callables(nsa: Any, parallel: Any, shape: Shape, inputs: dict[str, torch.Tensor],
                      block_indices: torch.Tensor, leaves: list[torch.Tensor]) -> dict[str, Callable[[], None]]:
    """The three public calls of one routing (module doc), zero-argument, in :data:`STAGES` order."""
    q, k, v, do = inputs["q"], inputs["k"], inputs["v"], inputs["do"]
    S, BS, scale, state = shape.S, shape.block_size, shape.K ** -0.5, {}

    def selection_fwd() -> None:
        state["o"], state["lse"] = parallel.parallel_nsa_fwd(q=q, k=k, v=v, block_indices=block_indices,
                                                             block_counts=S, block_size=BS, scale=scale)

    def full_bwd() -> None:
        state.pop("grads", None)
        state["grads"] = parallel.parallel_nsa_bwd(q=q, k=k, v=v, o=state["o"], lse=state["lse"], do=do,
                                                   block_indices=block_indices, block_counts=S, block_size=BS,
                                                   scale=scale)

    def train_step() -> None:
        for t in leaves:
            t.grad = None
        nsa.parallel_nsa(*leaves, block_indices=block_indices, block_counts=S, block_size=BS,
                         scale=scale).backward(do)

    return {"selection_fwd": selection_fwd, "full_bwd": full_bwd, "train_step": train_step}


def bytes_needed(shape: Shape, n_patterns: int, l2_flush_bytes: int) -> int:
    """Device bytes of a point: shared q, k, v, dO and their grads (the train step's leaves), the flush
    buffer; per routing its block_indices, o, lse and the wrapper's dq, dk, dv; one call's transients
    (delta, CSR or block mask, a second o/lse and gradient set); times :data:`HEADROOM`."""
    e = 4 if shape.dtype == "float32" else 2
    B, T, HQ, H, K, V, S = shape.B, shape.T, shape.HQ, shape.H, shape.K, shape.V, shape.S
    qkv = B * T * (HQ * K + H * K + H * V) * e
    per = B * T * H * S * 4 + B * T * HQ * (V * e + 4) + qkv
    transient = B * T * HQ * 4 + 2 * B * T * H * S * 4 + B * T * H * (T // shape.block_size) + per
    return int(HEADROOM * (2 * qkv + B * T * HQ * V * e + l2_flush_bytes + n_patterns * per + transient))


def measure(fns: dict[str, dict[str, Callable[[], None]]], orders: list[list[str]], timing: Timing,
            device: Any, telemetry: Telemetry, cupti_rounds: int) -> tuple[list[dict], list | None, str | None]:
    """THE SEAM onto today's measurement code (one function, so the engine can replace it): the round loop
    (:func:`run_rounds`, telemetry after each pattern) and, when ``cupti_rounds``, the CUPTI pass
    (:func:`profile_kernel_times`) with its raw events. Returns ``(records, events, why no events)``; a host
    without CUPTI keeps its timed rounds (as bench does)."""
    records = run_rounds(fns, orders, timing.warmup_rounds, timing.l2_flush_bytes, flush_policy=timing.flush,
                         on_pattern_done=lambda r, p: telemetry.sample(), device=device)
    if not cupti_rounds:
        return records, None, "no CUPTI pass: a CPU interpreter run" if device is not None else \
            "no CUPTI pass (--cupti-rounds 0)"
    from .cupti import profile_kernel_times  # noqa: PLC0415 - torch.profiler only when a CUPTI pass runs

    events: list = []
    try:
        profile_kernel_times(fns, timing.l2_flush_bytes, timing.flush, cupti_rounds, on_events=events.extend)
    except (RuntimeError, OSError) as exc:
        print(f"warning: CUPTI pass skipped ({type(exc).__name__}: {exc})", file=sys.stderr)
        return records, None, f"CUPTI pass failed: {type(exc).__name__}: {exc}"
    return records, events, None


def measure_point(point: dict[str, Any], job_dir: Path, nsa: Any, parallel: Any, tuners: dict[str, Any],
                  cuda: bool, telemetry: Telemetry, cupti_rounds: int, repetitions: int | None) -> dict[str, Any]:
    """One point of the job (module doc); returns what the parent records for it."""
    from ..results.release_kernels import kernel_calls  # noqa: PLC0415
    from .launcher import make_inputs  # noqa: PLC0415

    t0 = time.monotonic()
    config = config_from_dict(point["config"], source=point["config_path"])
    shape, timing, names = config.shape, config.timing, point["names"]  # the config's patterns, then file:<stem>s
    reps = repetitions or timing.repetitions
    memory = None
    if cuda:
        free, total = torch.cuda.mem_get_info()
        need = bytes_needed(shape, len(names), timing.l2_flush_bytes)
        if need > free:
            raise UserError(f"release point T={shape.T}: needs ~{need / 2**30:.1f} GiB of GPU memory, only "
                            f"{free / 2**30:.1f} GiB of {total / 2**30:.1f} GiB are free; lower T or free the GPU")
        memory = {"estimated_bytes": need, "free_bytes_before": int(free), "total_bytes": int(total)}
    device = "cuda" if cuda else "cpu"
    with np.load(job_dir / point["routings"]) as z:
        routings = {n: torch.from_numpy(np.ascontiguousarray(z[n], dtype=np.int32)).to(device) for n in names}
    inputs = make_inputs(shape, config.seeds.inputs, device)
    leaves = [inputs[n].detach().requires_grad_() for n in ("q", "k", "v")]
    fns = {n: release_callables(nsa, parallel, shape, inputs, routings[n], leaves) for n in names}
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    before = autotune_state(tuners)
    t_tune = time.monotonic()
    for fn in fns["local"].values():  # tune once, on local (the autotune keys hold no routing)
        fn()
    sync()
    tune_seconds = time.monotonic() - t_tune
    tuned = autotune_state(tuners)
    orders = round_orders(names, timing.warmup_rounds + reps, timing.order, config.seeds.order)
    timing = Timing(timing.warmup_rounds, reps, timing.l2_flush_bytes, timing.order, timing.flush)
    records, events, why = measure(fns, orders, timing, None if cuda else HostClockDevice(), telemetry,
                                   cupti_rounds if cuda else 0)
    after = autotune_state(tuners)
    if any(after.get(k, {}).get("cache") != v["cache"] for k, v in tuned.items()) or set(after) != set(tuned):
        raise GateFailure(f"release point T={shape.T}: an FLA autotuner re-tuned during timing (its cache changed); "
                          "results would mix configs. Check FLA_CACHE_RESULTS=0")
    names_table, calls, markers = kernel_calls(events) if events is not None else (None, None, None)
    del fns, leaves, inputs, routings
    if cuda:
        torch.cuda.empty_cache()
    print(f"release child: T={shape.T}, {len(names)} routings, {timing.warmup_rounds} + {reps} rounds, "
          f"{cupti_rounds if events is not None else 0} profiled: tuned in {tune_seconds:.0f} s, point "
          f"{time.monotonic() - t0:.0f} s", file=sys.stderr)
    return {"T": shape.T, "repetitions": reps, "round_orders": orders, "records": records,
            "autotune": {"tune_seconds": tune_seconds, "kernels": tuned,
                         "tuned_at_this_point": any(before.get(k, {}).get("cache") != v["cache"]
                                                    for k, v in tuned.items())},
            "cupti_rounds": cupti_rounds if events is not None else 0, "kernel_names": names_table,
            "kernel_calls": calls, "kernels_unavailable": why,
            "kernel_markers": markers, "memory": memory,
            "wall_seconds": time.monotonic() - t0}


def child_main(job_dir: str) -> int:
    """Run the job in ``job_dir/job.json`` and write ``job_dir/<output>``; a user error is one line on stderr
    (also written to ``job_dir/error.txt`` for the parent) and exit 2."""
    folder = Path(job_dir)
    try:
        job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
        env = require_env()
        interpreter = os.environ.get("TRITON_INTERPRET") == "1" and not torch.cuda.is_available()
        if not interpreter and not torch.cuda.is_available():
            raise GateFailure("release child: no CUDA GPU is visible (set TRITON_INTERPRET=1 for a CPU test run)")
        nsa, parallel = import_release(job["expected_fla"])
        tuners = autotuners()
        if interpreter:  # CPU harness only: an autotuner cannot benchmark without a GPU driver
            for tuner in tuners.values():
                tuner.configs = tuner.configs[:1]
        telemetry = Telemetry()
        points = [measure_point(p, folder, nsa, parallel, tuners, not interpreter, telemetry, job["cupti_rounds"],
                                job.get("repetitions")) for p in job["points"]]
        import triton  # noqa: PLC0415 - already imported by FLA

        out = {"timer": "host-clock" if interpreter else "cuda-events", "env": env, "points": points,
               "fla": imported_fla(), "telemetry_available": telemetry.handle is not None,
               "gpu_info": telemetry.device_info(), "sys_path": list(sys.path),
               "versions": {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
                            "python": sys.version.split()[0], "numpy": np.__version__}}
        write_text_atomic(folder / job["output"], dumps_strict(out))
        return 0
    except UserError as exc:
        (folder / "error.txt").write_text(str(exc) + "\n", encoding="utf-8")
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
