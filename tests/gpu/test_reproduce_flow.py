"""``reproduce`` end to end on the CPU, as the GPU run would go: FLA's real kernels under the Triton interpreter,
a fake H200 (tests/gpu/test_engine_arms.py's device), check -> smoke -> bench under the stop rule -> compare ->
validate. The submission folder validates as a third party's; against its own published run the verdict is 0,
against a perturbed copy 1, and a forged copy of the folder fails validate."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
import torch

from nsa_exp.analysis.stop_rule import DEFAULT_RULE
from nsa_exp.checking.compare import build as compare_results
from nsa_exp.checking.validate import validate_paths
from nsa_exp.core.requests import BenchRequest
from nsa_exp.core.stages import STAGE_NAMES
from nsa_exp.io.config_files import config_from_dict
from tests.gpu.test_engine import Ticks
from tests.gpu.test_engine_arms import H200_MS, FakeGpu, fake_gpu_gate, tiny_config
from tests.helpers import REPO

pytestmark = pytest.mark.interpreter


@pytest.fixture(scope="module")
def submission(fla_interpreter, tmp_path_factory):
    """One reproduce run on the fake H200 against a published run of the same tiny experiment (module-scoped:
    the three tests read one run)."""
    from nsa_exp.gpu import gates  # noqa: PLC0415 - FLA after the interpreter setup
    from nsa_exp.gpu.bench import run_bench  # noqa: PLC0415
    from nsa_exp.gpu.reproduce import run_reproduce  # noqa: PLC0415

    tmp = tmp_path_factory.mktemp("reproduce")
    # the config's own stop rule, short enough for the interpreter (deterministic fake times stop it at min_rounds)
    raw = {**tiny_config(repetitions=30, stop={**DEFAULT_RULE.to_dict(), "min_rounds": 4}),
           "name": f"tiny_reproduce_{os.getpid()}"}  # the bench journal's name: unique, as a crashed run leaves one
    (tmp / "tiny.json").write_text(json.dumps(raw))
    config = config_from_dict(raw, source=str(tmp / "tiny.json"))
    # argv as the CLI records it (python -m nsa_exp ...), whatever runs pytest: validate reads the run's name and
    # config from it (config_provenance), so each file records the command that wrote it
    cli = str(REPO / "nsa_exp" / "__main__.py")
    argv = [cli, "reproduce", "--config", str(tmp / "tiny.json"), "--allow-gpu"]  # the fake GPU is not an H200
    costs = [H200_MS[s] for s in STAGE_NAMES]
    published, out = tmp / "published.json", tmp / "runs" / "reproduce_h200"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gates, "gpu_gate", fake_gpu_gate)
        mp.setattr(torch.version, "cuda", "13.0")  # the fake host's CUDA (CPU torch records none)
        mp.setattr(sys, "argv", [cli, "bench", "--config", str(tmp / "tiny.json"), "--output", str(published),
                                 "--allow-gpu"])
        run_bench(BenchRequest(config, True, published, None, cupti_rounds=0), device=FakeGpu(costs), clock=Ticks(0.25))
        mp.setattr(sys, "argv", argv)
        # a second run, not the published one's observations again: compare refuses B holding A's run (two runs of a
        # deterministic fake would agree bit for bit), so this one's kernels take 0.1% longer, within any floor
        code, text = run_reproduce(config, True, out, None, str(published), floor=0.02,
                                   device=FakeGpu([c * 1.001 for c in costs]), clock=Ticks(0.25), argv=argv,
                                   cupti_rounds=0)
    return {"code": code, "text": text, "out": out, "published": published, "tmp": tmp, "name": config.name}


def test_a_run_that_matches_the_published_one_writes_a_valid_submission_and_verdict_0(submission):
    out = submission["out"]
    names = sorted(p.name for p in out.iterdir())
    name = submission["name"]
    assert names == sorted(["check.json", "smoke.json", f"{name}.json", f"{name}.csv", "compare.json",
                            "pip-freeze.txt", "PROVENANCE.md"]), names
    reports = validate_paths(sorted(str(p) for p in out.iterdir() if p.suffix in (".json", ".csv")))
    failed = {r["path"]: [c["name"] for c in r["checks"] if not c["passed"]] for r in reports if not r["passed"]}
    assert failed == {} and len(reports) == 5
    assert submission["code"] == 0
    text = submission["text"]
    for step in ("check", "smoke", "bench", "compare", "validate"):
        assert f"{step} " in text.splitlines()[0]
    assert "VERDICT: agrees" in text and "sink-heavy x local" in text and str(out) in text
    bench = json.loads((out / f"{name}.json").read_text())
    assert bench["timing"]["stop"]["stopped_by"] == "ci" and bench["timing"]["stop"]["rounds"] < 30
    note = (out / "PROVENANCE.md").read_text()
    assert "NVIDIA H200" in note and "reproduce --config" in note and "commit:" in note


def test_a_perturbed_published_run_gives_verdict_1(submission, tmp_path):
    from nsa_exp.report.reproduce import exit_code  # noqa: PLC0415

    doc = json.loads(submission["published"].read_text())
    st = doc["patterns"]["sink-heavy"]["stages"]["dkv_core"]
    for key in ("raw_ms", "warmup_ms"):
        st[key] = [x * 1.25 for x in st.get(key, [])]
    for key in ("median_ms", "p10_ms", "p90_ms", "p95_ms"):
        st[key] *= 1.25
    perturbed = tmp_path / "perturbed.json"
    perturbed.write_text(json.dumps(doc))
    cmp = compare_results(perturbed, submission["out"] / f"{submission['name']}.json", floor=0.02)
    assert exit_code(cmp) == 1
    assert [(r["pattern"], r["stage"], r["verdict"]) for r in cmp["rows"] if r["verdict"] != "same"] == \
        [("sink-heavy", "dkv_core", "faster")]


def test_a_forged_submission_fails_validate(submission, tmp_path):
    forged = tmp_path / "forged"
    shutil.copytree(submission["out"], forged)
    result = forged / f"{submission['name']}.json"
    doc = json.loads(result.read_text())
    doc["patterns"]["sink-heavy"]["stages"]["dkv_core"]["median_ms"] *= 0.9
    result.write_text(json.dumps(doc, indent=1))
    reports = {r["path"]: r for r in validate_paths([str(result), str(result.with_suffix(".csv"))])}
    bench = reports[str(result)]
    assert not bench["passed"]
    assert "$.patterns.sink-heavy.stages.dkv_core.median_ms" in json.dumps(bench["checks"])


def test_a_forged_noise_table_stops_reproduce_before_any_gpu_work(fla_interpreter, tmp_path, monkeypatch):
    """Every check of validate runs on the noise table right after the gates: a table whose H200 floors were all
    raised (the attack trial's forgery turned 16 slower into 24 same) stops the run before smoke, one line."""
    from nsa_exp.errors import UserError  # noqa: PLC0415
    from nsa_exp.gpu import gates  # noqa: PLC0415 - FLA after the interpreter setup
    from nsa_exp.gpu.reproduce import run_reproduce  # noqa: PLC0415

    table = json.loads((REPO / "results" / "noise" / "floors.json").read_text())
    for row in table["floors"]:
        if row["gpu"] == "NVIDIA H200":
            row["floor"] = 0.45
    forged = tmp_path / "floors.json"
    forged.write_text(json.dumps(table))
    raw = {**tiny_config(repetitions=30), "name": f"tiny_forged_table_{os.getpid()}"}
    (tmp_path / "tiny.json").write_text(json.dumps(raw))
    config = config_from_dict(raw, source=str(tmp_path / "tiny.json"))
    monkeypatch.setattr(gates, "gpu_gate", fake_gpu_gate)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    costs = [H200_MS[s] for s in STAGE_NAMES]
    out = tmp_path / "runs" / "reproduce_h200"
    with pytest.raises(UserError, match=r"--noise-table .*floors.json does not validate \(noise_table_recompute\)"):
        run_reproduce(config, True, out, str(forged), None, device=FakeGpu(costs), clock=Ticks(0.25),
                      argv=[sys.argv[0], "reproduce"], cupti_rounds=0)
    assert sorted(p.name for p in out.iterdir()) == ["check.json"]  # the gates ran; smoke and bench did not
