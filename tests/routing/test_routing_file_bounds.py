"""A routing file is bounded by the config's shape before a byte is read (every format, the ``cu_seqlens`` read of a
``.npz`` included), and an odd ``.pt`` (nested, sparse, quantized, meta tensors; no tensor) is one ``error:`` line with
no torch warning before it. Run as ``python -m nsa_exp routing`` children, so stderr is what a user sees."""

from __future__ import annotations

import json
import os
import time
import warnings

import numpy as np
import pytest
import torch

from nsa_exp.core.config import Pattern, Shape
from nsa_exp.errors import UserError
from nsa_exp.routing.files import max_file_bytes, read_cu_seqlens, routing_file_with_report
from nsa_exp.routing.patterns import generate_routing
from tests.helpers import primary_config_dict, run_cli

T = 2048  # M = 32 >= S = 16: a fast config


def _config(tmp_path) -> tuple[str, Shape]:
    cfg = primary_config_dict()
    cfg["shape"]["T"] = T
    path = tmp_path / "small.json"
    path.write_text(json.dumps(cfg))
    return str(path), Shape(**cfg["shape"])


def _one_error_line(proc) -> str:
    """Exit 2 and exactly one stderr line (no warning, no traceback): that line."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: routing file ") and "internal error" not in lines[0], lines[0]
    return lines[0]


def test_an_oversized_sparse_npz_is_refused_at_the_shape_bound_before_reading(tmp_path):
    """An attacker's 3 GiB sparse .npz was read whole (bounded only by any routing's 32 GiB: ~10 s, 3.2 GB resident,
    then 'File is not a zip file'; MemoryError as 'internal error' under a ulimit) by the cu_seqlens read before
    its size was checked against the config's shape; now refused at once at that shape's bound, as a .npy is."""
    config, shape = _config(tmp_path)
    path = tmp_path / "x.npz"
    path.touch()
    os.truncate(path, 3 << 30)  # sparse: no disk, no memory
    start = time.monotonic()
    proc = run_cli("routing", "--config", config, "--routing-file", str(path))
    elapsed = time.monotonic() - start
    line = _one_error_line(proc)
    bound = max_file_bytes((shape.B, shape.T, shape.H, shape.S))
    assert str(path) in line and f"more than the {bound} bytes" in line and "refused before reading" in line, line
    assert elapsed < 5, elapsed


def test_the_cu_seqlens_read_is_bounded_by_the_dims_given_and_packed_files_still_read(tmp_path):
    """read_cu_seqlens refuses a file over the bound of the dims it is given; a packed .npz within it is read as
    before (and still refused by routing with the 'carries cu_seqlens' line); without dims the bound is any
    routing's."""
    _, shape = _config(tmp_path)
    dims = (shape.B, shape.T, shape.H, shape.S)
    cu = np.array([0, 1024, 2048], dtype=np.int32)
    np.savez(tmp_path / "packed.npz", block_indices=generate_routing(Pattern("local"), shape, 0), cu_seqlens=cu)
    for bound in (dims, None):
        got = read_cu_seqlens(tmp_path / "packed.npz", T, shape.block_size, bound)
        assert got is not None and got.tolist() == cu.tolist()
    with pytest.raises(UserError, match="carries 'cu_seqlens'"):
        routing_file_with_report(tmp_path / "packed.npz", shape)
    big = tmp_path / "big.npz"
    big.touch()
    os.truncate(big, max_file_bytes(dims) + 1)
    with pytest.raises(UserError, match=f"more than the {max_file_bytes(dims)} bytes"):
        read_cu_seqlens(big, T, shape.block_size, dims)


def test_a_nested_tensor_pt_is_one_error_line_without_torch_warnings(tmp_path):
    """A .pt of a nested tensor printed torch's 'prototype stage' UserWarning (2 lines) before 'error: ...
    RuntimeError: Internal error: NestedTensorImpl doesn't support sizes'; now one line saying what it holds."""
    config, _ = _config(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.save(torch.nested.nested_tensor([torch.zeros(3, dtype=torch.int32)]), tmp_path / "n.pt")
    line = _one_error_line(run_cli("routing", "--config", config, "--routing-file", str(tmp_path / "n.pt")))
    assert "a nested tensor" in line and "dense int32 or int64 [B, T, H, S] tensor" in line, line


def test_a_sparse_tensor_pt_is_one_error_line_naming_its_layout(tmp_path):
    """A sparse COO tensor (saved at the config's shape) is refused as a sparse layout, not as numpy's advice to
    call to_dense()."""
    config, shape = _config(tmp_path)
    sparse = torch.zeros(shape.B, shape.T, shape.H, shape.S, dtype=torch.int32).to_sparse()
    torch.save(sparse, tmp_path / "s.pt")
    line = _one_error_line(run_cli("routing", "--config", config, "--routing-file", str(tmp_path / "s.pt")))
    assert "sparse_coo layout tensor" in line and "expected a dense int32 or int64" in line, line


@pytest.mark.parametrize(("content", "fragment"), [
    (lambda: {"a": 1, "b": "x"}, "a dict of no tensor (keys ['a', 'b'])"),
    (lambda: [torch.zeros(2, dtype=torch.int32)], "holds a list, expected a tensor"),
    (lambda: torch.quantize_per_tensor(torch.zeros(4), 0.1, 0, torch.qint8), "a quantized tensor (qint8)"),
    (lambda: torch.empty(1, T, 4, 16, dtype=torch.int32, device="meta"), "a meta tensor"),
    (lambda: {"block_indices": torch.zeros(1, T, 4, 16, dtype=torch.bfloat16)}, "[block_indices]: dtype bfloat16"),
], ids=["dict-without-tensor", "list", "quantized", "meta", "bfloat16"])
def test_other_odd_pt_contents_are_one_line_each(tmp_path, content, fragment):
    config, _ = _config(tmp_path)
    with warnings.catch_warnings():  # torch's deprecation of quantized tensors: not what is tested
        warnings.simplefilter("ignore")
        torch.save(content(), tmp_path / "odd.pt")
    line = _one_error_line(run_cli("routing", "--config", config, "--routing-file", str(tmp_path / "odd.pt")))
    assert fragment in line, line
