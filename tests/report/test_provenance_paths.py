"""The provenance table finds a replayed run recorded by another machine's absolute path by its
repository-relative tail (a reader never depends on the producing machine's paths)."""

from __future__ import annotations

from nsa_exp.report.provenance import _doc_row


def test_a_replayed_run_recorded_absolute_is_matched_by_its_tail():
    doc = {"kind": "bench_result", "metadata": {"argv": ["nsa_exp/__main__.py", "bench"], "created_utc": "T1"},
           "autotune": {"replayed_from": {"path": "/root/out/NSA-KernelExp/results/raw/x.json", "created_utc": "T0"}}}
    docs = {"results/raw/x.json": {"metadata": {"created_utc": "T0-discarded"}}}
    notes = _doc_row("results/raw/y.json", doc, {}, None, docs)[-1]
    assert "rests on a discarded run" in notes and "results/raw/x.json" in notes
    docs["results/raw/x.json"]["metadata"]["created_utc"] = "T0"
    assert "rests on a discarded run" not in _doc_row("results/raw/y.json", doc, {}, None, docs)[-1]
