#!/usr/bin/env bash
# The H200 runs of a development session, as one script per device call (each ends well inside 10 min).
#   scripts/h200_session.sh part1 OUTDIR   # check, smoke (with the M > S oracle gate), 20-round bench, sweeps
#   scripts/h200_session.sh part2 OUTDIR   # autotune matrix, the two tuning arms, the what-if arms
#   scripts/h200_session.sh whatif OUTDIR  # the what-if arms alone
#   scripts/h200_session.sh calib_bq4 OUTDIR  # the BQ=4 calibration sweep (configs/sweep_calib_bq4_h200.json)
#   scripts/h200_session.sh formal OUTDIR  # issue 14: check, smoke, the formal 150-round bench (CUPTI pass included)
#   scripts/h200_session.sh formal_bench OUTDIR  # the formal bench + repeat alone
#   scripts/h200_session.sh formal2 OUTDIR # issue 14: the independent repeat (configs replayed), ncu dK/dV and dQ;
#                                          # issue 10: the skew sweep's fla-topk points (resume)
#   scripts/h200_session.sh files OUTDIR   # issue 10: bench with a routing file; issue 15: the packing sweep
#   scripts/h200_session.sh x2 OUTDIR      # issue 10: a small sweep over two GPUs (submitit local executor)
#   scripts/h200_session.sh engine OUTDIR  # issue 21: check, smoke, 20-round bench + validate + compare to the formal
#   scripts/h200_session.sh engine_stop OUTDIR  # issue 21: the formal bench under --stop-rule + validate + compare
#   scripts/h200_session.sh doors30 OUTDIR # issue 30: the GATED commands' doors (environment and device-node gates
#                                          # at the door) on a GPU: smoke, a 3-round bench, profile-stage, a what-if
#   scripts/h200_session.sh kinds29 OUTDIR # issue 29: check, smoke, bench --stop-rule, compare, ncu dK/dV, validate
#   scripts/h200_session.sh peers OUTDIR   # issue 31: peer-bench --stop-rule at T=8192 (at most 100 rounds), then
#                                          # T=32768 (configs/peers_h200*.json) if it validates; validate
#   scripts/h200_session.sh peers_long OUTDIR  # issue 31: peer-bench at T=131072 (local, sink-heavy); validate
#   scripts/h200_session.sh peers_formal OUTDIR  # issue 31: on one machine, the formal bench and FLA alone through
#                                          # peer-bench (PAIR_REPS rounds each, default 150), compared: full_bwd
#                                          # against FLA's bwd
#   scripts/h200_session.sh probe_peers OUTDIR  # issue 31: the peers not timed, called through their public APIs at
#                                          # the primary shape (scripts/probe_not_timed.py; wheels carried in .whl-probe/)
#   scripts/h200_session.sh cost OUTDIR    # issue 30: the formal bench tuned afresh into the tuning cache, then replayed
#   scripts/h200_session.sh cost_stop OUTDIR  # issue 30: the formal config under --stop-rule, warm tuning cache
#   scripts/h200_session.sh cost_pair OUTDIR  # issue 30: the formal bench and the stop-rule bench on one machine
#   scripts/h200_session.sh penalty OUTDIR  # issue 32: the penalty map, T=32768 (B, H, G axes), then along T;
#                                          # each sweep stopped before the call's limit (PENALTY_TIMEOUT_S, resumable)
#   scripts/h200_session.sh release OUTDIR # issue 22: the release arm (NOT the pinned experiment): fla-core 0.5.2
#                                          # (control), 0.6.0 (also T=8192, 131072), 0.5.1 from the wheels in .whl-fla/;
#                                          # RELEASES="0.5.1" runs a subset, RELEASE_ARGS="--overwrite" replaces results
#   scripts/h200_session.sh layer OUTDIR   # issue 32: the pinned 0.5.2 with the nsa_layer call (compression +
#                                          # selection branches), T = 8192, 32768, 131072 (configs/release_layer_h200.json)
#   scripts/h200_session.sh layer_shapes OUTDIR  # the same at T=32768 for B2 H4, B8 H4, B1 H16 (..._shapes_h200.json)
# Results land under results/ and docs/figures/ of this tree (--publish: the published results, on purpose;
# --overwrite: a re-run replaces them); OUTDIR gets one tarball of them (and of OUTDIR's own logs, JSON and CSV
# files) after each step,
# so a step that fails or runs out of time still leaves the earlier ones. The caller sets NSA_EXP_GIT_SHA.
# Every step runs; the script exits with the first failed step's exit code (0 only when every step passed).
set -uo pipefail
if [ "$#" -ne 2 ]; then
  echo "usage: scripts/h200_session.sh PART OUTDIR (PART: one of the parts listed at the top of this script)" >&2
  exit 2
