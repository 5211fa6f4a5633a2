"""The release arm: a maintainer times a source tree with ONE command — tested on the CPU with a local copy of the
pinned 0.5.2 sources, the REAL FLA kernels under TRITON_INTERPRET=1 at a tiny float16 shape (one config per
autotuner), host-clock timer; then validate recomputes it, catches tampering, and compare reads it."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nsa_exp.checking.validate import validate_bytes
from nsa_exp.core.config import Pattern, Shape
from nsa_exp.routing.patterns import generate_routing
from tests.helpers import REPO, assert_one_line_error, harness_env, run_cli

pytestmark = pytest.mark.interpreter

TINY = {"B": 1, "T": 32, "HQ": 16, "H": 1, "K": 16, "V": 16, "S": 2, "block_size": 16, "dtype": "float16"}
SMOKE = {**TINY, "T": 64}


def write_configs(folder: Path, patterns: list[dict], layer: bool = False) -> Path:
    """A tiny base experiment config and a release config with one point (T=32) over ``patterns`` (``layer``:
    also the nsa_layer call)."""
    base = json.loads((REPO / "configs" / "e1_h200.json").read_text())
    base.pop("formal")
    base.update(name="tiny_cpu", shape=TINY, patterns=[{"name": "local"}],
                smoke={"naive": SMOKE, "staged": SMOKE, "oracle": SMOKE},
                timing={"warmup_rounds": 1, "repetitions": 5, "l2_flush_bytes": 2**20, "order": "shuffled-rounds",
                        "flush": "read"})
    (folder / "base.json").write_text(json.dumps(base))
    release = {"schema_version": "1.0", "name": "release_cpu", "base_config": str(folder / "base.json"),
               "points": [{"T": 32, "patterns": patterns}], **({"layer": True} if layer else {})}
    (folder / "release.json").write_text(json.dumps(release))
    return folder / "release.json"


def pinned_tree(folder: Path) -> Path:
    """A git checkout holding a copy of the installed (pinned, 0.5.2) fla package: a maintainer's tree."""
    src = Path(importlib.util.find_spec("fla").submodule_search_locations[0])
    tree = folder / "flash-linear-attention"
    shutil.copytree(src, tree / "fla", ignore=shutil.ignore_patterns("__pycache__"))
    if shutil.which("git"):
        for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
            subprocess.run(["git", "-C", str(tree), *cmd], check=True, capture_output=True)
    return tree


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """One release-bench run over the tree (local + sink-heavy + a routing file, 1 warm-up + 2 timed rounds)."""
    folder = tmp_path_factory.mktemp("release")
    config = write_configs(folder, [{"name": "local"}, {"name": "sink-heavy", "sinks": 1}], layer=True)
    tree = pinned_tree(folder)
    np.save(folder / "mine.npy", generate_routing(Pattern("zipf", exponent=1.0), Shape(**TINY), 5))
    args = ["release-bench", "--config", str(config), "--fla-source", str(tree), "--repetitions", "2",
            "--routing-file", str(folder / "mine.npy"),
            "--output-dir", str(folder / "out"), "--releases-dir", str(folder / "rel")]
    proc = run_cli(*args, env=harness_env())  # the child replays a launch it already ran (tests/child_site)
    assert proc.returncode == 0, proc.stderr
    (path,) = sorted((folder / "out").glob("*.json"))
    return {"folder": folder, "tree": tree, "path": path, "doc": json.loads(path.read_text()), "args": args,
            "proc": proc}


def checks(proc: subprocess.CompletedProcess) -> dict[str, bool]:
    (report,) = json.loads(proc.stdout)
    return {c["name"]: c["passed"] for c in report["checks"]}


