"""The process environment every GPU task needs, checked before triton or FLA is imported.

``FLA_CACHE_RESULTS=0`` stops FLA's autotuners from caching results on disk across processes and
patterns; ``FLA_DISABLE_BACKEND_DISPATCH=1`` pins the Triton path (no backend dispatch);
``TRITON_F32_DEFAULT=ieee`` makes fp32 ``tl.dot`` exact IEEE; ``TRITON_CACHE_DIR`` keeps compiled
kernels in a known place. ``scripts/run_h100.sh`` and the container set all four.

>>> good = {"TRITON_F32_DEFAULT": "ieee", "FLA_CACHE_RESULTS": "0", "FLA_DISABLE_BACKEND_DISPATCH": "1",
...         "TRITON_CACHE_DIR": "/tmp/triton"}
>>> env_problems(good)
[]
>>> env_problems({**good, "FLA_CACHE_RESULTS": "1"})
['FLA_CACHE_RESULTS=1 (must be 0)']
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import GateFailure

REQUIRED_ENV = {
    "TRITON_F32_DEFAULT": "ieee",
    "FLA_CACHE_RESULTS": "0",
    "FLA_DISABLE_BACKEND_DISPATCH": "1",
}
REQUIRED_NONEMPTY_ENV = ("TRITON_CACHE_DIR",)
#: Set to anything but 0, CUDA launches synchronously: the timed stages' events would include the host's launch
#: gaps between a stage's kernels. The environment gate refuses it; validate holds a recorded environment to it.
SYNCHRONOUS_LAUNCHES = "CUDA_LAUNCH_BLOCKING"
#: The Triton FLA 0a9b9f2 is pinned with (the ``versions`` gate requires it; validate holds results to it).
REQUIRED_TRITON = "3.6.0"
RECORDED_ENV = (*REQUIRED_ENV, *REQUIRED_NONEMPTY_ENV, "CUDA_VISIBLE_DEVICES", "TRITON_INTERPRET",
                "PYTORCH_CUDA_ALLOC_CONF", SYNCHRONOUS_LAUNCHES)
#: The device nodes through which CUDA reaches an NVIDIA GPU on Linux: the driver's control node (a host, or a
#: container the GPU was passed into) and WSL2's GPU node. A Linux process that sees neither has no CUDA GPU.
CUDA_DEVICE_NODES = ("/dev/nvidiactl", "/dev/dxg")
FIX = ("export TRITON_F32_DEFAULT=ieee FLA_CACHE_RESULTS=0 FLA_DISABLE_BACKEND_DISPATCH=1 "
       "TRITON_CACHE_DIR=/var/tmp/$USER/nsa-exp/triton (or run through scripts/run_h100.sh)")


def env_problems(environ: Mapping[str, str] | None = None) -> list[str]:
    """Each required variable that is missing or wrong, as ``NAME=value (must be X)``."""
    environ = os.environ if environ is None else environ
    problems = []
    for name, want in REQUIRED_ENV.items():
        got = environ.get(name)
        if got != want:
            problems.append(f"{name}={got if got is not None else '<unset>'} (must be {want})")
    for name in REQUIRED_NONEMPTY_ENV:
        if not environ.get(name):
            problems.append(f"{name}=<unset> (must name a directory)")
    if synchronous(environ):
        problems.append(f"{SYNCHRONOUS_LAUNCHES}={environ[SYNCHRONOUS_LAUNCHES]} (must be unset or 0: each launch "
                        "would wait for the kernel before it, and a stage's events would time the host's launch gaps)")
    return problems


def synchronous(environ: Mapping[str, Any]) -> bool:
    """Whether ``environ`` (a process's environment, or one a result recorded) makes CUDA launch synchronously
    (:data:`SYNCHRONOUS_LAUNCHES` set to anything but 0)."""
    return str(environ.get(SYNCHRONOUS_LAUNCHES, "0")) != "0"


def require_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Raise :class:`GateFailure` with the fix unless every required variable is right."""
    environ = os.environ if environ is None else environ
    problems = env_problems(environ)
    if problems:
        sync = synchronous(environ)  # its fix is to unset it; every other problem's, the exports of FIX
        fixes = ([FIX] if len(problems) > int(sync) else []) + ([f"unset {SYNCHRONOUS_LAUNCHES}"] if sync else [])
        raise GateFailure(f"environment: {'; '.join(problems)}. Fix: {'; '.join(fixes)}")
    return recorded_env(environ)


def recorded_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a result records (unset ones omitted)."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in RECORDED_ENV if name in environ}


def no_gpu(required_name: str, why: str) -> GateFailure:
    """The ``gpu`` gate's refusal when no CUDA GPU is visible (``why``: to whom, or how we know), with the fix (the
    whole line stays under 200 characters)."""
    return GateFailure(f"gpu: no CUDA GPU is visible {why}; run on an {required_name} host (check nvidia-smi and "
                       "CUDA_VISIBLE_DEVICES) or, in the container, pass --gpus / the compose GPU reservation")


def require_device_node(required_name: str, nodes: Sequence[str] = CUDA_DEVICE_NODES) -> None:
    """The ``gpu`` gate's first half, without torch: :func:`no_gpu` when this is Linux and none of ``nodes``
    exists (CUDA cannot open a GPU then); otherwise nothing (torch decides). A GPU command's door runs it after
    the command's arguments are checked, so a CPU box refuses it in ~0.3 s instead of after torch's ~1.5 s import.

    >>> require_device_node("H200", nodes=["/"])  # a node that exists: torch decides
    >>> try:
    ...     require_device_node("H200", nodes=["/no/nvidiactl"])
    ... except GateFailure as exc:
    ...     print(str(exc)[:67])
    gpu: no CUDA GPU is visible (no /no/nvidiactl); run on an H200 host
    """
    if sys.platform.startswith("linux") and not any(os.path.exists(node) for node in nodes):
        raise no_gpu(required_name, f"(no {' or '.join(nodes)})")


def door_gates(required_name: str) -> None:
    """The first two gates, torch-free, as a GPU command's door runs them once its arguments are checked: the
    environment (:func:`require_env`), then the device node (:func:`require_device_node`). One
    :class:`GateFailure` line; the handler's own gates run both again. Where both fail (a CPU box, the command
    typed without scripts/run_h100.sh), the line says both: the user learned of the GPU only after fixing the
    environment (a new user, 2026-12-07)."""
    try:
        require_env()
    except GateFailure as exc:
        try:
            require_device_node(required_name)
        except GateFailure:  # the GPU first: fixing the environment alone would not help here (a new user, again)
            raise GateFailure(f"no CUDA GPU is visible here (no {' or '.join(CUDA_DEVICE_NODES)}): run on an "
                              f"{required_name} host; there, also: {exc}") from None
        raise
    require_device_node(required_name)
