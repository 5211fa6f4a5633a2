"""Bring your own routing: load a ``block_indices`` file, validate it against a shape, count its edges.

Formats (chosen by suffix):

- ``.npy``: one array (``np.load(allow_pickle=False)``).
- ``.npz``: the array named ``block_indices`` if present, else the only array; several arrays and none
  named ``block_indices`` is an error listing the names.
- ``.pt``: ``torch.load(weights_only=True, map_location="cpu")`` of a tensor, or of a dict holding a tensor
  under ``block_indices`` (or holding exactly one tensor).

The array must be int32 or int64 ``[B, T, H, S]`` of the config's shape, each entry ``-1`` (no block; any
slot may hold it) or a causal block ``0 <= b <= t // block_size``, with no block twice within a (query,
head). Each violation is a one-line :class:`UserError` naming the file and the first offending
``(b, t, h, slot)`` in C order, raised before any GPU time. Edges are counted with FLA's CSR rule
(:func:`edges.effective_edges`); unlike the generated patterns they need not equal the closed form, and
the report says whether they do. The report records the sha256 of the file's bytes, so anyone holding the
file can re-check its statistics.
"""

from __future__ import annotations

import hashlib
import io
import re
import warnings
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.lib.format as npy_format

from ..core.config import MAX_T, Shape
from ..core.config import cu_seqlens as _packed_cu
from ..errors import UserError
from ..io.reader import read_bounded, show_path
from .edges import closed_form_edges, effective_edges
from .fanin import routing_statistics

FORMATS = (".npy", ".npz", ".pt")
NPZ_KEY = "block_indices"


def _one_line(exc: BaseException) -> str:
    r"""The first line of a reader's error, without terminal escapes; torch's refusal of a pickle that is not plain
    tensors (its first line is advice to load an untrusted file, in bold) as what it means here.

    >>> _one_line(ValueError("\x1b[1mbad\x1b[0m header\nmore"))
    'ValueError: bad header'
    """
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]", "", str(exc)).strip().splitlines()
    if text and text[0].startswith("Weights only load failed"):
        return ("it holds objects other than tensors, which torch.load(weights_only=True) refuses to unpickle; save "
                "the routing as a tensor: torch.save(block_indices, PATH)")
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


#: Bytes a routing file may hold beyond its int64 entries: the .npy header, a .npz's zip records, a
#: ``cu_seqlens`` member, a .pt's pickle and record names.
SLACK_BYTES = 1 << 20
#: Dims of a routing array: (B, T, H, S); None = any, up to :data:`MAX_T` for T and 1 for B.
Dims = tuple[int | None, int | None, int | None, int | None]


def max_file_bytes(dims: Dims) -> int:
    """The largest routing file read for ``dims``: its entries as int64 plus :data:`SLACK_BYTES`."""
    B, T, H, S = (d if d is not None else bound for d, bound in zip(dims, (1, MAX_T, 64, 64), strict=True))
    return B * T * H * S * 8 + SLACK_BYTES


def _check_header(shape: tuple[int, ...], dtype: np.dtype, dims: Dims, label: str, suffix: str) -> None:
    """The array a header declares must be int32/int64 ``[B, T, H, S]`` of ``dims``: refused (one line)
    before a byte of its data is read or decompressed."""
    if dtype.hasobject:
        raise UserError(f"{label}: cannot be read as {suffix}: dtype {dtype} (object arrays are never unpickled)")
    if dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise UserError(f"{label}: dtype {dtype}, expected int32 or int64 block indices")
    if len(shape) == 4 and dims[1] is None and not 0 < shape[1] <= MAX_T:
        raise UserError(f"{label}: shape {list(shape)}: T={shape[1]} is outside 1..{MAX_T} (read from its header, "
                        "before its data)")
    want = ([n if d is None else d for n, d in zip(shape, dims, strict=True)] if len(shape) == 4 else
        [d if d is not None else k for d, k in zip(dims, "BTHS", strict=True)])
    if len(shape) != 4 or any(d is not None and n != d for n, d in zip(shape, dims, strict=True)):
        raise UserError(f"{label}: shape {list(shape)}, expected {want} = [B, T, H, S] of the config (read from "
                        "its header, before its data)")


