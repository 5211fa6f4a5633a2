"""``report``: docs/RESULTS.md, README's results block, docs/PROVENANCE.md's table and
results/analysis/<name>.json, generated from the committed results.

No number in them is typed by hand: each is read from, or recomputed out of, the committed documents the manifest
names (:mod:`.manifest`; each validated with every check of its kind), and every verdict word passes the claims
guard (:mod:`.claims`): a claim the data do not support stops the report with one line, nothing written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import REPO_ROOT
from ..core.records import BenchLike, BenchResult
from ..errors import UserError
from ..io.metadata import base_metadata
from ..io.store import check_writable, write_json_unless_same, write_text_atomic
from .autotune import autotune_section
from .benches import docs8192_section, engine_section, routing_file_section
from .data import ReportData, load_report_data
from .gpus import cross_gpu_section, instrument_sections
from .manifest import Inputs
from .markdown import anchor, rebased_links
from .mechanism import mechanism_section
from .model import model_section, whatif_section
from .ncu import ncu_section
from .packing import packing_section
from .peers import peers_section
from .penalty import penalty_section
from .provenance import provenance_block, provenance_file
from .readme import readme_file
from .releases import release_section
from .sections import (
    answer_section,
    autotune_lines,
    figures_lines,
    latency_appendix,
    limits_section,
    repeatability_appendix,
    reproduce_section,
    setup_section,
    stage_sum_section,
)
from .spread import spread_appendix, spread_section
from .summary import readme_block, summary_lines
from .sweeps import sweep_section

TITLE = "# E1 results: equal-edge NSA routings vs FLA backward stage latency"
INPUTS = "Appendix: inputs"


def _ncu_docs(data: ReportData) -> list[dict[str, Any]]:
    paths = list(data.inputs.ncu)
    for f in data.formal[1:]:
        paths += [data.inputs.relative(p) for p in data.inputs.glob("results/ncu", f"{Path(f.path).stem}_*.json")]
    out = []
    for p in dict.fromkeys(paths):
        doc = dict(data.load(p, ("ncu_summary",)))
        doc["_path"] = p
        out.append(doc)
    return out


def inputs_section(data: ReportData) -> list[str]:
    i = data.inputs
    folders = [("bench results", "results/raw", len(i.bench_results())),
               ("sweep points", "results/sweeps/*/", len(i.sweep_points())),
               ("sweep tables", "results/sweeps/*.csv", len(i.sweep_tables())),
               ("model calibrations and validations", "results/model",
                len(i.model_calibrations()) + len(i.model_validations())),
               ("what-if results", "results/whatif", len(i.whatifs())),
               ("release results", "results/releases", len(i.releases())),
               ("peer results", "results/peers", len(i.peers()))]
    return [f"## {INPUTS}", "", "The manifest (`nsa_exp/report/manifest.py`) names these inputs; each is validated "
            "with every check of its kind before a number is read from it:", "",
            *[f"- `{p}`" for p in i.named()],
            # the other formal runs' Nsight summaries the Nsight tables read (the H200's were missing: a reader,
            # 2026-12-06)
            *[f"- `{d['_path']}`" for d in _ncu_docs(data) if d["_path"] not in i.named()],
            *[f"- {what}: every file under `{where}` ({n})" for what, where, n in folders], "",
            "Every file under `results/`, with its commit, creation time, GPU and command: the generated table of "
            "[PROVENANCE.md](PROVENANCE.md).", ""]


def method_notes(data: ReportData) -> list[str]:
    b = data.formal[0].analysis["bootstrap"]
    return ["## Appendix: method notes", "",
            f"- CIs: `scipy.stats.bootstrap`, {b['method']} method, {b['resamples']:,} resamples, seed {b['seed']}, "
            f"level {b['level']}; a median's CI resamples its rounds; a ratio to `local` resamples the rounds as pairs "
            "(`paired=True`: every round ran every routing); a ratio across runs, points or GPUs resamples each side "
            "on its own (`paired=False`); a difference of medians (time saved) is a paired bootstrap of the "
            "difference.",
            f"- Verdicts: [the rule]({anchor('The rule: differs measurably')}) (also docs/METHOD.md), with the noise "
            "floors it defines; the cross-session spreads that set them: the repeated-measurement appendix.",
            "- Model errors: predicted / measured − 1 per row of a validation; summarised over every row, the "
            "non-baseline rows and the distinct routing × T points (model appendix).",
            "- Timing protocol, flush policy, CUPTI rule, FLOP counts: docs/METHOD.md.", ""]


def render_results(data: ReportData, command: str) -> str:
    """The whole RESULTS.md text from the loaded data (:func:`.data.load_report_data`)."""
    i = data.inputs
    benches = [p for p in i.bench_results() if i.relative(p) not in data.failing]
    failing = f" (and {len(data.failing)} that fails `validate`, shown apart)" if data.failing else ""
    head = (f"_Generated by `{command}` from {data.claims.count(benches, 'committed bench results')}{failing}, "
            f"{data.claims.count(i.sweep_points(), 'sweep points')} and the other inputs "
            f"listed in [{INPUTS}]({anchor(INPUTS)}) (the manifest, `nsa_exp/report/manifest.py`); every committed "
            "file's commit, time, GPU and command: [PROVENANCE.md](PROVENANCE.md). Do not edit by hand._")
    question = ("Routings of NSA selection attention with exactly the same number of effective causal sparse edges "
                f"({data.formal[0].run.edges['closed_form']:,} at this shape, checked by the equal-edge gate) but "
                "different query fan-in per selected KV block: do FLA's backward stages take measurably different "
                "time? " + ", ".join(f"{f.label}: `{f.path}`" for f in data.formal) + ".")
    matrix = autotune_section(i.relative(m) if (m := i.path(i.autotune_matrix)) else None,
                              [a for a in i.tune_arms if i.path(a)], data.load, i.figures, data.floor, data.claims)
    whatif = whatif_section(data)
    packing = packing_section(data)
    docs = docs8192_section(data)
    out = [TITLE, "", head, "", question, "", *summary_lines(data),
           *answer_section(data), *figures_lines(data), *spread_section(data),
           *mechanism_section(data), *matrix,
           *(["## What a split schedule recovers (WHAT-IF ARMS, measured)", "", *whatif] if whatif else []),
           *release_section(data), *peers_section(data),
           *(packing + docs if packing else (["## Packed documents (cu_seqlens, H200)", "", *docs] if docs else [])),
           *penalty_section(data), *routing_file_section(data), *engine_section(data), *cross_gpu_section(data),
           *limits_section(),
           *latency_appendix(data), *repeatability_appendix(data), *spread_appendix(data),
           *instrument_sections(data), *stage_sum_section(data), *sweep_section(data), *model_section(data),
           *ncu_section(_ncu_docs(data)), *setup_section(data), *autotune_lines(data), *method_notes(data),
           *inputs_section(data), *reproduce_section(data, command)]
    return "\n".join(out)


def is_formal(result: BenchLike, flag: bool = False) -> bool:
    """A run is formal only when its config says so (``"formal": true``), or ``--formal`` labels a result
    recorded before the field existed; ``--formal`` on a config that says ``"formal": false`` is refused."""
    said = BenchResult.coerce(result).config.get("formal")
    if flag and said is False:
        raise UserError("--formal: the result's config says \"formal\": false; it cannot be labelled formal")
    return said is True or flag


def build_report(inputs: Inputs, output_md: str, output_json: str, command: str, readme: str | None = None,
                 formal: bool = False, provenance: str | None = None, readme_from: str | Path | None = None,
                 provenance_from: str | Path | None = None) -> bool:
    """Write RESULTS.md (``output_md``), the analysis JSON of the first formal result (``output_json``) and, given
    ``readme`` / ``provenance``, README's results block and PROVENANCE.md's table, all from ``inputs``. Returns
    whether the analysis file was written: it is kept when it holds the same analysis, metadata aside
    (:func:`nsa_exp.io.store.write_json_unless_same`). ``readme_from`` / ``provenance_from``: the file whose text
    around the block is kept (default the output itself; a run folder's copy is built from the published file).
    Everything is computed and checked before the first file is written: README's and PROVENANCE.md's text around
    their blocks is read (a missing file or marker refused) before any result is loaded."""
    check_writable(output_md, output_json, *([readme] if readme else []), *([provenance] if provenance else []))
    readme_around = readme_file(readme_from or readme) if readme else None
    provenance_around = provenance_file(provenance_from or provenance) if provenance else None
    for out in (output_md, output_json):
        if (target := inputs.path(out)) is not None and target.resolve() in {
                p.resolve() for p in map(inputs.path, [inputs.result, inputs.repeat, inputs.h200, inputs.h200_repeat])
                if p is not None}:
            raise UserError(f"--output {out}: is one of the report's inputs; give another path")
    data = load_report_data(inputs)
    is_formal(data.formal[0].run, formal)
    text = render_results(data, command)
    block = readme_block(data, "docs/RESULTS.md") if readme else ""
    data.claims.audit(text + "\n" + block, Path(output_md).name)
    analysis = {**data.formal[0].analysis, "metadata": base_metadata(import_gpu=False)}
    wrote_analysis = write_json_unless_same(output_json, analysis, "analysis")
    # the table lists the analysis file as now written (its creation time when it was rewritten)
    table = provenance_block(inputs, dict(data.docs)) if provenance else ""
    write_text_atomic(output_md, rebased_links(text, REPO_ROOT / "docs", Path(output_md)))
    if readme and readme_around is not None:
        readme_around.write(readme, block)
    if provenance and provenance_around is not None:
        provenance_around.write(provenance, table)
    return wrote_analysis
