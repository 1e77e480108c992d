#!/usr/bin/env bash
# Runs the GPU tests and benchmarks from a bundle made by `cargo xtask
# gpu-bundle` (no Rust needed on the GPU machine). Logs go to $OUT (or
# ./gpu-out): summary.txt (the GPU, one line per step plus the key
# figures), all.log (everything, bench tables included), bench-*.json.
#   bash scripts/gpu-run.sh [PART...]   (default: all)
# PART: tests | sanitize | tune | route | decode | prefill | w4a4 | bench (=
# route decode prefill w4a4) | all (= tests sanitize bench) | profile (ncu on the prefill
# kernels of two shapes and the W4A4 GEMM) | exp (each experimental PTX in
# $BUNDLE/exp/*.ptx[.gz], loaded by MOE4_PTX_FILE, against the bundle's own
# on the bench its name starts with: w4a4-, decode-, else prefill; the
# decode one's shapes and M from EXP_DECODE_SHAPES, EXP_DECODE_M; each
# pair EXP_REPEAT times, alternating: the card drifts by a few per cent) |
# exp-tests (with exp: test-w4a4 and its sanitizer cases on each w4a4-* PTX;
# test-decode, test-limits and the decode sanitizer case on each decode-* one;
# test-prefill, test-decode, test-limits and the prefill sanitizer case on each prefill
# one; EXP_PREFILL_SHAPES, EXP_PREFILL_M: that bench's shapes and M;
# EXP_MATCH: globs, space-separated, of the experimental builds to run) |
# profile-w4a4 | profile-w4a4-full (with per-instruction stalls) | profile-decode
# (ncu sections on one kernel each). TUNE_ARGS, PREFILL_ARGS, ...: extra arguments of bench tune, prefill, ...
# (e.g. "--m 1,2,4,8 --shape Qwen3-30B-A3B,DeepSeek-V3").
set -u
B=${BUNDLE:-.gpu}
if [ -f "$B/bundle.tar.xz" ]; then
  mkdir -p /tmp/moe4-bundle && tar xJf "$B/bundle.tar.xz" -C /tmp/moe4-bundle && B=/tmp/moe4-bundle