def _npy_header(fh: Any, label: str, suffix: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = npy_format.read_magic(fh)
        read = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
        # numpy's own parser (a literal, never evaluated), bounded
        return read(fh, max_header_size=10_000)  # type: ignore[call-arg]  # numpy's format.pyi lacks max_header_size
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise UserError(f"{label}: cannot be read as {suffix}: {_one_line(exc)}") from None


def _npy_array(fh: Any, size: int, dims: Dims, label: str, suffix: str) -> np.ndarray:
    """One ``.npy`` stream of ``size`` bytes: header checked (:func:`_check_header`), then exactly the bytes
    it declares read (a truncated or padded array is refused)."""
    shape, fortran, dtype = _npy_header(fh, label, suffix)
    _check_header(shape, dtype, dims, label, suffix)
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * dtype.itemsize
    left = size - fh.tell()
    if left != nbytes:
        raise UserError(f"{label}: cannot be read as {suffix}: its header declares {nbytes} bytes of data, the "
                        f"file holds {left} (truncated or padded)")
    try:
        data = fh.read(nbytes + 1)  # to the end: a zip member's CRC is checked there
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise UserError(f"{label}: cannot be read as {suffix}: {_one_line(exc)}") from None
    if len(data) != nbytes:
        raise UserError(f"{label}: cannot be read as {suffix}: {len(data)} bytes of data, its header declares "
                        f"{nbytes}")
    arr = np.frombuffer(data, dtype=dtype, count=count)
    return arr.reshape(shape[::-1]).transpose() if fortran else arr.reshape(shape)


def _npz_member(z: zipfile.ZipFile, name: str, dims: Dims, label: str) -> np.ndarray:
    """Member ``<name>.npy`` of an open ``.npz``: its header (the first few hundred decompressed bytes) checked
    against ``dims`` and against the size the archive declares before the data are decompressed, so a zip
    bomb costs a few hundred bytes, not the gigabytes its header claims."""
    info = z.getinfo(f"{name}.npy")
    try:
        with z.open(info) as member:
            return _npy_array(member, info.file_size, dims, label, ".npz")
    except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, OSError, EOFError) as exc:
        raise UserError(f"{label}: cannot be read as .npz: {_one_line(exc)}") from None


def _npz(path: Path, data: bytes, dims: Dims) -> tuple[np.ndarray, str | None]:
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as exc:
        raise UserError(f"routing file {path}: cannot be read as .npz: {_one_line(exc)}") from None
    with z:
        names = [n.removesuffix(".npy") for n in z.namelist() if n.endswith(".npy")]
        key = NPZ_KEY if NPZ_KEY in names else names[0] if len(names) == 1 else None
        if key is None:
            raise UserError(f"routing file {path}: .npz holds {len(names)} arrays {names}; name the routing "
                            f"'{NPZ_KEY}' or store only one array")
        return _npz_member(z, key, dims, f"routing file {path} [{key}]"), key


def _not_dense(obj: Any) -> str | None:
    """What a loaded tensor is when it is not a plain strided dense CPU tensor (None when it is one)."""
    import torch  # noqa: PLC0415  (deferred: see _pt)

    if obj.is_nested:
        return "a nested tensor"
    if obj.layout != torch.strided:
        return f"a {str(obj.layout).removeprefix('torch.')} layout tensor"
    if obj.is_quantized:
        return f"a quantized tensor ({str(obj.dtype).removeprefix('torch.')})"
    if obj.is_meta:
        return "a meta tensor (shape only, no data)"
    if obj.device.type != "cpu":
        return f"a tensor on device {obj.device}"
    return None


def _pt(path: Path, data: bytes) -> tuple[np.ndarray, str | None]:
    # torch is imported lazily: this module is in the numpy-only routing tier, and torch is needed
    # only for users who bring a .pt file (it is installed wherever the GPU tier runs).
    import torch  # noqa: PLC0415  (deferred on purpose, see above)

    if zipfile.is_zipfile(io.BytesIO(data)):  # torch.save's format: the records' declared sizes bounded first
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            declared = sum(i.file_size for i in z.infolist())
        if declared > 2 * len(data) + SLACK_BYTES:
            raise UserError(f"routing file {path}: cannot be read as .pt: its records declare {declared} bytes, "
                            f"far more than the file's {len(data)} (compressed records); refused before reading")
    # torch warns while loading (old pickle protocols) and while touching odd tensors (a nested tensor's
    # "prototype stage"): the error, if any, is the one line, so no warning is printed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        key = None
        if isinstance(obj, dict):
            tensors = {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}
            if NPZ_KEY in tensors:
                key = NPZ_KEY
            elif len(tensors) == 1:
                key = next(iter(tensors))
            elif not tensors:
                raise UserError(f"routing file {path}: .pt holds a dict of no tensor (keys "
                                f"{sorted(map(str, obj))[:8]}), expected a tensor or a dict with '{NPZ_KEY}'")
            else:
                raise UserError(f"routing file {path}: .pt dict holds tensors {sorted(map(str, tensors))}; name "
                                f"the routing '{NPZ_KEY}' or store only one tensor")
            obj = tensors[key]
        if not isinstance(obj, torch.Tensor):
            raise UserError(f"routing file {path}: .pt holds a {type(obj).__name__}, expected a tensor "
                            f"(or a dict with '{NPZ_KEY}')")
        label = f"routing file {path}" + (f" [{key}]" if key else "")
        if (what := _not_dense(obj)) is not None:
            raise UserError(f"{label}: {what}, expected a dense int32 or int64 [B, T, H, S] tensor "
                            "(torch.save(block_indices, PATH) of a plain tensor)")
        if obj.dtype not in (torch.int32, torch.int64):  # as validate_block_indices says it, before numpy sees it
            raise UserError(f"{label}: dtype {str(obj.dtype).removeprefix('torch.')}, expected int32 or int64 block "
                            "indices")
        return obj.detach().cpu().numpy(), key


