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
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .. import REPO_ROOT
from ..analysis.summary import summary_frame
from ..checking import bench_result
from ..core.families import TUNE_PATTERN
from ..core.measurement import Measurement, RoundPlan
from ..core.records import BenchResult, recorded_stages
from ..core.requests import BenchRequest
from ..core.stages import STAGE_NAMES
from ..errors import GateFailure
from ..io.journal import Journal, check_resumable
from ..io.store import write_frame, write_record
from ..io.tuning_cache import entry_path, store
from ..routing.fanin import routing_statistics
from ..routing.packing import packing_record
from .cupti import cupti_pass
from .engine import Arm, Cells, Run, measure
from .gates import gate_detail
from .telemetry import throttled
from .timing import next_round

if TYPE_CHECKING:  # FLA and triton only after the env gate (tune imports the module)
    from .tuning import PerPatternPins


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


@dataclass(frozen=True)
class TuneOutcome:
    """What bench's tune hook produced (run state, not a setting; set once, by :meth:`BenchArm.tune`):

    - ``autotune``: the ``autotune`` fields :func:`.tuning.tuning_arm` returned, its ``pins`` taken out
      (``tuned_on``, ``mode``, ``per_pattern``, ``replayed_from``),
    - ``kernels``: :func:`.launcher.autotune_record` right after tuning (each autotuned kernel's cache and best
      config), the record's ``autotune.kernels`` and the reference of the autotune-unchanged assertion,
    - ``pins``: the per-pattern pins re-applied before each routing's calls (None: one config serves all),
    - ``seconds``: host seconds the tuning took (``autotune.tune_seconds``),
    - ``cache_entry``: the ``--tuning-cache`` file this run's fresh tune fills once written (None: no cache, or
      the run replays its entry).
    """

    autotune: dict[str, Any]
    kernels: dict[str, Any]
    pins: PerPatternPins | None
    seconds: float
    cache_entry: Path | None


