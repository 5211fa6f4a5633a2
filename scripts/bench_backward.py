#!/usr/bin/env python3
"""The seed's entry point, a thin door onto ``python -m nsa_exp bench``.

From the repository root (the package is importable from there, installed or not):

    scripts/run_h100.sh python scripts/bench_backward.py --config configs/e1_h100.json \\
        --output runs/e1_h100/raw/e1_h100.json

The summary CSV goes to runs/<name>/summaries/<output stem>.csv unless --summary is given (with --publish, and
--overwrite to replace the committed run: --output results/raw/e1_h100.json, summary results/summaries/).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsa_exp.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
