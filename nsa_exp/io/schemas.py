"""Load a JSON Schema from ``schemas/`` and turn the first violation into a one-line message.

>>> validate_or_raise({"schema_version": "1.0"}, "config", label="config")
Traceback (most recent call last):
...
nsa_exp.errors.UserError: config: 'name' is a required property (schema config.schema.json)
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
from jsonschema import _keywords
from jsonschema._utils import find_additional_properties
from referencing.jsonschema import DRAFT202012

from .. import SCHEMA_DIR
from ..core.kinds import DOCUMENT_KINDS, UNKINDED_SCHEMAS
from ..errors import UserError
from .reader import read_bounded
from .strict_json import parse_strict

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


#: The keywords of which a schema's body holds at least one (a file holding its ``$id`` alone is no schema).
_BODY = ("type", "properties", "allOf", "anyOf", "oneOf", "$ref", "items")
_SCHEMA_BYTES = 4 * 2**20


@cache
def load_schema(kind: str) -> dict[str, Any]:
    """The schema ``schemas/<kind>.schema.json`` as a dict (cached).

    Raises:
        UserError: the file is missing, not a regular file, not strict JSON, or not this project's schema of that name
            (a JSON object of draft 2020-12 whose ``$id`` ends in ``/<kind>.schema.json``, whose ``x-schema-version`` is
            the vocabulary's for it, with a body): one line naming the file and how to restore it (a schema written
            over by hand or by another tool had every command end in "internal error KeyError" or a traceback).
    """
    name = f"schemas/{kind}.schema.json"
    fix = f"restore it from the project (git checkout -- {name})"
    try:  # bounded, a regular file only (a FIFO there hung every command, /dev/zero ended in MemoryError)
        schema = parse_strict(read_bounded(SCHEMA_DIR / f"{kind}.schema.json", name, _SCHEMA_BYTES))
    except UserError as exc:
        raise UserError(f"{exc}; {fix}") from None
    except ValueError as exc:
        raise UserError(f"{name}: cannot be read as a schema ({exc}); {fix}") from None
    doc_kind = next((k for k in DOCUMENT_KINDS if k.schema == kind), None)
    version = doc_kind.version if doc_kind is not None else UNKINDED_SCHEMAS.get(kind)
    if not (isinstance(schema, dict) and str(schema.get("$id", "")).endswith(f"/{kind}.schema.json")
            and schema.get("$schema") == DRAFT_2020_12 and schema.get("x-schema-version") == version
            and any(key in schema for key in _BODY)):
        raise UserError(f"{name}: is not this project's {kind} schema (its $id, $schema, x-schema-version or body "
                        f"differ); {fix}")
    return schema


@cache
def _registry() -> referencing.Registry:
    """Every schema under ``schemas/`` by its ``$id``, so cross-file ``$ref``s resolve offline."""
    resources = []
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        schema = load_schema(path.name.removesuffix(".schema.json"))
        resources.append((schema["$id"], referencing.Resource.from_contents(schema, DRAFT202012)))
    return referencing.Registry().with_resources(resources)


def _strict_integer(checker: Any, instance: Any) -> bool:
    """JSON Schema's ``integer`` accepts ``2048.0``; ours does not: a whole number written as a float
    (a float token in the JSON text) is rejected where an integer is meant (issue 16 item 3)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


#: A leaf schema's types by name, as exact Python types (a subclass, e.g. bool for a number, is left to jsonschema).
_LEAF_TYPES: dict[str, tuple[type, ...]] = {"number": (int, float), "integer": (int,), "string": (str,),
                                            "boolean": (bool,), "object": (dict,), "array": (list,),
                                            "null": (type(None),)}
_BOUNDS = {"minimum": operator.ge, "maximum": operator.le, "exclusiveMinimum": operator.gt,
           "exclusiveMaximum": operator.lt}
_TEXT = frozenset({"description", "title", "$comment"})
#: id(subschema) -> (subschema, its test or None): the schemas are cached for the process, so an id stays theirs
_LEAF_TESTS: dict[int, tuple[Any, Callable[[Any], bool] | None]] = {}


def _leaf_check(key: str, want: Any, kind: Any) -> Callable[[Any], bool] | None:
    """The predicate of one keyword of a leaf schema whose ``type`` is ``kind``, True only where that keyword yields
    no error in jsonschema (draft 2020-12, our strict integer); None for a keyword (or value) it does not judge.
    Bounds, lengths and patterns run after the type's predicate, so they see a number or a string."""
    if key == "type" and isinstance(want, str) and want in _LEAF_TYPES:
        exact = _LEAF_TYPES[want]
        return lambda v: type(v) in exact
    if key in _BOUNDS and kind in ("number", "integer") and type(want) in (int, float):
        compare = _BOUNDS[key]
        return lambda v: bool(compare(v, want))
    if key == "minLength" and kind == "string" and type(want) is int:
        return lambda v: len(v) >= want
    if key == "pattern" and kind == "string" and isinstance(want, str):
        try:
            search = re.compile(want).search
        except re.error:  # a pattern Python cannot read: jsonschema's own error (on a string only), not ours
            return None
        return lambda v: search(v) is not None
    if key == "enum" and isinstance(want, list) and all(type(w) is str for w in want):
        allowed = frozenset(want)
        return lambda v: type(v) is str and v in allowed
    if key == "const" and type(want) in (str, bool):
        return lambda v: type(v) is type(want) and v == want
    return None


