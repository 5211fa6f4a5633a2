"""The one measurement engine: gates -> inputs -> tune or pin -> cells -> rounds -> record -> write.

Every GPU measurement of the project is an **arm** of this engine: ``bench`` (:mod:`.bench`), a sweep point
(:mod:`.sweep_point`), the what-if arms (:mod:`.whatif_run`), the autotune matrix (:mod:`.autotune_matrix`),
the release arm (:mod:`.release`) and ``smoke`` (:mod:`.smoke`, which times nothing). :func:`measure` is the
only place that sequences the steps; an arm is a subclass of :class:`Arm` overriding the hooks that differ (the
idea of tritonbench's ``BenchmarkOperator``: one loop fills one record, the rest are hooks), so it declares

- its **gates** (:meth:`Arm.gates`; default: every gate of :func:`.gates.run_gates`, strict, before FLA is
  imported, filling ``run.gates``, ``run.routings``, ``run.names``),
- its **inputs** (:meth:`Arm.inputs`; default: shared seeded q, k, v, dO and one
  :class:`.launcher.StagedBackward` per routing in ``run.staged``: the one stage -> callable binding,
  :meth:`~.launcher.StagedBackward.stage_callables`, resolved from the Stage table),
- its **tuning policy** (:meth:`Arm.tune`; default none: the first call tunes),
- its **cells** (:meth:`Arm.cells`: groups of cells, each a :class:`Cells` -- ``{cell: {stage: call}}``,
  its :class:`~nsa_exp.core.measurement.RoundPlan` (:meth:`RoundPlan.of` the config: warm-up and timed
  rounds, order, flush, stop rule), the per-cell hooks that pin or check autotune configs, the journal), which
  the engine times one group at a time through the one round loop, :func:`.timing.run_rounds`
  (:func:`time_cells`; a generator may build a group only when it is reached and free it after
  :meth:`Arm.timed`, as the what-if arms do),
- what it does with each timed group (:meth:`Arm.timed`, reading the group's
  :class:`~nsa_exp.core.measurement.Measurement`: the autotune-unchanged assertion, summaries),
- its **record** (:meth:`Arm.record`: a typed record of :mod:`nsa_exp.core.records` -- a
  :class:`~nsa_exp.core.records.BenchResult`, :class:`~nsa_exp.core.records.SweepPoint`,
  :class:`~nsa_exp.core.records.ReleaseResult` -- or the JSON of a kind without one; record blocks such as
  bench's ``cupti`` and ``packing`` are added there; its ``timing`` block is the measurement's,
  :meth:`~nsa_exp.core.measurement.Measurement.timing`, stop record included) and
- how it is **written** (:meth:`Arm.write`; default: :func:`nsa_exp.io.store.write_record`, or
  :func:`~nsa_exp.io.store.write_json` under :attr:`Arm.schema`, to ``run.output``: validated, atomic).

Adding an arm is one module (the subclass and a ``run_*`` function or command handler calling :func:`measure`)
and one command row (:data:`nsa_exp.commands.COMMANDS`: the command's name, the handler, its options). The
release arm is one: it runs the engine in its own child process whose ``sys.path`` holds another FLA
(importing this module imports neither FLA nor triton, so that process chooses its FLA before the first FLA
import); its hooks are that FLA's provenance in place of the pinned-sources gate (``gates``), its public calls
as the stages (``inputs``), one pass of ``local`` (``tune``), one group of every routing (``cells``), and the
CUPTI pass over the same cells with its own per-kernel ``aggregate`` before its record (``record``).

The device is injectable: ``Run.device`` (default :class:`.timing.CudaDevice`) is everything the engine
and the loop touch on the GPU (events, flush, spin, synchronise, its name, memory, placement), so CPU tests
drive whole arms over FLA's real kernels under the Triton interpreter with a fake device and a fake clock
(``Run.clock``, read by the stop rule) and pin the loop's call order: flush, spin, start event, call, end
event per stage, one synchronise per cell.

Stop rule (:mod:`nsa_exp.analysis.stop_rule`): a group whose plan has ``stop`` set is stopped after the first
round at which the rule says so; its measurement's ``orders`` are cut to the rounds that ran and its ``stop``
holds the result's ``timing.stop`` block (rule, source, which criterion stopped it, one trace entry per timed
round). Under the verdict rule (``floor_fraction``) the floors are the noise table's for the device's GPU, and a
routing that has converged is left out of the later rounds' orders (the measurement records the orders as run);
with ``drop`` ``stage`` each converged stage of a routing is skipped in the later rounds on its own
(:meth:`~nsa_exp.analysis.stop_rule.StopTracker.stages_of`, handed to the loop), its records holding only the stages
timed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from tqdm import tqdm

from ..analysis.stop_rule import StopTracker, run_floors
from ..core.config import Config
from ..core.measurement import Measurement, PhaseClock, RoundPlan
from ..core.records import Record, RunRecord
from ..io.metadata import base_metadata
from ..io.store import write_json, write_record
from .gates import run_gates
from .inputs import Prefetch
from .telemetry import Telemetry
from .timing import CudaDevice, run_rounds


class Progress:
    """Rounds done on stderr via tqdm (quiet when stderr is not a TTY), phase in the description."""

    def __init__(self, label: str, warmup: int):
        self.label, self.warmup = label, warmup
        self.bar: tqdm | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = tqdm(total=total, desc=self.label, unit="round", file=sys.stderr,
                            disable=not sys.stderr.isatty())
        self.bar.set_postfix_str("warm-up" if done <= self.warmup else "timed")
        self.bar.update(1)
        if done == total:
            self.close()

    def close(self) -> None:
        """Close the bar (a loop the stop rule ended early never reaches its total)."""
        if self.bar is not None:
            self.bar.close()


@dataclass
class Cells:
    """One group of cells the round loop times together: every round runs each cell once, in that round's
    order (``plan``: :class:`nsa_exp.core.measurement.RoundPlan`, which also says the warm-up, the flush and the
    stop rule), and each cell's stages in their mapping order (one event pair per stage call).

    Filled by the engine after the loop: ``measurement`` (:class:`nsa_exp.core.measurement.Measurement`: the
    orders of the rounds that ran, one record per (round, cell) -- ``{"round", "pattern", "warmup",
    "ms": {stage: ms}}`` plus ``telemetry`` when sampled, ``rewarm`` for a resumed run's re-run warm-up -- and,
    under the stop rule, its record).
    """

    fns: Mapping[str, Mapping[str, Callable[[], Any]]]    # cell -> stage -> zero-argument call
    plan: RoundPlan
    rounds: Sequence[int] | None = None                    # the rounds to run (default all)
    rewarm: bool = False                                   # a resumed bench's re-run warm-up
    telemetry: bool = False                                # one NVML sample after each cell's synchronise
    before_cell: Callable[[str], None] | None = None       # before the cell's first flush (pin its configs)
    after_cell: Callable[[str], None] | None = None        # after its synchronise, before telemetry (check them)
    on_round_done: Callable[[int, list[dict[str, Any]]], None] | None = None   # the journal
    label: str | None = None                               # progress bar (None: none)
    tag: Any = None                                        # the arm's own (the what-if pattern, the matrix stage)
    measurement: Measurement | None = None

    @property
    def measured(self) -> Measurement:
        """:attr:`measurement`, once the engine has timed this group (ValueError before)."""
        if self.measurement is None:
            raise ValueError("this group of cells has not been timed yet")
        return self.measurement


def time_cells(cells: Cells, device: Any = None, telemetry: Any = None,
               clock: Callable[[], float] = time.monotonic) -> Cells:
    """Time ``cells`` through :func:`.timing.run_rounds` over ``device`` (default CUDA); ``telemetry`` is
    sampled after each cell when ``cells.telemetry``; ``clock`` (host seconds) times the stop rule. Returns
    ``cells``, its ``measurement`` filled."""
    plan = cells.plan
    orders = plan.orders()
    todo = list(range(len(orders))) if cells.rounds is None else list(cells.rounds)
    tracker = should_stop = None
    if plan.stop is not None:
        if cells.rewarm or todo != list(range(len(orders))):
            raise ValueError("the stop rule times a whole run: it cannot resume or re-warm part of one")
        floors = (None if plan.stop.floor_fraction is None else
            run_floors(device.name() if device is not None else None,
                       list(dict.fromkeys(s for stages in cells.fns.values() for s in stages))))
        tracker = StopTracker(plan.stop, plan.repetitions, plan.stop_source, clock, plan.cells, floors)

        def should_stop(r: int, round_records: list[dict[str, Any]]) -> bool:
            stop = tracker.update(round_records)
            # the verdict rule: later rounds time only the routings not yet converged (the loop reads each
            # round's order when it reaches it)
            orders[r + 1:] = [tracker.later_order(o) for o in orders[r + 1:]]
            return stop

    sample = telemetry.sample if cells.telemetry and telemetry is not None else None
    on_cell_done = None
    if cells.after_cell is not None or cells.telemetry:
        def on_cell_done(r: int, cell: str) -> Any:
            if cells.after_cell is not None:
                cells.after_cell(cell)
            return sample() if sample is not None else None

    progress = None if cells.label is None else Progress(cells.label, sum(1 for r in todo if r < plan.warmup))
    records = run_rounds(cells.fns, orders, plan.warmup, plan.l2_flush_bytes, on_pattern_done=on_cell_done,
                         progress=progress, rounds=todo, on_round_done=cells.on_round_done, rewarm=cells.rewarm,
                         device=device, before_pattern=cells.before_cell, flush_policy=plan.flush_policy,
                         should_stop=should_stop,
                         stages_of=tracker.stages_of if tracker is not None and tracker.by_stage else None)
    if progress is not None:
        progress.close()
    stop = None if tracker is None else tracker.record()
    if stop is not None:
        orders = orders[:plan.warmup + stop["rounds"]]
    cells.measurement = Measurement(plan, orders, records, stop)
    return cells


@dataclass
class Run:
    """One measurement: what the arm is given, and what the engine's steps fill in."""

    config: Config
    allow_gpu: bool
    output: Path | None = None
    device: Any = None                       # the GPU as the engine sees it (default timing.CudaDevice())
    clock: Callable[[], float] = time.monotonic
    files: dict[str, Any] = field(default_factory=dict)         # routing files: {"file:<stem>": block_indices}
    file_reports: dict[str, Any] = field(default_factory=dict)  # ... and their reports (routing.files)
    telemetry: Any = None                    # NVML sampler (default telemetry.Telemetry(), made when first used)
    prefetch: Prefetch | None = None         # the inputs being drawn during the gates (Arm.prefetch_inputs)
    # filled by the steps
    gates: list[dict[str, Any]] = field(default_factory=list)
    routings: dict[str, Any] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)              # the routings timed: the config's, then the files
    inputs: dict[str, Any] = field(default_factory=dict)
    staged: dict[str, Any] = field(default_factory=dict)        # routing -> launcher.StagedBackward
    t_start: float = 0.0
    phases: PhaseClock = field(init=False)   # host seconds per phase (measure() times each hook; arms nest theirs)

    def __post_init__(self) -> None:
        if self.device is None:
            self.device = CudaDevice()
        self.phases = PhaseClock(self.clock)

    def nvml(self) -> Any:
        """The telemetry sampler (made on first use, as the drivers made theirs)."""
        if self.telemetry is None:
            self.telemetry = Telemetry()
        return self.telemetry

    def time(self, cells: Cells) -> Cells:
        """:func:`time_cells` on this run's device, telemetry and clock."""
        return time_cells(cells, self.device, self.nvml() if cells.telemetry else None, self.clock)

    def elapsed(self) -> float:
        return self.clock() - self.t_start

    def output_path(self) -> Path:
        """``output``, for an arm that always writes its document (bench, smoke, the autotune matrix)."""
        if self.output is None:
            raise ValueError("this arm writes its document: the Run needs an output")
        return self.output

    def metadata(self) -> dict[str, Any]:
        """Host metadata (:func:`nsa_exp.io.metadata.base_metadata`) and the GPU's identity."""
        metadata = base_metadata()
        metadata["gpu"] = self.device.identity(self.nvml().device_info())
        return metadata


