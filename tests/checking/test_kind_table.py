"""One kind table (issue 29): every document kind of :data:`nsa_exp.core.kinds.DOCUMENT_KINDS` has exactly one
module of ``nsa_exp/checking/`` declaring it (``KIND``, beside its ``checks``), every module declaring ``KIND``
names a kind of that table, and :data:`nsa_exp.checking.kinds.KIND_MODULES` holds exactly those modules; no module,
script or task builds a document's body outside its kind's module."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType, SimpleNamespace

import nsa_exp.checking
from nsa_exp.checking import method_study
from nsa_exp.checking.kinds import KIND_CHECKS, KIND_MODULES
from nsa_exp.commands import COMMANDS
from nsa_exp.core import records as core_records
from nsa_exp.core.kinds import DOCUMENT_KINDS, KINDS
from nsa_exp.io.schemas import schema_errors
from tests.helpers import REPO


def declaring_modules() -> list[ModuleType]:
    """Every module of ``nsa_exp/checking/`` that declares ``KIND``."""
    modules = [importlib.import_module(info.name)
               for info in pkgutil.iter_modules(nsa_exp.checking.__path__, "nsa_exp.checking.")]
    return [m for m in modules if hasattr(m, "KIND")]


def kind_table_problems(modules: Iterable[ModuleType | SimpleNamespace], kinds: Iterable[str]) -> list[str]:
    """What breaks "one module per kind": a kind no module declares or two modules declare, a module declaring
    a kind the table lacks, a module declaring ``KIND`` without ``checks``."""
    modules, kinds = list(modules), list(kinds)
    by_kind: dict[str, list[str]] = {}
    for m in modules:
        by_kind.setdefault(m.KIND, []).append(m.__name__)
    problems = [f"{k}: declared by no module of nsa_exp/checking/" for k in kinds if k not in by_kind]
    problems += [f"{k}: declared by {len(names)} modules ({', '.join(sorted(names))})"
                 for k, names in by_kind.items() if len(names) > 1]
    problems += [f"{', '.join(names)}: KIND = {k!r} is no kind of core.kinds.DOCUMENT_KINDS"
                 for k, names in by_kind.items() if k not in kinds]
    problems += [f"{m.__name__}: declares KIND but no checks" for m in modules
                 if not callable(getattr(m, "checks", None))]
    return problems


def test_every_kind_has_exactly_one_module_and_every_module_a_kind():
    assert kind_table_problems(declaring_modules(), [k.name for k in DOCUMENT_KINDS]) == []


def test_kind_modules_are_the_rows_modules_and_kind_checks_their_checks():
    """``KIND_MODULES`` imports ``checking/<kind>.py`` of each row by the row's name: every declaring module is one
    of them, in table order, and declares the kind it is named after."""
    assert [m.__name__ for m in KIND_MODULES] == [f"nsa_exp.checking.{k.name}" for k in DOCUMENT_KINDS]
    assert [m.KIND for m in KIND_MODULES] == [k.name for k in DOCUMENT_KINDS]
    assert sorted(m.__name__ for m in KIND_MODULES) == sorted(m.__name__ for m in declaring_modules())
    assert len(KIND_MODULES) == len(set(KIND_MODULES))
    assert {m.KIND: m.checks for m in declaring_modules()} == KIND_CHECKS


def test_a_missing_a_doubled_and_an_unknown_kind_are_found():
    """The check can fail: a kind of the table without a module, one with two, and a module's unknown kind."""
    def module(name: str, kind: str, checks: object = print) -> SimpleNamespace:
        return SimpleNamespace(__name__=name, KIND=kind, checks=checks)

    modules = [module("a", "alpha"), module("b1", "beta"), module("b2", "beta"), module("z", "zeta", None)]
    assert kind_table_problems(modules, ["alpha", "beta", "gamma"]) == [
        "gamma: declared by no module of nsa_exp/checking/",
        "beta: declared by 2 modules (b1, b2)",
        "z: KIND = 'zeta' is no kind of core.kinds.DOCUMENT_KINDS",
        "z: declares KIND but no checks",
    ]


