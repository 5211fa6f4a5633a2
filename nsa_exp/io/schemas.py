"""Load a JSON Schema from ``schemas/`` and turn the first violation into a one-line message.

>>> validate_or_raise({"schema_version": "1.0"}, "config", label="config")
Traceback (most recent call last):
...
nsa_exp.errors.UserError: config: 'name' is a required property (schema config.schema.json)
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema
import referencing
from referencing.jsonschema import DRAFT202012

from .. import SCHEMA_DIR
from ..errors import UserError
from .strict_json import parse_strict


@cache
def load_schema(kind: str) -> dict[str, Any]:
    """The schema ``schemas/<kind>.schema.json`` as a dict (cached); ValueError when the file is not a JSON object."""
    schema = parse_strict((SCHEMA_DIR / f"{kind}.schema.json").read_bytes())
    if not isinstance(schema, dict):
        raise ValueError(f"schemas/{kind}.schema.json: a schema is a JSON object, not {type(schema).__name__}")
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


@cache
def _validator(kind: str) -> jsonschema.protocols.Validator:
    """The validator of ``schemas/<kind>.schema.json`` (cached). The schema itself is not checked against its
    metaschema here (a third of a small ``validate``'s time, in every process): the committed schemas are, by
    tests/io/test_schema_vocabulary.py."""
    schema = load_schema(kind)
    base = jsonschema.validators.validator_for(schema)
    cls = jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER.redefine("integer", _strict_integer))
    return cls(schema, registry=_registry(), format_checker=base.FORMAT_CHECKER)


def json_path(path: Any, root: str) -> str:
    """``['shape', 'T']`` -> ``root.shape.T``; list indices as ``[i]``."""
    out = root
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def schema_errors(doc: Any, kind: str, label: str) -> list[str]:
    """Every violation of ``schemas/<kind>.schema.json``, each as ``<json path>: <message>``."""
    errors = sorted(_validator(kind).iter_errors(doc), key=lambda e: list(e.absolute_path))
    return [f"{json_path(e.absolute_path, label)}: {_message(e)}" for e in errors]


def _message(error: Any) -> str:
    """jsonschema's message, saying so when a whole number was written as a float (``2048.0``)."""
    if error.validator == "type" and isinstance(error.instance, float) and "integer" in str(error.validator_value):
        return f"{error.instance!r} is a float where an integer is meant (write {error.instance:.0f}, not " \
               f"{error.instance!r})" if error.instance.is_integer() else f"{error.message}"
    return str(error.message)


def validate_or_raise(doc: Any, kind: str, label: str) -> None:
    """Raise :class:`UserError` naming the first violation (by JSON path) of the schema ``kind``."""
    validator = _validator(kind)
    best = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if best is not None:
        where = json_path(best.absolute_path, label)
        raise UserError(f"{where}: {_message(best)} (schema {kind}.schema.json)")


# Derived from schemas/ (never typed twice): the tidy summary's columns.
SUMMARY_COLUMNS: tuple[str, ...] = tuple(load_schema("summary_row")["required"])
