"""The peer arm (nsa_exp/gpu/peers.py) on the CPU: FLA's REAL kernels under the Triton interpreter, FlexAttention
eagerly (forward only: torch has no FlexAttention backward on a CPU) and SDPA's MATH backend, at tiny shapes.
Every peer agrees with the oracle; a block mask built from another routing does not (the check can fail); the arm
writes a peer result through the engine (fake device and clock) that validate passes, and forged copies fail."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from nsa_exp.analysis.cupti import METHOD_MARKED, cupti_block, sizing
from nsa_exp.checking.validate import validate_path
from nsa_exp.core.config import Pattern
from nsa_exp.core.requests import PeerRequest
from nsa_exp.io.config_files import config_from_dict
from nsa_exp.routing.patterns import generate_routing
from tests.gpu.test_engine import Ticks
from tests.gpu.test_engine_arms import ORACLE, FakeGpu, fake_gpu, fake_gpu_gate, tiny_config  # noqa: F401 - fixtures
from tests.helpers import REPO

pytestmark = [pytest.mark.interpreter, pytest.mark.usefixtures("fake_gpu")]

PATTERNS = [{"name": "local"}, {"name": "uniform"}, {"name": "sink-heavy", "sinks": 1}]


def config():
    return config_from_dict(tiny_config(patterns=PATTERNS, repetitions=5), source="tiny.json")


def test_every_peer_agrees_with_the_oracle_at_a_tiny_shape():
    from nsa_exp.gpu.peers import oracle_check  # noqa: PLC0415 - FLA after the interpreter setup

    o = oracle_check(config(), ["fla", "flex", "flex-tile", "sdpa-dense"], torch.device("cpu"), compiled=False)
    assert o["failures"] == {}
    # flex-tile only where the tiles share one selection (local, sink-heavy); uniform's do not at the oracle shape
    assert set(o["results"]) == {"local|fla", "uniform|fla", "sink-heavy|fla", "local|flex", "uniform|flex",
                                 "sink-heavy|flex", "local|flex-tile", "sink-heavy|flex-tile", "dense"}
    assert set(o["results"]["uniform|fla"]) == {"o", "dq", "dk", "dv"} and set(o["results"]["uniform|flex"]) == {"o"}
    assert all(m["rel_l2"] < 1e-2 for r in o["results"].values() for m in r.values())


def test_a_block_mask_of_another_routing_fails_the_oracle():
    """The oracle check can fail: FlexAttention with uniform's mask against the naive oracle of local."""
    from nsa_exp.core.config import Shape  # noqa: PLC0415
    from nsa_exp.gpu.launcher import make_inputs  # noqa: PLC0415 - FLA after the interpreter setup
    from nsa_exp.gpu.numerics import compare  # noqa: PLC0415
    from nsa_exp.gpu.peers import Peers, reference_outputs  # noqa: PLC0415

    shape = Shape(**ORACLE)
    inputs = make_inputs(shape, 3, "cpu")
    local, uniform = (generate_routing(Pattern(n), shape, 1) for n in ("local", "uniform"))
    assert not np.array_equal(local, uniform)
    ref = reference_outputs(shape, local, inputs)
    wrong = Peers(shape, inputs, compiled=False).problem("flex", uniform).outputs(gradients=False)
    assert compare(wrong["o"].float(), ref["o"])["rel_l2"] > 0.1


@pytest.fixture(scope="module")
def stop_run(fla_interpreter, tmp_path_factory) -> tuple[dict, Path]:
    """One peer-bench through the engine (fake device and clock), FLA and dense attention (FlexAttention has no CPU
    backward: the oracle test above checks it), under the config's own stop rule (``timing.stop``; ``--stop-rule``
    would record the default rule, which validate holds it to): with every observation equal each cell converges at
    ``min_rounds`` 6 of 8. Both tests below read it (one interpreter run of ~60 s instead of two)."""
    from nsa_exp.analysis.stop_rule import DEFAULT_RULE  # noqa: PLC0415
    from nsa_exp.core.config import StopRule  # noqa: PLC0415
    from nsa_exp.gpu import gates  # noqa: PLC0415 - FLA after the interpreter setup
    from nsa_exp.gpu.peers import run_peers  # noqa: PLC0415 - FLA after the interpreter setup

    out = tmp_path_factory.mktemp("peers") / "peers_stop.json"
    rule = StopRule(**{**DEFAULT_RULE.to_dict(), "min_rounds": 6, "min_seconds": 0.0})   # n <= 5: no interval
    eight = config_from_dict(tiny_config(patterns=PATTERNS, repetitions=8, stop=rule.to_dict()), source="tiny.json")
    with pytest.MonkeyPatch.context() as mp:
        # the argv the CLI would record for this run (validate reads its --config and --peers)
        mp.setattr(sys, "argv", [str(REPO / "nsa_exp" / "__main__.py"), "peer-bench", "--config", "tiny.json",
                                 "--peers", "fla,sdpa-dense", "--output", str(out), "--allow-gpu"])
        mp.setattr(gates, "gpu_gate", fake_gpu_gate)
        doc = run_peers(PeerRequest(eight, True, ("fla", "sdpa-dense"), out, cupti_rounds=0),
                        device=FakeGpu([5.0, 9.0, 14.0]), clock=Ticks(0.25))
    return doc, out


