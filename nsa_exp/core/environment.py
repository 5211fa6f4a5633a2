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
from collections.abc import Mapping

from ..errors import GateFailure

REQUIRED_ENV = {
    "TRITON_F32_DEFAULT": "ieee",
    "FLA_CACHE_RESULTS": "0",
    "FLA_DISABLE_BACKEND_DISPATCH": "1",
}
REQUIRED_NONEMPTY_ENV = ("TRITON_CACHE_DIR",)
#: The Triton FLA 0a9b9f2 is pinned with (the ``versions`` gate requires it; validate holds results to it).
REQUIRED_TRITON = "3.6.0"
RECORDED_ENV = (*REQUIRED_ENV, *REQUIRED_NONEMPTY_ENV, "CUDA_VISIBLE_DEVICES", "TRITON_INTERPRET",
                "PYTORCH_CUDA_ALLOC_CONF", "CUDA_LAUNCH_BLOCKING")
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
    return problems


def require_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Raise :class:`GateFailure` with the fix unless every required variable is right."""
    problems = env_problems(environ)
    if problems:
        raise GateFailure(f"environment: {'; '.join(problems)}. Fix: {FIX}")
    return recorded_env(environ)


def recorded_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a result records (unset ones omitted)."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in RECORDED_ENV if name in environ}