#: The document an arm records: a typed record (:mod:`nsa_exp.core.records`), or the JSON of a kind without one.
DocT = TypeVar("DocT", bound="Record | dict[str, Any]")


class Arm(Generic[DocT]):
    """An arm of the engine; override the hooks that differ (module docstring). :func:`measure` calls them
    in this order: gates, inputs, tune, then cells (each group timed, then :meth:`timed`), record, write."""

    #: the store schema the document is written under (None: the caller writes it)
    schema: str | None = None
    #: False: build the launchers dense even for a packed config (the arms written before packing existed)
    packed: bool = True

    #: True: the default :meth:`inputs` reads inputs drawn in the background from the moment the ``gpu`` gate
    #: passes (:class:`.inputs.Prefetch`; the same values, drawn while the later gates run)
    prefetch_inputs: bool = False

    def gates(self, run: Run) -> None:
        def passed(name: str) -> None:
            if name == "gpu" and self.prefetch_inputs:
                run.prefetch = Prefetch(run.config.shape, run.config.seeds.inputs)

        try:
            run.gates, run.routings = run_gates(run.config, allow_gpu=run.allow_gpu, strict=True, files=run.files,
                                                passed=passed)
        except BaseException:
            if run.prefetch is not None:  # a later gate refused: stop the draw, do not hold the refusal up
                run.prefetch.cancel()
            raise
        run.names = [p.name for p in run.config.patterns] + list(run.files)

    def inputs(self, run: Run) -> None:
        # Deferred on purpose: FLA/triton may only be imported once the env gate has passed.
        from .launcher import StagedBackward, make_inputs, make_problem  # noqa: PLC0415

        config = run.config
        cu = config.cu_seqlens if self.packed else None
        run.inputs = make_inputs(config.shape, config.seeds.inputs, run.device.tensor_device, run.prefetch)
        run.prefetch = None
        run.staged = {n: StagedBackward(make_problem(config.shape, run.routings[n], run.inputs, cu))
                      for n in run.names}

    def tune(self, run: Run) -> None:
        """Tune or pin FLA's autotuners before anything is timed (default: nothing)."""

    def cells(self, run: Run) -> Iterable[Cells]:
        """The groups of cells to time, in order (default none)."""
        return ()

    def timed(self, run: Run, cells: Cells) -> None:
        """After one group's rounds (``cells.measurement`` filled)."""

    def record(self, run: Run) -> DocT:
        """The document: a typed record (:mod:`nsa_exp.core.records`; a bench result, a sweep point), or the
        JSON of a kind that has none (written under :attr:`schema`)."""
        raise NotImplementedError

    def write(self, run: Run, doc: DocT) -> None:
        """Validated against its kind's schema, then written atomically to ``run.output`` (none: not written)."""
        if run.output is None:
            return
        if isinstance(doc, RunRecord):  # a typed record of a kind (bench result, sweep point, release result)
            write_record(run.output, doc)
        elif self.schema is not None and isinstance(doc, dict):
            write_json(run.output, doc, self.schema)


