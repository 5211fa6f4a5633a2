#!/usr/bin/env python3
"""Latency vs a fan-in statistic (thin door onto ``python -m nsa_exp plot``). From the repository root:

    python scripts/plot_fanin_latency.py --input results/summaries/e1_h100.csv --x fanin_cv
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsa_exp.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["plot", *sys.argv[1:]]))
