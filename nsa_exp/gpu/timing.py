"""The round loop: CUDA events, one event pair around each stage call, every observation kept.

Method (see docs/METHOD.md): before each timed call we (1) sweep an L2-flush buffer of
``l2_flush_bytes`` (>= 2x the H100's 50 MB L2) so every stage starts from a cold L2, and (2) enqueue
a GPU spin of ``LAUNCH_GUARD_CYCLES`` so the Python launch overhead of the stage is hidden behind
queued GPU work: the events then measure GPU time only, not host launch gaps. Patterns are
interleaved round by round (order from :func:`nsa_exp.core.protocol.round_orders`); the first
``warmup_rounds`` rounds (module load, autotune, allocator) are kept but flagged.

The sweep is the config's ``timing.flush`` policy (:data:`nsa_exp.core.protocol.FLUSH_POLICIES`): ``write``
overwrites the buffer (``fill_``; the original method, the default when a config does not name one),
``read`` reduces it into a preallocated int64 scalar (evicts L2 without leaving dirty lines for the next
stage to write back), ``none`` skips it. The policy was chosen from H200 data (``python -m nsa_exp flush-study``,
``results/studies/h200_flush_policy.json``; docs/METHOD.md).

The device is injectable (:class:`CudaDevice` by default) so CPU tests drive the loop with a fake
and pin its call order: flush, spin, start event, call, end event per stage; one sync per pattern.
No library does this loop (none interleaves patterns per stage), so it stays hand-written. It is the
only such loop: the engine (:mod:`nsa_exp.gpu.engine`) runs every arm's cells through it, the CUPTI
pass (:mod:`nsa_exp.gpu.cupti`) runs it with ``around`` (a profiler range per call) over a device that
records no events, and ``scripts/gpu_method_study.py`` runs it with ``cell_prologue`` (a flush policy
and spin per cell).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch

from ..core.protocol import FLUSH_POLICIES, LAUNCH_GUARD_CYCLES
from .telemetry import gpu_identity


class Event(Protocol):
    def record(self) -> None: ...
    def elapsed_time(self, end: Any) -> float: ...


class Device(Protocol):
    """What the round loop needs from the GPU."""

    def flush_buffer(self, nbytes: int) -> Any: ...
    def flush(self, buffer: Any, value: int) -> None: ...
    def read_flush(self, buffer: Any) -> None: ...
    def spin(self, cycles: int) -> None: ...
    def event(self) -> Event: ...
    def synchronize(self) -> None: ...


class CudaDevice:
    """The real device: torch's CUDA events, ``fill_`` (write flush) or an int64 sum (read flush) of an
    int32 buffer, ``torch.cuda._sleep``; and the host facts the engine reads (name, memory, identity)."""

    #: where the engine allocates inputs
    tensor_device = "cuda"
    #: what :func:`nsa_exp.gpu.bench.memory_accounting` reads the allocator from
    memory = torch.cuda

    def flush_buffer(self, nbytes: int) -> torch.Tensor:
        """The int32 flush buffer (zeroed once, untimed) and the read flush's preallocated int64 sink."""
        buffer = torch.zeros(max(nbytes // 4, 1), dtype=torch.int32, device="cuda")
        self.sink = torch.zeros((), dtype=torch.int64, device="cuda")
        return buffer

    def flush(self, buffer: torch.Tensor, value: int) -> None:
        buffer.fill_(value)

    def read_flush(self, buffer: torch.Tensor) -> None:
        """Read every line of ``buffer`` (one reduction, no allocation) into the preallocated sink."""
        torch.sum(buffer, dim=0, dtype=torch.int64, out=self.sink)

    def spin(self, cycles: int) -> None:
        torch.cuda._sleep(cycles)

    def event(self) -> torch.cuda.Event:
        return torch.cuda.Event(enable_timing=True)

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def name(self) -> str:
        """``torch.cuda.get_device_name(0)``."""
        return torch.cuda.get_device_name(0)

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def mem_get_info(self) -> tuple[int, int]:
        """(free, total) bytes of the current device."""
        return torch.cuda.mem_get_info()

    def identity(self, nvml_info: dict[str, Any]) -> dict[str, Any]:
        """GPU 0 as torch sees it plus NVML's driver and clocks (:func:`.telemetry.gpu_identity`)."""
        return gpu_identity(nvml_info)

    def placement(self) -> dict[str, Any]:
        """The torch device index and, when torch reports it, the PCI bus id (``dddd:bb:dd``)."""
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        pci = [v for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")
               if (v := getattr(props, a, None)) is not None]
        return {"device_index": torch.cuda.current_device(),
                **({"pci_bus_id": "{:04x}:{:02x}:{:02x}".format(*pci)} if len(pci) == 3 else {})}


def run_rounds(
    stage_fns: Mapping[str, Mapping[str, Callable[[], Any]]],
    orders: Sequence[Sequence[str]],
    warmup_rounds: int,
    l2_flush_bytes: int,
    on_pattern_done: Callable[[int, str], dict[str, Any] | None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    rounds: Sequence[int] | None = None,
    on_round_done: Callable[[int, list[dict[str, Any]]], None] | None = None,
    rewarm: bool = False,
    device: Device | None = None,
    before_pattern: Callable[[str], None] | None = None,
    flush_policy: str = "write",
    cell_prologue: Callable[[str], tuple[str, int]] | None = None,
    around: Callable[[str, str, int], AbstractContextManager[Any]] | None = None,
    flush_buffer: Any = None,
    should_stop: Callable[[int, list[dict[str, Any]]], bool] | None = None,
    stages_of: Callable[[str], Collection[str] | None] | None = None,
) -> list[dict[str, Any]]:
    """Run the rounds ``rounds`` (default: all); return one record per (round, pattern) with each
    stage's elapsed ms.

    ``stage_fns[pattern][stage]`` are zero-argument callables, called in their mapping order.
    ``on_pattern_done(round, pattern)`` (telemetry) is called after each pattern's synchronise;
    ``on_round_done(round, records)`` (the journal) after each round. ``rewarm`` marks every record
    as a warm-up re-run (a resumed bench re-runs its warm-up rounds before continuing).
    ``before_pattern(pattern)`` runs before the pattern's first flush, outside every timed region
    (bench's per-pattern arm swaps the pattern's pinned autotune configs in there).
    ``flush_policy`` (one of :data:`FLUSH_POLICIES`) picks the sweep; ``l2_flush_bytes=0`` also skips it.
    ``cell_prologue(pattern)`` -> ``(flush policy, spin cycles)`` overrides both per pattern (a study of
    the method itself); ``around(pattern, stage, round)`` is a context entered around each call, inside its
    event pair (the CUPTI pass's profiler range); ``flush_buffer`` is a buffer from
    ``device.flush_buffer`` to sweep instead of allocating one; ``should_stop(round, round_records)``,
    asked after each round's ``on_round_done``, ends the loop early when it returns True (the stop rule);
    ``stages_of(pattern)``, asked when the pattern's turn comes, names the stages to time (None: all; the stop
    rule's drop ``stage``): the others are skipped, not called, and its record holds only those.
    Raises ValueError for another policy.
    """
    if flush_policy not in FLUSH_POLICIES:
        raise ValueError(f"flush_policy {flush_policy!r} is not one of {FLUSH_POLICIES}")
    dev: Device = CudaDevice() if device is None else device
    flush = dev.flush_buffer(l2_flush_bytes) if flush_buffer is None else flush_buffer
    records = []
    todo = list(range(len(orders))) if rounds is None else list(rounds)
    for done, r in enumerate(todo, start=1):
        round_records = []
        for pattern in orders[r]:
            if before_pattern is not None:
                before_pattern(pattern)
            policy, cycles = (flush_policy, LAUNCH_GUARD_CYCLES) if cell_prologue is None else cell_prologue(pattern)
            if policy not in FLUSH_POLICIES:
                raise ValueError(f"flush_policy {policy!r} of {pattern!r} is not one of {FLUSH_POLICIES}")
            events = []
            timed = None if stages_of is None else stages_of(pattern)
            for stage, fn in stage_fns[pattern].items():
                if timed is not None and stage not in timed:
                    continue
                start, end = dev.event(), dev.event()
                if l2_flush_bytes and policy == "write":
                    dev.flush(flush, r)
                elif l2_flush_bytes and policy == "read":
                    dev.read_flush(flush)
                dev.spin(cycles)
                start.record()
                if around is None:
                    fn()
                else:
                    with around(pattern, stage, r):
                        fn()
                end.record()
                events.append((stage, start, end))
            dev.synchronize()
            rec = {"round": r, "pattern": pattern, "warmup": rewarm or r < warmup_rounds,
                   "ms": {stage: float(s.elapsed_time(e)) for stage, s, e in events}}
            if rewarm:
                rec["rewarm"] = True
            if on_pattern_done is not None:
                rec["telemetry"] = on_pattern_done(r, pattern)
            round_records.append(rec)
        records.extend(round_records)
        if on_round_done is not None:
            on_round_done(r, round_records)
        if progress is not None:
            progress(done, len(todo))
        if should_stop is not None and should_stop(r, round_records):
            break
    return records


def next_round(records: Sequence[Mapping[str, Any]]) -> int:
    """The first round a resumed bench still has to run (re-run warm-ups do not count).

    >>> next_round([{"round": 0}, {"round": 1}, {"round": 1, "rewarm": True}])
    2
    >>> next_round([])
    0
    """
    return 1 + max((r["round"] for r in records if not r.get("rewarm")), default=-1)
