"""The ``autotune_matrix`` kind: every autotune config of FLA's autotuned kernels x every routing, timed
(results/autotune). Its builder (:func:`build`; ``gpu/autotune_matrix.MatrixArm`` calls it) and its checks
(:func:`checks`), in one module.

- ``matrix_stats_recompute`` (every cell's median, p10, p90, p95, min, mean and n from its raw observations,
  :func:`nsa_exp.core.protocol.summarize`), ``matrix_observations`` (each timed cell has exactly the run's
  ``timing.rounds`` observations, one per round), ``matrix_cells`` (every routing in every ok cell; configs
  unique; FLA's choice among the configs).
- the autotune configs, the config's rules and shape, the run record, provenance and wall time every GPU
  document gets.
"""

from __future__ import annotations

from typing import Any

from ..core.config import Config
from ..core.families import TUNE_PATTERN
from ..core.kinds import schema_version
from ..core.protocol import LAUNCH_GUARD_CYCLES, round_orders, summarize
from ..core.stages import BACKWARD_AUTOTUNE_KEY, MATRIX_STAGES
from ..errors import UserError
from ..io.config_files import config_from_dict
from . import record_checks
from .autotune_checks import autotune_configs, config_key
from .checks import Add, Context, Problems, close, fixed_field_problems, guarded
from .record_checks import config_semantics, run_record
from .routing_checks import edge_gate_problems
from .run_checks import shape_problems

KIND = "autotune_matrix"  # its row of nsa_exp.core.kinds.DOCUMENT_KINDS


def cell_key(index: int, pattern: str) -> str:
    """The loop's "pattern" name of one (config index, routing) cell.

    >>> cell_key(3, "sink-heavy")
    '3|sink-heavy'
    """
    return f"{index}|{pattern}"


def matrix_checks(doc: dict[str, Any], add: Add) -> None:
    """Recompute and cross-check an ``autotune_matrix`` document; each check through ``add``."""
    stats_p, obs_p, cell_p = [], [], []
    rounds, warmup = doc["timing"]["rounds"], doc["timing"]["warmup_rounds"]
    for st, s in doc["stages"].items():
        seen = set()
        for i, cell in enumerate(s["cells"]):
            path = f"$.stages.{st}.cells[{i}]"
            if config_key(cell["config"]) in seen:
                cell_p.append((f"{path}.config", "the same config appears twice"))
            seen.add(config_key(cell["config"]))
            if cell["status"] != "ok":
                continue
            if sorted(cell["patterns"]) != sorted(doc["patterns"]):
                cell_p.append((f"{path}.patterns", f"routings {sorted(cell['patterns'])} != {sorted(doc['patterns'])}"))
            for n, o in cell["patterns"].items():
                for key, value in summarize(o["raw_ms"]).items():
                    if not close(o[key], value):
                        stats_p.append((f"{path}.patterns.{n}.{key}", f"recorded {o[key]} but the raw "
                                        f"observations give {value}"))
                if len(o["raw_ms"]) != rounds or sorted(o["rounds"]) != list(range(warmup, warmup + rounds)):
                    obs_p.append((f"{path}.patterns.{n}.raw_ms", f"{len(o['raw_ms'])} observations (rounds "
                                  f"{o['rounds'][:3]}...) != one per timed round ({rounds})"))
        # the rounds' cell orders are the plan's (core/measurement.RoundPlan.orders: every ok config x routing, in
        # config then routing order, seeded): reordered or cut orders PASSed (an attacker, 2026-12-06)
        cells = [cell_key(i, n) for i, c in enumerate(s["cells"]) if c["status"] == "ok" for n in doc["patterns"]]
        t = doc["timing"]
        if s["round_orders"] != round_orders(cells, warmup + rounds, t["order_mode"], t["order_seed"]):
            obs_p.append((f"$.stages.{st}.round_orders", f"not the {warmup + rounds} rounds' orders of its "
                          f"{len(cells)} cells that {t['order_mode']} with seed {t['order_seed']} gives"))
        for n, cfg in s["fla_choice"].items():
            if config_key(cfg) not in seen:
                cell_p.append((f"$.stages.{st}.fla_choice.{n}", f"{cfg} is not among the matrix's configs"))
        # the space is the configs FLA kept (the cells) and those it pruned (gpu/autotune_matrix.stage_document):
        # space_size 40 beside 16 cells and none pruned PASSed --strict (an attacker, 2026-12-07)
        space = len(s["cells"]) + len(s["pruned_by_fla"])
        if s["space_size"] != space:
            cell_p.append((f"$.stages.{st}.space_size", f"{s['space_size']}, but {len(s['cells'])} cells and "
                           f"{len(s['pruned_by_fla'])} pruned configs make {space}"))
    # every config was compiled inside the run, one after another: a cell's compile time of 9999 s in a run of 146 s
    # PASSed (an attacker, 2026-12-07)
    compiled = sum(c.get("compile_seconds") or 0.0 for s in doc["stages"].values() for c in s["cells"])
    if compiled > doc["wall_seconds"]:
        cell_p.append(("$.stages.*.cells[*].compile_seconds", f"{compiled:.1f} s of compiling in all, more than the "
                       f"run's wall time {doc['wall_seconds']:.1f} s"))
    add("matrix_stats_recompute", stats_p)
    add("matrix_observations", obs_p)
    add("matrix_cells", cell_p)
    add("matrix_timing", timing_problems(doc))


