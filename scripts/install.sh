#!/usr/bin/env bash
# The one install script: CI, developers, the H100 runs and the Dockerfile all use it.
#   bash scripts/install.sh cpu      # .venv with the CPU test toolchain (requirements-ci.txt)
#   bash scripts/install.sh h100     # .venv with the H100 toolchain (requirements-h100.txt)
#   NSA_EXP_VENV=/opt/venv bash scripts/install.sh h100    # another venv location (the container)
#   NSA_EXP_VENV=system bash scripts/install.sh h100       # into the current python (no venv)
#   bash scripts/install.sh cpu --requirements-only        # the pinned toolchain alone, no FLA, no project
#                                                          # (the Dockerfile's first layer; needs only this
#                                                          # script and the requirements files)
# FLA at commit 0a9b9f222e86b9a895c2447767e9b4cce6c8d530: the git submodule
# third_party/flash-linear-attention when it is populated, else fla-core==0.5.2 from PyPI (its fla/
# files hash to the commit's blobs; `invoke check` proves which sources were imported).
set -euo pipefail
mode="${1:-}"
case "$mode" in
  cpu) reqs=requirements-ci.txt ;;
  h100) reqs=requirements-h100.txt ;;
  *) echo "usage: bash scripts/install.sh cpu|h100 [--requirements-only]" >&2; exit 2 ;;
esac
case "${2:-}" in
  "") only_requirements=0 ;;
  --requirements-only) only_requirements=1 ;;
  *) echo "usage: bash scripts/install.sh cpu|h100 [--requirements-only]" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="${NSA_EXP_VENV:-.venv}"
if [ "$venv" = system ]; then
  py="${PYTHON:-python3}"
else
  [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
  py="$venv/bin/python"
fi
"$py" -m pip install --quiet --upgrade pip
# --no-compile, then compile_site: pip byte-compiles every module it installs one file at a time (25 of the 41 s
# the CPU toolchain took to install on 2 CPUs); compileall writes the same .pyc files on every core (14 s there;
# docs/METHOD.md, CI's own time). Like pip's step it passes over a file that does not compile (torch ships one
# written for Python 3.12 only: torch/testing/_internal/py312_intrinsics.py), so its exit status is not checked.
# The packages' own test suites (folders named test or tests: 2,969 of the CPU toolchain's 10,782 modules, pandas'
# 1,112 of them) are never imported here and are left out (-x): 14.9 -> 11.3 s on 2 CPUs (docs/METHOD.md, CI's own
# time, eleventh session); a module left out still imports, compiled in memory.
compile_site() {
  local dir skip
  for dir in $("$py" -c 'import sysconfig; print(*sorted({sysconfig.get_path(k) for k in ("purelib", "platlib")}))'); do
    # -x is searched in each file's full path: anchored at the site folder, so a venv under a folder named tests
    # still compiles
    skip="^$("$py" -c 'import re, sys; print(re.escape(sys.argv[1]))' "$dir")/(.+/)?tests?/"
    "$py" -m compileall -q -j 0 -x "$skip" "$dir" > /dev/null || true
  done
}
"$py" -m pip install --quiet --no-compile -r "$reqs"
if [ "$only_requirements" = 1 ]; then
  compile_site
  echo "install.sh: done ($mode, requirements only) -> $py"
  exit 0
fi
sub=third_party/flash-linear-attention
if [ -f "$sub/fla/__init__.py" ]; then
  echo "install.sh: FLA from the submodule $sub"
  "$py" -m pip install --quiet --no-compile --no-deps -e "$sub"
else
  echo "install.sh: submodule $sub not populated; FLA from PyPI fla-core==0.5.2"
  "$py" -m pip install --quiet --no-compile --no-deps fla-core==0.5.2
fi
"$py" -m pip install --quiet --no-compile --no-deps -e .
compile_site
echo "install.sh: done ($mode) -> $py"
