#!/usr/bin/env python3
"""Latency vs a fan-in statistic (thin door onto nsa_exp.results.plot). From the repository root:

    python scripts/plot_fanin_latency.py --input results/summaries/e1_h100.csv --x fanin_cv
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsa_exp.errors import UserError  # noqa: E402
from nsa_exp.results.plot import X_STATS, plot_fanin_latency  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="summary CSV (results/summaries/<name>.csv)")
    parser.add_argument("--x", default="fanin_cv", choices=sorted(X_STATS), help="fan-in statistic on the x axis")
    parser.add_argument("--out-dir", default="docs/figures", help="where the PNG and SVG go")
    args = parser.parse_args()
    try:
        for path in plot_fanin_latency(args.input, args.x, args.out_dir):
            print(f"wrote {path}")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