def test_one_command_times_a_source_tree_through_its_public_api_in_a_child_that_sees_only_it(timed):
    doc, tree = timed["doc"], timed["tree"]
    assert doc["kind"] == "release_result" and doc["not_pinned"].startswith("NOT the pinned experiment")
    assert doc["name"].startswith("source-flash-linear-attention") and doc["name"].endswith("-T32")
    rel = doc["release"]
    assert rel["kind"] == "source" and rel["version_imported"] == rel["version_declared"] == "0.5.2"
    assert rel["package_dir"] == str((tree / "fla").resolve())
    assert rel["fla_roots_on_path"] == [rel["origin"]["view"]] and rel["distributions"] == []
    pinned_site = str(Path(importlib.util.find_spec("fla").submodule_search_locations[0]).parent)
    assert pinned_site not in rel["sys_path"]  # its entry was replaced by a shadow without fla
    if shutil.which("git"):
        head = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
        assert rel["origin"]["git"]["sha"] == head.strip() and doc["name"].endswith(f"-{head.strip()[:12]}-T32")
    parallel = (tree / "fla/ops/nsa/parallel.py").read_bytes()
    assert rel["imported_files"]["fla/ops/nsa/parallel.py"] == hashlib.sha256(parallel).hexdigest()
    launches = [(x["kernel"], x["grid"]) for x in doc["source"]["launches"]]
    assert launches == [("parallel_nsa_bwd_kernel_dq", "(T, NV, B * H)"), ("parallel_nsa_bwd_kernel_dkv", "(NV, NB)"),
                        ("parallel_attn_bwd_kernel_preprocess", "(delta.numel(),)"),
                        ("prepare_block_csr_kernel", "(triton.cdiv(T, BT), B * H)"),
                        ("prepare_block_csr_kernel", "(triton.cdiv(T, BT), B * H)")]
    assert doc["source"]["kernels"]["parallel_nsa_bwd_kernel_dkv"]["autotune_key"] == ["BS", "BK", "BV", "G"]
    assert doc["timing"]["timer"] == "host-clock" and doc["kernels"] is None
    assert [g["name"] for g in doc["gates"]] == ["environment", "interpreter", "versions", "fla_sources",
                                                 "equal_edges", "release_fla"]
    assert list(doc["patterns"]) == ["local", "sink-heavy", "file:mine"] and "file:mine" in doc["edges"]["exempt"]
    assert doc["routing_files"]["file:mine"]["sha256"] == hashlib.sha256(
        (timed["folder"] / "mine.npy").read_bytes()).hexdigest()
    for p in doc["patterns"]:
        st = doc["patterns"][p]["stages"]
        assert list(st) == ["selection_fwd", "full_bwd", "train_step", "nsa_layer"]  # the config's "layer": true
        assert all(len(s["raw_ms"]) == 2 and len(s["warmup_ms"]) == 1 for s in st.values())
    assert "fla.ops.nsa.parallel:parallel_nsa_bwd_kernel_dkv" in doc["autotune"]["kernels"]
    assert "wrote" in timed["proc"].stdout


def test_validate_recomputes_the_release_result_and_rehashes_the_tree(timed):
    proc = run_cli("validate", str(timed["path"]), "--release-dir", str(timed["tree"]), "--routing-file",
                   str(timed["folder"] / "mine.npy"), "--json")
    assert proc.returncode == 0, proc.stdout
    got = checks(proc)
    assert all(got.values()) and {"stats_recompute", "routing_recompute", "routing_sha256", "timing_recompute",
                                  "release_files", "source_consistent", "gates_consistent",
                                  "routing_file_recompute"} <= set(got)
    assert "host-clock" in json.loads(proc.stdout)[0]["warnings"][0]["message"]


@pytest.mark.parametrize("edit, check", [
    (lambda d: d["patterns"]["local"]["stages"]["full_bwd"].update(median_ms=1.0), "stats_recompute"),
    (lambda d: d["patterns"]["sink-heavy"].update(routing_sha256="0" * 64), "routing_sha256"),
    (lambda d: d["timing"]["round_orders"][0].reverse(), "timing_recompute"),
    (lambda d: d["source"]["files"].update({"fla/ops/nsa/parallel.py": "1" * 64}), "source_consistent"),
], ids=["median", "routing", "orders", "source-hash"])
def test_validate_catches_an_edited_release_result(timed, edit, check):
    doc = copy.deepcopy(timed["doc"])
    edit(doc)
    report = validate_bytes(json.dumps(doc).encode(), "edited.json")
    assert not report["passed"] and {c["name"]: c["passed"] for c in report["checks"]}[check] is False


