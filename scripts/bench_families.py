#!/usr/bin/env python3
"""Routing generation cost of every family across its parameters: wall time, CPU time, peak traced memory.

    python scripts/bench_families.py --lengths 32768 131072 [--slots 64] [--quick] [--json out.json]

Shape: the config's (default configs/e1_h100.json: H=4, S=16, block_size=64) with T replaced. Time is one
untraced run (wall and process CPU); memory is the tracemalloc peak of a second, traced run, next to the
size of the int64 [rows, S] output so "linear in T*H*S" can be read off (issue 16 item 8: < 3 s per
routing at T=131072 on the CPU).
"""

import argparse
import json
import os
import platform
import sys
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsa_exp.core.families import pattern_from_entry  # noqa: E402
from nsa_exp.errors import UserError  # noqa: E402
from nsa_exp.io.config_files import load_config  # noqa: E402
from nsa_exp.routing.patterns import generate_routing  # noqa: E402


def generate(name: str, params: dict, shape, seed: int):
    """The family's routing through the table and its generator (what a config entry gives)."""
    return generate_routing(pattern_from_entry({"name": name, **params}, "family", shape), shape, seed)


def cases(S: int, M: int, quick: bool = False) -> list[tuple[str, dict]]:
    if quick:
        return [("zipf", {"exponent": s}) for s in (0.0, 1.0, 1.5, 2.0, 8.0)] + [
            ("sink-heavy", {"sinks": S - 1}), ("hot-block", {"block": 0})]
    out: list[tuple[str, dict[str, Any]]] = [
        ("zipf", {"exponent": s}) for s in (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 64.0)]
    out += [("sink-heavy", {"sinks": k}) for k in sorted({1, 4, S // 2, S - 1})]
    out += [("hot-block", {"block": b}) for b in (0, M // 2, M - 1)]
    out += [("zipf", {"exponent": 8.0, "heads": [0]}), ("sink-heavy", {"sinks": 4, "heads": [0]}),
            ("hot-block", {"block": 0, "heads": [3]})]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/e1_h100.json")
    parser.add_argument("--lengths", type=int, nargs="+", default=[32768, 131072])
    parser.add_argument("--slots", type=int, help="override S")
    parser.add_argument("--seed", type=int, default=20260726)
    parser.add_argument("--quick", action="store_true", help="a few parameters per family only")
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args()
    try:
        base = load_config(args.config).shape
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.slots:
        base = replace(base, S=args.slots)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; shape {base.to_dict()} "
          f"with T varied")
    print(f"{'T':>7} {'family':<11} {'params':<34} {'wall s':>7} {'cpu s':>7} {'peak MB':>8} {'out MB':>7}")
    rows = []
    for T in args.lengths:
        shape = replace(base, T=T)
        out_mb = shape.B * T * shape.H * shape.S * 8 / 1e6
        for name, params in cases(shape.S, shape.num_blocks, args.quick):
            t0, c0 = time.perf_counter(), time.process_time()
            generate(name, params, shape, args.seed)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            tracemalloc.start()
            generate(name, params, shape, args.seed)
            peak = tracemalloc.get_traced_memory()[1] / 1e6
            tracemalloc.stop()
            rows.append({"T": T, "S": shape.S, "H": shape.H, "family": name, "params": params, "wall_s": wall,
                         "cpu_s": cpu, "peak_mb": peak, "output_mb": out_mb})
            print(f"{T:>7} {name:<11} {json.dumps(params):<34} {wall:>7.2f} {cpu:>7.2f} {peak:>8.0f} {out_mb:>7.0f}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
