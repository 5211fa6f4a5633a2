#!/usr/bin/env bash
# Run a command on one GPU with the environment every GPU task requires.
#   scripts/run_h100.sh invoke bench
#   scripts/run_h100.sh make check
#   CUDA_VISIBLE_DEVICES=1 NSA_EXP_CACHE=/scratch/nsa scripts/run_h100.sh python -m nsa_exp smoke
# GPU: CUDA_VISIBLE_DEVICES (default 0). Caches: $NSA_EXP_CACHE (default /var/tmp/$USER/nsa-exp).
set -euo pipefail
if [ "$#" -eq 0 ]; then
  echo "usage: scripts/run_h100.sh COMMAND [ARGS...]   e.g. scripts/run_h100.sh invoke bench" >&2
  exit 2
fi
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
cache="${NSA_EXP_CACHE:-/var/tmp/${USER:-$(id -un)}/nsa-exp}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$cache/triton}"
export TRITON_F32_DEFAULT=ieee
export FLA_CACHE_RESULTS=0
export FLA_DISABLE_BACKEND_DISPATCH=1
mkdir -p "$TRITON_CACHE_DIR"
if ! command -v "$1" > /dev/null 2>&1; then
  hint="install it or put it on PATH"
  [ "$1" = ncu ] && hint="install NVIDIA Nsight Compute (ships with the CUDA toolkit) and put its ncu on PATH"
  echo "error: $1: command not found; $hint" >&2
  exit 2
fi
exec "$@"