def measure(arm: Arm[Any], run: Run) -> dict[str, Any]:
    """Run ``arm``: gates -> inputs -> tune -> each group of cells timed -> record -> write. Returns the
    document's JSON. Each step is timed into ``run.phases`` (:class:`~nsa_exp.core.measurement.PhaseClock`:
    gates, inputs, tune, rounds, record; an arm's record hook nests its own, e.g. bench's cupti and
    reproduction, and reads :meth:`~nsa_exp.core.measurement.PhaseClock.seconds` into its record).
    A group that ran under the stop rule must reach the document: its ``timing.stop`` is the group's stop record
    (the arm builds its timing with :meth:`~nsa_exp.core.measurement.Measurement.timing`); a record
    without it is refused before anything is written (RuntimeError: the arm is wrong, not the input)."""
    run.t_start = run.clock()
    with run.phases("gates"):
        arm.gates(run)
    with run.phases("inputs"):
        arm.inputs(run)
    with run.phases("tune"):
        arm.tune(run)
    stop = None
    for cells in arm.cells(run):
        with run.phases("rounds"):
            run.time(cells)
        stop = cells.measured.stop if cells.measured.stop is not None else stop
        arm.timed(run, cells)
    with run.phases("record"):
        doc = arm.record(run)
    if stop is not None:
        timing = doc.timing.to_json() if isinstance(doc, RunRecord) else doc.get("timing", {})
        if timing.get("stop") != stop:
            raise RuntimeError(f"{type(arm).__name__}: a group ran under the stop rule but the record's timing.stop "
                               "is not its stop record; build the timing block with Measurement.timing")
    arm.write(run, doc)
    return doc.to_json() if isinstance(doc, Record) else doc
