"""The seeded random inputs every GPU arm times, and their generation overlapped with the gates.

:func:`random_inputs` draws q, k, v, dO from one seeded CPU generator in float32, in that order: the values are
the same on every host for a shape and seed (a CUDA generator's would depend on the GPU's SM count), which is why
they are drawn on the CPU: 713 M values at the primary shape, ~5 s of one core on the H200 host (issue 30's
``inputs`` phase). :class:`Prefetch` draws them in a background thread while the later gates run (torch releases
the GIL inside ``randn``), so the ``inputs`` phase only waits for what is left and moves them to the GPU; the
values are the very same tensors :func:`random_inputs` returns (tests/gpu/test_inputs.py).
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from ..core.config import Shape


def random_inputs(shape: Shape, seed: int, cancelled: threading.Event | None = None) -> dict[str, torch.Tensor]:
    """float32 CPU tensors ``q [B,T,HQ,K]``, ``k [B,T,H,K]``, ``v [B,T,H,V]``, ``do [B,T,HQ,V]`` ~ N(0, 1) (never
    zeros) from ``torch.Generator("cpu").manual_seed(seed)``, drawn in that order. ``cancelled`` (set): stop
    between tensors and return those drawn so far (a gate failed; nobody will read them)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dims = {"q": (shape.HQ, shape.K), "k": (shape.H, shape.K), "v": (shape.H, shape.V), "do": (shape.HQ, shape.V)}
    out = {}
    for name, d in dims.items():
        if cancelled is not None and cancelled.is_set():
            break
        out[name] = torch.randn(shape.B, shape.T, *d, generator=gen, dtype=torch.float32)
    return out


class Prefetch:
    """:func:`random_inputs` of ``shape`` and ``seed`` drawn in a background thread from construction on;
    :meth:`result` waits for them (re-raising what the thread raised), :meth:`cancel` stops the thread after the
    tensor it is drawing and waits for it (a gate failed: the refusal is not held up by a draw nobody reads)."""

    def __init__(self, shape: Shape, seed: int):
        self.key = (shape, seed)
        self._cancelled = threading.Event()
        self._out: dict[str, torch.Tensor] = {}
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._draw, name="nsa-exp-inputs", daemon=False)
        self._thread.start()

    def _draw(self) -> None:
        try:
            self._out = random_inputs(*self.key, cancelled=self._cancelled)
        except BaseException as exc:  # noqa: BLE001 - handed to the reader
            self._error = exc

    def result(self, shape: Shape, seed: int) -> dict[str, torch.Tensor] | None:
        """The drawn tensors when they are of ``shape`` and ``seed`` (None: another key, draw afresh)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._out if (shape, seed) == self.key and not self._cancelled.is_set() else None

    def cancel(self) -> None:
        self._cancelled.set()
        self._thread.join()


def to_device(cpu: dict[str, torch.Tensor], dtype: Any, device: str | torch.device) -> dict[str, torch.Tensor]:
    """``cpu``'s tensors on ``device`` as ``dtype`` (what every launcher times)."""
    return {name: t.to(device, dtype) for name, t in cpu.items()}
