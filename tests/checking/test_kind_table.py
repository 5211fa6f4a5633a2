"""One kind table (issue 29): every document kind of :data:`nsa_exp.core.kinds.DOCUMENT_KINDS` has exactly one
module of ``nsa_exp/checking/`` declaring it (``KIND``, beside its ``checks``), every module declaring ``KIND``
names a kind of that table, and :data:`nsa_exp.checking.kinds.KIND_MODULES` lists exactly those modules."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType, SimpleNamespace

import nsa_exp.checking
from nsa_exp.checking.kinds import KIND_CHECKS, KIND_MODULES
from nsa_exp.core.kinds import DOCUMENT_KINDS


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


def test_kind_modules_lists_every_declaring_module_and_kind_checks_their_checks():
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
