"""The ncu export parses ncu's own raw CSV (the committed H100 ones), and profile-stage refuses a
bench result whose shape, commit or GPU differ; the replay pins each autotuner to the recorded config."""

from __future__ import annotations

import copy
import csv
import io
import json

import pytest

from nsa_exp.core.nvtx import parse_patterns, range_name
from nsa_exp.errors import UserError
from nsa_exp.gpu.ncu import export_csv_text
from nsa_exp.gpu.profiler import load_benchmark_result, replay_autotune
from nsa_exp.io.config_files import load_config
from nsa_exp.io.ncu_csv import METRICS, parse_raw_csv
from nsa_exp.io.schemas import schema_errors
from nsa_exp.report.ncu import ncu_section as report_ncu
from tests.helpers import REPO, assert_one_line_error, run_cli

NCU = REPO / "results" / "ncu"
DKV_CSV = NCU / "e1_h100_local-vs-sink-heavy_dkv_core.raw.csv"
DEV = REPO / "results" / "raw" / "e1_h100_dev.json"
H100 = "NVIDIA H100 80GB HBM3"


def test_raw_csv_gives_one_row_per_profiled_kernel_in_ns_and_bytes():
    kernels = parse_raw_csv(DKV_CSV.read_text())
    assert [k["kernel"] for k in kernels] == ["parallel_nsa_bwd_kernel_dkv"] * 2
    local, sink = (k["metrics"] for k in kernels)
    assert kernels[0]["units"]["duration_ns"] == "ms"  # what ncu printed, before conversion
    assert kernels[0]["value_units"]["duration_ns"] == "ns"  # the stored value's unit
    assert kernels[0]["value_units"]["shared_mem_dynamic_bytes"] == "byte/block"
    assert 1e7 < local["duration_ns"] < sink["duration_ns"] < 1e8  # 15 ms and 64 ms, in ns
    assert local["grid_size"] == 2048 == 4 * 512  # one program per (kv head, kv block)
    assert local["shared_mem_dynamic_bytes"] == 73920.0
    assert sink["sm_throughput_max_pct"] > 3 * sink["sm_throughput_pct"]  # the imbalance the tail causes
    assert all(s["reason"] != "selected" for k in kernels for s in k["top_stalls"])
    assert set(local) == set(METRICS)


def test_export_is_schema_valid_and_labels_kernels_by_launch_order(tmp_path):
    meta = json.loads((NCU / "e1_h100_local-vs-sink-heavy_dkv_core.json").read_text())["metadata"]
    doc = export_csv_text(DKV_CSV.read_text(), tmp_path / "s.json",
                          {"patterns_in_launch_order": ["local", "sink-heavy"]}, meta)
    assert [k["pattern"] for k in doc["kernels"]] == ["local", "sink-heavy"]
    assert schema_errors(json.loads((tmp_path / "s.json").read_text()), "ncu_summary", "s") == []


def test_csv_without_kernels_is_refused():
    with pytest.raises(UserError, match="no kernel rows"):
        parse_raw_csv('"==PROF== nothing profiled"\n')


def test_pattern_specs_and_range_names():
    assert parse_patterns("sink-heavy") == ["sink-heavy"]
    assert parse_patterns("local-vs-sink-heavy") == ["local", "sink-heavy"]
    assert range_name("local-vs-sink-heavy", "dq_core") == "nsa_local-vs-sink-heavy_dq_core"
    for bad in ("striped", "local-vs-zipf-vs-uniform", "local-vs-"):
        with pytest.raises(UserError):
            parse_patterns(bad)


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda r: r["shape"].__setitem__("T", 2048), "its shape"),
    (lambda r: r["fla"].__setitem__("commit", "0" * 40), "FLA commit"),
    (lambda r: r["metadata"]["gpu"].__setitem__("name", "NVIDIA H200"), "tuned on 'NVIDIA H200'"),
    (lambda r: r.__setitem__("kind", "check_report"), "not a bench result"),
])
def test_benchmark_result_that_does_not_match_is_refused(tmp_path, mutate, fragment):
    result = json.loads(DEV.read_text())
    bad = copy.deepcopy(result)
    mutate(bad)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(UserError, match=fragment):
        load_benchmark_result(path, load_config("configs/e1_h100_dev.json"), H100)


