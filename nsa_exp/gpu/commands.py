"""The GPU commands' doors (``check``, ``smoke``, ``bench``, ``profile-stage``, ``ncu``): argparse
namespace in, one report written, a few lines printed. :mod:`nsa_exp.cli` imports this module only
when one of these commands runs, so the CPU commands never import torch.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..analysis.peers import format_peers
from ..analysis.summary import format_summary
from .bench import run_bench
from .check import run_check
from .ncu import run_ncu
from .peers import run_peers
from .profiler import profile_stage
from .smoke import run_smoke
from .whatif_run import run_whatif


def check(args: argparse.Namespace) -> int:
    # the config read and the report's path claimed by the argument checks (arguments._gpu_report), before torch
    config, out = args.run_config, args.run_output
    run_check(config, args.allow_gpu, out)
    print(f"check passed; report {out}")
    return 0


def smoke(args: argparse.Namespace) -> int:
    config, out = args.run_config, args.run_output  # as check's (arguments._gpu_report)
    report = run_smoke(config, args.allow_gpu, out)
    for name, m in report["naive"]["metrics"].items():
        print(f"naive  {name}: rel_l2 {m['rel_l2']:.2e} max_abs/max|ref| {m['max_abs_rel']:.2e}")
    for pattern, ms in report["staged_vs_official"]["patterns"].items():
        cells = [f"{g} rel_l2 {m['rel_l2']:.1e} max_ulp {m['max_ulp']} ({m['n_different']} differ)"
                 for g, m in ms.items()]
        print(f"staged {pattern}: " + ", ".join(cells))
    print(f"smoke passed; report {out}")
    return 0


def bench(args: argparse.Namespace) -> int:
    # one frozen request: the config with the command line's overrides folded in, the outputs claimed, the routing
    # files read, built once by the argument checks (arguments._bench) before this handler runs
    request = args.bench_request
    result = run_bench(request)
    print(format_summary(result))
    print(f"wrote {request.output} and {request.summary}")
    return 0


def profile(args: argparse.Namespace) -> int:
    # the config read and the patterns checked against it by the argument checks (arguments._profile)
    info = profile_stage(args.run_config, args.pattern, args.stage, args.benchmark_result, args.allow_gpu)
    print(json.dumps(info))
    return 0


def ncu(args: argparse.Namespace) -> int:
    # the bench result replayed and the two outputs claimed by the argument checks (arguments._ncu)
    summary, report = args.ncu_outputs
    doc = run_ncu(args.config, args.pattern, args.stage, args.ncu_benchmark_result, summary.stem, report.parent,
                  summary.parent, args.allow_gpu, sys.executable)
    for k in doc["kernels"]:
        m = k["metrics"]
        print(f"{k['pattern']}: {k['kernel']} {m['duration_ns']} ns, occupancy {m['achieved_occupancy_pct']}%, "
              f"waves {m['waves_per_sm']}, top stall {k['top_stalls'][:1]}")
    print(f"wrote {summary}")
    return 0


def peer_bench(args: argparse.Namespace) -> int:
    """PEERS: see :mod:`nsa_exp.gpu.peers` (arguments checked, the config read and the output claimed by
    ``arguments._peer_bench``: ``args.peer_request``)."""
    request = args.peer_request
    doc = run_peers(request)
    print(format_peers(doc))
    print(f"wrote {request.output}")
    return 0


def whatif(args: argparse.Namespace) -> int:
    """WHAT-IF ARMS (not the experiment's measurement): see :mod:`nsa_exp.gpu.whatif_run` (arguments checked, the
    config read and the output claimed by ``arguments._whatif``: ``args.whatif_request``)."""
    request = args.whatif_request
    doc = run_whatif(request)
    for pattern, entry in doc["patterns"].items():
        for name, arm in entry["arms"].items():
            print(f"{pattern:<12} {name:<32} B'={arm['batches']:<3} median {arm['total']['median_ms']:8.3f} ms  "
                  f"saved {arm['saved_ms']:+8.3f} ms")
    print(f"wrote {request.output} (WHAT-IF ARMS, not the experiment's measurement)")
    return 0
