"""The provenance table, generated: one row per file under ``results/`` (:meth:`.manifest.Inputs.result_files`),
from the file's own metadata, so no committed result can be missing from it.

Per file: its kind, the commit it recorded (``metadata.git.sha``, with ``git_head_seen`` where the device's
copy carried another HEAD), whether the tree was dirty, when it was created (UTC), on which GPU, the command
(``metadata.argv`` with the interpreter path cut), the part of ``scripts/h200_session.sh`` whose step runs that
command (matched token for token), and notes: a file that replays the autotune configs of a run that is no
longer the committed one (``autotune.replayed_from.created_utc`` differs from the committed file's), a derived
file recorded from a dirty tree. A CSV is written by the same command as its JSON (a bench summary beside its
result, an ncu CSV beside its summary, a sweep table from its point files) and carries that provenance; a
``compare`` document records no metadata of its own, so its row names the results it compared and its command
as the document records it.

The table goes into docs/PROVENANCE.md between ``<!-- provenance:start -->`` and ``<!-- provenance:end -->``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..io.paths import tails
from ..io.reader import read_bounded
from ..io.store import read_strict
from ..io.strict_json import MAX_BYTES
from .manifest import KNOWN_FAILING, SESSION_SCRIPT, Inputs
from .markdown import MarkedFile, md_table

START, END = "<!-- provenance:start -->", "<!-- provenance:end -->"


def session_steps(script: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(part, step, nsa_exp argv)`` for every ``step NAME "$py" -m nsa_exp ...`` line of the session script
    (backslash continuations joined); an absent script gives none."""
    if not script.is_file():
        return []
    text = read_bounded(script, str(script), MAX_BYTES).decode("utf-8").replace("\\\n", " ")
    out, part = [], None
    for line in text.splitlines():
        m = re.match(r"^\s{2}([A-Za-z0-9_|]+)\)\s*(?:#.*)?$", line)
        if m:
            part = m.group(1)
            continue
        m = re.search(r"\bstep\s+(\S+)\s+\"\$py\"\s+-m\s+nsa_exp\s+(.*)$", line)
        if m and part:
            out.append((part, m.group(1), tuple(shlex.split(m.group(2)))))
    return out


