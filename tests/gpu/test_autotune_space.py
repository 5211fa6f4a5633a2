"""The Stage table's autotune spaces (which ``validate`` holds recorded configs to) are exactly the configs
FLA 0a9b9f2 declares on each autotuned kernel, in FLA's order."""

from __future__ import annotations

import json
import subprocess
import sys

from nsa_exp.core.stages import AUTOTUNED_STAGES, stage
from tests.helpers import REPO

# A fresh interpreter: the suite's harness restricts every autotuner to one config (tests/conftest.py).
READ_SPACES = """
import json, warnings
warnings.simplefilter("ignore")
from nsa_exp.gpu.launcher import _autotuner, autotuned_kernels, config_record
print(json.dumps({s: [config_record(c) for c in _autotuner(k).configs] for s, k in autotuned_kernels().items()}))
"""


def test_each_autotuned_stage_lists_flas_own_configs():
    proc = subprocess.run([sys.executable, "-c", READ_SPACES], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    fla = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(fla) == sorted(AUTOTUNED_STAGES)
    for name, configs in fla.items():
        assert list(stage(name).autotune_space) == configs, name
