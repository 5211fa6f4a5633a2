"""Every command README.md and docs/*.md show a user, extracted from the text (issue 23: "every documented
command runs as written").

A command is found in a fenced ``bash`` block (or a fence without a language whose lines start with a command;
``\\`` continuations joined, comment lines and trailing ``# ...`` comments dropped) or in an inline code span
that starts with a command prefix (``python -m nsa_exp``, ``invoke``, ``make``, ``scripts/...``). Each is one of:

- ``mention``: an inline span naming a command without arguments (prose about it): the command must exist;
- ``template``: a synopsis with placeholders (``<name>``, ``[--opt]``, ``A|B``, ``...``, ``PATH``): it cannot run
  as written; its command and every ``--flag`` it names must exist in that door;
- ``gpu``: it needs CUDA (a GPU command of the command table, ``scripts/run_h100.sh``, ``ncu``, the GPU
  compose services): parsed, not run;
- ``host``: it needs what a test cannot have (Docker, podman as root, an install, the test suite itself);
- ``cpu``: run verbatim, in a clone of the repository.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = ("README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md")))

PREFIXES = ("python -m nsa_exp", ".venv/bin/python -m nsa_exp", "python scripts/", "invoke ", ".venv/bin/invoke ",
            "make ", "scripts/", "bash scripts/", "docker compose", "NSA_EXP_", "CUDA_VISIBLE_DEVICES=", "ncu ")
#: Commands of the command table that need a GPU (everything else runs on a CPU).
GPU_COMMANDS = {"check", "smoke", "bench", "autotune-matrix", "profile-stage", "ncu", "whatif", "reproduce",
                "peer-bench"}
#: Scripts that are thin doors onto a GPU command.
GPU_SCRIPTS = {"scripts/bench_backward.py": "bench", "scripts/profile_stage.py": "profile-stage"}
PLACEHOLDER = re.compile(r"<[^>]*>|\[[^\]]*\]|\.\.\.|…|\b(?:PATH|DIR|FILE|NAME|RESULT|OUTDIR|SUMMARY|RAW)\b|"
                         r"\b[A-Z]\.json\b|\bX Y\b|\bk=v\b")


@dataclass(frozen=True)
class DocCommand:
    """One documented command: where it is (``file:line``), its text, its class, and its group (the fenced
    block it is part of, whose commands run in order in one state; an inline command is a group alone)."""

    where: str
    text: str
    kind: str  # template | mention | gpu | host | cpu
    group: str

    @property
    def id(self) -> str:
        return f"{self.where}: {self.text[:70]}"


def _strip_comment(line: str) -> str:
    """``line`` without a trailing shell comment (a ``#`` outside quotes after whitespace)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _fenced(path: str, text: str) -> list[tuple[str, str, str]]:
    out, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^\s*```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        lang, body, start = fence.group(1), [], i + 1
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append((i + 1, lines[i]))
            i += 1
        i += 1
        if lang not in ("bash", "sh", ""):
            continue
        if lang == "" and not any(ln.strip().startswith(PREFIXES) for _, ln in body):
            continue  # a diagram or a formula, not commands
        pending, first = "", start
        for no, raw in body:
            line = _strip_comment(raw) if not raw.lstrip().startswith("#") else ""
            if not pending:
                first = no
            if line.endswith("\\"):
                pending += line[:-1].strip() + " "
                continue
            command = (pending + line.strip()).strip()
            pending = ""
            if command:
                out.append((f"{path}:{first}", command, f"{path}:{start}"))
    return out


def _inline(path: str, text: str) -> list[tuple[str, str]]:
    """Inline code spans (which may run over a line break) that start with a command prefix, fences left out."""
    lines, in_fence = text.splitlines(), False
    for i, line in enumerate(lines):
        if re.match(r"^\s*```", line):
            in_fence = not in_fence
            lines[i] = ""
        elif in_fence:
            lines[i] = ""
    prose = "\n".join(lines)
    out = []
    for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", prose):
        span = " ".join(m.group(1).split())
        if span.startswith(PREFIXES) and " " in span:
            out.append((f"{path}:{prose.count(chr(10), 0, m.start()) + 1}", span))
    return out


def nsa_command(tokens: list[str]) -> tuple[str, str, list[str]] | None:
    """``(door, command, argv)`` of a command line: door ``cli`` (``python -m nsa_exp`` or a thin script),
    ``invoke`` or ``make``; None for anything else."""
    while tokens and re.match(r"^[A-Z_]+=", tokens[0]):  # leading environment assignments
        tokens = tokens[1:]
    if tokens[:1] == ["scripts/run_h100.sh"]:
        tokens = tokens[1:]
    if not tokens:
        return None
    head = tokens[0].split("/")[-1]
    if head.startswith("python") and tokens[1:3] == ["-m", "nsa_exp"] and len(tokens) > 3:
        return "cli", tokens[3], tokens[4:]
    if head.startswith("python") and len(tokens) > 1 and tokens[1] in GPU_SCRIPTS:
        return "cli", GPU_SCRIPTS[tokens[1]], tokens[2:]
    if head.startswith("python") and tokens[1:2] == ["scripts/plot_fanin_latency.py"]:
        return "cli", "plot", tokens[2:]
    if head == "invoke" and len(tokens) > 1:
        return "invoke", tokens[1], tokens[2:]
    if head == "make" and len(tokens) > 1:
        return "make", tokens[1], tokens[2:]
    return None


def classify(text: str) -> str:
    if re.match(r"python3? -c ", text):  # a one-liner over the package (METHOD.md's stop-rule replays): run as
        return "cpu"                     # written; its brackets are Python's subscripts, not placeholders
    if PLACEHOLDER.search(text) or re.search(r"\S\|\S", text.replace("'", " ").replace('"', " ")):
        return "template"
    try:
        tokens = shlex.split(text)
    except ValueError:
        return "template"
    if any(t in ("docker", "ncu") for t in tokens[:1]) or "scripts/container.sh" in tokens[:2] \
            or "scripts/install.sh" in tokens[:2] or "scripts/h200_session.sh" in tokens[:1]:
        return "host"
    if tokens[:1] == ["scripts/run_h100.sh"] or any(t.startswith("CUDA_VISIBLE_DEVICES=") for t in tokens[:1]) \
            or any(t.endswith(".ncu-rep") for t in tokens):  # Nsight Compute reports come from a GPU run
        return "gpu"
    found = nsa_command(tokens)
    if found is None:
        return "host"
    door, name, argv = found
    if name == "release-bench":
        return "host"  # a GPU and your FLA checkout (--fla-source) or downloaded wheels (--wheel-dir): not here
    names = [name, *(argv if door in ("invoke", "make") else [])]
    if door in ("invoke", "make") and any(n in ("test", "lint") for n in names):
        return "host"  # the suite itself (CI runs it), not a command to run inside it
    if door == "make" and any(n in GPU_COMMANDS for n in names):
        return "gpu"
    if name in GPU_COMMANDS or (door == "invoke" and any(n.replace("_", "-") in GPU_COMMANDS for n in argv
                                                         if not n.startswith("-"))):
        return "gpu"
    if name == "sweep" and "--table-only" not in argv and "--dry-run" not in argv and "--table_only" not in argv:
        return "gpu"
    return "cpu"


def _is_mention(text: str) -> bool:
    """An inline span naming a command without arguments (``python -m nsa_exp sweep``, ``invoke check``): prose
    about the command, not a command to run; its name must exist."""
    try:
        tokens = shlex.split(text)
    except ValueError:
        return False
    found = nsa_command(tokens)
    return found is not None and not found[2] and not found[1].startswith("-")


#: Generated regions that RECORD commands as past runs gave them (the provenance table: each file's argv from its
#: metadata, its output paths on the GPU host): a record, not an instruction; kind ``record``, never run.
RECORD_REGIONS = (("<!-- provenance:start -->", "<!-- provenance:end -->"),)


def _record_lines(text: str) -> set[int]:
    """1-based line numbers inside a :data:`RECORD_REGIONS` region."""
    inside, out = False, set()
    for n, line in enumerate(text.splitlines(), 1):
        if any(line.strip() == start for start, _ in RECORD_REGIONS):
            inside = True
        elif any(line.strip() == end for _, end in RECORD_REGIONS):
            inside = False
        elif inside:
            out.add(n)
    return out


def documented_commands(root: Path = REPO) -> list[DocCommand]:
    """Every command of README.md and docs/*.md, in document order, each classified (one per place it appears;
    ``a && b`` gives two commands of one group); those of a generated record region are kind ``record``."""
    out = []
    for rel in DOCS:
        text = (root / rel).read_text()
        records = _record_lines(text)
        found = [(w, c, g) for w, c, g in _fenced(rel, text)] + [(w, c, None) for w, c in _inline(rel, text)]
        for where, command, group in sorted(found, key=lambda wcg: int(wcg[0].rsplit(":", 1)[1])):
            for part in (p.strip() for p in command.split(" && ")):
                kind = classify(part)
                kind = "mention" if kind != "template" and group is None and _is_mention(part) else kind
                kind = "record" if int(where.rsplit(":", 1)[1]) in records else kind
                out.append(DocCommand(where, part, kind, group or where))
    return out
