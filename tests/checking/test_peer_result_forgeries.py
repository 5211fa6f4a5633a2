"""Forgeries of the committed H200 peer results that validate refuses (a forger's trial of 2026-12-04 passed each
before): the stop rule's recorded rule and floors, the CUPTI pass's sizing, its profiled calls faster than the timed
ones, a missing CUPTI block beside its phase, memory beyond the GPU, the verdict rule's method and wall clock, and
latencies scaled or swapped past the GPU's BF16 peak, oracle metrics that disagree with each other or the shape."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from nsa_exp.analysis.peers import peer_summary
from nsa_exp.checking.validate import validate_path
from nsa_exp.core.peers import NOT_TIMED, NOT_TIMED_EARLIER
from nsa_exp.core.records import StageStats
from tests.helpers import REPO

T32768 = REPO / "results" / "peers" / "peers_h200.json"
T8192 = REPO / "results" / "peers" / "peers_h200_T8192.json"   # ran under peer-bench --stop-rule
T131072 = REPO / "results" / "peers" / "peers_h200_T131072.json"


def _failures(doc: dict, tmp_path) -> set[str]:
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(doc))
    report = validate_path(path)
    return {f["path"] for c in report["checks"] if not c["passed"] for f in c["failures"]} | \
        {c["name"] for c in report["checks"] if not c["passed"]}


def _scale_cupti(doc: dict, cell: str, factor: float) -> None:
    block = doc["cupti"]
    for key, median in (("kernel_ms", "median_kernel_ms"), ("event_ms", "median_event_ms")):
        for stage, calls in block[key][cell].items():
            block[key][cell][stage] = [x * factor for x in calls]
            block[median][cell][stage] = float(np.median(block[key][cell][stage]))


def _trace_elapsed_halved(d):   # the round loop's wall clock below the GPU time it timed
    for e in d["timing"]["stop"]["trace"]:
        e["elapsed_seconds"] *= 0.5
    d["timing"]["stop"]["elapsed_seconds"] = d["timing"]["stop"]["trace"][-1]["elapsed_seconds"]


def _stop_rule(d):
    d["timing"]["stop"]["rule"]["floor_fraction"] = 5.0


def _floors(d):
    d["timing"]["stop"]["floors"] = {"fwd": 0.5, "bwd": 0.5, "fwd_bwd": 0.5}


def _method(d):
    d["timing"]["stop"]["method"] = "fixed 49 rounds for every routing"


def _elapsed(d):
    d["timing"]["stop"]["elapsed_seconds"] = 1000.0


def _sizing(d):
    d["cupti"]["sizing"]["min_rounds"] = 3


def _faster_profiled(d):
    _scale_cupti(d, "local|fla", 0.5)


def _no_cupti(d):
    del d["cupti"]


def _memory_beyond_gpu(d):
    m = d["memory"]["dense"]
    m["peak_allocated_bytes"] = 300_000_000_000
    m["peak_minus_baseline_bytes"] = m["peak_allocated_bytes"] - m["baseline_allocated_bytes"]


def _zero_call(d):
    d["cupti"]["kernel_ms"]["local|fla"]["bwd"][0] = 0.0   # one call, the median unmoved


def _no_memory(d):
    del d["memory"]


def _restat(d: dict) -> None:
    """Every cell's statistics and the summary recomputed, as a careful forger would."""
    for cell in d["cells"].values():
        for st in cell["stages"].values():
            st.update(StageStats.of(st["raw_ms"], st["warmup_ms"]).to_json())
    d["summary"] = peer_summary(d["cells"], d["routings"])


def _fla_timed_at_half(d):   # a forger's trial of 2026-12-04: FLA "fastest" everywhere, its kernels left as run
    for cell in d["cells"].values():
        if cell["peer"] == "fla":
            for st in cell["stages"].values():
                st["raw_ms"], st["warmup_ms"] = [x * 0.5 for x in st["raw_ms"]], [x * 0.5 for x in st["warmup_ms"]]
    _restat(d)