def _read_array(path: Path, data: bytes, dims: Dims) -> tuple[Any, str | None]:
    """The raw array (numpy) of a routing file's bytes and the key it came from."""
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return _npy_array(io.BytesIO(data), len(data), dims, f"routing file {path}", ".npy"), None
    if suffix == ".npz":
        return _npz(path, data, dims)
    return _pt(path, data)


def _where(index: int, shape4: tuple[int, ...]) -> str:
    b, t, h, s = (int(i) for i in np.unravel_index(index, shape4))
    return f"(b, t, h, slot)=({b}, {t}, {h}, {s})"


def validate_block_indices(bi: np.ndarray, shape: Shape, label: str) -> None:
    """Raise a one-line UserError at the first problem: dtype, shape, range, causality, duplicates."""
    if not isinstance(bi, np.ndarray) or bi.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        dtype = getattr(bi, "dtype", type(bi).__name__)
        raise UserError(f"{label}: dtype {dtype}, expected int32 or int64 block indices")
    want = (shape.B, shape.T, shape.H, shape.S)
    if tuple(bi.shape) != want:
        raise UserError(f"{label}: shape {list(bi.shape)}, expected {list(want)} = [B, T, H, S] of the config")
    M, BS = shape.num_blocks, shape.block_size
    flat = bi.reshape(-1)
    bad = np.flatnonzero((flat < -1) | (flat >= M))
    if bad.size:
        i = int(bad[0])
        raise UserError(f"{label}: block {int(flat[i])} at {_where(i, want)} is outside -1..M-1 = -1..{M - 1}")
    cur = (np.arange(shape.T, dtype=np.int64) // BS)[None, :, None, None]
    bad = np.flatnonzero((bi.astype(np.int64) > cur).reshape(-1))
    if bad.size:
        i = int(bad[0])
        t = int(np.unravel_index(i, want)[1])
        raise UserError(f"{label}: block {int(flat[i])} at {_where(i, want)} is not causal "
                        f"(query t={t} sees blocks 0..{t // BS})")
    slot = np.arange(shape.S, dtype=np.int64)
    keyed = np.where(bi >= 0, bi.astype(np.int64), -1 - slot)  # -1 padding made unique so it never collides
    srt = np.sort(keyed, axis=-1)
    dup_rows = np.flatnonzero((np.diff(srt, axis=-1) == 0).any(axis=-1).reshape(-1))
    if dup_rows.size:
        r = int(dup_rows[0])
        row = keyed.reshape(-1, shape.S)[r]
        s = next(j for j in range(1, shape.S) if row[j] in row[:j])
        i = r * shape.S + s
        raise UserError(f"{label}: block {int(row[s])} at {_where(i, want)} repeats an earlier slot of the "
                        f"same (query, head); each (query, head) selects distinct blocks")


def read_routing_file(path: str | Path, dims: Dims = (None, None, None, None)) -> tuple[np.ndarray, str | None, bytes]:
    """The raw array of a routing file (not yet validated), the key it came from, and the file's bytes.

    The file is read by the one bounded reader (:func:`nsa_exp.io.reader.read_bounded`: a regular file of
    at most :func:`max_file_bytes` of ``dims``); a ``.npy`` (or a ``.npz`` member) has its header's dtype
    and shape checked against ``dims`` (``(B, T, H, S)``, None = any) before its data are read or
    decompressed, and must hold exactly the bytes its header declares.

    Raises:
        UserError: unsupported suffix, missing/unreadable/oversized file, not a .npy/.npz/.pt, several
            arrays, a header whose dtype or shape is not the routing's.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"routing file {show_path(path)}: a folder; give a {', '.join(FORMATS)} file")
    if path.suffix.lower() not in FORMATS:
        raise UserError(f"routing file {show_path(path)}: unsupported suffix {path.suffix!r}; use one of "
                        f"{', '.join(FORMATS)}")
    shown = show_path(path)
    data = read_bounded(path, f"routing file {shown}", max_file_bytes(dims),
                        not_found=f"routing file {shown} does not exist")
    if path.suffix.lower() == ".npy" and not data.startswith(b"\x93NUMPY"):
        raise UserError(f"routing file {path}: not a .npy file (no NumPy header; "
                        f"{'empty file' if not data else 'first bytes ' + repr(data[:8])}); save it with numpy.save")
    try:
        bi, key = _read_array(path, data, dims)
    except UserError:
        raise
    except Exception as exc:  # a corrupt/foreign .pt: torch's unpickler raises many kinds
        raise UserError(f"routing file {path}: cannot be read as {path.suffix}: {_one_line(exc)}") from None
    return bi, key, data


CU_KEY = "cu_seqlens"


def read_cu_seqlens(path: str | Path, T: int, block_size: int, dims: Dims | None = None) -> np.ndarray | None:
    """The int32 ``cu_seqlens`` stored next to ``block_indices`` in a ``.npz`` routing file (None when absent
    or not a .npz); checked like a ``lengths`` packing (0 .. T, strictly increasing, whole blocks). The file
    is read bounded and the member's header checked before its data (:func:`read_routing_file`): a file
    larger than :func:`max_file_bytes` of ``dims`` (the routing's ``(B, T, H, S)``, as
    :func:`read_routing_file` bounds it; None = any shape) is refused before a byte is read.

    Raises:
        UserError: an oversized file, or the array is not 1-D integers or breaks a packing rule (one line
            naming it).
    """
    path = Path(path)
    if path.suffix.lower() != ".npz":
        return None
    where = f"routing file {show_path(path)} [{CU_KEY}]"
    bound = max_file_bytes(dims if dims is not None else (None, None, None, None))
    data = read_bounded(path, f"routing file {show_path(path)}", bound,
                        not_found=f"routing file {show_path(path)} does not exist")
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as exc:
        raise UserError(f"routing file {path}: cannot be read as .npz: {_one_line(exc)}") from None
    with z:
        if f"{CU_KEY}.npy" not in z.namelist():
            return None
        info = z.getinfo(f"{CU_KEY}.npy")
        limit = (T + 1) * 8 + 4096
        if info.file_size > limit:
            raise UserError(f"{where}: the archive declares {info.file_size} bytes, more than T+1={T + 1} "
                            "boundaries can hold; refused before decompressing")
        try:
            with z.open(info) as member:
                shape, _, dtype = _npy_header(member, where, ".npz")
                if dtype.hasobject or len(shape) != 1:
                    raise UserError(f"{where}: must be 1-D integers starting at 0 (document boundaries), got "
                                    f"{dtype} {list(shape)}")
                cu = np.frombuffer(member.read(limit), dtype=dtype)
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as exc:
            raise UserError(f"{where}: unreadable ({_one_line(exc)})") from None
    if cu.ndim != 1 or cu.size < 2 or cu.size != shape[0] or not np.issubdtype(cu.dtype, np.integer) or cu[0] != 0:
        raise UserError(f"{where}: must be 1-D integers starting at 0 (document boundaries), got {cu.dtype} "
                        f"{list(cu.shape)}")
    if int(cu.min()) < 0 or int(cu.max()) > T:
        raise UserError(f"{where}: boundaries must lie in 0..T={T}, got {int(cu.min())}..{int(cu.max())}")
    lengths = np.diff(cu.astype(np.int64))
    return _packed_cu({"lengths": lengths.tolist()}, T, block_size, where)


def load_routing_file(path: str | Path, shape: Shape) -> tuple[np.ndarray, dict[str, Any]]:
    """Read and validate a routing file: int32 ``[B,T,H,S]`` and ``{path, format, key, dtype, sha256}``."""
    bi, key, data = read_routing_file(path, (shape.B, shape.T, shape.H, shape.S))
    path = Path(path)
    label = f"routing file {path}" + (f" [{key}]" if key else "")
    validate_block_indices(bi, shape, label)
    info = {"path": str(path), "format": path.suffix.lower().lstrip("."), "key": key, "dtype": str(bi.dtype),
            "sha256": hashlib.sha256(data).hexdigest()}
    return bi.astype(np.int32), info


def routing_file_report(path: str | Path, shape: Shape) -> dict[str, Any]:
    """Validate a file and summarise it: edges (CSR rule) vs the closed form, fan-in and CSR-row statistics."""
    return routing_file_with_report(path, shape)[1]


def routing_file_with_report(path: str | Path, shape: Shape) -> tuple[np.ndarray, dict[str, Any]]:
    """The validated int32 routing of a file and its report (:func:`routing_file_report`)."""
    # bounded by the config's shape, as load_routing_file reads it: never more than such a routing can hold
    if read_cu_seqlens(path, shape.T, shape.block_size, (shape.B, shape.T, shape.H, shape.S)) is not None:
        raise UserError(f"routing file {path}: carries '{CU_KEY}' (a packed routing); bench, sweep and routing take "
                        "a packing from the config's packing section, predict --routing-file reads packed files")
    bi, info = load_routing_file(path, shape)
    edges = effective_edges(bi, shape.block_size)
    closed = closed_form_edges(shape)
    equal = edges == closed
    note = ("edges equal the closed form (comparable at equal edges with the generated patterns)" if equal else
            f"edges differ from the closed form by {edges - closed:+d}: latency is not comparable at equal edges")
    return bi, {**info, "edges": edges, "closed_form_edges": closed, "equal_to_closed_form": equal, "note": note,
                **routing_statistics(bi, shape.block_size)}


def file_pattern_name(path: str | Path) -> str:
    """The pattern name a routing file is timed under: ``file:<stem>`` (characters outside
    ``[A-Za-z0-9_.=-]`` become ``_``).

    >>> file_pattern_name("runs/my model (layer 3).npy")
    'file:my_model__layer_3_'
    """
    return "file:" + re.sub(r"[^A-Za-z0-9_.=-]", "_", Path(path).stem)


def pattern_names(paths: Sequence[str]) -> dict[str, str]:
    """``{file:<stem>: path}`` in the order given (:func:`file_pattern_name`).

    Raises:
        UserError: two files with one pattern name (one line naming both).
    """
    names: dict[str, str] = {}
    for path in paths:
        name = file_pattern_name(path)
        if name in names:
            raise UserError(f"--routing-file {path}: pattern name {name!r} is taken by {names[name]}; rename one file")
        names[name] = str(path)
    return names


def file_routings(paths: Sequence[str], shape: Shape, require_equal: bool = False,
                  ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
    """Every ``--routing-file`` read and validated at ``shape`` (before any GPU work): the routings and their
    reports, both keyed ``file:<stem>``. ``require_equal`` (``--require-equal-edges``): every file's edges
    must equal the closed form (and so each other).

    Raises:
        UserError: a broken file (one line naming the first offending (b, t, h, slot)), two files with
            the same pattern name, or unequal edges under ``require_equal``.
    """
    routings: dict[str, np.ndarray] = {}
    reports: dict[str, dict[str, Any]] = {}
    for name, path in pattern_names(paths).items():
        routings[name], reports[name] = routing_file_with_report(path, shape)
    unequal = {r["path"]: r["edges"] for r in reports.values() if not r["equal_to_closed_form"]}
    if require_equal and unequal:
        detail = ", ".join(f"{p}={c}" for p, c in unequal.items())
        raise UserError(f"--require-equal-edges: closed form {closed_form_edges(shape)} edges, but {detail}")
    return routings, reports


def format_files_table(reports: Sequence[dict[str, Any]]) -> str:
    """Human-readable table of routing file reports."""
    lines = [f"{'routing file':<28} {'edges':>11} {'= closed':>8} {'fanin mean':>10} {'max':>7} {'p99':>8} "
             f"{'cv':>6} {'gini':>6}  sha256"]
    for r in reports:
        f = r["fanin"]
        name = Path(r["path"]).name + (f"[{r['key']}]" if r["key"] else "")
        lines.append(f"{name:<28} {r['edges']:>11,} {'yes' if r['equal_to_closed_form'] else 'NO':>8} "
                     f"{f['mean']:>10.1f} {f['max']:>7.0f} {f['p99']:>8.1f} {f['cv']:>6.3f} {f['gini']:>6.3f}  "
                     f"{r['sha256'][:16]}")
    lines += [f"note {Path(r['path']).name}: {r['note']}" for r in reports if not r["equal_to_closed_form"]]
    return "\n".join(lines)
