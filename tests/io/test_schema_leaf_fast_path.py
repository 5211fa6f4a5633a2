"""The schema validator's leaf fast path (nsa_exp/io/schemas.py: ``items``, ``prefixItems``, ``properties`` and
``additionalProperties`` skip the values a leaf test passes) finds exactly what jsonschema alone finds: the same
violations, in the same order, with the same messages, and the same first one for a one-line refusal, on every
committed document kind, intact and with values changed at random (wrong types, bounds, lengths, patterns, enums,
keys added and removed). Also: the per-file verdict is keyed by the bytes, so two files differing in one byte
are judged apart."""

from __future__ import annotations

import copy
import json
import random
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from nsa_exp.core.kinds import KINDS
from nsa_exp.io import schemas
from nsa_exp.io.strict_json import parse_strict
from tests.helpers import REPO


def _plain(kind: str) -> Any:
    """jsonschema's own validator for the kind, with only our strict integer: the reference."""
    schema = schemas.load_schema(kind)
    base = jsonschema.validators.validator_for(schema)
    cls = jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER.redefine("integer",
                                                                                     schemas._strict_integer))
    return cls(schema, registry=schemas._registry(), format_checker=base.FORMAT_CHECKER)


def _found(errors: list[Any]) -> tuple[list[tuple[list[str | int], str]], tuple[list[str | int], str] | None]:
    """Every violation by path (as ``schema_errors`` lists them) and the one a one-line refusal names."""
    best = jsonschema.exceptions.best_match(errors)
    ordered = sorted(errors, key=lambda e: list(e.absolute_path))
    return ([(list(e.absolute_path), schemas._message(e)) for e in ordered],
            None if best is None else (list(best.absolute_path), schemas._message(best)))


def _one_per_kind() -> list[Path]:
    """The smallest committed document of each kind (the reference validator is the slow one)."""
    files = subprocess.run(["git", "ls-files", "results/*.json"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    smallest: dict[str, Path] = {}
    for name in files:
        path = REPO / name
        kind = json.loads(path.read_bytes()).get("kind")
        if kind in KINDS and (kind not in smallest or path.stat().st_size < smallest[kind].stat().st_size):
            smallest[kind] = path
    return sorted(smallest.values())


DOCS = _one_per_kind()
MUTANTS = 30
#: what a changed leaf becomes: each a way a forged or broken value differs from a valid one
VALUES = (True, False, None, "x", "", -1, -1.5, 0, 0.0, 2048.0, 1e308, 2**70, [], {}, float("nan"), "0" * 64,
          "selection_fwd", "local")


def _slots(doc: Any, path: tuple = ()) -> list[tuple]:
    """Every (container path, key) of the document, leaves and containers alike."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for key, value in items:
        out.append((path, key))
        out += _slots(value, (*path, key))
    return out


def _at(doc: Any, path: tuple) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _mutants(doc: dict[str, Any], seed: int, n: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    slots = _slots(doc)
    out = []
    for _ in range(n):
        mutant = copy.deepcopy(doc)
        path, key = rng.choice(slots)
        parent = _at(mutant, path)
        how = rng.random()
        if how < 0.75:
            parent[key] = rng.choice(VALUES)
        elif how < 0.85 and isinstance(parent, dict):
            del parent[key]
        elif how < 0.95 and isinstance(parent, dict):
            parent["unexpected_key"] = rng.choice(VALUES)
        elif isinstance(parent, list):
            parent.append(rng.choice(VALUES))
        else:
            parent[key] = rng.choice(VALUES)
        out.append(mutant)
    return out


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_the_fast_path_finds_what_jsonschema_finds(path):
    doc = parse_strict(path.read_bytes())
    kind = KINDS[doc["kind"]]
    plain = _plain(kind)
    assert schemas._violations(doc, kind) == [] and not list(plain.iter_errors(doc))
    changed = 0
    for mutant in _mutants(doc, seed=len(path.name), n=MUTANTS):
        want = _found(list(plain.iter_errors(mutant)))
        assert _found(list(schemas._validator(kind).iter_errors(mutant))) == want
        assert schemas._violations(mutant, kind) == want[0]
        changed += bool(want[0])
    # a change under a free-form object ("detail") or of a value to another valid one is no violation
    assert changed >= MUTANTS // 4, f"{path.name}: only {changed} of {MUTANTS} changes were violations"


def test_a_leaf_test_passes_only_what_jsonschema_passes():
    cases = [({"type": "number", "minimum": 0}, [0, 2.5, 10**30], [-1, True, "1", None, float("nan")]),
             ({"type": "integer", "exclusiveMinimum": 0, "maximum": 3}, [1, 3], [0, 4, 2.0, True]),
             ({"type": "string", "pattern": "^[0-9a-f]{64}$"}, ["0" * 64], ["0" * 63, "g" * 64, 0]),
             ({"type": "string", "minLength": 1}, ["a"], ["", None]),
             ({"enum": ["a", "b"], "x-vocabulary": {"enum": "stage"}}, ["a"], ["c", 1, None]),
             ({"const": True}, [True], [1, 1.0, False]),
             ({"minimum": 0, "pattern": "^x", "minLength": 2}, [], []),  # no type: not a leaf (None below)
             ({"minLength": 2, "maximum": 5, "type": "integer"}, [], [])]  # minLength on an integer: not judged
    # the keywords in the order a schema file lists them (sorted): the type is still tested first
    cases.append(({"exclusiveMinimum": 0, "maximum": 9, "type": "number"}, [1, 9.0], ["1", [1], None, 0, 10]))
    for schema, good, bad in cases:
        if not good:
            assert schemas._leaf_test(schema) is None, schema
            continue
        test = schemas._leaf_test(schema)
        assert test is not None, schema
        assert all(test(v) for v in good), schema
        assert not any(test(v) for v in bad), schema
    for other in ({"type": ["number", "null"]}, {"type": "string", "format": "date-time"}, {"$ref": "#/x"},
                  {"type": "array", "items": {"type": "number"}}, {"enum": [1, 2]}, {"const": 1},
                  {"type": "string", "pattern": "\\p{L}"}):  # a pattern Python cannot compile (an attacker's trial)
        assert schemas._leaf_test(other) is None, other


def test_the_remembered_verdict_belongs_to_the_bytes():
    path = REPO / "results" / "raw" / "e1_h200.json"
    data = path.read_bytes()
    doc = parse_strict(data)
    assert schemas.file_schema_errors(data, doc, "result", "$") == []
    forged = data.replace(b'"schema_version": "1.0"', b'"schema_version": 1.0', 1)
    assert forged != data
    bad = schemas.file_schema_errors(forged, parse_strict(forged), "result", "$")
    assert bad and bad[0].startswith("$.schema_version: ")
    assert schemas.file_schema_errors(data, doc, "result", "X") == []