def document_bodies(source: str) -> list[tuple[int, str]]:
    """Where ``source`` builds a document body, with the kind it builds: a dict literal or a call whose ``kind`` is
    a document kind (a string of the table, the module's own ``KIND``, a typed record's ``X.KIND``), a typed
    record's constructor (``BenchResult(...)``) or a ``schema_version(kind)`` call. Lines, in the order found."""
    records = {name: cls.KIND for name, cls in vars(core_records).items()
               if isinstance(cls, type) and getattr(cls, "KIND", "")}
    tree = ast.parse(source)
    own = next((n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                and any(isinstance(t, ast.Name) and t.id == "KIND" for t in n.targets)), None)

    def kind_of(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and node.value in KINDS:
            return str(node.value)
        if isinstance(node, ast.Name) and node.id == "KIND":
            return own
        if isinstance(node, ast.Attribute) and node.attr == "KIND" and isinstance(node.value, ast.Name):
            return records.get(node.value.id)
        return None

    found = []
    for node in ast.walk(tree):
        kinds: list[str | None] = []
        if isinstance(node, ast.Dict):
            kinds += [kind_of(v) for k, v in zip(node.keys, node.values, strict=True)
                      if isinstance(k, ast.Constant) and k.value == "kind"]
        elif isinstance(node, ast.Call):
            kinds += [kind_of(kw.value) for kw in node.keywords if kw.arg == "kind"]
            if isinstance(node.func, ast.Name) and node.func.id in records:
                kinds.append(records[node.func.id])
            if isinstance(node.func, ast.Name) and node.func.id == "schema_version" and node.args:
                kinds.append(kind_of(node.args[0]))
        found += [(node.lineno, k) for k in kinds if k]
    return sorted(found)


def test_no_document_body_is_built_outside_its_kinds_module():
    """Issue 29: a document's body is built only in its kind's module (checking/<module> declaring that ``KIND``);
    every other module, script and task writes what that module's ``build`` returns."""
    home = {m.KIND: Path(m.__file__).resolve() for m in KIND_MODULES}
    files = [*(REPO / "nsa_exp").rglob("*.py"), *(REPO / "scripts").rglob("*.py"), REPO / "tasks.py"]
    astray = [f"{p.relative_to(REPO)}:{line} builds a {kind} document" for p in sorted(files)
              for line, kind in document_bodies(p.read_text()) if home[kind] != p.resolve()]
    assert astray == []
    assert len({k for p in files for _, k in document_bodies(p.read_text())}) == len(KIND_MODULES) - 1  # the
    # calibration set is an input under configs/: nothing writes it


def test_a_body_built_elsewhere_is_found():
    """The scan can fail: each way of building a body is seen, and a kind field that is no document kind is not."""
    source = ('from x import BenchResult, schema_version\nKIND = "compare"\n'
              'a = {"kind": "smoke_report", "x": 1}\nb = BenchResult(name="n")\nc = dict(kind=KIND)\n'
              'd = schema_version("noise_table")\ne = {"kind": "wheel-dir"}\nf = g(kind=BenchResult.KIND)\n')
    assert document_bodies(source) == [(3, "smoke_report"), (4, "bench_result"), (5, "compare"), (6, "noise_table"),
                                       (8, "bench_result")]


def test_the_method_study_builder_gives_the_committed_studies():
    """scripts/gpu_method_study.py writes ``method_study.build``'s document: built from a committed study's parts,
    it is that study (with the ``schema_version`` it now carries) and passes validate's schema."""
    for path in sorted((REPO / "results" / "studies").glob("*_method_study_*.raw.json")):
        doc = json.loads(path.read_text())
        parts = {p: doc[p] for p in doc if p in method_study.PARTS}
        built = method_study.build(config=doc["config"], metadata=doc["metadata"], gates=doc["gates"], parts=parts,
                                   seconds=doc["seconds"])
        assert built == {"schema_version": "1.0", **doc}, path.name
        assert schema_errors(built, "method_study", label=path.name) == []


def test_every_command_a_kind_row_names_is_a_command_of_the_cli():
    """``validate`` holds a recorded ``python -m nsa_exp`` argv to the commands that write its kind (the row's
    ``commands``): a row naming no such command would fail every honest document of that kind."""
    names = {c.name for c in COMMANDS}
    assert [(k.name, c) for k in DOCUMENT_KINDS for c in k.commands if c not in names] == []
    assert {k.name for k in DOCUMENT_KINDS if not k.commands} == {"model_calibration_set", "method_study"}