def test_replay_pins_each_autotuner_to_the_recorded_config(fla_interpreter):
    from nsa_exp.gpu.launcher import _autotuner, autotuned_kernels  # noqa: PLC0415 - FLA after the interpreter setup

    result = load_benchmark_result(DEV, load_config("configs/e1_h100_dev.json"), H100)
    saved = {k: _autotuner(v).configs for k, v in autotuned_kernels().items()}
    try:
        chosen = replay_autotune(result)
        for stage, kernel in autotuned_kernels().items():
            (cfg,) = _autotuner(kernel).configs
            rec = result["autotune"]["kernels"][stage]["best_config"]
            assert (cfg.kwargs, cfg.num_warps, cfg.num_stages) == (rec["kwargs"], rec["num_warps"], rec["num_stages"])
            assert chosen[stage] == rec
    finally:
        for k, v in autotuned_kernels().items():
            _autotuner(v).configs = saved[k]


def test_profile_stage_cli_without_gpu_is_a_one_line_error():
    proc = run_cli("profile-stage", "--pattern", "local-vs-sink-heavy", "--stage", "dkv_core",
                   "--benchmark-result", str(DEV))
    assert_one_line_error(proc, "gpu: no CUDA GPU is visible")


def test_committed_ncu_summaries_are_from_the_gpu_their_name_says():
    paths = sorted(NCU.glob("*.json"))
    assert any(p.name.startswith("e1_h200_") for p in paths) and any(p.name.startswith("e1_h100_") for p in paths)
    for path in paths:
        doc = json.loads(path.read_text())
        want = "NVIDIA H200" if path.name.startswith("e1_h200_") else H100
        assert {k["device"] for k in doc["kernels"]} == {want}, path
        assert doc["metadata"]["git"]["sha"]


# Issue 16 item 6: a multi-kernel stage (csr) in one NVTX range, patterns launched one after the other.
CSR_KERNELS = ["vectorized_elementwise_kernel", "prepare_block_csr_kernel", "cub_scan_kernel",
               "prepare_block_csr_kernel"]


def _multi_kernel_csv(names_per_pattern: list[list[str]]) -> str:
    """The committed dK/dV raw CSV's header and units rows, then its first kernel row copied once per
    launch, renamed and renumbered (ncu's launch order)."""
    header, units, row, _ = list(csv.reader(io.StringIO(DKV_CSV.read_text())))
    name_col, id_col = header.index("Kernel Name"), header.index("ID")
    rows = [header, units]
    for name in (n for names in names_per_pattern for n in names):
        rows.append([str(len(rows) - 2) if i == id_col else name if i == name_col else v for i, v in enumerate(row)])
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue()


def test_multi_kernel_stage_labels_each_kernel_with_its_pattern_and_the_report_names_it(tmp_path):
    meta = json.loads((NCU / "e1_h100_local-vs-sink-heavy_dkv_core.json").read_text())["metadata"]
    doc = export_csv_text(_multi_kernel_csv([CSR_KERNELS, CSR_KERNELS]), tmp_path / "s.json",
                          {"patterns_in_launch_order": ["local", "sink-heavy"], "stage": "csr"}, meta)
    assert [(k["pattern"], k["kernel"]) for k in doc["kernels"]] == \
        [("local", n) for n in CSR_KERNELS] + [("sink-heavy", n) for n in CSR_KERNELS]
    assert schema_errors(json.loads((tmp_path / "s.json").read_text()), "ncu_summary", "s") == []
    table = "\n".join(report_ncu([{**doc, "_path": "s.json"}]))
    gpu = doc["kernels"][0]["device"]
    assert "?" not in table and f"| csr | {gpu} | local: prepare_block_csr_kernel |" in table
    assert table.count("sink-heavy: prepare_block_csr_kernel") == 2 and "local: cub_scan_kernel" in table


@pytest.mark.parametrize("blocks", [
    [CSR_KERNELS, CSR_KERNELS[:3]],                      # 7 rows for 2 patterns: no clean split
    [CSR_KERNELS, CSR_KERNELS[::-1]],                    # same count, different kernel order
])
def test_kernels_that_do_not_split_evenly_by_pattern_stay_unlabelled(tmp_path, blocks):
    meta = json.loads((NCU / "e1_h100_local-vs-sink-heavy_dkv_core.json").read_text())["metadata"]
    doc = export_csv_text(_multi_kernel_csv(blocks), tmp_path / "s.json",
                          {"patterns_in_launch_order": ["local", "sink-heavy"], "stage": "csr"}, meta)
    assert {k["pattern"] for k in doc["kernels"]} == {None}