def _leaf_checks(subschema: dict[str, Any]) -> list[Callable[[Any], bool]] | None:
    """Every keyword's predicate (:func:`_leaf_check`), the type's first; None when one keyword has none."""
    kind = subschema.get("type")
    checks: list[Callable[[Any], bool]] = []
    for key in sorted(subschema, key=lambda k: k != "type"):
        if key in _TEXT or key.startswith("x-"):
            continue
        check = _leaf_check(key, subschema[key], kind)
        if check is None:
            return None
        checks.append(check)
    return checks


def _leaf_test(subschema: Any) -> Callable[[Any], bool] | None:
    """A fast test of a value against a leaf schema (a type; numeric bounds; a string's length and pattern; an enum
    of strings; a string or boolean const), True only where jsonschema finds no error; None for any other schema.

    The values under such leaves are most of a result (each round's latency, every stage's median): jsonschema
    descends into each (~10 µs); this test takes ~1 µs. A False does not mean invalid (a bool where a number is
    meant, a NaN under a bound, an int subclass): the caller then descends as jsonschema does, so every error, its
    order and its message are jsonschema's own.

    >>> _leaf_test({"type": "number", "minimum": 0})(2.5), _leaf_test({"type": "integer"})(True)
    (True, False)
    >>> _leaf_test({"$ref": "#/$defs/gate"}) is None, _leaf_test({"type": "string", "format": "date-time"}) is None
    (True, True)
    """
    found = _LEAF_TESTS.get(id(subschema))
    if found is not None and found[0] is subschema:
        return found[1]
    checks = _leaf_checks(subschema) if isinstance(subschema, dict) else None
    test = None if checks is None else (lambda v, checks=tuple(checks): all(c(v) for c in checks))
    _LEAF_TESTS[id(subschema)] = (subschema, test)
    return test


def _passes_leaf(subschema: Any, value: Any) -> bool:
    test = _leaf_test(subschema)
    return test is not None and test(value)


# jsonschema's own keyword functions (jsonschema/_keywords.py, 4.x), each descending only into the values whose leaf
# schema :func:`_leaf_test` does not pass: the same errors in the same order, ~3x less time on a bench result.

