"""The one reader of user files (nsa_exp/io/reader.py): regular files only, bounded before reading, one line for
every refusal; and every loader of a user file in the package goes through it."""

from __future__ import annotations

import ast
import os
import threading

import pytest

from nsa_exp.errors import UserError
from nsa_exp.io.reader import read_bounded, require_folder, same_file, show_path
from nsa_exp.io.strict_csv import read_csv_table
from tests.helpers import REPO


def _refusal(path, limit=1 << 20) -> str:
    with pytest.raises(UserError) as err:
        read_bounded(path, f"config {show_path(path)}", limit)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "c.json")
    done: list[str] = []
    reader = threading.Thread(target=lambda: done.append(_refusal(tmp_path / "c.json")), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert done and "a FIFO (named pipe), not a regular file" in done[0]  # a blocking open() would hang here


def test_devices_folders_and_unusable_paths_are_one_line(tmp_path):
    assert "/dev/zero: a character device, not a regular file" in _refusal("/dev/zero")
    (tmp_path / "zero.json").symlink_to("/dev/zero")  # a link is followed, then judged
    assert "a character device" in _refusal(tmp_path / "zero.json")
    assert "a folder, not a regular file" in _refusal(tmp_path)
    long = tmp_path / ("a" * 5000)
    message = _refusal(long)
    assert "the path is too long" in message and "(5" in message and len(message) < 300  # shown shortened
    assert message.endswith("(File name too long)")
    assert _refusal(tmp_path / "none.json").endswith("none.json: no such file")


def test_the_size_is_checked_before_a_byte_is_read(tmp_path):
    (tmp_path / "big.json").write_bytes(b"{}  ")
    assert "4 bytes, more than the 3 bytes such a file can hold (refused before reading)" in \
        _refusal(tmp_path / "big.json", limit=3)
    assert read_bounded(tmp_path / "big.json", "x", 4) == b"{}  "


def test_a_csv_table_is_judged_by_its_row_schema_columns():
    text = read_csv_table(REPO / "results/summaries/e1_h200.csv", "--input", "summary_row", "a bench summary CSV")
    assert text.startswith("config_name,")
    with pytest.raises(UserError, match=r"^--table x: not a sweep table \(no column sweep, point_id, family \.\.\.\); "
                                        r"a bench summary is drawn by plot --input$"):
        read_csv_table(REPO / "results/summaries/e1_h200.csv", "--table x", "sweep_row", "a sweep table",
                       hint="a bench summary is drawn by plot --input")


def test_same_file_sees_a_hard_link_and_a_resolved_path(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    os.link(tmp_path / "a.json", tmp_path / "b.json")
    assert same_file(tmp_path / "a.json", tmp_path / "b.json")
    assert same_file(tmp_path / "a.json", tmp_path / "x" / ".." / "a.json")
    assert not same_file(tmp_path / "a.json", tmp_path / "c.json")


#: Files the package reads itself (never a path a user names): its own sources, schemas, README, FLA's sources.
OWN_FILES = {"io/reader.py", "io/schemas.py", "io/schema_sync.py", "io/metadata.py", "report/readme.py",
             "gpu/fla_source.py", "io/fla_pin.py",  # the pin's file list and the installed FLA's own sources
             "gpu/sweep_point.py"}  # sweep_point: a sweep's autotune_from, read by arguments first
#: The release arm reads the files of an installed FLA release, a wheel or a --fla-source / --release-dir tree
#: (Python sources, dist-info, its own job folder), each after an ``is_file()`` check (a regular file: never a
#: FIFO or a device). Not yet through the bounded reader: listed here so a new module cannot join them unseen.
RELEASE_TREES = {"releases/environments.py", "releases/source.py", "gpu/release.py", "checking/release_result.py"}
#: Calls that read a path's bytes: ``np.load``/``np.loadtxt``/``np.fromfile``, ``torch.load``, ``pd.read_csv``
#: (by their module), ``.read_bytes()``/``.read_text()`` of any path, the builtin ``open()`` and ``os.open``
#: for reading (a write-only ``os.open`` of the atomic writer, or a folder opened to fsync it, is not a read).
READ_BY_MODULE = {"np": {"load", "loadtxt", "fromfile"}, "numpy": {"load", "loadtxt", "fromfile"},
                  "torch": {"load"}, "pd": {"read_csv"}, "pandas": {"read_csv"}}
IN_MEMORY = {"BytesIO", "StringIO"}


def _reads_a_path(node: ast.Call) -> bool:
    fn = node.func
    name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
    owner = fn.value.id if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) else ""
    first = node.args[0] if node.args else None
    if isinstance(first, ast.Call) and (getattr(first.func, "attr", "") in IN_MEMORY
                                        or getattr(first.func, "id", "") in IN_MEMORY):
        return False  # parsing bytes already read
    if name in ("read_bytes", "read_text") and isinstance(fn, ast.Attribute):
        return True
    if name == "open" and owner in ("", "io"):
        return not (isinstance(first, ast.Attribute) and first.attr == "devnull")
    if name == "open" and owner == "os":
        return not any(f in ast.unparse(node) for f in ("O_WRONLY", "O_RDWR", "O_DIRECTORY"))
    return name in READ_BY_MODULE.get(owner, ())


def test_every_reader_of_a_user_file_goes_through_the_bounded_reader():
    """No ``open()``, ``Path.read_bytes/read_text``, ``np.load``, ``pd.read_csv`` or ``torch.load`` of a path
    outside io/reader.py and the package's own files: a new loader that reads a user's file directly (and so
    could block on a FIFO or read /dev/zero forever) fails here."""
    direct = []
    for path in sorted((REPO / "nsa_exp").rglob("*.py")):
        rel = path.relative_to(REPO / "nsa_exp").as_posix()
        if rel in OWN_FILES | RELEASE_TREES:
            continue
        direct += [f"{rel}:{node.lineno} {ast.unparse(node.func)}()" for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.Call) and _reads_a_path(node)]
    assert direct == [], direct


@pytest.mark.parametrize(("path", "why"), [("/dev/zero", "a character device, not a folder"),
                                           ("pyproject.toml", "a file, not a folder"),
                                           ("no/such/folder", "no such folder")])
def test_a_folder_option_says_what_its_path_is_instead(path, why):
    """``--fla-source /dev/zero`` said "no such folder" of a device that exists."""
    with pytest.raises(UserError, match=f"^--x {path}: {why}; hint$"):
        require_folder(REPO / path if path == "pyproject.toml" else path, f"--x {path}", "hint")