def _fwd_bwd_under_its_parts(d):   # fwd+bwd at 0.93 x bwd alone: inside the old 10% room below the larger part
    for c, cell in d["cells"].items():
        if cell["peer"] == "fla":
            st = cell["stages"]
            f = 0.93 * st["bwd"]["median_ms"] / st["fwd_bwd"]["median_ms"]
            st["fwd_bwd"]["raw_ms"] = [x * f for x in st["fwd_bwd"]["raw_ms"]]
            st["fwd_bwd"]["warmup_ms"] = [x * f for x in st["fwd_bwd"]["warmup_ms"]]
            for k, m in (("kernel_ms", "median_kernel_ms"), ("event_ms", "median_event_ms")):
                d["cupti"][k][c]["fwd_bwd"] = [x * f for x in d["cupti"][k][c]["fwd_bwd"]]
                d["cupti"][m][c]["fwd_bwd"] = float(np.median(d["cupti"][k][c]["fwd_bwd"]))
    _restat(d)


def _rounds_phase_short(d):
    d["phases"]["rounds"] = 1.0


def _rounds_phase_past_wall(d):
    d["phases"]["rounds"] = 1500.0


def _scale_cells(d: dict, factor: float, which=lambda cell: True) -> None:
    """The chosen cells' observations and profiled calls scaled by ``factor``, statistics recomputed (each cell's
    kernels and events move with its latencies, so the CUPTI and fwd+bwd checks see a consistent file)."""
    for c, cell in d["cells"].items():
        if which(cell):
            for st in cell["stages"].values():
                st["raw_ms"] = [x * factor for x in st["raw_ms"]]
                st["warmup_ms"] = [x * factor for x in st["warmup_ms"]]
            if "cupti" in d:
                _scale_cupti(d, c, factor)
    _restat(d)


def _all_at_a_tenth(d):   # a forger's trial of 2026-12-04: every peer 10x faster, every ratio unchanged
    _scale_cells(d, 0.1)


def _dense_at_three_tenths(d):   # T=131072: dense SDPA 3.3x faster, FLA no longer ahead of it
    _scale_cells(d, 0.3, lambda cell: cell["routing"] is None)  # the dense cell


def _cells_swapped(d):   # FLA's local cell and dense's cell trade their data
    d["cells"]["local|fla"]["stages"], d["cells"]["dense"]["stages"] = (d["cells"]["dense"]["stages"],
                                                                        d["cells"]["local|fla"]["stages"])
    _restat(d)


def _oracle_error_hidden(d):   # dense's dK max error divided by 100: under any tolerance, its max_abs left as measured
    d["oracle"]["results"]["dense"]["dk"]["max_abs_rel"] /= 100


def _oracle_numel(d):
    d["oracle"]["results"]["local|fla"]["dv"]["numel"] = 1024


def _oracle_rel_l2(d):   # an L2 error below what the recorded largest error allows
    m = d["oracle"]["results"]["local|flex"]["o"]
    m["rel_l2"] = m["max_abs_rel"] / (10 * m["numel"] ** 0.5)


def _interpreter_flag(d):   # a GPU run (its CUPTI block) relabelled as the interpreter's, every peer 10x faster
    _all_at_a_tenth(d)
    d["metadata"]["env"]["TRITON_INTERPRET"] = "1"


def _reference_inflated(d):   # an oracle failure (max_abs 0.06 x the reference) hidden behind a larger reference
    m = d["oracle"]["results"]["local|flex"]["dk"]
    m["max_abs"] = 0.06 * m["ref_max_abs"]
    m["ref_max_abs"], m["max_abs_rel"] = m["max_abs"] / 0.04, 0.04


def _cell_left_out(d):   # local|flex deleted, its skip reason the interpreter's "not checked against the oracle"
    for block in (d["cells"], d["oracle"]["results"], d["memory"], *(d["cupti"][k] for k in (
            "kernel_ms", "median_kernel_ms", "event_ms", "median_event_ms"))):
        block.pop("local|flex", None)
    d["peers"]["flex"]["cells"].remove("local|flex")
    d["peers"]["flex"]["skipped"]["local"] = "not checked against the oracle"
    _restat(d)