def _items(validator: Any, items: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    if not validator.is_type(instance, "array") or items is False or "prefixItems" in schema:
        yield from _keywords.items(validator, items, instance, schema)
        return
    for index, item in enumerate(instance):
        if not _passes_leaf(items, item):
            yield from validator.descend(instance=item, schema=items, path=index)


def _prefix_items(validator: Any, prefix: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    if not validator.is_type(instance, "array"):
        return
    for (index, item), subschema in zip(enumerate(instance), prefix, strict=False):
        if not _passes_leaf(subschema, item):
            yield from validator.descend(instance=item, schema=subschema, schema_path=index, path=index)


def _properties(validator: Any, properties: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for name, subschema in properties.items():
        if name in instance and not _passes_leaf(subschema, instance[name]):
            yield from validator.descend(instance[name], subschema, path=name, schema_path=name)


def _additional_properties(validator: Any, extra_schema: Any, instance: Any,
                           schema: dict[str, Any]) -> Iterator[Any]:
    if not (validator.is_type(instance, "object") and isinstance(extra_schema, dict)):
        yield from _keywords.additionalProperties(validator, extra_schema, instance, schema)
        return
    for extra in set(find_additional_properties(instance, schema)):
        if not _passes_leaf(extra_schema, instance[extra]):
            yield from validator.descend(instance[extra], extra_schema, path=extra)


@cache
def _validator(kind: str) -> jsonschema.protocols.Validator:
    """The validator of ``schemas/<kind>.schema.json`` (cached). The schema itself is not checked against its
    metaschema here (a third of a small ``validate``'s time, in every process): the committed schemas are, by
    tests/io/test_schema_vocabulary.py."""
    schema = load_schema(kind)
    base = jsonschema.validators.validator_for(schema)
    cls = jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER.redefine("integer", _strict_integer),
                                       validators={"items": _items, "prefixItems": _prefix_items,
                                                   "properties": _properties,
                                                   "additionalProperties": _additional_properties})
    return cls(schema, registry=_registry(), format_checker=base.FORMAT_CHECKER)


def json_path(path: Any, root: str) -> str:
    """``['shape', 'T']`` -> ``root.shape.T``; list indices as ``[i]``."""
    out = root
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _errors(doc: Any, kind: str) -> list[Any]:
    """jsonschema's errors of ``doc`` under ``schemas/<kind>.schema.json``.

    Raises:
        UserError: the validation failed on a schema under ``schemas/`` that its metaschema refuses (a ``type``
            jsonschema does not know, a bound that is no number: a schema written over by hand ended in "internal
            error UnknownType"): one line naming the file and how to restore it. Any other failure is raised as is.
    """
    try:
        return list(_validator(kind).iter_errors(doc))
    except referencing.exceptions.Unresolvable as exc:  # a "$ref" edited to point nowhere: any string passes the
        # metaschema (a re-attacker, 2026-12-07); named by what it could not resolve, not the whole schema
        raise UserError(f"schemas/{kind}.schema.json (or a schema it refers to): a $ref does not resolve "
                        f"({type(exc).__name__}: {str(getattr(exc, 'ref', '') or exc)[:120]}); restore it from the "
                        f"project (git checkout -- schemas/)") from None
    except Exception:
        for name in dict.fromkeys([kind, *(p.name.removesuffix(".schema.json")
                                           for p in sorted(SCHEMA_DIR.glob("*.schema.json")))]):
            try:  # the metaschema's check, only once validating has failed (a third of a small validate's time)
                jsonschema.validators.validator_for(load_schema(name)).check_schema(load_schema(name))
            except jsonschema.exceptions.SchemaError as exc:
                where = json_path(exc.absolute_path, f"schemas/{name}.schema.json")
                raise UserError(f"{where}: not a valid JSON Schema ({exc.message}); restore it from the project "
                                f"(git checkout -- schemas/{name}.schema.json)") from None
        raise


def _violations(doc: Any, kind: str) -> list[tuple[list[str | int], str]]:
    """Every violation of ``schemas/<kind>.schema.json`` as (its JSON path's parts, its message), by path."""
    errors = sorted(_errors(doc, kind), key=lambda e: list(e.absolute_path))
    return [(list(e.absolute_path), _message(e)) for e in errors]


def schema_errors(doc: Any, kind: str, label: str) -> list[str]:
    """Every violation of ``schemas/<kind>.schema.json``, each as ``<json path>: <message>``."""
    return [f"{json_path(path, label)}: {message}" for path, message in _violations(doc, kind)]


#: (kind, sha256 of a file's bytes) -> its violations: what :func:`file_schema_errors` found in this process
_FILE_VIOLATIONS: dict[tuple[str, bytes], list[tuple[list[str | int], str]]] = {}
_FILES_KEPT = 4096


def file_schema_errors(data: bytes, doc: Any, kind: str, label: str) -> list[str]:
    """:func:`schema_errors` of ``doc``, the strict parse (:func:`~nsa_exp.io.strict_json.parse_strict`) of a
    file's bytes ``data``, found once per process for those bytes and ``kind`` (the same bytes parse to the same
    document): a file read again — a source of several derived documents, a result the report loads and then
    validates — is not walked again (about half of ``validate``'s schema time over the committed results). The caller
    passes that parse unchanged: a document edited after parsing would be judged as its bytes were (every caller,
    ``validate_bytes``, ``bench_document`` and ``load_document``, parses right before the call)."""
    key = (kind, hashlib.sha256(data).digest())
    found = _FILE_VIOLATIONS.get(key)
    if found is None:
        if len(_FILE_VIOLATIONS) >= _FILES_KEPT:
            _FILE_VIOLATIONS.clear()
        found = _FILE_VIOLATIONS[key] = _violations(doc, kind)
    return [f"{json_path(path, label)}: {message}" for path, message in found]


def _message(error: Any) -> str:
    """jsonschema's message, saying so when a whole number was written as a float (``2048.0``)."""
    if error.validator == "type" and isinstance(error.instance, float) and "integer" in str(error.validator_value):
        return (f"{error.instance!r} is a float where an integer is meant (write {error.instance:.0f}, not "
               f"{error.instance!r})" if error.instance.is_integer() else f"{error.message}")
    return str(error.message)


def validate_or_raise(doc: Any, kind: str, label: str) -> None:
    """Raise :class:`UserError` naming the first violation (by JSON path) of the schema ``kind``."""
    best = jsonschema.exceptions.best_match(_errors(doc, kind))
    if best is not None:
        where = json_path(best.absolute_path, label)
        raise UserError(f"{where}: {_message(best)} (schema {kind}.schema.json)")


# Derived from schemas/ (never typed twice): the tidy summary's columns.
SUMMARY_COLUMNS: tuple[str, ...] = tuple(load_schema("summary_row")["required"])
