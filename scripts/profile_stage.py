#!/usr/bin/env python3
"""Launch one stage inside the NVTX range ``nsa_<pattern>_<stage>`` for Nsight Compute (thin door
onto ``python -m nsa_exp profile-stage``). From the repository root:

    ncu --set full --nvtx --nvtx-include "nsa_local-vs-sink-heavy_dkv_core/" --clock-control none \\
        -o profiles/e1_local_vs_sink_dkv python scripts/profile_stage.py --config configs/e1_h100.json \\
        --pattern local-vs-sink-heavy --stage dkv_core --benchmark-result results/raw/e1_h100.json
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsa_exp.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["profile-stage", *sys.argv[1:]]))
