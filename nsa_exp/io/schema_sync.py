"""schemas/ from the vocabulary: the parts of every schema that :mod:`nsa_exp.core` declares, regenerated.

Generated in each ``schemas/<stem>.schema.json``: its ``x-schema-version`` and the consts of its
``schema_version`` and ``kind`` (:mod:`nsa_exp.core.kinds`), and every node marked ``"x-vocabulary":
{KEYWORD: NAME}``, whose ``KEYWORD`` (``enum``, ``required`` or ``properties``) is set from
:data:`nsa_exp.core.enums.VOCABULARY` ``[NAME]``. Files are written as ``json.dumps(indent=2)`` text.
A kind whose module declares its frozen record (``RECORD`` in ``checking/<kind>.py``, issue 29) has its whole
schema file generated from the record's fields (:func:`generated_schema`): its module and its row are the kind.
``python -m nsa_exp schemas`` lists the files that differ (exit 1); ``--write`` rewrites them.

>>> render({"x-vocabulary": {"enum": "round_orders"}, "enum": []})["enum"]
['shuffled-rounds', 'fixed-rounds']
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import SCHEMA_DIR
from ..core.enums import VOCABULARY
from ..core.kinds import DOCUMENT_KINDS, UNKINDED_SCHEMAS, DocumentKind, document_kind
from ..core.records import json_schema
from .store import write_text_atomic
from .strict_json import parse_strict

MARK = "x-vocabulary"
#: The draft every schema file declares, and the base of their ``$id``.
DRAFT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://nsa-kernelexp.invalid/schemas/"
_KIND_OF = {k.schema: k for k in DOCUMENT_KINDS}


def _fill(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _fill(item)
        return
    if not isinstance(node, dict):
        return
    for keyword, name in node.get(MARK, {}).items():
        values = VOCABULARY[name]()
        if keyword in ("enum", "required"):
            node[keyword] = values
        elif keyword == "properties":
            templates = list(node.get("properties", {}).values())
            if not templates or any(t != templates[0] for t in templates):
                raise ValueError(f"{MARK} properties: the node needs one common property schema, got {templates}")
            node["properties"] = {v: copy.deepcopy(templates[0]) for v in values}
        else:
            raise ValueError(f"{MARK}: cannot generate {keyword!r} (enum, required or properties)")
    for value in node.values():
        _fill(value)


def render(schema: dict[str, Any], stem: str | None = None) -> dict[str, Any]:
    """``schema`` with its generated parts set (``stem``: its file stem, for the kind and version consts)."""
    out = copy.deepcopy(schema)
    if stem is not None:
        kind = _KIND_OF.get(stem)
        version = kind.version if kind else UNKINDED_SCHEMAS[stem]
        out["x-schema-version"] = version
        props = out.get("properties", {})
        if "schema_version" in props:
            props["schema_version"] = {"const": version}
        if kind is not None:
            props["kind"] = {"const": kind.name}
    _fill(out)
    return out


def text_of(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def generated_schema(kind: DocumentKind, record: type) -> dict[str, Any]:
    """The whole schema file of ``kind``, generated from its frozen ``record`` (a dataclass whose fields are the
    document's keys, :func:`nsa_exp.core.records.json_schema`), titled by the kind table's ``what``."""
    return render({"$schema": DRAFT, "$id": f"{ID_BASE}{kind.schema}.schema.json", "x-schema-version": kind.version,
                   "title": kind.what, **json_schema(record)}, kind.schema)


def drifted(folder: Path = SCHEMA_DIR, records: Mapping[str, type] | None = None) -> dict[Path, str]:
    """``{path: the text it should hold}`` for every schema file that differs from its rendering; ``records``
    (``{kind: its record}``, :data:`nsa_exp.checking.kinds.KIND_RECORDS`): those kinds' files are generated whole
    from their records (a missing one drifts too)."""
    generated = {document_kind(name).schema: generated_schema(document_kind(name), record)
                 for name, record in (records or {}).items()}
    out = {}
    for stem, schema in generated.items():
        path, want = folder / f"{stem}.schema.json", text_of(schema)
        if not path.is_file() or path.read_text(encoding="utf-8") != want:
            out[path] = want
    for path in sorted(folder.glob("*.schema.json")):
        if path.name.removesuffix(".schema.json") in generated:
            continue
        text = path.read_text(encoding="utf-8")
        want = text_of(render(parse_strict(text.encode("utf-8")), path.name.removesuffix(".schema.json")))
        if text != want:
            out[path] = want
    return dict(sorted(out.items()))


def sync_schemas(write: bool, folder: Path = SCHEMA_DIR, records: Mapping[str, type] | None = None) -> list[Path]:
    """The schema files that drift from the vocabulary (or, for ``records``' kinds, from their records); rewritten
    (atomically) when ``write``."""
    stale = drifted(folder, records)
    if write:
        for path, text in stale.items():
            write_text_atomic(path, text)
    return list(stale)