fi
O=${OUT:-gpu-out}
mkdir -p "$O"
parts=" ${*:-all} "
parts=${parts// all / tests sanitize bench }
parts=${parts// bench / route decode prefill w4a4 }
want() { [[ "$parts" == *" $1 "* ]]; }
export MOE4_REQUIRE_GPU=1
export RUST_BACKTRACE=1
status=0
step() { # name, timeout, command...
  local name=$1 t=$2; shift 2
  echo "=== $name: $*" | tee -a "$O/summary.txt"
  local start=$(date +%s)
  timeout "$t" "$@" > "$O/step.log" 2>&1
  local rc=$?
  echo "=== $name: rc=$rc ($(( $(date +%s) - start )) s)" | tee -a "$O/summary.txt"
  grep -E "^moe4:|test result|FAILED|panicked|mismatch|SUMMARY|error|relative|integer sums|^  .* M=|^  .* rows=" "$O/step.log" | head -150 | tee -a "$O/summary.txt"
  { echo "=== $name: $*"; cat "$O/step.log"; } >> "$O/all.log"
  rm -f "$O/step.log"
  [ $rc -eq 0 ] || status=1
  # A step that ran out of time has likely hung the GPU: stop here.
  if [ $rc -eq 124 ]; then echo "=== stopping: $name timed out" | tee -a "$O/summary.txt"; exit 1; fi
}
# A CUDA tool on the PATH or in the usual install folders.
cuda_tool() { command -v "$1" || ls /usr/local/cuda*/bin/"$1" /opt/nvidia/nsight-compute/*/"$1" 2>/dev/null | head -1; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv | tee -a "$O/summary.txt"
step info 60 "$B/moe4" info
if want tests; then
  step smoke-cli 120 "$B/moe4" smoke
  step run-cli 60 "$B/moe4" run
  step run-w4a4-cli 120 "$B/moe4" run-w4a4 --out /tmp/w4a4-out.safetensors
  step demo 300 "$B/moe4" demo
  for t in "$B"/test-*; do
    step "$(basename "$t")" 240 "$t" --test-threads=2
  done
fi
if want sanitize; then
  S=$(cuda_tool compute-sanitizer)
  if [ -n "$S" ]; then
    step memcheck-decode 300 "$S" --tool memcheck --error-exitcode 1 "$B/test-decode" sanitizer_case
    step racecheck-decode 300 "$S" --tool racecheck --error-exitcode 1 "$B/test-decode" sanitizer_case
    step memcheck-w4a4 300 "$S" --tool memcheck --error-exitcode 1 "$B/test-w4a4" malformed_offsets
    step memcheck-w4a4-tiles 300 "$S" --tool memcheck --error-exitcode 1 "$B/test-w4a4" wgmma_tiles
    step racecheck-w4a4-tiles 300 "$S" --tool racecheck --error-exitcode 1 "$B/test-w4a4" wgmma_tiles
    step synccheck-w4a4-tiles 300 "$S" --tool synccheck --error-exitcode 1 "$B/test-w4a4" wgmma_tiles
    step memcheck-prefill 300 "$S" --tool memcheck --error-exitcode 1 "$B/test-prefill" prefill_sanitizer_case
    step racecheck-prefill 300 "$S" --tool racecheck --error-exitcode 1 "$B/test-prefill" prefill_sanitizer_case
    step synccheck-prefill 300 "$S" --tool synccheck --error-exitcode 1 "$B/test-prefill" prefill_sanitizer_case
  else
    echo "compute-sanitizer not found" | tee -a "$O/summary.txt"; status=1
  fi
fi
if want profile; then
  N=$(cuda_tool ncu)
  if [ -n "$N" ]; then
    # One forward's kernels (route, permute, FC1, FC2, combine) of two shapes:
    # a report, its details page, and the FC1 kernel's SASS with per-line
    # counters (stall reasons, instructions executed).
    for s in DeepSeek-V3 Qwen3-30B-A3B; do
      step "ncu-prefill-$s" 400 "$N" --clock-control none -k 'regex:moe_(route|permute|pfw|combine)' -c 5 \
        --set full --import-source no -f -o "/tmp/prof-$s" "$B/moe4" bench prefill --shape "$s" --m 8192
      step "ncu-details-$s" 120 "$N" -i "/tmp/prof-$s.ncu-rep" --page details --print-details all
      step "ncu-sass-$s" 120 sh -c "'$N' -i '/tmp/prof-$s.ncu-rep' -k regex:moe_pfw1 --page source --print-source sass --csv > '$O/sass-$s.csv'"
    done
    step ncu-w4a4-Mixtral 400 "$N" --clock-control none -k regex:w4a4_gemm -c 2 --set full --print-details all \
      "$B/moe4" bench w4a4 --shape Mixtral-8x7B --m 8192
  else
    echo "ncu not found" | tee -a "$O/summary.txt"; status=1
  fi
fi
if want profile-w4a4 || want profile-w4a4-full || want profile-decode; then
  N=$(cuda_tool ncu)
  SECT="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
  if want profile-w4a4; then
    step ncu-w4a4-wg 300 "$N" --clock-control none -k regex:w4a4_gemm_wg_bf16 -c 2 $SECT \
      "$B/moe4" bench w4a4 --shape Mixtral-8x7B --m 8192
  fi
  if want profile-w4a4-full; then
    step ncu-w4a4-full 300 "$N" --clock-control none -k regex:w4a4_gemm_wg_bf16 -c 1 --set full --import-source no \
      -f -o /tmp/prof-w4a4 "$B/moe4" bench w4a4 --shape Mixtral-8x7B --m 8192
    step ncu-w4a4-details 120 "$N" -i /tmp/prof-w4a4.ncu-rep --page details --print-details all
    step ncu-w4a4-sass 120 sh -c "'$N' -i /tmp/prof-w4a4.ncu-rep --page source --print-source sass --csv > '$O/sass-w4a4.csv'"
  fi
  if want profile-decode; then
    step ncu-decode-ds3-16 300 "$N" --clock-control none -k regex:moe_fc -c 2 $SECT \
      "$B/moe4" bench decode --shape DeepSeek-V3 --m 16
  fi
fi
if want exp; then
  # Each experimental PTX runs the bench its name starts with (w4a4-*,
  # decode-*, else prefill), interleaved with the bundle's own PTX (exp-own)
  # so each A/B is from one run.
  # (*.ptx.gz are unpacked first: they travel smaller)
  mkdir -p /tmp/moe4-exp
  for g in "${BUNDLE:-.gpu}"/exp/*.ptx.gz; do [ -f "$g" ] && gunzip -c "$g" > "/tmp/moe4-exp/$(basename "$g" .gz)"; done
  for f in "${BUNDLE:-.gpu}"/exp/*.ptx /tmp/moe4-exp/*.ptx; do
    [ -f "$f" ] || continue
    n=$(basename "$f" .ptx)
    # EXP_MATCH (globs, space-separated): only the experimental builds
    # whose name matches one of them.
    read -ra globs <<< "${EXP_MATCH:-*}"
    hit=0
    for g in "${globs[@]}"; do [[ "$n" == $g ]] && hit=1; done
    [ $hit = 1 ] || continue
    case "$n" in
      w4a4-*) args=(bench w4a4 --shape Mixtral-8x7B,GPT-OSS-120B --m 8192) ;;
      decode-*) args=(bench decode --shape "${EXP_DECODE_SHAPES:-Qwen3-30B-A3B,DeepSeek-V3,Mixtral-8x7B}" --m "${EXP_DECODE_M:-1,8,64}") ;;
      *) args=(bench prefill --shape "${EXP_PREFILL_SHAPES:-DeepSeek-V3,Qwen3-30B-A3B,Mixtral-8x7B}" --m "${EXP_PREFILL_M:-8192}") ;;
    esac
    if want exp-tests && [[ "$n" != w4a4-* && "$n" != decode-* && "$n" == ${EXP_TEST_MATCH:-*} ]]; then
      # An experimental prefill build against the CPU reference (the decode
      # tests too: the same PTX module), and under the sanitizers.
      S=$(cuda_tool compute-sanitizer)
      step "exp-test-prefill-$n" 400 env MOE4_PTX_FILE="$f" "$B/test-prefill" --test-threads=2
      step "exp-test-decode-$n" 400 env MOE4_PTX_FILE="$f" "$B/test-decode" --test-threads=2
      step "exp-test-limits-$n" 300 env MOE4_PTX_FILE="$f" "$B/test-limits" --test-threads=2
      for tool in memcheck racecheck synccheck; do
        step "exp-$tool-$n" 300 env MOE4_PTX_FILE="$f" "$S" --tool $tool --error-exitcode 1 "$B/test-prefill" prefill_sanitizer_case
      done
    fi
    if want exp-tests && [[ "$n" == decode-* && "$n" == ${EXP_TEST_MATCH:-*} ]]; then
      # An experimental decode build against the CPU reference (and the
      # layer's limits), and under the sanitizers, before it may land.
      S=$(cuda_tool compute-sanitizer)
      step "exp-test-decode-$n" 400 env MOE4_PTX_FILE="$f" "$B/test-decode" --test-threads=2
      step "exp-test-limits-$n" 300 env MOE4_PTX_FILE="$f" "$B/test-limits" --test-threads=2
      for tool in memcheck racecheck; do
        step "exp-$tool-$n" 300 env MOE4_PTX_FILE="$f" "$S" --tool $tool --error-exitcode 1 "$B/test-decode" sanitizer_case
      done
    fi
    if want exp-tests && [[ "$n" == w4a4-* && "$n" == ${EXP_TEST_MATCH:-*} ]]; then
      # The experimental W4A4 build against the CPU reference, and under
      # the sanitizer, before it may land.
      S=$(cuda_tool compute-sanitizer)
      step "exp-test-w4a4-$n" 400 env MOE4_PTX_FILE="$f" "$B/test-w4a4" --test-threads=2
      step "exp-memcheck-$n" 300 env MOE4_PTX_FILE="$f" "$S" --tool memcheck --error-exitcode 1 "$B/test-w4a4" wgmma_tiles
      step "exp-racecheck-$n" 300 env MOE4_PTX_FILE="$f" "$S" --tool racecheck --error-exitcode 1 "$B/test-w4a4" wgmma_tiles
    fi
    for r in $(seq "${EXP_REPEAT:-1}"); do
      sfx=$([ "${EXP_REPEAT:-1}" = 1 ] || echo "-r$r")
      step "exp-own-for-$n$sfx" 300 "$B/moe4" "${args[@]}"
      step "exp-$n$sfx" 300 env MOE4_PTX_FILE="$f" "$B/moe4" "${args[@]}"
    done
  done
fi
for k in tune route decode prefill w4a4; do
  if want $k; then
    # TUNE_ARGS, PREFILL_ARGS, ... (the part's name in capitals): extra
    # arguments, e.g. "--m 1,2,4,8 --shape Qwen3-30B-A3B,DeepSeek-V3".
    v="${k^^}_ARGS"; extra=(); [ -n "${!v:-}" ] && read -ra extra <<< "${!v}"
    step bench-$k 300 "$B/moe4" bench $k --json "$O/bench-$k.json" "${extra[@]}"
  fi
done
exit $status
