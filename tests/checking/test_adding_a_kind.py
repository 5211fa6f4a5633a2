"""Adding a document kind is one row of ``core/kinds.py`` and one module ``checking/<kind>.py`` (issue 29), shown
here end to end: a copy of the package gets a toy kind (``launch_grids``: each stage's launch grid at a shape,
rebuilt by ``validate`` from the shape it records) and nothing else. Its module declares its frozen record, from
which ``schemas --write`` generates the kind's whole schema file; ``validate`` passes the kind's document, fails a
forged one naming the field (its recompute) and a mistyped one (the generated schema), and ``validate --json``
reports it as the kind. The line counts of the two additions are pinned, so a kind that starts needing a second
edit elsewhere fails here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

#: The row added to ``DOCUMENT_KINDS`` (before its closing parenthesis): one line.
ROW = '    DocumentKind("launch_grids", "launch_grids", "each stage\'s launch grid at a shape", derived=True),\n'

#: The kind's module: its name, its builder and its check (rebuild, then diff field by field).
MODULE = '''\
"""The ``launch_grids`` kind: each stage's launch grid at a shape; validate rebuilds it from the shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.config import Shape
from ..core.kinds import schema_version
from ..core.records import Record
from ..core.stages import launch_grids
from .checks import Add, Context, Problems, one_check
from .sources import deep_diff

KIND = "launch_grids"


@dataclass(frozen=True)
class LaunchGrids(Record):
    schema_version: str
    kind: str
    shape: dict[str, int | str]
    grids: dict[str, tuple[int, ...]]


RECORD = LaunchGrids


def build(shape: Shape) -> dict[str, Any]:
    grids = {k: tuple(v) for k, v in launch_grids(shape).items()}
    return LaunchGrids(schema_version(KIND), KIND, shape.to_dict(), grids).to_json()


def recompute(doc: dict[str, Any], add: Add, ctx: Context) -> None:
    problems: Problems = []
    deep_diff(doc, build(Shape.from_dict(doc["shape"])), "$", problems)
    add("launch_grids_recompute", problems)


checks = one_check("launch_grids_recompute", recompute)
'''


def _run(tree: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=tree, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"})


def test_a_new_kind_is_one_row_and_one_module_whose_record_generates_its_schema(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "nsa_exp", tree / "nsa_exp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "schemas", tree / "schemas")
    kinds = tree / "nsa_exp" / "core" / "kinds.py"
    text = kinds.read_text()
    end = text.index("\n)\n", text.index("DOCUMENT_KINDS: tuple[DocumentKind, ...] = ("))
    kinds.write_text(text[:end + 1] + ROW + text[end + 1:])
    (tree / "nsa_exp" / "checking" / "launch_grids.py").write_text(MODULE)
    assert (len(ROW.splitlines()), len(MODULE.splitlines())) == (1, 40)  # lines of the row and the module

    schema = tree / "schemas" / "launch_grids.schema.json"
    drift = _run(tree, "-m", "nsa_exp", "schemas")
    assert drift.returncode == 1 and "schemas/launch_grids.schema.json" in drift.stdout, drift.stdout + drift.stderr
    wrote = _run(tree, "-m", "nsa_exp", "schemas", "--write")
    assert wrote.returncode == 0, wrote.stderr
    assert _run(tree, "-m", "nsa_exp", "schemas").returncode == 0  # no drift left
    generated = json.loads(schema.read_text())
    assert generated["title"] == "each stage's launch grid at a shape"  # the row's words
    assert generated["properties"]["kind"] == {"const": "launch_grids"}
    assert generated["properties"]["grids"] == {"type": "object", "additionalProperties": {
        "type": "array", "items": {"type": "integer"}}}
    assert generated["required"] == ["schema_version", "kind", "shape", "grids"]

    built = _run(tree, "-c", "import json; from nsa_exp.checking.launch_grids import build; "
                 "from nsa_exp.core.config import PRIMARY_SHAPE; print(json.dumps(build(PRIMARY_SHAPE)))")
    assert built.returncode == 0, built.stderr
    doc = json.loads(built.stdout)
    assert doc["grids"]["dkv_core"] == [1, 2048]  # the Stage table's dK/dV grid at the primary shape: M*H programs
    good = tree / "grids.json"
    good.write_text(json.dumps(doc))
    passed = _run(tree, "-m", "nsa_exp", "validate", "--json", str(good))
    assert passed.returncode == 0, passed.stdout + passed.stderr
    report = json.loads(passed.stdout)
    entry = report[0] if isinstance(report, list) else report
    assert "launch_grids" in json.dumps(entry) and "launch_grids_recompute" in json.dumps(entry)

    doc["grids"]["dkv_core"][1] = 1024  # a forged grid: half the programs
    forged = tree / "forged.json"
    forged.write_text(json.dumps(doc))
    failed = _run(tree, "-m", "nsa_exp", "validate", str(forged))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "launch_grids_recompute" in failed.stdout and "$.grids.dkv_core" in failed.stdout

    doc["grids"]["dkv_core"][1] = "2048"  # a mistyped grid: the generated schema refuses it
    forged.write_text(json.dumps(doc))
    failed = _run(tree, "-m", "nsa_exp", "validate", str(forged))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "schema" in failed.stdout and "grids" in failed.stdout and "launch_grids_recompute" not in failed.stdout

    # and the repository itself has no such kind: the copy alone changed
    assert not (REPO / "nsa_exp" / "checking" / "launch_grids.py").exists()
    assert not (REPO / "schemas" / "launch_grids.schema.json").exists()
