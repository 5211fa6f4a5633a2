"""Forged documents (issue 23): every document kind the project writes, forged the ways a competent forger
would, must FAIL ``validate`` on a check that names the forgery; every committed file must PASS.

The forgeries are data (``tests/corpus/forged_documents.json``: source file, edits, the checks that may
catch it), built at test time by ``tests/corpus/forge.py``. A case today's code lets through is listed in
``KNOWN_FAILING`` (id -> what happens today) and runs as a strict xfail: the fix that makes it pass must
delete its entry, or the suite fails (see tests/corpus/README.md).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .corpus.forge import REPO, Sources, build, csv_roundtrip, load_cases
from .corpus.runner import run_child, run_main

CASES = load_cases()

# The kinds the brief names; each needs at least 5 forgeries. ``schema_kinds`` below adds every document
# kind that has a schema, so a new kind cannot go unforged.
REQUIRED_KINDS = {
    "bench_result", "summary_csv", "sweep_point", "sweep_csv", "sweep_autotune", "compare", "model_calibration",
    "model_calibration_set", "model_validation", "ncu_summary", "ncu_raw_csv", "smoke_report", "check_report",
    "whatif_result", "flush_study", "method_study", "analysis", "autotune_matrix", "routing_report",
    "validation_report",
}

KNOWN_FAILING: dict[str, str] = {}

# Committed files validate FAILs or refuses today (issue 23, "validate on committed files FAILs"): none since the
# stop-rule run's re-run with the paired CUPTI pass (issue 28; docs/PROVENANCE.md).
COMMITTED_KNOWN_FAILING: dict[str, str] = {}


def _params(cases: list[dict], known: dict[str, str], key=lambda c: c["id"]):
    out = []
    for case in cases:
        k = key(case)
        # raises=AssertionError: a crash of the harness (or of validate in-process) is an error, not "known".
        marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=known[k])] if k in known else []
        out.append(pytest.param(case, id=k, marks=marks))
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Sources:
    return Sources(tmp_path_factory.mktemp("derived"))


@pytest.fixture(scope="module")
def forge_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("forged")


def _failed(report: dict) -> list[str]:
    return [c["name"] for c in report["checks"] if not c["passed"]]


def _one_line(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip()]


#: Forgeries only the repository's history exposes (config_provenance reads the config at the recorded commit
#: with ``git show``); where the tree is not a git repository (the image's /opt/nsa-exp) that check is unverifiable.
NEEDS_GIT = {"bench_result.formal_flipped"}


@pytest.mark.parametrize("case", _params(CASES, KNOWN_FAILING))
def test_forged_document_fails_validation_on_a_named_check(case, sources, forge_dir):
    if case["id"] in NEEDS_GIT and not (REPO / ".git").exists():
        pytest.skip("needs the repository's git history (config_provenance); not a git repository here")
    built = build(case, forge_dir, sources)
    assert built["forged_bytes"] != built["source_bytes"], "the edits changed nothing"
    argv = ["validate", "--json", *map(str, built["validate"])]
    for also in built["also"]:
        argv += ["--also", str(also)]
    result = run_main(argv, cwd=REPO)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    if case.get("outcome") == "fail_or_refuse" and result.code == 2:
        lines = _one_line(result.stderr)
        assert len(lines) == 1 and lines[0].startswith("error:") and case["refuse_names"] in lines[0], lines
        return
    assert result.code in (0, 1), (f"validate exit {result.code}, expected 1 (FAIL): {result.stderr.strip()}; "
                                   f"{case['why']}")
    for report in json.loads(result.stdout):
        failed = _failed(report)
        verdict = f"PASS (exit {result.code})" if report["passed"] else f"FAIL on {failed}"
        assert not report["passed"] and result.code == 1 and set(failed) & set(case["catch"]), (
            f"{Path(report['path']).name}: {verdict}; expected FAIL on one of {case['catch']}: {case['why']}")


def test_the_corpus_forges_every_kind_at_least_five_times():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    per_kind = Counter(c["kind"] for c in CASES)
    schema_kinds = {json.loads(p.read_text()).get("properties", {}).get("kind", {}).get("const")
                    for p in (REPO / "schemas").glob("*.schema.json")} - {None}
    for kind in REQUIRED_KINDS | schema_kinds:
        assert per_kind[kind] >= 5, (kind, per_kind[kind])
    for case in CASES:
        assert case["id"].startswith(case["kind"] + ".") and case["why"] and case["catch"], case["id"]


def test_known_failing_names_only_cases_of_the_corpus():
    assert set(KNOWN_FAILING) <= {c["id"] for c in CASES}, set(KNOWN_FAILING) - {c["id"] for c in CASES}


@pytest.mark.parametrize("path", ["results/summaries/e1_h200_pre.csv", "results/sweeps/sweep_x2_h200.csv",
                                  "results/ncu/e1_h200_local-vs-sink-heavy_dkv_core.raw.csv"])
def test_the_generator_rewrites_a_committed_csv_byte_for_byte(path):
    """A CSV edit changes its cell and nothing else (quoting, line ends): the forgery is the edit alone."""
    text = (REPO / path).read_bytes().decode("utf-8")
    assert csv_roundtrip(text) == text


def _committed() -> list[str]:
    files = [p for p in sorted((REPO / "results").rglob("*")) if p.is_file()]
    files += sorted((REPO / "configs").glob("model_calibration*.json"))
    return [str(p.relative_to(REPO)) for p in files]


def _validate_children(paths: list[str]) -> dict[str, tuple[int | None, str, dict | None]]:
    """``validate --json`` over ``paths`` in a few children, two at a time; a batch that does not give one
    report per file (a file refused with exit 2) is rerun file by file.

    Children, not this process: the suite sets TRITON_INTERPRET=1, under which ``validate`` regenerates an
    fla-topk point by running FLA's top-k kernel in the interpreter at T=32768 (many minutes); a user's
    shell does not have it set. Returns path -> (exit code, stderr, report or None)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    groups: dict[str, list[str]] = {}  # every JSON in one child (one routing cache), CSVs by folder
    for path in paths:
        groups.setdefault(str(Path(path).parent) if path.endswith(".csv") else "json", []).append(path)

    def run(batch: list[str]) -> dict[str, tuple[int | None, str, dict | None]]:
        result = run_child(["validate", "--json", *batch], REPO, timeout=600, env=env, clear_env=True)
        try:
            reports = json.loads(result.stdout) if result.code in (0, 1) else None
        except ValueError:
            reports = None
        if reports is not None and len(reports) == len(batch):
            return {p: (result.code, result.stderr, r) for p, r in zip(batch, reports, strict=True)}
        if len(batch) == 1:
            return {batch[0]: (result.code, result.stderr, None)}
        out: dict[str, tuple[int | None, str, dict | None]] = {}
        for path in batch:
            out |= run([path])
        return out

    out: dict[str, tuple[int | None, str, dict | None]] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for part in pool.map(run, sorted(groups.values(), key=len, reverse=True)):
            out |= part
    return out


