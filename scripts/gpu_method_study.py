"""GPU method study for issue 16: L2-flush policy, the naive oracle where routings differ, grid limits.

One process, up to four parts (``--parts``), one JSON (every raw observation kept):

1. ``flush``: every stage x pattern at the config's shape, timed with CUDA events by the engine's one
   loop (``nsa_exp.gpu.timing.run_rounds``, each (policy, pattern) one cell whose ``cell_prologue`` sets its
   sweep and spin), under four cache policies, policies interleaved round by round:
   ``write`` (fill a 256 MiB buffer: today's policy), ``read`` (sum the same buffer: evicts L2 but
   leaves clean lines), ``none`` (no flush), ``write+spin4x`` (write flush, then a 4x longer spin).
2. ``oracle``: FLA forward + official backward vs ``naive_nsa_selection`` (fp32 autograd) for every
   routing at T=1024, S=8 (M=16 > S, so the routings really differ).
3. ``grid``: the dK/dV launch at grid (1, 65472) and (1, 65536) (``cfg_dkv_grid_y_*``).
4. ``kernels``: the autotune spaces after pruning and the kernels compiled by the parts before it.

    scripts/run_h100.sh python scripts/gpu_method_study.py --config configs/e1_h100.json --out OUT.json

``--out`` is claimed as the CLI's outputs are (never the config; under ``results/`` or ``docs/`` only with
``--publish``, and ``--overwrite`` to replace a study there); a bad argument is one ``error:`` line, exit 2,
before any gate.

This is a study script (its findings go into docs/METHOD.md), not one of the experiment's tasks.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsa_exp.arguments import check_count, check_suffix  # noqa: E402
from nsa_exp.checking import method_study  # noqa: E402
from nsa_exp.cli import NUMBER_TYPES, OneLineParser, run_reporting_errors  # noqa: E402
from nsa_exp.core.config import Pattern, Shape  # noqa: E402
from nsa_exp.core.protocol import LAUNCH_GUARD_CYCLES, summarize  # noqa: E402
from nsa_exp.core.stages import STAGE_NAMES as STAGES  # noqa: E402
from nsa_exp.errors import UserError  # noqa: E402
from nsa_exp.gpu.gates import run_gates  # noqa: E402
from nsa_exp.gpu.launcher import (  # noqa: E402
    StagedBackward,
    _autotuner,
    autotuned_kernels,
    config_record,
    make_inputs,
    make_problem,
)
from nsa_exp.gpu.numerics import compare  # noqa: E402
from nsa_exp.gpu.smoke import naive_comparison  # noqa: E402
from nsa_exp.gpu.telemetry import Telemetry  # noqa: E402
from nsa_exp.gpu.timing import run_rounds  # noqa: E402
from nsa_exp.io.config_files import load_config  # noqa: E402
from nsa_exp.io.metadata import base_metadata  # noqa: E402
from nsa_exp.io.store import OutputPolicy, write_json  # noqa: E402
from nsa_exp.routing.patterns import generate_routing  # noqa: E402

POLICIES = ("write", "read", "none", "write+spin4x")


def flush_study(config, routings, rounds: int, warmup: int) -> dict:
    inputs = make_inputs(config.shape, config.seeds.inputs, "cuda")
    names = [p.name for p in config.patterns]
    fns = {n: StagedBackward(make_problem(config.shape, routings[n], inputs)).stage_callables() for n in names}
    for fn in fns["local"].values():  # autotune once on local, as bench does
        fn()
    torch.cuda.synchronize()
    rng = np.random.default_rng(16)
    tele = Telemetry()
    orders = [[f"{policy}|{pattern}" for policy in [POLICIES[i] for i in rng.permutation(len(POLICIES))]
               for pattern in [names[i] for i in rng.permutation(len(names))]] for _ in range(warmup + rounds)]
    cells = {key: fns[key.split("|")[1]] for key in orders[0]}

    def prologue(key: str) -> tuple[str, int]:  # the cell's L2 sweep and launch-guard spin
        policy = key.split("|")[0]
        return policy.split("+")[0], LAUNCH_GUARD_CYCLES * (4 if policy.endswith("spin4x") else 1)

    timed = run_rounds(cells, orders, warmup, config.timing.l2_flush_bytes, cell_prologue=prologue,
                       on_pattern_done=lambda r, key: tele.sample())
    records = [{"round": x["round"], "policy": x["pattern"].split("|")[0], "pattern": x["pattern"].split("|")[1],
                "warmup": x["warmup"], "ms": x["ms"], "telemetry": x["telemetry"]} for x in timed]
    summary = {pol: {pat: {st: summarize([x["ms"][st] for x in records if x["policy"] == pol
                                          and x["pattern"] == pat and not x["warmup"]]) for st in STAGES}
                     for pat in names} for pol in POLICIES}
    return {"policies": list(POLICIES), "rounds": rounds, "warmup_rounds": warmup,
            "flush_bytes": config.timing.l2_flush_bytes, "launch_guard_cycles": LAUNCH_GUARD_CYCLES,
            "records": records, "summary": summary}


def oracle_study(config) -> dict:
    shape = method_study.ORACLE_SHAPE  # validate holds the study to it
    out = {"shape": shape.to_dict(), "patterns": {}}
    for p in config.patterns:
        bi = generate_routing(p, shape, config.seeds.routing)
        out["patterns"][p.name] = naive_comparison(shape, bi, config.seeds.inputs, "cuda")
    return out


def grid_study(seed: int) -> dict:
    out = {}
    for T in (16368, 16384):  # B*H*M = 64 * T/16: 65472 and 65536
        shape = Shape(B=1, T=T, HQ=1024, H=64, K=16, V=16, S=16, block_size=16, dtype="bfloat16")
        bi = generate_routing(Pattern("local"), shape, seed)
        staged = StagedBackward(make_problem(shape, bi, make_inputs(shape, seed, "cuda")))
        rec: dict[str, Any] = {"dkv_grid": list(staged.params.dkv_grid)}
        try:
            inter = staged.run_staged()
            torch.cuda.synchronize()
            official = staged.full_bwd(inter["o"], inter["lse"])
            torch.cuda.synchronize()
            rec["ok"] = True
            rec["dk_vs_official"] = compare(staged.gradients()[1], official[1])
        except Exception as exc:  # the study records the launch failure itself
            rec["ok"] = False
            rec["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        out[str(staged.params.dkv_grid[1])] = rec
        del staged
        torch.cuda.empty_cache()
    return out


def kernels_study() -> dict:
    """Autotune space (after FLA's pruning) and compiled-kernel resources of the autotuned kernels."""
    out: dict[str, dict[str, Any]] = {}
    for stage, kernel in autotuned_kernels().items():
        tuner = _autotuner(kernel)
        rec = {"configs": [config_record(c) for c in tuner.configs], "compiled": []}
        jit = tuner.fn
        while hasattr(jit, "fn") and not hasattr(jit, "device_caches"):
            jit = jit.fn
        for dev_cache in getattr(jit, "device_caches", {}).values():
            for compiled in dev_cache[0].values():
                md = compiled.metadata
                rec["compiled"].append({"n_regs": getattr(compiled, "n_regs", None),
                                        "n_spills": getattr(compiled, "n_spills", None),
                                        "shared": getattr(md, "shared", None), "num_warps": md.num_warps,
                                        "num_stages": md.num_stages})
        out[stage] = rec
    props = torch.cuda.get_device_properties(0)
    out["device"] = {k: getattr(props, k, None) for k in (
        "name", "multi_processor_count", "regs_per_multiprocessor", "max_threads_per_multi_processor",
        "shared_memory_per_multiprocessor", "shared_memory_per_block_optin", "L2_cache_size", "total_memory")}
    return out


def main() -> int:
    """The study; a bad input or failed gate is one line on stderr and its exit code (2 / 3), as the CLI's
    (:func:`nsa_exp.cli.run_reporting_errors`)."""
    def command() -> int:
        study()
        return 0

    return run_reporting_errors(command)


def study() -> None:
    # no abbreviations, as the CLI: the validator reads --config from the recorded argv by its full name
    ap = OneLineParser(prog="gpu_method_study.py", description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--config", default="configs/e1_h100.json")
    ap.add_argument("--out", required=True, help="the study's JSON (a path outside the published results unless "
                                                 "--publish)")
    ap.add_argument("--rounds", type=NUMBER_TYPES[int], default=30, help="timed rounds per flush cell (1 to 100,000)")
    ap.add_argument("--warmup", type=NUMBER_TYPES[int], default=3, help="untimed rounds first (0 to 100,000)")
    ap.add_argument("--parts", default=",".join(method_study.PARTS))
    ap.add_argument("--publish", action="store_true", help="--out may lie in the published results (results/)")
    ap.add_argument("--overwrite", action="store_true", help="with --publish: replace a published study")
    args = ap.parse_args()
    wanted = args.parts.split(",")
    unknown = [p for p in wanted if p not in method_study.PARTS]
    if unknown:
        raise UserError(f"--parts: {', '.join(map(repr, unknown))} is not a part of the study "
                        f"({', '.join(method_study.PARTS)})")
    if len(set(wanted)) < len(wanted):
        twice = sorted({p for p in wanted if wanted.count(p) > 1})
        raise UserError(f"--parts: {', '.join(twice)} given more than once (each part runs once)")
    check_count("--rounds", args.rounds)
    check_count("--warmup", args.warmup, zero="no untimed round")
    check_suffix("--out", args.out, ".json")
    config = load_config(args.config)
    # claimed before any GPU work, as the CLI's outputs are (nsa_exp/io/store.py OutputPolicy): never an input,
    # never a published file unless --publish (--overwrite to replace it), writable
    out = OutputPolicy.of(args, ("--config", args.config), run=config.name).claim(args.out, named=True,
                                                                                  option="--out")
    gates, routings = run_gates(config, allow_gpu=True, strict=True)
    metadata = {**base_metadata(), "gpu_name": torch.cuda.get_device_name(0)}
    parts: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for part in wanted:
        t0 = time.monotonic()
        if part == "flush":
            parts["flush"] = flush_study(config, routings, args.rounds, args.warmup)
        elif part == "oracle":
            parts["oracle"] = oracle_study(config)
        elif part == "kernels":
            parts["kernels"] = kernels_study()
        elif part == "grid":
            parts["grid"] = grid_study(config.seeds.inputs)
        seconds[part] = time.monotonic() - t0
        # validated against its schema and written atomically after each part: a crash keeps the parts done
        doc = method_study.build(config=config.raw, metadata=metadata, gates=gates, parts=parts, seconds=seconds)
        write_json(out, doc, "method_study")
        print(f"{part}: {seconds[part]:.1f}s", flush=True)
    if "flush" in doc:
        s = doc["flush"]["summary"]
        for pat in s["write"]:
            for st in STAGES:
                print(f"{pat:11s} {st:17s} " + " ".join(f"{pol}={s[pol][pat][st]['median_ms']:.3f}"
                                                          for pol in POLICIES))
    if "oracle" in doc:
        for pat, res in doc["oracle"]["patterns"].items():
            print(pat, {k: round(v["rel_l2"], 5) for k, v in res.items() if isinstance(v, dict) and "rel_l2" in v})
    if "grid" in doc:
        print(json.dumps(doc["grid"]))


if __name__ == "__main__":
    sys.exit(main())