fi
part="$1" out="$2"
# the parts are this script's case labels below; a PART of none is refused before anything is made
parts=$(sed -n 's/^  \([a-z0-9_]*\))\( .*\)\{0,1\}$/\1/p' "$0" | tr '\n' ' ')
case " $parts " in
  *" $part "*) ;;
  *) echo "error: PART $part: no such part; one of: ${parts% }" >&2; exit 2 ;;
esac
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac  # OUTDIR relative to where the script was called from
if [ -e "$out" ] && [ ! -d "$out" ]; then echo "error: OUTDIR $out: exists and is not a folder; pass a folder" >&2; exit 2; fi
cd "$(dirname "$0")/.."
export TRITON_F32_DEFAULT=ieee FLA_CACHE_RESULTS=0 FLA_DISABLE_BACKEND_DISPATCH=1 PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-/tmp/nsa-exp-triton}"
# the interpreter: $PYTHON as given, else the project's .venv (bash scripts/install.sh h100), else python3 on PATH;
# one that cannot import the project is refused before any step runs
py="${PYTHON:-python3}"
[ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ] && py=.venv/bin/python
if ! "$py" -c "import jsonschema, tabulate, nsa_exp.cli" > /dev/null 2>&1; then
  echo "error: $py cannot import the project and its packages (jsonschema, tabulate); run bash scripts/install.sh h100 first, or set PYTHON to an interpreter that can" >&2
  exit 2
