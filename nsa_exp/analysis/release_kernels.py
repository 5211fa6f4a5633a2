"""The release arm's per-kernel CUPTI records, pure: profiler events -> each call's kernels -> stages.

The release arm calls FLA's public ``parallel_nsa_bwd`` as a whole, so its stages cannot be bracketed
by events one by one as bench's staged launcher does. After the timed rounds, the CUPTI pass
(:func:`nsa_exp.gpu.cupti.profile_kernel_times`) runs each call inside a ``record_function`` range
(:func:`nsa_exp.analysis.cupti.range_label`); :func:`kernel_calls` gives each call the device events
(kernels, memsets, memcpys) of its window on the GPU timeline, in start order, as
``[name index, start ms from the window's start, duration ms]``.

:func:`stage_groups` then maps each call's kernels to the pinned bench's stages by kernel name
(:data:`STAGE_KERNELS`, from the Stage table's ``kernel`` and ``kernel_span``): one-launch stages
(``delta_preprocess``, ``dq_core``, ``dkv_core``) are the sum of their kernel's durations; ``csr`` is the span
from the first ``prepare_block_csr_kernel`` launch (the count pass) to the end of the last (the scatter pass),
the cumsum between them included. The pinned ``csr`` range also holds the two ``torch.zeros`` fills before the
count pass, so that correspondence is *partial* (a few µs on ~0.3 ms). A Triton kernel the release launches
with no pinned counterpart (0.5.1's ``parallel_nsa_kernel_mask``, its dense block mask) is its own group
``kernel:<name>``, marked as not corresponding.

>>> class R:
...     def __init__(self, a, b): self.start, self.end = a, b
>>> class E:
...     def __init__(self, name, a, b, dev="CUDA"): self.name, self.time_range, self.device_type = name, R(a, b), dev
>>> ev = [E("nsa_cupti/local/full_bwd/0", 100.0, 200.0), E("parallel_nsa_bwd_kernel_dq", 110.0, 200.0),
...       E("prepare_block_csr_kernel", 210.0, 220.0), E("cumsum", 221.0, 223.0),
...       E("prepare_block_csr_kernel", 224.0, 230.0), E("parallel_nsa_bwd_kernel_dkv", 231.0, 390.0),
...       E("fill", 0.0, 1.0), E("spin_kernel", 1.0, 99.0), E("nsa_cupti/local/full_bwd/0", 100.0, 400.0, dev="CPU"),
...       E("fill", 391.0, 392.0), E("spin_kernel", 392.0, 900.0), E("nsa_cupti/local/full_bwd/1", 901.0, 950.0),
...       E("parallel_nsa_bwd_kernel_dq", 901.0, 950.0)]
>>> names, calls, markers = kernel_calls(ev)
>>> len(names), markers, len(calls["local"]["full_bwd"])
(4, {'names': ['fill', 'spin_kernel'], 'per_call': 2, 'consistent': True}, 2)
>>> groups = stage_groups(calls["local"]["full_bwd"][:1], names, launched=["parallel_nsa_bwd_kernel_dq",
...     "parallel_nsa_bwd_kernel_dkv", "prepare_block_csr_kernel"])
>>> {g: [round(x, 3) for x in v] for g, v in groups.items()}
{'csr': [0.02], 'dq_core': [0.09], 'dkv_core': [0.159]}
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..core.stages import STAGES
from .cupti import PREFIX, SLACK_US

#: pinned backward stage -> (its kernel's name, how a call's launches of it make the stage's time, correspondence):
#: a span stage's pinned range also holds torch ops besides its kernel, so it corresponds only partially.
STAGE_KERNELS: dict[str, tuple[str, str, str]] = {
    s.name: (s.kernel, "span" if s.kernel_span else "sum", "partial" if s.kernel_span else "exact")
    for s in STAGES if s.backward and s.kernel is not None}
CSR_NOTE = ("release: span of its prepare_block_csr_kernel launches (count pass start to scatter pass end); "
            "pinned: the prepare_block_csr range, which also holds the two torch.zeros fills before the count pass")
Call = list[list[Any]]  # [[name index, start ms from the range start, duration ms], ...]


def kernel_matches(name: str, kernel: str) -> bool:
    """A profiler kernel name is ``kernel`` (Triton names the CUDA function after the ``@triton.jit``
    function; a ``_<suffix>`` is tolerated, as older Triton versions appended one).

    >>> kernel_matches("parallel_nsa_bwd_kernel_dkv", "parallel_nsa_bwd_kernel_dq")
    False
    """
    return name == kernel or name.startswith(kernel + "_")


def _is_device(e: Any) -> bool:
    return str(getattr(e, "device_type", "")).rsplit(".", 1)[-1] != "CPU"


def kernel_calls(events: Iterable[Any]) -> tuple[list[str], dict[str, dict[str, list[Call]]], dict[str, Any]]:
    """``(names, {pattern: {stage: [call, ...]}}, markers)`` (module doc); calls in round order.

    A call's window runs from the start of its range's GPU-side span to the start of the next range's:
    the GPU runs one stream in launch order, and a training step's backward kernels, launched by the
    autograd engine's device thread, fall outside the span of the range opened on the calling thread
    but inside this window. Each window ends with the next call's L2 flush and GPU spin (queued before
    its range opens); their device events are learned from what runs before the first range (the first
    call's flush and spin: nothing else is queued there) and dropped from the end of every window.
    ``markers`` = ``{"names": [...], "per_call": n, "consistent": bool}``: ``consistent`` is False when a
    window does not end with that sequence (its call's kernels are then not trustworthy). Events carry
    ``name``, ``device_type`` and ``time_range.start/end`` (µs), as torch.profiler's ``FunctionEvent``."""
    ranges, device = [], []
    for e in events:
        if not _is_device(e):
            continue
        parts = e.name.split("/")
        if parts[0] == PREFIX:
            if len(parts) == 4:
                ranges.append((e.time_range.start, parts[1], parts[2], int(parts[3])))
        else:
            device.append((e.time_range.start, e.time_range.end, e.name))
    device.sort()
    ranges.sort()
    marker = [n for a, _, n in device if ranges and a < ranges[0][0] - SLACK_US]
    consistent = True
    found: dict[str, dict[str, dict[int, list[tuple[float, float, str]]]]] = {}
    for j, (start, pattern, stage, call) in enumerate(ranges):
        stop = ranges[j + 1][0] if j + 1 < len(ranges) else float("inf")
        inside = [(a - start, b - a, n) for a, b, n in device if start - SLACK_US <= a < stop - SLACK_US]
        if j + 1 < len(ranges) and marker:
            consistent &= [n for _, _, n in inside[-len(marker):]] == marker
            inside = inside[:-len(marker)]
        by_call = found.setdefault(pattern, {}).setdefault(stage, {})
        by_call[call] = by_call.get(call, []) + inside
    names = sorted({n for st in found.values() for c in st.values() for k in c.values() for _, _, n in k})
    index = {n: i for i, n in enumerate(names)}
    out = {p: {s: [[[index[n], round(a / 1000, 6), round(d / 1000, 6)] for a, d, n in cs[c]] for c in sorted(cs)]
               for s, cs in st.items()} for p, st in found.items()}
    return names, out, {"names": marker, "per_call": len(marker), "consistent": bool(consistent)}


def call_span_ms(call: Call) -> float:
    """First launch's start to last launch's end of one call (0 for a call without launches)."""
    return max((s + d for _, s, d in call), default=0.0) - min((s for _, s, _ in call), default=0.0)


def group_ms(call: Call, names: Sequence[str], kernel: str, how: str) -> float | None:
    """One call's time of ``kernel``: the sum of its launches' durations (``sum``) or the span from the
    first launch's start to the last one's end (``span``); None when the call did not launch it."""
    hits = [(s, d) for i, s, d in call if kernel_matches(names[i], kernel)]
    if not hits:
        return None
    return sum(d for _, d in hits) if how == "sum" else max(s + d for s, d in hits) - min(s for s, _ in hits)


def group_table(launched: Sequence[str]) -> list[dict[str, Any]]:
    """The groups of a release whose wrapper launches ``launched`` (kernel names read from its source):
    each pinned stage whose kernel it launches, then one ``kernel:<name>`` group per other kernel."""
    rows: list[dict[str, Any]] = [
        {"group": stage, "kernel": k, "how": how, "pinned_stage": stage, "correspondence": c,
         **({"note": CSR_NOTE} if stage == "csr" else {})}
        for stage, (k, how, c) in STAGE_KERNELS.items() if any(kernel_matches(x, k) for x in launched)]
    known = {k for k, _, _ in STAGE_KERNELS.values()}
    rows += [{"group": f"kernel:{k}", "kernel": k, "how": "sum", "pinned_stage": None, "correspondence": "none",
              "note": "launched by this release's parallel_nsa_bwd; no stage of the pinned bench times it"}
             for k in dict.fromkeys(launched) if k not in known]
    return rows


def stage_groups(calls: Sequence[Call], names: Sequence[str], launched: Sequence[str]) -> dict[str, list[float]]:
    """``{group: [ms per call]}`` over ``calls`` for the groups of :func:`group_table` every call launched."""
    out = {}
    for row in group_table(launched):
        values = [group_ms(c, names, row["kernel"], row["how"]) for c in calls]
        present = [v for v in values if v is not None]
        if values and len(present) == len(values):
            out[row["group"]] = [round(v, 6) for v in present]
    return out