def timing_problems(doc: dict[str, Any]) -> Problems:
    """The matrix's timing block as :func:`build` writes it from its config and the protocol: the config's L2 flush
    and order mode, its order seed, the pinned launch guard, the tuning routing (a matrix claiming no L2 flush, or
    an order mode no code has, PASSed: an attacker, 2026-12-06). Warm-up and rounds come from the command line."""
    try:
        config = config_from_dict(doc["config"], "$.config")
    except UserError as exc:
        return [("$.config", str(exc))]
    t = doc["timing"]
    want = {"l2_flush_bytes": config.timing.l2_flush_bytes, "launch_guard_cycles": LAUNCH_GUARD_CYCLES,
            "order_mode": config.timing.order, "order_seed": config.seeds.order}
    problems = fixed_field_problems(t, want, "$.timing", "the config and protocol give")
    if doc.get("tuned_on_seed") != TUNE_PATTERN:
        problems.append(("$.tuned_on_seed", f"{doc.get('tuned_on_seed')!r}, the tuner's routing is {TUNE_PATTERN!r}"))
    return problems


def stage_set_problems(doc: dict[str, Any]) -> Problems:
    """The stages the recorded command asked for (``--stages``, else its default ``dq_core,dkv_core``), each with
    FLA's autotune key: a matrix with a stage deleted or its key cut PASSed ``--strict`` (an attacker, 2026-12-07)."""
    problems: Problems = []
    argv = record_checks.recorded_cli_argv(doc)
    if argv is not None:
        given = record_checks.argv_option(argv, "--stages") or ",".join(MATRIX_STAGES)  # as the door reads it
        asked = list(dict.fromkeys(s.strip() for s in given.split(",") if s.strip()))
        if list(doc["stages"]) != asked:
            problems.append(("$.stages", f"{list(doc['stages'])}, but the recorded command asks for {asked}"))
    for name, s in doc["stages"].items():  # each stage's kernel name: autotune_configs
        if s.get("autotune_key") != list(BACKWARD_AUTOTUNE_KEY):
            problems.append((f"$.stages.{name}.autotune_key", f"{s.get('autotune_key')}, FLA's key is "
                             f"{list(BACKWARD_AUTOTUNE_KEY)}"))
    return problems


def checks(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    matrix_checks(doc, add)
    add("matrix_stages", stage_set_problems(doc))
    autotune_configs(doc, add)
    config_semantics(doc, add)
    add("shape_matches_config", shape_problems(doc))
    guarded("gates_passed", add, gates_passed, doc, add, ctx)
    run_record(doc, add, ctx)
    guarded("config_provenance", add, record_checks.config_provenance, doc, add, ctx)
    work = sum(sum(o["raw_ms"]) for s in doc["stages"].values() for c in s["cells"] if c["status"] == "ok"
               for o in c["patterns"].values())
    record_checks.wall_plausible(doc["wall_seconds"], work, "$.wall_seconds", "its cells' timed observations", add)
    ctx.unverifiable("$.stages.*.cells[*].patterns.*.raw_ms, $.stages.*.fla_choice, $.wall_seconds, $.metadata",
                     "measured on the GPU host (FLA's choice: its autotuner's, held to the matrix's configs); every "
                     "statistic is recomputed from the observations")


def gates_passed(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    """A matrix is timed only after every gate passed (one recorded failed, with a TF32 environment behind it,
    PASSed --strict: an attacker, 2026-12-06), and its equal-edge gate is its config's routings'
    (:func:`.routing_checks.edge_gate_problems`)."""
    failed = record_checks.unpassed_gates(doc, "nothing is timed after a failed gate")
    add("gates_passed", failed or edge_gate_problems(doc, doc["config"], ctx))


def build(*, name: str, config: Config, patterns: list[str], warmup: int, rounds: int, fla_commit: str,
          gates: list[dict[str, Any]], stages: dict[str, Any], metadata: dict[str, Any],
          wall_seconds: float) -> dict[str, Any]:
    """The matrix's document: per autotuned stage its cells (``stages``: each config's per-routing observations
    and statistics, FLA's own choice), timed ``rounds`` rounds after ``warmup`` over ``patterns``."""
    timing = config.timing
    return {"schema_version": schema_version("autotune_matrix"), "kind": "autotune_matrix", "name": name,
            "config": config.raw, "shape": config.shape.to_dict(), "patterns": patterns,
            "tuned_on_seed": TUNE_PATTERN,
            "timing": {"warmup_rounds": warmup, "rounds": rounds, "l2_flush_bytes": timing.l2_flush_bytes,
                       "launch_guard_cycles": LAUNCH_GUARD_CYCLES, "order_mode": timing.order,
                       "order_seed": config.seeds.order},
            "fla_commit": fla_commit, "gates": gates, "stages": stages, "metadata": metadata,
            "wall_seconds": wall_seconds}