@pytest.fixture(scope="module", autouse=True)
def _committed_in_background():
    """Validate the committed files in children from the module's first test on, beside the in-process
    forged cases (the children mostly regenerate routings: CPU work that overlaps on two cores)."""
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(_validate_children, _committed())
    yield future
    pool.shutdown(wait=True)


@pytest.fixture(scope="module")
def committed_reports(_committed_in_background) -> dict[str, tuple[int | None, str, dict | None]]:
    return _committed_in_background.result()


@pytest.mark.parametrize("path", _params(_committed(), COMMITTED_KNOWN_FAILING, key=lambda p: p))
def test_every_committed_file_passes_validate(path, committed_reports):
    code, stderr, report = committed_reports[path]
    assert report is not None, f"validate {path}: exit {code}: {stderr.strip()}"
    failed = [(c["name"], c["failures"][0]) for c in report["checks"] if not c["passed"]]
    assert report["passed"] and not failed, failed


def test_every_kind_of_committed_file_is_validated():
    """The parametrisation above is over what exists: it must find the whole results tree (and the
    known failures must name files that exist), or a lost folder would pass silently."""
    committed = _committed()
    assert set(COMMITTED_KNOWN_FAILING) <= set(committed), set(COMMITTED_KNOWN_FAILING) - set(committed)
    folders = {Path(p).parts[1] for p in committed if p.startswith("results/")}
    assert folders >= {"analysis", "autotune", "compare", "model", "ncu", "raw", "reports", "studies", "summaries",
                       "sweeps", "whatif"}, folders
    assert len(committed) >= 100 and "configs/model_calibration_h200.json" in committed
