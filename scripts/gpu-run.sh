#!/usr/bin/env bash
# Runs every GPU test and benchmark from a bundle made by `cargo xtask
# gpu-bundle` (no Rust needed on the GPU machine). Logs go to $OUT (or ./gpu-out).
#   bash scripts/gpu-run.sh [tests|bench|sanitize|all]   (default: all)
set -u
B=${BUNDLE:-.gpu}
if [ -f "$B/bundle.tar.gz" ]; then
  mkdir -p /tmp/moe4-bundle && tar xzf "$B/bundle.tar.gz" -C /tmp/moe4-bundle && B=/tmp/moe4-bundle
fi
O=${OUT:-gpu-out}
mkdir -p "$O"
what=${1:-all}
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
  grep -E "^moe4:|test result|FAILED|panicked|mismatch|SUMMARY|error|relative|integer sums" "$O/step.log" | head -120 | tee -a "$O/summary.txt"
  { echo "=== $name: $*"; cat "$O/step.log"; } >> "$O/all.log"
  [ "$name" = bench ] && cp "$O/step.log" "$O/bench.log"
  rm -f "$O/step.log"
  [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$O/gpu.txt"
step info 60 "$B/moe4" info
if [ "$what" = all ] || [ "$what" = tests ]; then
  step smoke-cli 120 "$B/moe4" smoke
  step run-cli 120 "$B/moe4" run
  step run-w4a4-cli 120 "$B/moe4" run-w4a4 --out "$O/w4a4-out.safetensors"
  step demo 300 "$B/moe4" demo
  for t in "$B"/test-*; do
    step "$(basename "$t")" 400 "$t" --test-threads=2
  done
fi
if [ "$what" = all ] || [ "$what" = sanitize ]; then
  S=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -n "$S" ]; then
    step memcheck-decode 300 "$S" --tool memcheck --error-exitcode 1 "$B/test-decode" sanitizer_case
    step racecheck-decode 300 "$S" --tool racecheck --error-exitcode 1 "$B/test-decode" sanitizer_case
    step memcheck-w4a4 300 "$S" --tool memcheck --error-exitcode 1 "$B/test-w4a4" malformed_offsets
  else
    echo "compute-sanitizer not found" | tee -a "$O/summary.txt"; status=1
  fi
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  step bench 540 "$B/moe4" bench all --json "$O/bench.json"
  sed -n '/^# moe4 bench/,$p' "$O/bench.log" > "$O/bench.md"
fi
exit $status
