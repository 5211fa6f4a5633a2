"""Compile one small Triton kernel for an H100/H200 (sm_90) and list $TRITON_CACHE_DIR: no GPU needed.

Triton lowers the kernel to PTX and assembles the cubin with the ptxas its wheel ships, then stores
every stage in its cache, as it does for FLA's kernels on a GPU. The container check
(scripts/container.sh) runs this in the GPU services' volume layout to show that the Triton cache
volume is where Triton writes, is writable by the user the entry point picked, and outlives the
container.

    python scripts/triton_cache_probe.py          # prints one line per file in the cache, then a summary

Exit 2 (one line) when TRITON_CACHE_DIR is unset or not a directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def _scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, 2.0 * tl.load(x_ptr + offsets, mask=mask), mask=mask)


def main() -> int:
    cache = Path(os.environ.get("TRITON_CACHE_DIR", ""))
    if not os.environ.get("TRITON_CACHE_DIR") or not cache.is_dir():
        print(f"error: TRITON_CACHE_DIR={os.environ.get('TRITON_CACHE_DIR', '<unset>')} is not a directory",
              file=sys.stderr)
        return 2
    source = ASTSource(_scale, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                       constexprs={"BLOCK": 128})
    kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32))
    files = sorted(p for p in cache.rglob("*") if p.is_file())
    for p in files:
        st = p.stat()
        print(f"{p}  {st.st_size} bytes  uid={st.st_uid} gid={st.st_gid}")
    print(f"triton {triton.__version__}: compiled {kernel.name} for sm_90 ({len(kernel.asm['cubin'])}-byte cubin); "
          f"{len(files)} file(s) in {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
