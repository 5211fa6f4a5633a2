"""CPU test harness: the REAL FLA kernels run through the Triton interpreter.

``TRITON_INTERPRET=1`` must be set before triton is imported, so it is set here, at collection.
The interpreter has no bf16 (tests use float16) and autotuners need a GPU to benchmark, so
:func:`single_config_autotuners` restricts each FLA autotuner to its first config. Both changes
live in the test harness only; the GPU path never sees them.
"""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")
os.environ.setdefault("FLA_CACHE_RESULTS", "0")
os.environ.setdefault("FLA_DISABLE_BACKEND_DISPATCH", "1")
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".triton-cache"))

import pytest  # noqa: E402

from nsa_exp.core.config import Shape  # noqa: E402

# The tiny shape the interpreter runs in seconds (GUIDE §4): G = 16, M = 8 blocks, S = 4 slots.
TINY = Shape(B=1, T=256, HQ=16, H=1, K=64, V=64, S=4, block_size=32, dtype="float16")


def single_config_autotuners() -> None:
    """Limit every FLA autotuner this experiment launches to one config (CPU harness only)."""
    from nsa_exp.gpu.launcher import _autotuner, autotuned_kernels  # noqa: PLC0415 - FLA after the interpreter setup

    for kernel in autotuned_kernels().values():
        tuner = _autotuner(kernel)
        tuner.configs = tuner.configs[:1]


@pytest.fixture(scope="session")
def fla_interpreter():
    """Import FLA under the interpreter with single-config autotuners; yields the launcher module."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from nsa_exp.gpu import launcher  # noqa: PLC0415 - FLA after the interpreter setup
    single_config_autotuners()
    return launcher