def test_peer_bench_writes_a_result_that_validate_recomputes(stop_run, tmp_path):
    doc, out = stop_run
    assert list(doc["cells"]) == ["local|fla", "uniform|fla", "sink-heavy|fla", "dense"]
    assert doc["peers"]["sdpa-dense"]["backend"] == "MATH"
    s = doc["summary"]
    assert s["routings"]["local"]["fla"]["skew_penalty"] is None
    assert s["routings"]["uniform"]["fla"]["extra_work"] == 1.0 and s["dense"] is not None
    assert doc["routings"]["local"]["tile_shared"]   # (at M = S every routing selects every causal block)
    # each cell's memory: one forward + backward after a reset of the allocator's peak (the fake's peak: +1 MiB)
    assert set(doc["memory"]) == set(doc["cells"]) and "cupti" not in doc  # --cupti-rounds 0: no pass
    assert all(m["peak_minus_baseline_bytes"] == 2**20 for m in doc["memory"].values())
    report = validate_path(out)
    failed = {c["name"]: [f["path"] for f in c["failures"]] for c in report["checks"] if not c["passed"]}
    # CPU torch has no CUDA version (the bench arm's test says the same)
    assert failed == {"environment_recorded": ["$.metadata.versions.cuda"]} or \
        set(failed) <= {"environment_recorded", "config_provenance"}, failed
    assert "peer_recompute" in {c["name"] for c in report["checks"]}

    def fails(mutate) -> set[str]:
        forged = copy.deepcopy(doc)
        mutate(forged)
        path = tmp_path / "forged.json"
        path.write_text(json.dumps(forged))
        rep = validate_path(path)
        return {c["name"] for c in rep["checks"] if not c["passed"]}

    def median(d):
        d["cells"]["uniform|fla"]["stages"]["bwd"]["median_ms"] *= 0.5

    def penalty(d):
        d["summary"]["routings"]["uniform"]["fla"]["skew_penalty"]["ratio"] = 2.0

    def drop_cell(d):
        del d["cells"]["uniform|fla"]

    def work(d):
        d["routings"]["uniform"]["work"]["block_mask"] += 1

    def oracle(d):
        d["oracle"]["results"]["uniform|fla"]["dk"]["rel_l2"] = 0.5

    def skip_reason(d):
        d["peers"]["fla"]["skipped"] = {"uniform": "not tile-shared: full blocks would compute pairs it never selects"}

    for mutate in (median, penalty, drop_cell, work, oracle, skip_reason):
        assert "peer_recompute" in fails(mutate), mutate.__name__

    def memory(d):
        d["memory"]["dense"]["peak_allocated_bytes"] += 1

    def memory_cells(d):
        del d["memory"]["dense"]

    for mutate in (memory, memory_cells):
        assert "peer_memory" in fails(mutate), mutate.__name__

    # the CUPTI block is judged as bench's, on the cells: kernel times that agree with the events pass, half fail
    def cupti(scale):
        def add(d):
            events = {c: {s: v["stages"][s]["raw_ms"][:5] for s in v["stages"]} for c, v in d["cells"].items()}
            kernels = {c: {s: [x * scale for x in ms] for s, ms in st.items()} for c, st in events.items()}
            d["cupti"] = cupti_block(kernels, 5, sizing({c: {s: v["stages"][s]["median_ms"] for s in v["stages"]}
                                                         for c, v in d["cells"].items()}), METHOD_MARKED, events)
        return add

    assert "cupti_agreement" not in fails(cupti(1.0)) and "cupti_agreement" in fails(cupti(0.5))


def test_peer_bench_under_the_stop_rule_drops_converged_cells_and_validates(stop_run, tmp_path):
    """peer-bench under the stop rule (here the config's ``timing.stop``): each cell a "routing" of the verdict
    rule; with every observation equal each cell converges at ``min_rounds``, the run stops on ``ci`` there, and
    validate recomputes the trace (a forged one fails)."""
    doc, out = stop_run
    stop = doc["timing"]["stop"]
    assert (stop["stopped_by"], stop["rounds"], stop["source"]) == ("ci", 6, "config")
    assert stop["cell_rounds"] == dict.fromkeys(doc["cells"], 6) and stop["saved_cell_rounds"] == 4 * (8 - 6)
    assert all(len(s["raw_ms"]) == 6 for c in doc["cells"].values() for s in c["stages"].values())
    report = validate_path(out)
    failed = {c["name"] for c in report["checks"] if not c["passed"]}
    assert failed <= {"environment_recorded", "config_provenance"}, failed

    forged = copy.deepcopy(doc)
    forged["timing"]["stop"]["trace"][0]["unconverged"] = 0
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(forged))
    assert "peer_recompute" in {c["name"] for c in validate_path(path)["checks"] if not c["passed"]}