fi
failed_rc=0 failed_step=""
mkdir -p "$out" || { echo "error: OUTDIR $out cannot be created; pass a writable folder" >&2; exit 2; }
step() {  # step NAME CMD...: run, log, pack
  local name="$1"; shift
  local t0=$SECONDS
  echo "=== $name: $*"
  "$@" > "$out/$part.$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$part.$name.log"
  echo "=== $name rc=$rc in $((SECONDS - t0)) s"
  if [ "$rc" -ne 0 ] && [ "$failed_rc" -eq 0 ]; then failed_rc=$rc failed_step=$name; fi
  # the device tool returns a handful of files from OUTDIR: everything a step wrote there travels in this one tarball
  tar czf "$out/$part.tgz" results docs/figures "$out"/*.log "$out"/*.json "$out"/*.csv 2>/dev/null
}
case "$part" in
  part1)
    step check "$py" -m nsa_exp check --config configs/e1_h200.json --output results/reports/e1_h200_check.json --publish --overwrite
    step smoke "$py" -m nsa_exp smoke --config configs/e1_h200.json --output results/reports/e1_h200_smoke.json --publish --overwrite
    step bench "$py" -m nsa_exp bench --config configs/e1_h200.json --repetitions 20 --name e1_h200_post \
      --output results/raw/e1_h200_post.json --summary results/summaries/e1_h200_post.csv --publish --overwrite
    step sweep_skew "$py" -m nsa_exp sweep --config configs/sweep_skew_h200.json --publish --overwrite
    step sweep_T "$py" -m nsa_exp sweep --config configs/sweep_T_h200.json --publish --overwrite
    ;;
  whatif)
    step whatif "$py" -m nsa_exp whatif --config configs/e1_h200.json --patterns sink-heavy,zipf \
      --max-fanin 4096,8192 --layouts split,split-heavy-first --rounds 10 --output results/whatif/e1_h200_whatif.json --publish --overwrite
    ;;
  calib_bq4)
    step sweep_calib_bq4 "$py" -m nsa_exp sweep --config configs/sweep_calib_bq4_h200.json --publish --overwrite
    ;;
  part2)
    step matrix "$py" -m nsa_exp autotune-matrix --config configs/e1_h200.json --rounds 15 \
      --output results/autotune/e1_h200.json --publish --overwrite
    step whatif "$py" -m nsa_exp whatif --config configs/e1_h200.json --patterns sink-heavy,zipf \
      --max-fanin 4096,8192 --layouts split,split-heavy-first --rounds 10 --output results/whatif/e1_h200_whatif.json --publish --overwrite
    step arm_per_pattern "$py" -m nsa_exp bench --config configs/e1_h200.json --tune per-pattern --repetitions 15 \
      --output results/raw/e1_h200_tune_per-pattern.json --summary results/summaries/e1_h200_tune_per-pattern.csv --publish --overwrite
    step arm_sink_heavy "$py" -m nsa_exp bench --config configs/e1_h200.json --tune-on sink-heavy --repetitions 15 \
      --output results/raw/e1_h200_tune_sink-heavy.json --summary results/summaries/e1_h200_tune_sink-heavy.csv --publish --overwrite
    ;;
  formal)
    step check "$py" -m nsa_exp check --config configs/e1_h200.json --output results/reports/e1_h200_check.json --publish --overwrite
    step smoke "$py" -m nsa_exp smoke --config configs/e1_h200.json --output results/reports/e1_h200_smoke.json --publish --overwrite
    step bench "$py" -m nsa_exp bench --config configs/e1_h200.json --name e1_h200 \
      --output results/raw/e1_h200.json --summary results/summaries/e1_h200.csv --publish --overwrite
    ;;
  formal_bench)  # the formal bench and its repeat alone (re-run after the CUPTI aggregation fix)
    step bench "$py" -m nsa_exp bench --config configs/e1_h200.json --name e1_h200 \
      --output results/raw/e1_h200.json --summary results/summaries/e1_h200.csv --publish --overwrite
    step repeat "$py" -m nsa_exp bench --config configs/e1_h200.json --name e1_h200_repeat \
      --autotune-from results/raw/e1_h200.json \
      --output results/raw/e1_h200_repeat.json --summary results/summaries/e1_h200_repeat.csv --publish --overwrite
    ;;
  formal2)
    step repeat "$py" -m nsa_exp bench --config configs/e1_h200.json --name e1_h200_repeat \
      --autotune-from results/raw/e1_h200.json \
      --output results/raw/e1_h200_repeat.json --summary results/summaries/e1_h200_repeat.csv --publish --overwrite
    step ncu_dkv "$py" -m nsa_exp ncu --config configs/e1_h200.json --stage dkv_core --publish --overwrite
    step ncu_dq "$py" -m nsa_exp ncu --config configs/e1_h200.json --stage dq_core --publish --overwrite
    step sweep_topk "$py" -m nsa_exp sweep --config configs/sweep_skew_h200.json --publish --overwrite
    ;;
  files)
    step routing_save "$py" -m nsa_exp routing --config configs/e1_h200.json --save /tmp/nsa_routings
    step bench_file "$py" -m nsa_exp bench --config configs/e1_h200.json --routing-file /tmp/nsa_routings/zipf.npy \
      --repetitions 10 --autotune-from results/raw/e1_h200.json --cupti-rounds 0 \
      --output results/raw/e1_h200_file.json --summary results/summaries/e1_h200_file.csv --publish --overwrite
    step validate_file "$py" -m nsa_exp validate results/raw/e1_h200_file.json --routing-file /tmp/nsa_routings/zipf.npy
    step sweep_packing "$py" -m nsa_exp sweep --config configs/sweep_packing_h200.json --publish --overwrite
    ;;
  x2)
    nvidia-smi -L > "$out/x2.gpus.log" 2>&1
    CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0,1}" step sweep_x2 "$py" -m nsa_exp sweep \
      --config configs/sweep_x2_h200.json --executor local --publish --overwrite
    ;;
  engine)  # issue 21: the engine's HEAD against the formal run (a 20-round bench); every file in OUTDIR
    step check "$py" -m nsa_exp check --config configs/e1_h200.json --output "$out/e1_h200_check.json"
    step smoke "$py" -m nsa_exp smoke --config configs/e1_h200.json --output "$out/e1_h200_smoke.json"
    step bench20 "$py" -m nsa_exp bench --config configs/e1_h200.json --repetitions 20 --name e1_h200_engine20 \
      --output "$out/e1_h200_engine20.json" --summary "$out/e1_h200_engine20.csv"
    step validate20 "$py" -m nsa_exp validate "$out/e1_h200_engine20.json" "$out/e1_h200_engine20.csv"
    step compare20 "$py" -m nsa_exp compare results/raw/e1_h200.json "$out/e1_h200_engine20.json" \
      --output "$out/e1_h200_vs_engine20.json"
    ;;
  doors30)  # issue 30: arguments.GATED's commands pass their door's environment and device-node gates on a GPU and
    # run; the config of the GPU found (an H100 gets e1_h100, its bench result replayed); every file in OUTDIR
    ls -l /dev/nvidiactl /dev/dxg > "$out/device_nodes.log" 2>&1
    name=e1_h200; nvidia-smi -L 2>/dev/null | grep -q H100 && name=e1_h100
    step smoke "$py" -m nsa_exp smoke --config "configs/$name.json" --output "$out/${name}_smoke.json"
    step bench3 "$py" -m nsa_exp bench --config "configs/$name.json" --repetitions 3 --cupti-rounds 0 \
      --name "${name}_doors30" --output "$out/${name}_doors30.json" --summary "$out/${name}_doors30.csv"
    step profile "$py" -m nsa_exp profile-stage --config "configs/$name.json" --pattern local --stage dq_core \
      --benchmark-result "results/raw/$name.json"
    step whatif "$py" -m nsa_exp whatif --config "configs/$name.json" --patterns sink-heavy --max-fanin 8192 \
      --layouts split --rounds 3 --benchmark-result "results/raw/$name.json" --output "$out/${name}_whatif_doors30.json"
    step validate "$py" -m nsa_exp validate "$out/${name}_smoke.json" "$out/${name}_doors30.json" \
      "$out/${name}_doors30.csv" "$out/${name}_whatif_doors30.json"
    ;;
  kinds29)  # issue 29: the kind modules on the GPU (check, smoke, bench --stop-rule, validate, compare, ncu dK/dV)
    step check "$py" -m nsa_exp check --config configs/e1_h200.json --output "$out/e1_h200_check.json"
    step smoke "$py" -m nsa_exp smoke --config configs/e1_h200.json --output "$out/e1_h200_smoke.json"
    step bench_stop "$py" -m nsa_exp bench --config configs/e1_h200.json --stop-rule --name e1_h200_kinds29 \
      --output "$out/e1_h200_kinds29.json" --summary "$out/e1_h200_kinds29.csv"
    step compare "$py" -m nsa_exp compare results/raw/e1_h200.json "$out/e1_h200_kinds29.json" \
      --output "$out/e1_h200_vs_kinds29.json"
    step ncu_dkv "$py" -m nsa_exp ncu --config configs/e1_h200.json --stage dkv_core
    cp -r runs "$out/runs" 2>/dev/null
    step validate "$py" -m nsa_exp validate "$out"/e1_h200_*.json "$out/e1_h200_kinds29.csv" "$out"/runs/*/ncu/*.json
    ;;
  peers)  # issue 31: FLA, FlexAttention and dense SDPA on the same routings (results/peers/): T=8192 under the stop
          # rule (at most 100 rounds), validated before T=32768 (20 rounds) is started
    step peers_T8192 "$py" -m nsa_exp peer-bench --config configs/peers_h200_T8192.json --stop-rule --repetitions 100 \
      --publish --overwrite
    step validate_T8192 "$py" -m nsa_exp validate results/peers/peers_h200_T8192.json
    if [ "$failed_rc" -eq 0 ]; then
      step peers_T32768 "$py" -m nsa_exp peer-bench --config configs/peers_h200.json --publish --overwrite
      step validate "$py" -m nsa_exp validate results/peers/peers_h200.json
    fi
    ;;
  peers_long)  # issue 31: T=131072, local and sink-heavy
    step peers_T131072 "$py" -m nsa_exp peer-bench --config configs/peers_h200_T131072.json --publish --overwrite
    step validate "$py" -m nsa_exp validate results/peers/peers_h200_T131072.json
    ;;
  peers_formal)  # issue 31: does the peer arm's FLA row reproduce bench's full_bwd? On one machine, one after the
                 # other: the formal bench (tuned afresh) and FLA alone through peer-bench, PAIR_REPS rounds each
                 # (default 150, the formal protocol's)
    reps="${PAIR_REPS:-150}"
    step bench_pair "$py" -m nsa_exp bench --config configs/e1_h200.json --name e1_h200_pair --repetitions "$reps" \
      --output results/raw/e1_h200_pair.json --summary results/summaries/e1_h200_pair.csv --publish --overwrite
    step peers_fla_pair "$py" -m nsa_exp peer-bench --config configs/e1_h200.json --peers fla --repetitions "$reps" \
      --output results/peers/e1_h200_fla_pair.json --publish --overwrite
    step compare "$py" -m nsa_exp compare results/raw/e1_h200_pair.json results/peers/e1_h200_fla_pair.json \
      --publish --overwrite
    step validate "$py" -m nsa_exp validate results/peers/e1_h200_fla_pair.json results/raw/e1_h200_pair.json \
      results/compare/e1_h200_pair_vs_e1_h200_fla_pair.json
    ;;
  probe_peers)  # issue 31: evidence for core.peers.NOT_TIMED (what each peer not timed does at the primary shape)
    step probe "$py" scripts/probe_not_timed.py
    ;;
  engine_stop)  # issue 21: the formal config under the stop rule (its wall_seconds against the formal run's)
    step bench_stop "$py" -m nsa_exp bench --config configs/e1_h200.json --stop-rule --name e1_h200_stop \
      --output "$out/e1_h200_stop.json" --summary "$out/e1_h200_stop.csv"
    step validate_stop "$py" -m nsa_exp validate "$out/e1_h200_stop.json" "$out/e1_h200_stop.csv"
    step compare_stop "$py" -m nsa_exp compare results/raw/e1_h200.json "$out/e1_h200_stop.json" \
      --output "$out/e1_h200_vs_stop.json"
    ;;
  cost)  # issue 30: what a run costs -- the formal bench tuned afresh (filling the tuning cache), then again
         # replaying it (warm cache), each with its phases; TUNING_CACHE: a cache folder carried in (default OUTDIR/tuning)
    cache="${TUNING_CACHE:-$out/tuning}"
    step bench_cold "$py" -m nsa_exp bench --config configs/e1_h200.json --name e1_h200_cost_cold \
      --tuning-cache "$cache" --output "$out/e1_h200_cost_cold.json" --summary "$out/e1_h200_cost_cold.csv"
    step bench_warm "$py" -m nsa_exp bench --config configs/e1_h200.json --name e1_h200_cost_warm \
      --tuning-cache "$cache" --output "$out/e1_h200_cost_warm.json" --summary "$out/e1_h200_cost_warm.csv"
    step validate_cost "$py" -m nsa_exp validate "$out"/e1_h200_cost_*.json "$out"/e1_h200_cost_*.csv
    step cost "$py" -m nsa_exp cost "$out"/e1_h200_cost_cold.json "$out"/e1_h200_cost_warm.json
    ;;
  cost_stop)  # issue 30: the formal config under --stop-rule with the warm tuning cache (TUNING_CACHE), its phases;
              # validated and compared with the formal run (and with FORMAL, a formal run's JSON, when set).
              # NAME: the result's name (default e1_h200_cost_stop)
    name="${NAME:-e1_h200_cost_stop}"
    # each step's log is named after the result too, so that two runs into one OUTDIR keep both
    step "bench_$name" "$py" -m nsa_exp bench --config configs/e1_h200.json --stop-rule --name "$name" \
      --tuning-cache "${TUNING_CACHE:-$out/tuning}" --output "$out/$name.json" --summary "$out/$name.csv"
    step "validate_$name" "$py" -m nsa_exp validate "$out/$name.json" "$out/$name.csv"
    step "compare_$name" "$py" -m nsa_exp compare results/raw/e1_h200.json "$out/$name.json" \
      --output "$out/e1_h200_vs_$name.json"
    if [ -n "${FORMAL:-}" ]; then  # also against a formal run of this GPU model replaying the same tuning cache
      step "compare_formal_$name" "$py" -m nsa_exp compare "$FORMAL" "$out/$name.json" \
        --output "$out/$(basename "$FORMAL" .json)_vs_$name.json"
    fi
    step "cost_$name" "$py" -m nsa_exp cost "$out/$name.json"
    ;;
  cost_pair)  # issue 30: on one machine, the formal bench replaying the tuning cache (TUNING_CACHE), then the same
              # config under --stop-rule; the stop run compared with this machine's formal run and with the published one.
              # GPU: h200 (default) or h100 -- configs/e1_$GPU.json and results/raw/e1_$GPU.json, result names e1_$GPU_$PAIR_*
    # PAIR: the result names' middle part (default pair; e.g. pair_b for a second pair into the same folder)
    cache="${TUNING_CACHE:-$out/tuning}" g="${GPU:-h200}" pair="${PAIR:-pair}"
    step bench_formal "$py" -m nsa_exp bench --config "configs/e1_$g.json" --name "e1_${g}_${pair}_formal" \
      --tuning-cache "$cache" --output "$out/e1_${g}_${pair}_formal.json" --summary "$out/e1_${g}_${pair}_formal.csv"
    step bench_stop "$py" -m nsa_exp bench --config "configs/e1_$g.json" --stop-rule --name "e1_${g}_${pair}_stop" \
      --tuning-cache "$cache" --output "$out/e1_${g}_${pair}_stop.json" --summary "$out/e1_${g}_${pair}_stop.csv"
    step validate_pair "$py" -m nsa_exp validate "$out/e1_${g}"_${pair}_*.json "$out/e1_${g}"_${pair}_*.csv
    step compare_same_machine "$py" -m nsa_exp compare "$out/e1_${g}_${pair}_formal.json" "$out/e1_${g}_${pair}_stop.json" \
      --output "$out/e1_${g}_${pair}_formal_vs_stop.json"
    step compare_published "$py" -m nsa_exp compare "results/raw/e1_$g.json" "$out/e1_${g}_${pair}_stop.json" \
      --output "$out/e1_${g}_vs_e1_${g}_${pair}_stop.json"
    step cost "$py" -m nsa_exp cost "$out/e1_${g}_${pair}_formal.json" "$out/e1_${g}_${pair}_stop.json"
    ;;
  penalty)  # issue 32: the two penalty-map sweeps; a sweep stopped by its timeout keeps its finished points (resume)
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > "$out/penalty.gpu.log" 2>&1
    step sweep_penalty timeout -s INT "${PENALTY_TIMEOUT_S:-420}" "$py" -m nsa_exp sweep \
      --config configs/sweep_penalty_h200.json --publish
    step sweep_penalty_T timeout -s INT "${PENALTY_T_TIMEOUT_S:-150}" "$py" -m nsa_exp sweep \
      --config configs/sweep_penalty_T_h200.json --publish
    ;;
  release)  # one child process per release, each one's results written as it ends; stopped before the call's limit
    rel=(); for v in ${RELEASES:-0.5.2 0.6.0 0.5.1}; do rel+=(--release "$v"); done
    # shellcheck disable=SC2086  # RELEASE_ARGS: extra options, word-split on purpose
    step release timeout -s INT "${RELEASE_TIMEOUT_S:-540}" "$py" -m nsa_exp release-bench \
      --config configs/release_h200.json "${rel[@]}" --wheel-dir .whl-fla --publish ${RELEASE_ARGS:-}
    ;;
  layer)  # issue 32: the pinned FLA (fla-core 0.5.2 from .whl-fla/) with the layer call, at T = 8192, 32768, 131072
    step release_layer timeout -s INT "${RELEASE_TIMEOUT_S:-540}" "$py" -m nsa_exp release-bench \
      --config configs/release_layer_h200.json --release 0.5.2 --wheel-dir .whl-fla --publish ${RELEASE_ARGS:-}
    step validate_layer "$py" -m nsa_exp validate results/releases/release_layer_h200/*.json \
      --release-dir .nsa-exp/releases/fla-core-0.5.2
    ;;
  layer_shapes)  # issue 32: the layer call along the map's B and H axes at T=32768 (configs/release_layer_shapes_h200.json)
    step release_layer_shapes timeout -s INT "${RELEASE_TIMEOUT_S:-540}" "$py" -m nsa_exp release-bench \
      --config configs/release_layer_shapes_h200.json --release 0.5.2 --wheel-dir .whl-fla --publish ${RELEASE_ARGS:-}
    step validate_layer_shapes "$py" -m nsa_exp validate results/releases/release_layer_shapes_h200/*.json \
      --release-dir .nsa-exp/releases/fla-core-0.5.2
    ;;
  *) echo "usage: scripts/h200_session.sh PART OUTDIR (PART: one of the parts listed at the top of this script)" >&2; exit 2 ;;
esac
if [ "$failed_rc" -ne 0 ]; then
  echo "error: h200_session $part: step $failed_step failed (rc=$failed_rc; log $out/$part.$failed_step.log)" >&2
fi
exit "$failed_rc"
