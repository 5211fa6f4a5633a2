"""``bench``: time every FLA stage for every routing at the primary shape, interleaved.

Steps: gates (env, H100, triton, FLA sources, equal edges) -> shared random inputs (q, k, v, dO are
the same tensors for every pattern; only the routing differs) -> autotune once on ``local`` (the
autotune key of FLA's kernels, ``BS, BK, BV, G``, does not include the routing, so that one config
serves every pattern; we assert it never changed) -> staged-vs-official reproduction at the full
shape -> warm-up + timed rounds, patterns interleaved in a seeded shuffled order -> memory
accounting -> result JSON (schema ``result``) and the tidy summary CSV (schema ``summary_row``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from .. import REPO_ROOT
from ..analysis.cupti import ROUNDS as CUPTI_ROUNDS
from ..analysis.summary import summary_frame
from ..core.config import Config
from ..core.families import TUNE_PATTERN
from ..core.protocol import round_orders
from ..core.records import build_result
from ..errors import GateFailure
from ..io.metadata import base_metadata
from ..io.store import write_frame, write_json
from ..routing.fanin import routing_statistics
from ..routing.packing import packing_record
from .cupti import profile_kernel_times
from .gates import gate_detail, run_gates
from .journal import Journal, check_resumable
from .telemetry import Telemetry, gpu_identity, throttled
from .timing import LAUNCH_GUARD_CYCLES, next_round, run_rounds


class Progress:
    """Rounds done on stderr via tqdm (quiet when stderr is not a TTY), phase in the description."""

    def __init__(self, label: str, warmup: int):
        self.label, self.warmup, self.bar = label, warmup, None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = tqdm(total=total, desc=self.label, unit="round", file=sys.stderr,
                            disable=not sys.stderr.isatty())
        self.bar.set_postfix_str("warm-up" if done <= self.warmup else "timed")
        self.bar.update(1)
        if done == total:
            self.bar.close()


def memory_accounting(staged: Any, state_o: Any, state_lse: Any, cuda: Any = torch.cuda) -> dict[str, int]:
    """Auxiliary and gradient bytes of the staged path; the official wrapper's peak after a reset.

    ``cuda`` (default ``torch.cuda``) is injectable so a CPU test can pin the accounting with a fake.
    """
    delta = staged.delta_preprocess(state_o)
    csr_indices, csr_offsets = staged.csr()
    grads = staged.dq.nbytes + staged.dk.nbytes + staged.dv.nbytes
    cuda.synchronize()
    del delta
    cuda.reset_peak_memory_stats()
    base_alloc, base_reserved = cuda.memory_allocated(), cuda.memory_reserved()
    outputs = staged.full_bwd(state_o, state_lse)
    cuda.synchronize()
    peak_alloc, peak_reserved = cuda.max_memory_allocated(), cuda.max_memory_reserved()
    shape = staged.p.shape
    return {
        "delta_bytes": shape.B * shape.T * shape.HQ * 4,
        "csr_indices_bytes": int(csr_indices.nbytes),
        "csr_offsets_bytes": int(csr_offsets.nbytes),
        "csr_transient_cursor_bytes": int((csr_offsets.numel() - 1) * 4),
        "aux_persistent_bytes": shape.B * shape.T * shape.HQ * 4 + int(csr_indices.nbytes + csr_offsets.nbytes),
        "preallocated_gradient_bytes": int(grads),
        "official_outputs_bytes": int(sum(t.nbytes for t in outputs)),
        "official_baseline_allocated_bytes": int(base_alloc),
        "official_peak_allocated_bytes": int(peak_alloc),
        "official_peak_minus_baseline_bytes": int(peak_alloc - base_alloc),
        "official_baseline_reserved_bytes": int(base_reserved),
        "official_peak_reserved_bytes": int(peak_reserved),
    }


def reproduction_gate(pattern: str, repro: dict[str, Any], dkv_rel_l2: float) -> None:
    """At the primary shape the staged path must give the wrapper's dQ bit for bit and its dK/dV within
    ``dkv_rel_l2`` (see smoke.py for why dK/dV may differ); otherwise the stage timings are void."""
    if not repro["dq"]["bit_exact"]:
        raise GateFailure(f"reproduction {pattern}: staged dq differs from parallel_nsa_bwd in "
                          f"{repro['dq']['n_different']} elements; the staged launch is wrong, timings void")
    for g in ("dk", "dv"):
        if repro[g]["rel_l2"] > dkv_rel_l2:
            raise GateFailure(f"reproduction {pattern}: staged {g} rel_l2 {repro[g]['rel_l2']:.3g} > "
                              f"{dkv_rel_l2} vs parallel_nsa_bwd; the staged launch is wrong, timings void")


def run_bench(config: Config, allow_gpu: bool, output: str | Path, summary: str | Path | None,
              repetitions: int | None = None, resume: bool = False, discard_journal: bool = False,
              tune_on: str = TUNE_PATTERN, per_pattern: bool = False,
              autotune_from: str | None = None, cupti_rounds: int = CUPTI_ROUNDS,
              routing_files: tuple[dict, dict] | None = None) -> dict[str, Any]:
    """The whole benchmark; returns the result document (already written).

    Tuning arm (issue 11; recorded under ``autotune``): ``tune_on`` (default ``local``, the seed's
    protocol) tunes once on that routing and reuses its configs; ``per_pattern`` tunes each routing on
    itself (autotuners reset between patterns) and re-pins each pattern's configs before its calls;
    ``autotune_from`` (a bench result) replays that run's configs, tuning nothing.
    ``cupti_rounds`` (default 5; 0 skips it) profiled rounds after the timed ones give the ``cupti``
    block (issue 14, :mod:`nsa_exp.gpu.cupti`).
    ``routing_files``: ``(routings, reports)`` of :func:`nsa_exp.routing.files.file_routings`, validated
    before this is called; each is timed as one more pattern ``file:<stem>``, interleaved with the rest.
    """
    files, file_reports = routing_files or ({}, {})
    t_start = time.monotonic()
    journal = Journal(REPO_ROOT, Path(output).stem)
    journal.refuse_unless_told(resume, discard_journal)
    # env first, before FLA is imported
    gates, routings = run_gates(config, allow_gpu=allow_gpu, strict=True, files=files)
    # Deferred on purpose: FLA/triton may only be imported once the env gate above has passed.
    from .launcher import StagedBackward, autotune_record, make_inputs, make_problem, pin_autotune_configs  # noqa: PLC0415
    from .numerics import compare  # noqa: PLC0415
    from .tuning import tuning_arm  # noqa: PLC0415

    telemetry = Telemetry()
    reps = repetitions or config.timing.repetitions
    names = [p.name for p in config.patterns] + list(files)
    if tune_on not in names:
        raise GateFailure(f"--tune-on: bench autotunes on {tune_on!r}; it is not among config.patterns {names}")

    inputs = make_inputs(config.shape, config.seeds.inputs, "cuda")
    staged = {n: StagedBackward(make_problem(config.shape, routings[n], inputs, config.cu_seqlens)) for n in names}
    fns = {n: staged[n].stage_callables() for n in names}

    # Autotune once, on local: one staged pass + the wrapper; every kernel's cache then holds one key.
    # A resumed run pins the interrupted run's configs instead (tuning is not repeatable across processes).
    old_meta, records = journal.load() if resume else ({}, [])
    if resume:
        pin_autotune_configs(old_meta["autotune_best"])
    t_tune = time.monotonic()
    arm = tuning_arm(config, fns, tune_on, per_pattern, autotune_from, torch.cuda.get_device_name(0))
    tuned = autotune_record()
    tune_seconds = time.monotonic() - t_tune
    pins = arm.pop("pins")

    warmup = config.timing.warmup_rounds
    orders = round_orders(names, warmup + reps, config.timing.order, config.seeds.order)
    meta = {"config": config.raw, "gpu_name": torch.cuda.get_device_name(0), "repetitions": reps,
            "fla_commit": gate_detail(gates, "fla_sources")["commit"], "warmup_rounds": warmup,
            "autotune_best": {k: v["best_config"] for k, v in tuned.items()}, "round_orders": orders,
            "autotune_arm": arm,
            **({"routing_files": {n: r["sha256"] for n, r in file_reports.items()}} if files else {})}
    if resume:
        check_resumable(old_meta, meta)
        records += run_rounds(fns, orders, warmup, config.timing.l2_flush_bytes, flush_policy=config.timing.flush,
                              rounds=range(warmup),
                              on_pattern_done=lambda r, p: telemetry.sample(), rewarm=True)
    else:
        journal.start(meta)
    first = next_round(records)
    records += run_rounds(fns, orders, warmup, config.timing.l2_flush_bytes, flush_policy=config.timing.flush,
                          rounds=range(first, len(orders)),
                          on_pattern_done=lambda r, p: (pins and pins.after(p), telemetry.sample())[1],
                          on_round_done=journal.append, before_pattern=pins and pins.before,
                          progress=Progress(f"bench {config.name}", warmup - first))

    after = autotune_record()
    unchanged = pins is not None or all(after[k]["cache"] == tuned[k]["cache"] and len(after[k]["cache"]) <= 1
                                        for k in tuned)
    same_config = unchanged and len({json.dumps(c, sort_keys=True) for c in arm["per_pattern"].values()}) <= 1
    if not unchanged:
        raise GateFailure("autotune: a kernel re-tuned during timing (cache changed); results would mix "
                          "configs. Check FLA_CACHE_RESULTS=0 and that all patterns share one shape")

    cupti = None
    try:  # a cross-check only: a host without CUPTI keeps its timed rounds, recorded without the block
        cupti = profile_kernel_times(fns, config.timing.l2_flush_bytes, config.timing.flush, cupti_rounds,
                                     before_pattern=pins and pins.before) if cupti_rounds else None
    except (RuntimeError, OSError) as exc:
        print(f"warning: CUPTI pass skipped ({type(exc).__name__}: {exc}); the result has no cupti block",
              file=sys.stderr)

    per_pattern: dict[str, Any] = {}
    for n in names:
        s = staged[n]
        # Reproduction at the full shape: one staged pass vs the official wrapper on the same o/lse.
        inter = s.run_staged()
        official = s.full_bwd(inter["o"], inter["lse"])
        repro = {g: compare(a, b) for g, a, b in zip(("dq", "dk", "dv"), s.gradients(), official, strict=True)}
        reproduction_gate(n, repro, config.tolerances.full_shape_dkv_rel_l2)
        del official
        mem = memory_accounting(s, inter["o"], inter["lse"])
        del inter
        per_pattern[n] = {"edges": int(gate_detail(gates, "equal_edges")["per_pattern"][n]),
                          **routing_statistics(routings[n], config.shape.block_size, config.cu_seqlens),
                          "reproduces_official": repro, "memory": mem}
        torch.cuda.empty_cache()

    metadata = base_metadata()
    metadata["gpu"] = gpu_identity(telemetry.device_info())
    result = build_result(
        name=Path(output).stem, config=config, gates=gates, gate_detail=gate_detail, records=records,
        per_pattern=per_pattern, orders=orders, repetitions=reps, resumed=resume,
        autotune={"tuned_on": arm["tuned_on"], "tune_seconds": tune_seconds, "kernels": tuned,
                  "same_config_all_patterns": same_config, **{k: v for k, v in arm.items() if k != "tuned_on"}},
        launch_guard_cycles=LAUNCH_GUARD_CYCLES, telemetry={"available": telemetry.handle is not None},
        metadata=metadata, wall_seconds=time.monotonic() - t_start, throttled=throttled,
        routing_files=file_reports)
    if config.cu_seqlens is not None:
        result["packing"] = packing_record(config.cu_seqlens, gate_detail(gates, "equal_edges")["closed_form"])
    if cupti is not None:
        result["cupti"] = cupti
    write_json(output, result, "result")
    if summary is not None:
        write_frame(summary, summary_frame(result), "summary_row")
    journal.discard()
    return result
