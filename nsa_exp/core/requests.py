"""What a command asks its arm to do, as one typed, frozen record (issue 29): the command line's settings folded
in once, at the entry point, and passed down as one value; an arm reads them and never sets one.

:class:`BenchRequest` is ``bench``'s: :mod:`nsa_exp.arguments` builds it once its checks pass (the config read
and its overrides folded in, every output claimed under the output policy, the routing files read and
validated), the bench door hands it to ``gpu/bench.run_bench``, and ``gpu/bench.BenchArm`` is constructed from
it. ``reproduce`` builds its own (the flow's paths, the stop rule's default, no journal, no tuning options).
:class:`PeerRequest` is ``peer-bench``'s, built the same way (``arguments._peer_bench``) and read by
``gpu/peers.run_peers`` and its arm. :class:`CompareRequest` is ``compare``'s (``arguments._compare``, read by
``handlers.cmd_compare``): the options checked and the output claimed before any file is read.
:class:`WhatIfRequest` is ``whatif``'s (``arguments._whatif``, read by ``gpu/whatif_run.run_whatif``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Config
from .families import TUNE_PATTERN


@dataclass(frozen=True)
class BenchRequest:
    """One ``bench`` run's settings, built once at the entry point (``arguments._bench`` for the command, the flow
    for ``reproduce``, a test for itself) and read, never changed, below it. Frozen: a field is never assigned
    after construction (the routing files' dictionaries are handed on as they were read, not copied).

    - ``config``: the experiment config (:class:`~nsa_exp.core.config.Config`) read from ``--config`` with the
      command line's overrides folded in once (:meth:`~nsa_exp.core.config.Config.overridden`: ``--repetitions``;
      ``--stop-rule`` as ``timing.stop`` when the config has no rule of its own). ``config.raw`` stays the file's.
    - ``allow_gpu``: ``--allow-gpu``: run on a GPU other than the config's ``required_gpu`` (the GPU gate's
      override, recorded in its gate).
    - ``output``: the result JSON (schema ``result``) to write: ``--output``, else ``results/raw/<name>.json``
      (``<name>``: ``--name``, else the config's name) moved to ``runs/<name>/`` unless ``--publish``; claimed
      under :class:`nsa_exp.io.store.OutputPolicy` before any GPU work. Its stem names the run (the record's
      ``name``, the journal's folder).
    - ``summary``: the tidy summary CSV (schema ``summary_row``): ``--summary``, else
      ``results/summaries/<output stem>.csv`` under the same policy; None writes none (tests, never the command).
    - ``resume``: ``--resume``: continue the interrupted run's journal (its configs pinned, its warm-up re-run).
    - ``discard_journal``: ``--discard-journal``: delete an interrupted run's journal and start over.
    - ``tune_on``: ``--tune-on``: the routing the default arm autotunes on, once (default
      :data:`~nsa_exp.core.families.TUNE_PATTERN`, ``local``).
    - ``per_pattern``: ``--tune per-pattern``: tune each routing on itself and re-pin its configs before its calls.
    - ``autotune_from``: ``--autotune-from``: a bench result whose configs are replayed (nothing tuned), as given
      on the command line (validated by the argument checks); None: tune.
    - ``cupti_rounds``: ``--cupti-rounds``: profiled rounds of the CUPTI pass after the timed ones; None sizes the
      pass by need from the timed medians, 0 skips it.
    - ``routing_files``: ``(routings, reports)`` of :func:`nsa_exp.routing.files.file_routings` for
      ``--routing-file`` (``--require-equal-edges`` applied), both keyed ``file:<stem>``: each routing an int
      ``[B, T, H, S]`` array of block indices, timed as one more pattern; None (or two empty dicts): none.
    - ``tuning_cache``: ``--tuning-cache``: the folder (checked by :func:`nsa_exp.io.store.check_work_folder`, made
      when the first entry is kept) whose entry for this GPU, FLA commit and shape is replayed, or filled by a
      fresh tune; None: no cache.
    """

    config: Config
    allow_gpu: bool
    output: Path
    summary: Path | None
    resume: bool = False
    discard_journal: bool = False
    tune_on: str = TUNE_PATTERN
    per_pattern: bool = False
    autotune_from: str | None = None
    cupti_rounds: int | None = None
    routing_files: tuple[dict[str, Any], dict[str, dict[str, Any]]] | None = None
    tuning_cache: Path | None = None


@dataclass(frozen=True)
class PeerRequest:
    """One ``peer-bench`` run's settings, built once at the entry point (``arguments._peer_bench`` for the command,
    a test for itself) and read, never changed, below it (``gpu/peers.run_peers``, ``gpu/peers.PeerArm``).

    - ``config``: the experiment config with ``--repetitions`` folded in and ``--stop-rule``'s default rule as
      ``timing.stop`` when the config has none (:meth:`~nsa_exp.core.config.Config.overridden`).
    - ``allow_gpu``: ``--allow-gpu`` (the GPU gate's override, recorded in its gate).
    - ``peers``: ``--peers``, each a row name of :data:`nsa_exp.core.peers.PEERS`, in the order given, none twice.
    - ``output``: the peer result JSON (schema ``peer_result``): ``--output``, else ``results/peers/<config
      name>.json`` moved to ``runs/<name>/`` unless ``--publish``; claimed under
      :class:`nsa_exp.io.store.OutputPolicy` before any GPU work.
    - ``cupti_rounds``: ``--cupti-rounds``: profiled rounds after the timed ones; None sizes the pass by need, 0
      skips it.
    """

    config: Config
    allow_gpu: bool
    peers: tuple[str, ...]
    output: Path
    cupti_rounds: int | None = None


@dataclass(frozen=True)
class CompareRequest:
    """One ``compare``'s settings, built once by ``arguments._compare`` after its checks (the options, A against
    B, the output claimed under the output policy) and before any input is read; ``handlers.cmd_compare`` reads it.

    - ``a``, ``b``: the two results (paths as given; B is judged against A).
    - ``output``: the comparison JSON (schema ``compare``) to write, claimed: ``--output``, else
      ``results/compare/<A>_vs_<B>[_cycles].json`` under the output policy; ``""``: write none (``--output ''``).
    - ``noise_from``: ``--noise-from X Y`` (a result and its independent repeat), () for none.
    - ``floor``: ``--floor`` (a fraction), None for the noise table's or ``noise_from``'s floors.
    - ``cycles``: ``--cycles``: compare in SM-cycle space.
    - ``fail_on``: ``--fail-on``'s verdict set name, None for none.
    - ``resamples``: bootstrap resamples per row.
    """

    a: str
    b: str
    output: str
    noise_from: tuple[str, ...] = ()
    floor: float | None = None
    cycles: bool = False
    fail_on: str | None = None
    resamples: int = 10_000


@dataclass(frozen=True)
class WhatIfRequest:
    """One ``whatif`` run's settings (WHAT-IF ARMS, not the experiment's measurement), built once by
    ``arguments._whatif`` after its checks and read by ``gpu/whatif_run.run_whatif`` and its arm.

    - ``config``: the experiment config (``--config``).
    - ``allow_gpu``: ``--allow-gpu`` (the GPU gate's override, recorded in its gate).
    - ``patterns``: ``--patterns``, each a routing of the config.
    - ``max_fanins``: ``--max-fanin``: the F values (positive; a CSR row longer than F is split).
    - ``layouts``: ``--layouts``, each ``split`` or ``split-heavy-first``.
    - ``rounds``: ``--rounds``: timed rounds after the config's warm-up (positive).
    - ``benchmark_result``: ``--benchmark-result``: the bench result (validated) whose autotune configs are pinned.
    - ``output``: the what-if result JSON (schema ``whatif_result``): ``--output``, else
      ``results/whatif/<config>_whatif.json`` moved to ``runs/<name>/`` unless ``--publish``; claimed under
      :class:`nsa_exp.io.store.OutputPolicy` before any GPU work.
    """

    config: Config
    allow_gpu: bool
    patterns: tuple[str, ...]
    max_fanins: tuple[int, ...]
    layouts: tuple[str, ...]
    rounds: int
    benchmark_result: str
    output: Path
