#!/usr/bin/env python3
"""Routing generation time on this CPU (thin door onto ``python -m nsa_exp routing-time``).

    python scripts/bench_routing.py --config configs/e1_h100.json --lengths 32768 131072
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsa_exp.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["routing-time", *sys.argv[1:]]))
