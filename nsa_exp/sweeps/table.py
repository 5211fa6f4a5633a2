"""The sweep table: every valid point file as one tidy row (schema ``sweep_row``), written and read back."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analysis.sweep_rows import table_rows
from ..checking.validate import load_validated
from ..core.records import SweepPoint
from ..errors import UserError
from ..io.progress import progress
from ..io.reader import show_path
from ..io.schemas import schema_errors
from ..io.store import write_frame
from ..io.strict_csv import read_csv_table
from .plan import point_done

if TYPE_CHECKING:
    import pandas as pd


def sweep_table(out_dir: str | Path, csv_path: str | Path | None = None) -> pd.DataFrame:
    """Every measured point under ``out_dir`` as one tidy row (sorted by family, T, point id); written to
    ``csv_path`` (schema ``sweep_row`` per row) when given.

    A point file (a schema-valid ``sweep_point``; anything else is an unfinished point and skipped) must pass
    every check of ``validate`` (:func:`nsa_exp.checking.validate.load_validated`): a forged or poisoned point
    is refused in one line naming it, never tabulated; a folder without one is refused (no 0-row table)."""
    done = [path for path in sorted(Path(out_dir).glob("*.json")) if point_done(path)]
    docs: list[SweepPoint | dict[str, Any]] = [
        load_validated(path, ("sweep_point",), hint="fix or remove that point file, then rebuild the table")
        for path in progress(done, f"sweep table: validating the points of {Path(out_dir).name}", unit="point")]
    if not docs:
        raise UserError(f"{out_dir}: no measured point file (run the sweep on a GPU first); no table written")
    rows, columns = table_rows(docs)
    import pandas as pd  # noqa: PLC0415 - pandas (0.2 s) where a table is built, not in every CPU command's start

    frame = pd.DataFrame(rows, columns=columns)
    if csv_path is not None:
        write_frame(csv_path, frame, "sweep_row")
    return frame


def read_sweep_table(path: Path) -> pd.DataFrame:
    """A sweep table, each row checked against the ``sweep_row`` schema (UserError naming the row)."""
    text = read_csv_table(path, show_path(path), "sweep_row", "a sweep table")
    import pandas as pd  # noqa: PLC0415 - pandas (0.2 s) where a table is built, not in every CPU command's start

    frame = pd.read_csv(io.StringIO(text), dtype={"params": str})
    for i, row in enumerate(frame.to_dict("records")):
        clean = {k: (int(v) if k in ("T", "edges", "B", "H", "G") else v) for k, v in row.items()}
        errors = schema_errors(clean, "sweep_row", f"{path.name} row {i + 2}")
        if errors:
            raise UserError(errors[0])
    return frame