def _not_timed(d):
    d["not_timed"]["flash-sparse-attn"] = "timed elsewhere, 2x faster than FLA"


@pytest.mark.parametrize(("source", "forge", "expected"), [
    (T8192, _stop_rule, "$.timing.stop.rule"),
    (T8192, _floors, "$.timing.stop.floors"),
    (T8192, _method, "$.timing.stop.method"),
    (T8192, _elapsed, "$.timing.stop.elapsed_seconds"),
    (T32768, _sizing, "$.cupti.sizing"),
    (T32768, _faster_profiled, "$.cupti.median_event_ms.local|fla.fwd"),
    (T32768, _no_cupti, "$.cupti"),
    (T32768, _memory_beyond_gpu, "$.memory.dense.peak_allocated_bytes"),
    (T32768, _not_timed, "$.not_timed"),
    (T32768, _zero_call, "$.cupti.kernel_ms.local|fla.bwd"),
    (T32768, _no_memory, "$.memory"),
    (T32768, _fla_timed_at_half, "$.cells.local|fla.stages.bwd.median_ms"),
    (T32768, _fwd_bwd_under_its_parts, "$.cells.local|fla.stages.fwd_bwd.median_ms"),
    (T32768, _rounds_phase_short, "$.phases.rounds"),
    (T32768, _rounds_phase_past_wall, "$.phases"),
    (T32768, _all_at_a_tenth, "$.cells.dense.stages.fwd.median_ms"),
    (T131072, _dense_at_three_tenths, "$.cells.dense.stages.fwd.median_ms"),
    (T32768, _cells_swapped, "$.cells.dense.stages.fwd.median_ms"),
    (T32768, _oracle_error_hidden, "$.oracle.results.dense.dk.max_abs_rel"),
    (T32768, _oracle_numel, "$.oracle.results.local|fla.dv.numel"),
    (T32768, _oracle_rel_l2, "$.oracle.results.local|flex.o.rel_l2"),
    (T32768, _interpreter_flag, "$.cells.dense.stages.fwd.median_ms"),
    (T32768, _reference_inflated, "$.oracle.results.*.dk.ref_max_abs"),
    (T32768, _cell_left_out, "$.cells"),
    (T8192, _trace_elapsed_halved, "$.timing.stop.trace[4].elapsed_seconds"),
])
def test_a_forged_peer_result_fails_validate_at_the_forged_field(source, forge, expected, tmp_path):
    doc = json.loads(source.read_text())
    assert _failures(copy.deepcopy(doc), tmp_path) == set()  # the committed file passes
    forge(doc)
    assert expected in _failures(doc, tmp_path), forge.__name__


def test_a_peer_result_carries_the_current_or_an_earlier_not_timed_list_and_nothing_else(tmp_path):
    doc = json.loads(T32768.read_text())
    assert doc["not_timed"] in (NOT_TIMED, *NOT_TIMED_EARLIER)
    for listed in (NOT_TIMED, *NOT_TIMED_EARLIER):
        doc["not_timed"] = dict(listed)
        assert "$.not_timed" not in _failures(copy.deepcopy(doc), tmp_path)
    doc["not_timed"] = {**NOT_TIMED, "Liger-Kernel NSA": NOT_TIMED_EARLIER[0]["flash-sparse-attn"]}  # a mix of both
    assert "$.not_timed" in _failures(doc, tmp_path)


def test_a_peer_pass_stripped_of_its_sizing_fails_as_benchs_does():
    """Bench's twin (a forger's trial of 2026-12-04): without --cupti-rounds in the recorded argv a pass with paired
    events was sized by need and records its sizing; peer-bench's pass is sized the same way."""
    from nsa_exp.checking.peer_result import as_bench_view, marked_cupti_problems  # noqa: PLC0415

    doc = as_bench_view(json.loads((REPO / "results" / "peers" / "peers_h200_T8192.json").read_text()))
    assert marked_cupti_problems(doc) == []
    del doc["cupti"]["sizing"]
    assert "$.cupti.sizing" in [p for p, _ in marked_cupti_problems(doc)]
