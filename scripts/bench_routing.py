#!/usr/bin/env python3
"""Routing generation time on this CPU (thin door onto nsa_exp.routing.report.time_generation).

    python scripts/bench_routing.py --config configs/e1_h100.json --lengths 32768 131072
"""

import argparse
import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsa_exp.errors import UserError  # noqa: E402
from nsa_exp.routing.config import load_config  # noqa: E402
from nsa_exp.routing.report import time_generation  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/e1_h100.json")
    parser.add_argument("--lengths", type=int, nargs="+", default=[32768, 131072])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        rows = time_generation(load_config(args.config), tuple(args.lengths), args.repeats)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, median of {args.repeats}")
    for T in args.lengths:
        sub = [r for r in rows if r["T"] == T]
        cells = "  ".join(f"{r['pattern']} {r['median_s']:.3f}s" for r in sub)
        print(f"T={T:>7}: {cells}  all four {sum(r['median_s'] for r in sub):.3f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
