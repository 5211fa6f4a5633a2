"""The document kinds: every document this project writes or reads, with its schema and version.

A JSON document names its kind in its ``kind`` field; a CSV table is known by its columns
(:data:`CSV_KINDS`: a summary and a sweep table by the ``required`` list of their row schema, ncu's raw
export by its ``ID`` / ``Kernel Name`` header). ``schemas/<schema>.schema.json`` holds each kind's shape;
its ``kind`` and ``schema_version`` consts are generated from this table (``python -m nsa_exp schemas``).
What each kind's checks recompute lives with the checks (:mod:`nsa_exp.checking.kinds`).

>>> KINDS["bench_result"], schema_version("bench_result")
('result', '1.0')
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DocumentKind:
    """One kind: its name (the ``kind`` field of a JSON document), its schema's stem, its version."""

    name: str
    schema: str
    what: str
    version: str = "1.0"
    #: False: documents of this kind were written before they carried ``schema_version`` (absent = ``version``)
    versioned: bool = True
    #: True: a document of this kind is derived on a CPU from the files it names, and ``validate`` rebuilds it from
    #: them (not a measurement): where such a source could not be rebuilt, what is derived from it cannot be either
    derived: bool = False
    #: the commands of this CLI that write it (a recorded ``python -m nsa_exp`` argv runs one of them; empty: none
    #: is known, e.g. an input or a script's record)
    commands: tuple[str, ...] = ()


#: In the order of their schema files (the order the validator lists them in its messages).
DOCUMENT_KINDS: tuple[DocumentKind, ...] = (
    DocumentKind("analysis", "analysis", "derived statistics of a bench result (results/analysis)",
                 derived=True, commands=("report",)),
    DocumentKind("autotune_matrix", "autotune_matrix", "autotune config x routing matrix (results/autotune)",
                 commands=("autotune-matrix",)),
    DocumentKind("check_report", "check_report", "the gates' report (results/reports/<config>_check.json)",
                 commands=("check", "reproduce")),
    DocumentKind("compare", "compare", "bench result B against A per pattern x stage (results/compare)",
                 derived=True, commands=("compare", "reproduce")),
    DocumentKind("flush_study", "flush_study", "the L2 flush policy chosen from a method study (results/studies)",
                 derived=True, commands=("flush-study",)),
    DocumentKind("model_calibration", "model_calibration", "the dK/dV makespan model's calibration (results/model)",
                 derived=True, commands=("calibrate",)),
    DocumentKind("model_calibration_set", "model_calibration_set", "designed calibration routings (configs/)"),
    DocumentKind("method_study", "method_study", "a GPU method study's raw record (scripts/gpu_method_study.py, "
                 "results/studies)", versioned=False),
    DocumentKind("model_validation", "model_validation", "predicted vs measured dK/dV (results/model)",
                 derived=True, commands=("model-validate",)),
    DocumentKind("ncu_summary", "ncu_summary", "Nsight Compute metrics of one profiled stage (results/ncu)",
                 derived=True, commands=("ncu", "ncu-export")),
    DocumentKind("noise_table", "noise_table", "the noise floor f(GPU, stage) of every GPU x stage, derived from "
                 "the committed repeats (results/noise/floors.json)", derived=True, commands=("noise-table",)),
    DocumentKind("peer_result", "peer_result", "PEERS: FLA, FlexAttention and dense SDPA on the same routings "
                 "(peer-bench, results/peers)", commands=("peer-bench",)),
    DocumentKind("release_result", "release_result", "the release arm: another FLA release or source tree through "
                 "its public API, NOT the pinned experiment (results/releases)", commands=("release-bench",)),
    DocumentKind("bench_result", "result", "a bench run: every observation of every pattern x stage (results/raw)",
                 commands=("bench", "reproduce")),
    DocumentKind("routing_report", "routing_report", "edges and fan-in of every routing (routing --json)",
                 commands=("routing",)),
    DocumentKind("smoke_report", "smoke_report", "correctness against FLA's naive oracle (results/reports)",
                 commands=("smoke", "reproduce")),
    DocumentKind("sweep_autotune", "sweep_autotune", "the autotune configs a sweep's first point tuned, which every "
                 "later point pins (results/sweeps/<sweep>/_autotune.json)", commands=("sweep",)),
    DocumentKind("sweep_point", "sweep_point", "one sweep point: a routing and local at one T (results/sweeps)",
                 commands=("sweep",)),
    DocumentKind("validation_report", "validation_report",
                 "what validate found in one file (python -m nsa_exp validate --json)", commands=("validate",)),
    DocumentKind("whatif_result", "whatif_result", "the WHAT-IF ARMS, timed (results/whatif)", commands=("whatif",)),
)
#: The file a sweep that pins no bench result stores the configs its first point tuned in (a ``sweep_autotune``,
#: results/sweeps/<sweep>/_autotune.json), which every later point pins.
AUTOTUNE_FILE = "_autotune.json"
#: ``{document kind: schema file stem}``.
KINDS: dict[str, str] = {k.name: k.schema for k in DOCUMENT_KINDS}
#: The schemas of the inputs and tables that carry no ``kind`` field, with the version they are written at.
UNKINDED_SCHEMAS: dict[str, str] = {"config": "1.0", "release_config": "1.0", "submission": "1.0",
                                    "summary_row": "1.0", "sweep_config": "1.0", "sweep_row": "1.0"}
#: The CSV tables ``validate`` reads: kind -> what it is (the row schema where there is one).
CSV_KINDS: dict[str, str] = {
    "summary_csv": "bench's medians table, one row per pattern x stage (results/summaries; row schema summary_row)",
    "sweep_csv": "a sweep's tidy table, one row per point (results/sweeps/<sweep>.csv; row schema sweep_row)",
    "ncu_raw_csv": "Nsight Compute's raw export of one profile (results/ncu/<name>.raw.csv, ncu --csv --page raw)",
}
_BY_NAME = {k.name: k for k in DOCUMENT_KINDS}
#: The kinds ``validate`` rebuilds from the files they name (:attr:`DocumentKind.derived`).
DERIVED_KINDS: frozenset[str] = frozenset(k.name for k in DOCUMENT_KINDS if k.derived)


def document_kind(name: str) -> DocumentKind:
    """The row of the kind ``name`` (KeyError otherwise: the caller names the document)."""
    return _BY_NAME[name]


def schema_version(kind: str) -> str:
    """The ``schema_version`` a document of ``kind`` is written with."""
    return document_kind(kind).version
