"""``bench``: time every FLA stage for every routing at the primary shape, interleaved (an arm of
:mod:`nsa_exp.gpu.engine`).

Steps: gates (env, H100, triton, FLA sources, equal edges) -> shared random inputs (q, k, v, dO are
the same tensors for every pattern; only the routing differs) -> autotune once on ``local`` (the
autotune key of FLA's kernels, ``BS, BK, BV, G``, does not include the routing, so that one config
serves every pattern; we assert it never changed) -> warm-up + timed rounds, patterns interleaved in a
seeded shuffled order (every round journalled; optionally ended early by the stop rule) -> the CUPTI
pass -> staged-vs-official reproduction at the full shape -> memory accounting -> result JSON (schema
``result``) and the tidy summary CSV (schema ``summary_row``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from .. import REPO_ROOT
from ..analysis.summary import summary_frame
from ..checking import bench_result
from ..core.families import TUNE_PATTERN
from ..core.measurement import RoundPlan
from ..core.records import BenchResult, recorded_stages
from ..core.requests import BenchRequest
from ..core.stages import STAGE_NAMES
from ..errors import GateFailure
from ..io.store import write_frame, write_record
from ..io.tuning_cache import entry_path, store
from ..routing.fanin import routing_statistics
from ..routing.packing import packing_record
from .cupti import cupti_pass
from .engine import Arm, Cells, Run, measure
from .gates import gate_detail
from .journal import Journal, check_resumable
from .telemetry import throttled
from .timing import next_round


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


class BenchArm(Arm[BenchResult]):
    """bench's hooks: the journal and the tuning arm (:func:`.tuning.tuning_arm`) around the one loop, the
    autotune-unchanged assertion after it, then the CUPTI pass, reproduction and memory blocks; the record is a
    :class:`nsa_exp.core.records.BenchResult`, written with its summary CSV."""

    def __init__(self, summary: str | Path | None, resume: bool, discard_journal: bool, tune_on: str,
                 per_pattern: bool, autotune_from: str | None, cupti_rounds: int | None,
                 tuning_cache: Path | None = None):
        self.summary, self.resume, self.discard_journal = summary, resume, discard_journal
        self.tune_on, self.per_pattern, self.autotune_from = tune_on, per_pattern, autotune_from
        self.cupti_rounds, self.tuning_cache = cupti_rounds, tuning_cache
        self.cache_entry: Path | None = None   # the tuning-cache file this run's fresh tune fills (none: it replays)
        self.records: list[dict[str, Any]] = []

    def gates(self, run: Run) -> None:
        self.journal = Journal(REPO_ROOT, run.output_path().stem)
        self.journal.refuse_unless_told(self.resume, self.discard_journal)
        super().gates(run)  # env first, before FLA is imported
        run.nvml()
        if self.tune_on not in run.names:
            raise GateFailure(f"--tune-on: bench autotunes on {self.tune_on!r}; it is not among config.patterns "
                              f"{run.names}")

    def inputs(self, run: Run) -> None:
        super().inputs(run)
        self.fns = {n: run.staged[n].stage_callables() for n in run.names}

    def tune(self, run: Run) -> None:
        """Autotune once, on local: one staged pass + the wrapper; every kernel's cache then holds one key.
        A resumed run pins the interrupted run's configs instead (tuning is not repeatable across processes).

        The autotuners start from scratch (:func:`.tuning.reset_autotuners`): FLA keys its autotune cache without
        T, so a process that ran other shapes first (``reproduce`` runs smoke's T=256..2048 calls before the
        bench) would otherwise launch the configs tuned at those shapes. Seen on the H200 (2026-12-02, d731b04):
        dK/dV kept smoke's BQ=4 config, 1.0 s of "tuning" against the formal run's 68 s."""
        # Deferred on purpose: FLA/triton may only be imported once the env gate has passed.
        from .launcher import autotune_record, pin_autotune_configs  # noqa: PLC0415
        from .tuning import reset_autotuners, tuning_arm  # noqa: PLC0415

        config = run.config
        reset_autotuners()
        old_meta, self.records = self.journal.load() if self.resume else ({}, [])
        if self.resume:
            pin_autotune_configs(old_meta["autotune_best"])
        if self.tuning_cache is not None:  # io/tuning_cache.py: replay a kept fresh tune, or keep this one
            entry = entry_path(self.tuning_cache, run.device.name(), gate_detail(run.gates, "fla_sources")["commit"],
                               config.shape.to_dict(), config.cu_seqlens)
            if entry.is_file() and self.autotune_from is None:
                self.autotune_from = str(entry)
            elif self.autotune_from is None and not self.per_pattern and self.tune_on == TUNE_PATTERN:
                self.cache_entry = entry
        t_tune = run.clock()
        self.arm = tuning_arm(config, self.fns, self.tune_on, self.per_pattern, self.autotune_from, run.device.name(),
                              synchronize=run.device.synchronize)
        self.tuned = autotune_record()
        self.tune_seconds = run.clock() - t_tune
        self.pins = self.arm.pop("pins")
        self.plan = RoundPlan.of(run.names, config)
        meta = {"config": config.raw, "gpu_name": run.device.name(), "repetitions": self.plan.repetitions,
                "fla_commit": gate_detail(run.gates, "fla_sources")["commit"], "warmup_rounds": self.plan.warmup,
                "autotune_best": {k: v["best_config"] for k, v in self.tuned.items()},
                "round_orders": self.plan.orders(),
                "autotune_arm": self.arm,
                **({"routing_files": {n: r["sha256"] for n, r in run.file_reports.items()}} if run.files else {})}
        if self.resume:
            check_resumable(old_meta, meta)
        else:
            self.journal.start(meta)

    def cells(self, run: Run) -> Iterator[Cells]:
        plan, pins = self.plan, self.pins
        group = partial(Cells, fns=self.fns, plan=plan, telemetry=True)
        if self.resume:  # the interrupted run's warm-up, re-run before continuing
            yield group(plan=replace(plan, stop=None), rounds=range(plan.warmup), rewarm=True)
        yield group(rounds=range(next_round(self.records), plan.rounds), before_cell=pins and pins.before,
                    after_cell=pins and pins.after, on_round_done=self.journal.append,
                    label=f"bench {run.config.name}")

    def timed(self, run: Run, cells: Cells) -> None:
        self.records += cells.measured.records
        # the last group's orders: every planned round, cut where the stop rule ended the loop
        self.measurement = cells.measured.with_records(self.records)

    def record(self, run: Run) -> BenchResult:
        from .launcher import autotune_record  # noqa: PLC0415 - FLA after the env gate
        from .numerics import compare  # noqa: PLC0415

        config, names, arm, tuned, m = run.config, run.names, self.arm, self.tuned, self.measurement
        after = autotune_record()
        unchanged = self.pins is not None or all(after[k]["cache"] == tuned[k]["cache"] and len(after[k]["cache"]) <= 1
                                                 for k in tuned)
        same_config = unchanged and len({json.dumps(c, sort_keys=True) for c in arm["per_pattern"].values()}) <= 1
        if not unchanged:
            raise GateFailure("autotune: a kernel re-tuned during timing (cache changed); results would mix "
                              "configs. Check FLA_CACHE_RESULTS=0 and that all patterns share one shape")

        cupti = cupti_pass(run, self.fns, m, STAGE_NAMES, self.cupti_rounds,
                           before_pattern=self.pins and self.pins.before, per_stage=True)

        gates = run.gates
        per_pattern: dict[str, Any] = {}
        for n in names:
            s = run.staged[n]
            with run.phases("reproduction"):
                # Reproduction at the full shape: one staged pass vs the official wrapper on the same o/lse.
                inter = s.run_staged()
                official = s.full_bwd(inter["o"], inter["lse"])
                repro = {g: compare(a, b) for g, a, b in zip(("dq", "dk", "dv"), s.gradients(), official,
                                                             strict=True)}
                reproduction_gate(n, repro, config.tolerances.full_shape_dkv_rel_l2)
                del official
                mem = memory_accounting(s, inter["o"], inter["lse"], cuda=run.device.memory)
                del inter
                run.device.empty_cache()
            per_pattern[n] = {"edges": int(gate_detail(gates, "equal_edges")["per_pattern"][n]),
                              **routing_statistics(run.routings[n], config.shape.block_size, config.cu_seqlens),
                              "reproduces_official": repro, "memory": mem}

        metadata = run.metadata()
        packing = None if config.cu_seqlens is None else \
            packing_record(config.cu_seqlens, gate_detail(gates, "equal_edges")["closed_form"])
        return bench_result.build(
            name=run.output_path().stem, config=config, gates=gates, gate_detail=gate_detail, records=m.records,
            timing=m.timing(recorded_stages(m.records), resumed=self.resume), per_pattern=per_pattern,
            autotune={"tuned_on": arm["tuned_on"], "tune_seconds": self.tune_seconds, "kernels": tuned,
                      "same_config_all_patterns": same_config, **{k: v for k, v in arm.items() if k != "tuned_on"}},
            telemetry={"available": run.nvml().handle is not None},
            metadata=metadata, phases=run.phases.seconds(), wall_seconds=run.elapsed(), throttled=throttled,
            routing_files=run.file_reports, packing=packing, cupti=cupti)

    def write(self, run: Run, doc: BenchResult) -> None:
        write_record(run.output_path(), doc)
        if self.cache_entry is not None:
            store(self.cache_entry, doc)
        if self.summary is not None:
            write_frame(self.summary, summary_frame(doc), "summary_row")
        self.journal.discard()


def run_bench(request: BenchRequest, device: Any = None, clock: Any = time.monotonic) -> dict[str, Any]:
    """The whole benchmark of ``request`` (:class:`nsa_exp.core.requests.BenchRequest`: every setting, built once
    at the entry point); returns the result document (already written to ``request.output``).

    ``request.config`` holds the command line's overrides already (:meth:`nsa_exp.core.config.Config.overridden`:
    ``--repetitions``; the stop rule of ``bench --stop-rule`` as ``timing.stop`` from ``--stop-rule`` when the
    config has none; recorded as ``timing.stop``, :mod:`nsa_exp.analysis.stop_rule`).
    Tuning arm (issue 11; recorded under ``autotune``): ``tune_on`` (default ``local``, the seed's
    protocol) tunes once on that routing and reuses its configs; ``per_pattern`` tunes each routing on
    itself (autotuners reset between patterns) and re-pins each pattern's configs before its calls;
    ``autotune_from`` (a bench result) replays that run's configs, tuning nothing; ``tuning_cache`` (a folder,
    :mod:`nsa_exp.io.tuning_cache`) replays the entry a fresh tune of the default arm kept there for this GPU,
    FLA commit and shape, or tunes afresh and keeps the written result as that entry.
    ``cupti_rounds`` profiled rounds after the timed ones give the ``cupti`` block (issue 14,
    :mod:`nsa_exp.gpu.cupti`): None (default) sizes the pass by need from the timed medians
    (:func:`nsa_exp.analysis.cupti.sizing`, recorded as ``cupti.sizing``), 0 skips it.
    ``routing_files``: ``(routings, reports)`` of :func:`nsa_exp.routing.files.file_routings`, validated
    before this is called; each is timed as one more pattern ``file:<stem>``, interleaved with the rest.
    ``device`` (default CUDA) and ``clock`` (host seconds) are injectable (:mod:`.engine`): not settings of the
    run, so not in the request.
    """
    r = request
    files, file_reports = r.routing_files or ({}, {})
    arm = BenchArm(r.summary, r.resume, r.discard_journal, r.tune_on, r.per_pattern, r.autotune_from, r.cupti_rounds,
                   r.tuning_cache)
    return measure(arm, Run(r.config, r.allow_gpu, r.output, device=device, clock=clock, files=files,
                            file_reports=file_reports))