def command_of(meta: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The command as it ran (``python -m nsa_exp ...`` for the package's entry) and its argv after the entry."""
    argv = [str(a) for a in meta.get("argv") or []]
    if not argv:
        return "not recorded", ()
    if argv[0].endswith("nsa_exp/__main__.py"):
        return "python -m nsa_exp " + shlex.join(argv[1:]), tuple(argv[1:])
    if "submitit" in argv[0]:
        return f"a submitit job ({Path(argv[-1]).name})", ()
    return "python " + shlex.join([Path(argv[0]).as_posix().split("/work/main/")[-1], *argv[1:]]), tuple(argv[1:])


#: Flags that say where a run's files go, not what it measured: a recorded command matches a session step without them.
_NAMESPACE_FLAGS = ("--publish", "--overwrite")


def _measured(args: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(a for a in args if a not in _NAMESPACE_FLAGS)


def _parts(args: tuple[str, ...], steps: list[tuple[str, str, tuple[str, ...]]], doc: dict[str, Any]) -> str:
    hits = [f"`{part}`" for part, _, a in steps if _measured(a) == _measured(args)]
    if not hits and doc.get("kind") == "sweep_point":  # a submitit worker: the step that ran its sweep's config
        config = (f"configs/{doc['sweep']}.json",)
        hits = [f"`{part}`" for part, _, a in steps if a[:1] == ("sweep",) and a[2:3] == config]
    return " or ".join(dict.fromkeys(hits)) or "—"


def _sha(git: dict[str, Any]) -> str:
    sha = str(git.get("sha") or "not recorded")[:7]
    seen = git.get("git_head_seen")
    return f"`{sha}`" + (f" (HEAD seen `{seen[:7]}`)" if seen else "")


def _dirty(git: dict[str, Any]) -> str:
    return {True: "**dirty**", False: "clean", None: "unknown"}[git.get("dirty")]


def _doc_row(rel: str, doc: dict[str, Any], steps, inputs: Inputs, docs: dict[str, dict[str, Any]]) -> list[str]:
    meta = doc.get("metadata") or {}
    git = meta.get("git") or {}
    command, args = command_of(meta)
    notes = []
    src = (doc.get("autotune") or {}).get("replayed_from") if isinstance(doc.get("autotune"), dict) else None
    if src and src.get("path"):
        # by its repository-relative tail: a path recorded absolute on another machine names the same file
        now = next((docs[t.as_posix()] for t in tails(src["path"]) if t.as_posix() in docs), None)
        if now is not None and (now.get("metadata") or {}).get("created_utc") != src.get("created_utc"):
            notes.append(f"**rests on a discarded run**: replays the autotune configs of `{src['path']}` as created "
                         f"{src.get('created_utc')}; the committed file was created "
                         f"{now['metadata'].get('created_utc')}")
    if rel in KNOWN_FAILING:
        checks, where = KNOWN_FAILING[rel]
        notes.append(f"**`validate` FAILs** {', '.join(checks)}, committed as measured ({where})")
    if git.get("dirty") and not (meta.get("gpu") or {}).get("name"):
        notes.append("derived from a dirty tree")
    if doc.get("kind") == "compare":
        a, b = doc["a"], doc["b"]
        nf = doc["noise_floor"]
        cycles = doc["space"] == "cycles"
        default = f"results/compare/{Path(a['path']).stem}_vs_{Path(b['path']).stem}{'_cycles' if cycles else ''}.json"
        command = (f"python -m nsa_exp compare {a['path']} {b['path']}"
                   + (f" --noise-from {' '.join(nf['paths'])}" if nf["kind"] == "repeat" else "")
                   + (f" --floor {next(iter(nf['per_stage'].values()), 0.02):g}" if nf["kind"] == "default" else "")
                   + (" --cycles" if cycles else "") + ("" if rel == default else f" --output {rel}")
                   + " --publish --overwrite")
        notes.append(f"records no metadata of its own (command as the document records it); A at "
                     f"`{a['git_sha'][:7]}` {a['created_utc']}, B at `{b['git_sha'][:7]}` {b['created_utc']}")
        return [f"`{rel}`", "compare", "—", "—", "—", "—", f"`{command}`", "—", "; ".join(notes)]
    if doc.get("kind") == "noise_table":
        notes.append(f"records no metadata of its own; derived from {len(doc['sources'])} committed results "
                     f"({len(doc['excluded'])} excluded), which `validate` rebuilds it from")
        return [f"`{rel}`", "noise_table", "—", "—", "—", "—", "`python -m nsa_exp noise-table --publish --overwrite`",
                "—", "; ".join(notes)]
    gpu = _gpu(doc)
    return [f"`{rel}`", str(doc.get("kind", "?")), _sha(git), _dirty(git), str(meta.get("created_utc", "—")), gpu,
            f"`{command}`", _parts(args, steps, doc), "; ".join(notes) or "—"]


def _gpu(doc: dict[str, Any]) -> str:
    """The GPU a file records: a run's ``metadata.gpu.name``, a method study's ``metadata.gpu_name``, an Nsight
    Compute summary's profiled kernels' ``device`` (its metadata records none); "—" for a CPU command's file."""
    meta = doc.get("metadata") or {}
    devices = {str(k["device"]) for k in doc.get("kernels") or [] if isinstance(k, dict) and k.get("device")}
    return ((meta.get("gpu") or {}).get("name") or meta.get("gpu_name")
            or (", ".join(sorted(devices)) if doc.get("kind") == "ncu_summary" else None) or "—")


def _owner(rel: str, docs: dict[str, dict[str, Any]]) -> tuple[str | None, str]:
    """The JSON whose command wrote the CSV ``rel``, and how."""
    path = Path(rel)
    if rel.startswith("results/summaries/"):
        return f"results/raw/{path.stem}.json", "bench's summary beside"
    if path.name.endswith(".raw.csv"):
        return rel.removesuffix(".raw.csv") + ".json", "ncu's raw CSV beside"
    if rel.startswith("results/sweeps/"):
        points = sorted(k for k in docs if k.startswith(f"results/sweeps/{path.stem}/"))
        return (points[0] if points else None), "the table of the point files in"
    return None, ""


def provenance_rows(inputs: Inputs, docs: dict[str, dict[str, Any]] | None = None) -> list[list[str]]:
    """One row per file under ``results/`` (module doc); ``docs``: documents already loaded, by relative path."""
    docs = dict(docs or {})
    files = [inputs.relative(p) for p in inputs.result_files()]
    for rel in files:
        if rel.endswith(".json") and rel not in docs:
            docs[rel] = read_strict(inputs.root / rel)[1]
    steps = session_steps(inputs.root / SESSION_SCRIPT)
    rows = []
    for rel in files:
        if rel.endswith(".json"):
            rows.append(_doc_row(rel, docs[rel], steps, inputs, docs))
            continue
        owner, how = _owner(rel, docs)
        if owner is None or owner not in docs:
            rows.append([f"`{rel}`", Path(rel).suffix.lstrip(".") or "file", "—", "—", "—", "—", "—", "—",
                         "no document of its own and no JSON it belongs to"])
            continue
        row = _doc_row(owner, docs[owner], steps, inputs, docs)
        if rel.startswith("results/sweeps/"):
            points = [d for k, d in docs.items() if k.startswith(f"results/sweeps/{Path(rel).stem}/")]
            shas = sorted({str(d["metadata"]["git"].get("sha"))[:7] for d in points})
            times = sorted(d["metadata"]["created_utc"] for d in points)
            row[2] = ", ".join(f"`{s}`" for s in shas)
            row[4] = f"{times[0]} … {times[-1]}"
            how = f"{how} `results/sweeps/{Path(rel).stem}/` ({len(points)} points; rebuilt by `sweep` at its end)"
        else:
            how = f"{how} `{owner}`"
        rows.append([f"`{rel}`", "csv", *row[2:8], f"written as {how}" + (f"; {row[8]}" if row[8] != "—" else "")])
    return rows


HEADER = ["file", "kind", "commit", "tree", "created (UTC)", "GPU", "command", "h200_session.sh part", "notes"]


def derived_trees(rows: list[list[str]]) -> str:
    """One generated sentence on the derived files (those with a recorded tree and no GPU: written by a CPU
    command): how many record a clean tree, and each that records a dirty one, from the table's own rows."""
    derived = [r for r in rows if r[1] != "csv" and r[5] == "—" and r[3] in ("clean", "**dirty**")]
    dirty = [r[0] for r in derived if r[3] == "**dirty**"]
    clean = len(derived) - len(dirty)
    if not dirty:
        return f"Derived files (written by a CPU command, no GPU): all {len(derived)} record a clean tree."
    return (f"Derived files (written by a CPU command, no GPU): {clean} of {len(derived)} record a clean tree; "
            f"{len(dirty)} {'records' if len(dirty) == 1 else 'record'} a dirty one (a developer's uncommitted "
            f"edits): {', '.join(dirty)}.")


def provenance_block(inputs: Inputs, docs: dict[str, dict[str, Any]] | None = None) -> str:
    """The generated block of docs/PROVENANCE.md: the rule it follows, the derived files' trees and the table."""
    rows = provenance_rows(inputs, docs)
    return "\n".join([
        "_Generated by `python -m nsa_exp report` from the metadata of every file under `results/` "
        f"({len(rows)} files); do not edit by hand._", "",
        "`commit` is the sha the file recorded (`metadata.git.sha`; \"HEAD seen\": the git HEAD of the device's "
        "copy of the tree, when it differed from the stated `NSA_EXP_GIT_SHA`); `tree`: whether that tree had "
        "uncommitted changes; `command`: `metadata.argv`, the command as it ran then (run today, a command that "
        "wrote a published file needs `--publish --overwrite` to replace it; without `--publish` it writes under "
        "`runs/`: README, Outputs); the part of `scripts/h200_session.sh` is the one whose "
        "step runs exactly that command (several parts may run the same command).", "",
        derived_trees(rows), "",
        md_table(HEADER, rows)])


def update_provenance(path: Path, block: str, source: str | Path | None = None) -> None:
    """Write ``path``: ``source``'s text (default ``path`` itself; its markers must be there) with the generated
    block replaced by ``block`` and its relative links reaching their files from ``path``'s folder
    (:class:`.markdown.MarkedFile`)."""
    provenance_file(source or path).write(path, block)


def provenance_file(source: str | Path) -> MarkedFile:
    """PROVENANCE.md (``source``) read around its table (UserError: missing, or without the markers)."""
    return MarkedFile.read(source, START, END, "provenance table")


def missing_from(block: str, files: Iterable[str]) -> list[str]:
    """The files of ``files`` the block has no row for (a test holds this empty)."""
    return [f for f in files if f"| `{f}` |" not in block]