def test_validate_catches_a_changed_file_in_the_supplied_tree(timed, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(timed["tree"] / "fla", tree / "fla")
    (tree / "fla/ops/utils/csr.py").write_text((tree / "fla/ops/utils/csr.py").read_text() + "\n# edited\n")
    proc = run_cli("validate", str(timed["path"]), "--release-dir", str(tree), "--json")
    assert proc.returncode == 1 and checks(proc)["release_files"] is False


def test_compare_reads_two_release_results_and_a_rerun_is_refused_unless_overwrite(timed, tmp_path):
    twin = tmp_path / "twin.json"
    twin.write_text(timed["path"].read_text())
    out = tmp_path / "cmp.json"
    proc = run_cli("compare", str(timed["path"]), str(twin), "--resamples", "1000", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert {(r["stage"], r["metric"]) for r in doc["rows"]} == {(s, "events") for s in
                                                                ("selection_fwd", "full_bwd", "train_step",
                                                                 "nsa_layer")}
    assert all(r["ratio"] == 1.0 and r["ci95"][0] <= 1.0 <= r["ci95"][1] for r in doc["rows"])
    assert doc["release"]["not_compared"] == [] and doc["release"]["patterns"] == ["local", "sink-heavy",
                                                                                   "file:mine"]
    assert doc["release"]["a_label"] == doc["release"]["b_label"] == timed["doc"]["release"]["label"]
    # a source tree's outputs are refused before the gates (which import FLA, ~4 s): with an environment the first
    # gate refuses, the refusal is still the output's
    gate_fails = {"TRITON_F32_DEFAULT": "tf32"}
    again = run_cli(*timed["args"], env=gate_fails)
    assert_one_line_error(again, "exists", "--overwrite")
    args = list(timed["args"])
    args[args.index("--output-dir") + 1] = str(timed["tree"] / "fla")  # the outputs would land in an input
    inside = run_cli(*args, "--overwrite", env=gate_fails)
    assert_one_line_error(inside, "--output-dir", "lies inside an input folder", "--fla-source")


def test_the_layer_call_runs_the_compression_and_selection_branches_with_their_gates():
    """``nsa_layer`` is ``parallel_nsa`` with both gates: the gates get gradients, and the compression branch
    changes q's gradient against the selection-only ``train_step`` (the real kernels, interpreted)."""
    import fla.ops.nsa as nsa  # noqa: PLC0415 - the pinned FLA, in this process (the interpreter is set)
    import fla.ops.nsa.parallel as parallel  # noqa: PLC0415
    import torch  # noqa: PLC0415

    from nsa_exp.core.stages import RELEASE_STAGE_LISTS  # noqa: PLC0415
    from nsa_exp.gpu.launcher import make_inputs  # noqa: PLC0415
    from nsa_exp.gpu.release import autotuners, layer_gates, release_callables  # noqa: PLC0415

    for tuner in autotuners().values():  # as the release child does under the interpreter: one config each
        tuner.configs = tuner.configs[:1]
    shape = Shape(**TINY)
    inputs = make_inputs(shape, 7, "cpu")
    leaves = [inputs[n].detach().requires_grad_() for n in ("q", "k", "v")]
    gates = layer_gates(shape, 7, "cpu")
    assert [tuple(g.shape) for g in gates] == [(1, 32, 16)] * 2 and all(float(g.detach().min()) > 0 for g in gates)
    bi = torch.from_numpy(generate_routing(Pattern("local"), shape, 5)).to(torch.int32)
    fns = release_callables(nsa, parallel, shape, inputs, bi, leaves, RELEASE_STAGE_LISTS[1], gates)
    assert list(fns) == ["selection_fwd", "full_bwd", "train_step", "nsa_layer"]
    fns["train_step"]()
    dq_selection = leaves[0].grad.clone()
    fns["nsa_layer"]()
    assert all(g.grad is not None and float(g.grad.abs().sum()) > 0 for g in gates)
    assert not torch.allclose(leaves[0].grad, dq_selection)
