"""One home per name (issue 29): a public top-level name of the package (function, class or assignment; not
``_private``) is defined in one module, and every other module imports it from there. Two modules defining one
name were either one concept with two homes (DTYPES, PERCENTILE_METHOD, HEADROOM …: now imported from one) or
two concepts sharing a name (shape_at, Point, KINDS …: now named for what each is). The exceptions are the
per-module protocols below: a name every module of one kind defines, each for its own module, read through the
module (``bench_result.build``) or imported under an alias."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "nsa_exp"

#: name -> (the modules, as globs relative to nsa_exp/, that may each define it; why it is a per-module protocol).
PROTOCOLS: dict[str, tuple[tuple[str, ...], str]] = {
    "build": (("checking/*.py",), "a document kind's builder, one per kind module (docs/ARCHITECTURE.md, "
                                  "'A document kind')"),
    "KIND": (("checking/*.py",), "the document kind a kind module declares (its row of core/kinds.DOCUMENT_KINDS); "
                                 "checking/kinds.KIND_CHECKS is built from each module's KIND and checks"),
    "checks": (("checking/*.py",), "a document kind's checks, one per kind module, collected into "
                                   "checking/kinds.KIND_CHECKS under the module's KIND"),
    "RECORD": (("checking/*.py",), "a document kind's frozen record, from which its schema file is generated; "
                                   "checking/kinds.KIND_RECORDS collects it under the module's KIND"),
    "recompute": (("checking/*.py",), "a derived kind's rebuild-and-diff check, its module's checks "
                                      "(checks.one_check) or one of them"),
    "TITLE": (("report/*.py",), "the heading of the report section the module renders (build.py: the document's)"),
    "answer_line": (("report/*.py",), "a report section's line in the answer block; report/summary.py reads "
                                      "each section's"),
    "format_table": (("analysis/*.py", "routing/report.py"), "the console table of the document the module "
                                                             "computes; handlers.py prints each (aliased)"),
    "METHOD": (("analysis/*.py",), "the 'method' text of the block the module computes and a document records "
                                   "(bootstrap, cupti, stop rule), beside its METHOD_* variants"),
    "command": (("gpu/*.py",), "the handler of the one command a GPU module owns, '<module>:command' in "
                               "commands.py's table"),
    "T": (("*",), "a module's own TypeVar: a type parameter, not a concept"),
}


def _names(body: list[ast.stmt]) -> Iterator[str]:
    """The names a module body binds at top level: defs, classes, assignments (also inside top-level if/try)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        yield sub.id
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            yield node.target.id
        elif isinstance(node, ast.If):
            yield from _names(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _names(node.body + node.orelse + node.finalbody
                              + [s for h in node.handlers for s in h.body])


def definitions(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Public top-level name -> the modules (paths relative to ``package``) that define it."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        for name in _names(ast.parse(path.read_text()).body):
            if not name.startswith("_"):
                out[name].add(module)  # a set: typing overloads (io/store.load_record) are one module's
    return out


def duplicates(defs: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each name defined in two or more modules, but for a protocol's own modules; a protocol name defined
    outside its modules too is listed with every module that defines it."""
    out = {}
    for name, modules in defs.items():
        if len(modules) < 2:
            continue
        globs = PROTOCOLS.get(name, ((), ""))[0]
        if any(not any(fnmatch(m, g) for g in globs) for m in modules):
            out[name] = sorted(modules)
    return out


def test_every_public_name_has_one_home():
    assert duplicates(definitions()) == {}


def test_every_protocol_is_still_one():
    """An entry of :data:`PROTOCOLS` whose name no two modules define any more is stale: remove it."""
    defs = definitions()
    assert sorted(n for n in PROTOCOLS if len(defs.get(n, ())) < 2) == []
    assert all(reason for _, reason in PROTOCOLS.values())


def test_a_second_home_is_found(tmp_path):
    """The check can fail: a name defined in two modules, or a protocol name outside its modules, is listed."""
    (tmp_path / "a.py").write_text("X = 1\n\ndef f():\n    pass\n\nbuild = None\n")
    (tmp_path / "checking").mkdir()
    (tmp_path / "checking" / "b.py").write_text("if True:\n    X: int = 2\n\nclass f:\n    pass\n\ndef build():\n"
                                                "    pass\n\n_private = 3\n")
    (tmp_path / "checking" / "c.py").write_text("def build():\n    pass\n\n_private = 4\n")
    assert duplicates(definitions(tmp_path)) == {"X": ["a.py", "checking/b.py"], "f": ["a.py", "checking/b.py"],
                                                 "build": ["a.py", "checking/b.py", "checking/c.py"]}