class BenchArm(Arm[BenchResult]):
    """bench's hooks: the journal and the tuning arm (:func:`.tuning.tuning_arm`) around the one loop, the
    autotune-unchanged assertion after it, then the CUPTI pass, reproduction and memory blocks; the record is a
    :class:`nsa_exp.core.records.BenchResult`, written with its summary CSV.

    Its settings are the frozen ``request`` (:class:`nsa_exp.core.requests.BenchRequest`) it is constructed from,
    and the journal that request names; the hooks never set one. What the run produces is kept in the attributes
    annotated below, each set by the hook that produces it."""

    #: inputs: each routing's stage calls, ``{routing: {stage: call}}``
    fns: dict[str, Any]
    #: tune: the tuning's outcome
    tuned: TuneOutcome
    #: timed: the measurement of every round (a resumed run's journalled rounds, then this process's)
    measurement: Measurement

    prefetch_inputs = True  # the inputs are drawn while the FLA-sources and routing gates run (issue 30)

    def __init__(self, request: BenchRequest):
        self.request = request
        self.journal = Journal(REPO_ROOT, request.output.stem)  # the run's name: its output's stem
        self.records: list[dict[str, Any]] = []   # run state: every round's records so far (tune loads a journal's)

    def round_plan(self, run: Run) -> RoundPlan:
        """The round plan of the routings timed (the config's, then the routing files'; known after the gates)."""
        return RoundPlan.of(run.names, self.request.config)

    def gates(self, run: Run) -> None:
        self.journal.refuse_unless_told(self.request.resume, self.request.discard_journal)
        super().gates(run)  # env first, before FLA is imported
        run.nvml()
        if self.request.tune_on not in run.names:
            raise GateFailure(f"--tune-on: bench autotunes on {self.request.tune_on!r}; it is not among "
                              f"config.patterns {run.names}")
        if self.request.discard_journal:  # only once every gate has passed: a refused run changes nothing
            self.journal.discard()

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

        request, config = self.request, run.config
        reset_autotuners()
        old_meta, self.records = self.journal.load() if request.resume else ({}, [])
        if request.resume:
            pin_autotune_configs(old_meta["autotune_best"])
        # the bench result whose configs are replayed: --autotune-from's, else the tuning cache's entry when it holds
        # one for this GPU, FLA commit and shape (the request is never changed)
        replay_from, cache_entry = request.autotune_from, None
        if request.tuning_cache is not None:  # io/tuning_cache.py: replay a kept fresh tune, or keep this one
            entry = entry_path(request.tuning_cache, run.device.name(),
                               gate_detail(run.gates, "fla_sources")["commit"], config.shape.to_dict(),
                               config.cu_seqlens)
            if entry.is_file() and replay_from is None:
                replay_from = str(entry)
            elif replay_from is None and not request.per_pattern and request.tune_on == TUNE_PATTERN:
                cache_entry = entry
        t_tune = run.clock()
        autotune = tuning_arm(config, self.fns, request.tune_on, request.per_pattern, replay_from, run.device.name(),
                              synchronize=run.device.synchronize)
        kernels = autotune_record()
        seconds = run.clock() - t_tune
        pins = autotune.pop("pins")  # the record's autotune fields are the rest
        self.tuned = TuneOutcome(autotune, kernels, pins, seconds, cache_entry)
        plan = self.round_plan(run)
        meta = {"config": config.raw, "gpu_name": run.device.name(), "repetitions": plan.repetitions,
                "fla_commit": gate_detail(run.gates, "fla_sources")["commit"], "warmup_rounds": plan.warmup,
                "autotune_best": {k: v["best_config"] for k, v in kernels.items()},
                "round_orders": plan.orders(),
                "autotune_arm": autotune,
                **({"routing_files": {n: r["sha256"] for n, r in run.file_reports.items()}} if run.files else {})}
        if request.resume:
            check_resumable(old_meta, meta)
        else:
            self.journal.start(meta)

    def cells(self, run: Run) -> Iterator[Cells]:
        plan, pins = self.round_plan(run), self.tuned.pins
        group = partial(Cells, fns=self.fns, plan=plan, telemetry=True)
        if self.request.resume:  # the interrupted run's warm-up, re-run before continuing
            yield group(plan=replace(plan, stop=None), rounds=range(plan.warmup), rewarm=True)
        yield group(rounds=range(next_round(self.records), plan.rounds), before_cell=pins.before if pins else None,
                    after_cell=pins.after if pins else None, on_round_done=self.journal.append,
                    label=f"bench {run.config.name}")

    def timed(self, run: Run, cells: Cells) -> None:
        self.records += cells.measured.records
        # the last group's orders: every planned round, cut where the stop rule ended the loop
        self.measurement = cells.measured.with_records(self.records)

    def record(self, run: Run) -> BenchResult:
        from .launcher import autotune_record  # noqa: PLC0415 - FLA after the env gate
        from .numerics import compare  # noqa: PLC0415

        config, names, m = run.config, run.names, self.measurement
        arm, tuned, pins = self.tuned.autotune, self.tuned.kernels, self.tuned.pins
        after = autotune_record()
        unchanged = pins is not None or all(after[k]["cache"] == tuned[k]["cache"] and len(after[k]["cache"]) <= 1
                                            for k in tuned)
        same_config = unchanged and len({json.dumps(c, sort_keys=True) for c in arm["per_pattern"].values()}) <= 1
        if not unchanged:
            raise GateFailure("autotune: a kernel re-tuned during timing (cache changed); results would mix "
                              "configs. Check FLA_CACHE_RESULTS=0 and that all patterns share one shape")

        cupti = cupti_pass(run, self.fns, m, STAGE_NAMES, self.request.cupti_rounds,
                           before_pattern=pins.before if pins else None, per_stage=True)

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
        packing = (None if config.cu_seqlens is None else
            packing_record(config.cu_seqlens, gate_detail(gates, "equal_edges")["closed_form"]))
        return bench_result.build(
            name=run.output_path().stem, config=config, gates=gates, gate_detail=gate_detail, records=m.records,
            timing=m.timing(recorded_stages(m.records), resumed=self.request.resume), per_pattern=per_pattern,
            autotune={"tuned_on": arm["tuned_on"], "tune_seconds": self.tuned.seconds, "kernels": tuned,
                      "same_config_all_patterns": same_config, **{k: v for k, v in arm.items() if k != "tuned_on"}},
            telemetry={"available": run.nvml().handle is not None},
            metadata=metadata, phases=run.phases.seconds(), wall_seconds=run.elapsed(), throttled=throttled,
            routing_files=run.file_reports, packing=packing, cupti=cupti)

    def write(self, run: Run, doc: BenchResult) -> None:
        write_record(run.output_path(), doc)
        if self.tuned.cache_entry is not None:
            store(self.tuned.cache_entry, doc)
        if self.request.summary is not None:
            write_frame(self.request.summary, summary_frame(doc), "summary_row")
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
    files, file_reports = request.routing_files or ({}, {})
    return measure(BenchArm(request), Run(request.config, request.allow_gpu, request.output, device=device,
                                          clock=clock, files=files, file_reports=file_reports))
