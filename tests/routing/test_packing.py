"""Packed documents (issue 15): the packing section, routings per document, the packed equal-edge gate,
varlen CSR rows in FLA's chunk-major program order, and the sweep's packings axis."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

from nsa_exp.core.config import Pattern, Shape, cu_seqlens
from nsa_exp.core.families import FAMILIES as TABLE
from nsa_exp.errors import UserError
from nsa_exp.io.config_files import config_from_dict, load_config
from nsa_exp.io.schemas import schema_errors
from nsa_exp.report.data import ReportData
from nsa_exp.report.manifest import committed_inputs
from nsa_exp.report.packing import packing_section
from nsa_exp.routing.edges import effective_edges, equal_edge_gate
from nsa_exp.routing.fanin import csr_rows, routing_statistics
from nsa_exp.routing.packing import (
    generate_packed_routing,
    packed_closed_form_edges,
    packed_routing_violations,
    packing_record,
)
from nsa_exp.routing.patterns import generate_routing
from nsa_exp.sweeps.plan import load_sweep
from nsa_exp.sweeps.run import run_sweep
from nsa_exp.sweeps.table import sweep_table
from tests.helpers import REPO, assert_one_line_error, run_cli
from tests.sweeps.test_sweep import _sweep_config, fake_measure

FAMILIES = [n for n, row in TABLE.items() if row.external is None]  # fla-topk is dense-only
SHAPE = Shape(B=1, T=2048, HQ=64, H=2, K=64, V=64, S=8, block_size=64, dtype="bfloat16")
PACKINGS = [{"documents": 2048}, {"documents": 512}, {"lengths": [64, 1024, 192, 768]},
            {"distribution": "lognormal", "mean": 400, "sigma": 1.2, "seed": 5}]


@pytest.mark.parametrize("packing", PACKINGS, ids=lambda p: next(iter(p)))
def test_cu_seqlens_start_at_zero_end_at_T_increase_and_hold_whole_blocks(packing):
    cu = cu_seqlens(packing, SHAPE.T, SHAPE.block_size)
    assert cu.dtype == np.int32 and cu[0] == 0 and cu[-1] == SHAPE.T
    assert (np.diff(cu) > 0).all() and (np.diff(cu) % SHAPE.block_size == 0).all()


def test_the_lognormal_packing_is_seeded_and_mixes_lengths():
    entry = {"distribution": "lognormal", "mean": 4096, "sigma": 1.0, "seed": 0}
    a, b = cu_seqlens(entry, 32768, 64), cu_seqlens(entry, 32768, 64)
    c = cu_seqlens({**entry, "seed": 1}, 32768, 64)
    assert np.array_equal(a, b) and not np.array_equal(a, c) and len(set(np.diff(a).tolist())) > 3


@pytest.mark.parametrize(("packing", "field"), [
    ({"documents": 100}, "config.packing.documents"),
    ({"documents": 768}, "config.packing.documents"),          # a multiple of 64 that does not divide T
    ({"lengths": [1024, 1000, 24]}, "config.packing.lengths[1]"),
    ({"lengths": [1024]}, "config.packing.lengths"),
    ({"documents": 1024, "lengths": [2048]}, "config.packing"),
    ({"documents": 1024, "seed": 1}, "config.packing.seed"),
    ({"distribution": "lognormal", "mean": 400, "seed": 1}, "config.packing.sigma"),
    ({"distribution": "zipf", "mean": 4, "sigma": 1, "seed": 1}, "config.packing.distribution"),
])
def test_a_bad_packing_is_one_line_naming_the_field(packing, field):
    raw = {**load_config("configs/e1_h100.json").raw, "shape": SHAPE.to_dict(), "packing": packing}
    with pytest.raises(UserError) as err:
        config_from_dict(raw)
    assert str(err.value).startswith(field) and "\n" not in str(err.value)


def test_a_packed_patterns_rules_hold_in_the_longest_document():
    """Each document is routed at its own length with document-local blocks: a hot block past every document's last
    block was accepted and routed as local (an attacker, 2026-12-07); one inside the longest document passes."""
    docs = [SHAPE.T // 2, SHAPE.T // 2]
    raw = {**load_config("configs/e1_h100.json").raw, "shape": SHAPE.to_dict(), "packing": {"lengths": docs}}
    last = docs[0] // SHAPE.block_size - 1
    config_from_dict({**raw, "patterns": [{"name": "local"}, {"name": "hot-block", "block": last}]})
    with pytest.raises(UserError, match=rf"^config.patterns\[1\] \(packed: in the longest document, "
                                        rf"T={docs[0]}\).block: {last + 1} is outside"):
        config_from_dict({**raw, "patterns": [{"name": "local"}, {"name": "hot-block", "block": last + 1}]})


def test_a_packing_needs_one_packed_row():
    raw = {**load_config("configs/e1_h100.json").raw, "shape": {**SHAPE.to_dict(), "B": 2},
           "packing": {"documents": 512}}
    with pytest.raises(UserError, match=r"^config.shape.B"):
        config_from_dict(raw)


def test_one_document_reproduces_the_dense_routing_and_each_document_is_the_generator_at_its_length():
    one = cu_seqlens({"documents": SHAPE.T}, SHAPE.T, SHAPE.block_size)
    cu = cu_seqlens({"lengths": [768, 512, 768]}, SHAPE.T, SHAPE.block_size)
    for name in FAMILIES:
        dense = generate_routing(Pattern(name), SHAPE, 3)
        assert np.array_equal(generate_packed_routing(Pattern(name), SHAPE, 3, one), dense)
        packed = generate_packed_routing(Pattern(name), SHAPE, 3, cu)
        assert np.array_equal(packed[:, :768], generate_routing(Pattern(name), SHAPE.__class__(
            **{**SHAPE.to_dict(), "T": 768}), 3))
        assert packed_routing_violations(packed, SHAPE, cu) == []
    # documents 0 and 2 have the same length but their own seeds: uniform draws differ
    uniform = generate_packed_routing(Pattern("uniform"), SHAPE, 3, cu)
    assert not np.array_equal(uniform[:, :768], uniform[:, 1280:])
    with pytest.raises(UserError, match=r"^config.packing: pattern 'fla-topk' is generated on the dense layout"):
        generate_packed_routing(Pattern("fla-topk"), SHAPE, 3, cu)


@pytest.mark.parametrize("packing", PACKINGS, ids=lambda p: next(iter(p)))
def test_every_family_meets_the_packed_closed_form(packing):
    cu = cu_seqlens(packing, SHAPE.T, SHAPE.block_size)
    routings = {n: generate_packed_routing(Pattern(n), SHAPE, 0, cu) for n in FAMILIES}
    gate = equal_edge_gate(routings, SHAPE, cu)
    lengths = np.diff(cu)
    t_local = np.concatenate([np.arange(n) for n in lengths])
    assert gate["closed_form"] == SHAPE.H * int(np.minimum(SHAPE.S, t_local // SHAPE.block_size + 1).sum())
    assert packed_closed_form_edges(SHAPE.H, SHAPE.S, SHAPE.block_size, cu) == gate["closed_form"]


def test_the_packed_gate_refuses_a_routing_that_drops_an_edge():
    cu = cu_seqlens({"documents": 512}, SHAPE.T, SHAPE.block_size)
    bi = generate_packed_routing(Pattern("local"), SHAPE, 0, cu)
    bi[0, 700, 0, 0] = -1
    assert effective_edges(bi, SHAPE.block_size, cu) == packed_closed_form_edges(SHAPE.H, SHAPE.S, 64, cu) - 1
    with pytest.raises(Exception, match="equal-edge gate failed"):
        equal_edge_gate({"local": bi}, SHAPE, cu)


def test_varlen_csr_rows_are_chunk_major_and_a_documents_sink_row_holds_its_length():
    cu = cu_seqlens({"lengths": [512, 1024, 512]}, SHAPE.T, SHAPE.block_size)
    bi = generate_packed_routing(Pattern("sink-heavy", sinks=1), SHAPE, 0, cu)
    fanin = csr_rows(bi, SHAPE.block_size, cu).fanin
    H, chunk_offsets = SHAPE.H, [0, 8, 24]
    assert fanin.size == 32 * H
    for doc, length in enumerate(np.diff(cu)):
        for h in range(H):  # program (global_block)*H + h: block 0 of every document, each head
            assert fanin[chunk_offsets[doc] * H + h] == length
    dense = csr_rows(generate_routing(Pattern("sink-heavy", sinks=1), SHAPE, 0), SHAPE.block_size).fanin
    one = cu_seqlens({"documents": SHAPE.T}, SHAPE.T, SHAPE.block_size)
    varlen = csr_rows(generate_routing(Pattern("sink-heavy", sinks=1), SHAPE, 0), SHAPE.block_size, one).fanin
    M = SHAPE.num_blocks  # same rows, other order: dense (h*M + s) vs varlen (s*H + h)
    assert np.array_equal(varlen, dense.reshape(H, M).T.reshape(-1)) and not np.array_equal(varlen, dense)


def test_sixteen_documents_at_the_primary_shape_generate_in_under_three_seconds():
    shape = load_config("configs/e1_h100.json").shape
    cu = cu_seqlens({"documents": 2048}, shape.T, shape.block_size)
    t0 = time.monotonic()
    bi = generate_packed_routing(Pattern("sink-heavy", sinks=4), shape, 0, cu)
    assert time.monotonic() - t0 < 3.0 and bi.shape == (1, shape.T, shape.H, shape.S)


def test_the_packing_record_is_schema_valid_and_names_the_program_order():
    cu = cu_seqlens({"documents": 512}, SHAPE.T, SHAPE.block_size)
    record = packing_record(cu, 123)
    assert record["cu_seqlens"] == cu.tolist() and len(record["cu_seqlens_sha256"]) == 64
    assert "(global_block)*H + h" in record["program_order"]


def test_the_packings_axis_labels_each_point_and_the_table_carries_the_packing(tmp_path):
    path = _sweep_config(tmp_path, lengths=[8192], patterns=[{"name": "sink-heavy", "sinks": 4}],
                         packings=[None, {"documents": 8192}, {"documents": 2048}])
    points = load_sweep(path)
    assert [p.point_id for p in points] == ["T8192-dense-sink-heavy-sinks4", "T8192-docs8192-sink-heavy-sinks4",
                                            "T8192-docs2048-sink-heavy-sinks4"]
    assert "packing" not in points[0].config and points[2].config["packing"] == {"documents": 2048}

    out = tmp_path / "out"
    run_sweep(points, out, allow_gpu=True, measure=fake_measure)  # the real arm records each point's packing
    for f in out.glob("T*.json"):  # the points (beside them _autotune.json, the configs the first point tuned)
        assert schema_errors(json.loads(f.read_text()), "sweep_point", "$") == []
    table = sweep_table(out)
    assert dict(zip(table["packing"], table["documents"], strict=True)) == {"dense": 1, "docs8192": 1, "docs2048": 4}


def test_the_committed_packing_sweep_covers_dense_and_five_packings():
    points = load_sweep("configs/sweep_packing_h200.json")
    assert [p.packing_label for p in points] == ["dense", "docs32768", "docs8192", "docs4096", "docs2048",
                                                 "lognormal4096s1seed0"]
    assert {p.pattern["name"] for p in points} == {"sink-heavy"} and "full_bwd" not in points[0].stages


CALIBRATION = "results/model/h200_BQ1_w4_s2.json"


def test_predict_follows_the_varlen_program_order_from_a_packing_or_an_npz_cu_seqlens(tmp_path):
    dense = json.loads(run_cli("predict", "--calibration", CALIBRATION, "--pattern", "sink-heavy", "--json").stdout)
    one = json.loads(run_cli("predict", "--calibration", CALIBRATION, "--pattern", "sink-heavy",
                             "--packing", '{"documents": 32768}', "--json").stdout)
    # same rows (2048 programs > 264 slots), chunk-major order: the 16 sink rows (blocks 0..3 of the 4 heads)
    # are programs 0..15 instead of h*512 + 0..3, so the model's makespan changes with the order alone
    assert one["programs"] == dense["programs"] and one["predicted_ms"] < dense["predicted_ms"]
    shape = Shape(**{**load_config("configs/e1_h100.json").shape.to_dict(), "T": 4096})
    cu = cu_seqlens({"documents": 1024}, 4096, 64)
    path = tmp_path / "packed.npz"
    np.savez(path, block_indices=generate_packed_routing(Pattern("sink-heavy", sinks=4), shape, 0, cu), cu_seqlens=cu)
    from_file = json.loads(run_cli("predict", "--calibration", CALIBRATION, "--routing-file", str(path),
                                   "--json").stdout)
    from_flag = json.loads(run_cli("predict", "--calibration", CALIBRATION, "--pattern", "sink-heavy", "--T", "4096",
                                   "--packing", '{"documents": 1024}', "--json").stdout)
    assert from_file["predicted_ms"] == from_flag["predicted_ms"]
    bad = tmp_path / "bad.npz"
    np.savez(bad, block_indices=generate_routing(Pattern("local"), shape, 0), cu_seqlens=np.array([0, 1000, 4096]))
    assert_one_line_error(run_cli("predict", "--calibration", CALIBRATION, "--routing-file", str(bad)),
                          "cu_seqlens", "block_size")


def test_the_packing_report_section_renders_penalty_per_document_length_and_the_order_effect(tmp_path):
    assert packing_section(ReportData(committed_inputs(root=tmp_path))) == []
    rows = []
    for label, docs, dkv, local in [("lognormal4096s1seed0", 9, 20.0, 14.0), ("docs2048", 16, 16.0, 15.0),
                                    ("dense", 1, 63.0, 15.0), ("docs32768", 1, 55.0, 15.5),
                                    ("docs8192", 4, 30.0, 15.0)]:
        rows.append({"packing": label, "documents": docs, "sweep": "s", "point_id": f"T32768-{label}-sink-heavy",
                     "family": "sink-heavy", "params": "{}", "T": 32768, "edges": 1, "fanin_mean": 1.0,
                     "fanin_max": 32768.0 / docs, "fanin_p99": 1.0, "fanin_cv": 1.0, "fanin_gini": 0.5,
                     "dkv_median_ms": dkv, "dkv_p10_ms": dkv, "dkv_p90_ms": dkv, "csr_median_ms": 1.0,
                     "local_dkv_median_ms": local, "ratio_vs_local": dkv / local})
    (tmp_path / "results" / "sweeps").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(tmp_path / "results" / "sweeps" / "sweep_packing_h200.csv", index=False)
    text = "\n".join(packing_section(ReportData(committed_inputs(root=tmp_path))))
    order = [text.index(f"| {label}") for label in ("dense", "docs32768", "docs8192", "docs2048", "lognormal")]
    assert order == sorted(order) and " 4.200× |" in text  # dense penalty 63 / 15
    # no point files under this root: the medians of the table, no CI, and it says so
    assert "dense 63.000 ms vs one document (varlen order) 55.000 ms (0.873×; point files not committed" in text


def test_validate_recomputes_a_packed_points_statistics_over_the_varlen_csr_rows(tmp_path):
    from nsa_exp.checking.validate import validate_path  # noqa: PLC0415 - as test_sweep's recompute test

    path = _sweep_config(tmp_path, lengths=[4096], patterns=[{"name": "sink-heavy", "sinks": 4}],
                         packings=[{"documents": 1024}])
    point = load_sweep(path)[0]
    config = config_from_dict(point.config)
    doc = fake_measure(point, True, tmp_path)  # the real arm: packing record and statistics over the CSR rows
    assert doc["point"]["packing"] == point.packing_label and doc["packing"] == packing_record(
        config.cu_seqlens, packed_closed_form_edges(config.shape.H, config.shape.S, config.shape.block_size,
                                                    config.cu_seqlens))
    for p in config.patterns:
        bi = generate_packed_routing(p, config.shape, config.seeds.routing, config.cu_seqlens)
        assert doc["patterns"][p.name]["edges"] == effective_edges(bi, config.shape.block_size, config.cu_seqlens)
    out = tmp_path / f"{doc['point_id']}.json"  # a sweep writes <point_id>.json (point_consistent)
    out.write_text(json.dumps(doc))
    report = validate_path(out)
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    dense = generate_routing(config.pattern("sink-heavy"), config.shape, config.seeds.routing)
    doc["patterns"]["sink-heavy"].update(routing_statistics(dense, config.shape.block_size))  # dense stats: wrong
    out.write_text(json.dumps(doc))
    failed = [c for c in validate_path(out)["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["routing_recompute"]


def test_the_routing_command_reports_a_packed_config_and_saves_npz_that_predict_reads(tmp_path):
    raw = json.loads((REPO / "configs" / "e1_h100.json").read_text())
    raw.update(name="packed", shape={**raw["shape"], "T": 4096}, packing={"documents": 1024},
               patterns=[{"name": "local"}, {"name": "sink-heavy", "sinks": 4}])
    config = tmp_path / "packed.json"
    config.write_text(json.dumps(raw))
    proc = run_cli("routing", "--config", str(config), "--json", "--save", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    cu = cu_seqlens({"documents": 1024}, 4096, 64)
    closed = packed_closed_form_edges(4, 16, 64, cu)
    assert report["closed_form_edges"] == closed and report["packing"]["documents"] == 4
    assert {p["edges"] for p in report["patterns"].values()} == {closed}
    assert report["patterns"]["sink-heavy"]["fanin"]["max"] == 1024  # a document's sink row: its length
    saved = np.load(tmp_path / "r" / "sink-heavy.npz")
    assert np.array_equal(saved["cu_seqlens"], cu)
    from_file = json.loads(run_cli("predict", "--calibration", CALIBRATION, "--routing-file",
                                   str(tmp_path / "r" / "sink-heavy.npz"), "--json").stdout)
    from_flag = json.loads(run_cli("predict", "--calibration", CALIBRATION, "--pattern", "sink-heavy", "--T", "4096",
                                   "--packing", '{"documents": 1024}', "--json").stdout)
    assert from_file["predicted_ms"] == from_flag["predicted_ms"]


def test_model_validate_reads_a_packed_point_in_the_varlen_program_order():
    from nsa_exp.model.points import pattern_fanin, read_points  # noqa: PLC0415 - model tier, as the CLI loads it

    path = REPO / "results" / "sweeps" / "sweep_packing_h200" / "T32768-docs8192-sink-heavy-sinks4.json"
    points = {p.name: p for p in read_points(path)}
    p = points["sink-heavy(sinks=4)@T=32768-docs8192"]
    assert p.packing == {"documents": 8192}
    cu = cu_seqlens(p.packing, p.T, 64)
    bi = generate_packed_routing(Pattern("sink-heavy", sinks=4), Shape(**{**p.shape, "T": p.T}), p.seed, cu)
    packed = pattern_fanin(p.pattern, p.shape, p.T, p.seed, p.packing)
    assert np.array_equal(packed, csr_rows(bi, 64, cu).fanin) and packed.max() == 8192
    assert not np.array_equal(packed, pattern_fanin(p.pattern, p.shape, p.T, p.seed))  # the dense routing differs
