# Helpers for a device call's own run script (docs/runs/*-run.sh), sourced
# after OUT is set:  . "$(dirname "$0")/steps.sh"
#   run NAME TIMEOUT CMD...   runs CMD with a time limit, appends its output
#                             to $OUT/all.log and its key lines to
#                             $OUT/summary.txt; skipped (and said so) when
#                             less than TIMEOUT/2 of the call's LIMIT
#                             (default 560 s) is left.
#   $SAN, $NCU                compute-sanitizer's and Nsight Compute's
#                             paths.
# Bench steps named ab-<build>-r<round> make an A/B table with
# scripts/ab-steps.py. Give a step that is the first to load a PTX on a
# fresh machine >= 60 s: the driver's JIT takes 20-40 s.
T0=$(date +%s)
S=$OUT/summary.txt
export MOE4_REQUIRE_GPU=1 RUST_BACKTRACE=1
left() { echo $(( ${LIMIT:-560} - ($(date +%s) - T0) )); }
run() {
  local n=$1 t=$2; shift 2
  [ "$(left)" -gt $((t / 2)) ] || { echo "=== skip $n (time)" | tee -a "$S"; return; }
  echo "=== $n" | tee -a "$S"
  local s0
  s0=$(date +%s)
  timeout "$t" "$@" > /tmp/step.log 2>&1
  echo "rc=$? ($n, $(( $(date +%s) - s0 )) s)" | tee -a "$S"
  grep -E "test result|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY| M=|pairs=|copy" /tmp/step.log | head -100 | tee -a "$S"
  { echo "=== $n"; cat /tmp/step.log; } >> "$OUT/all.log"
}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv | tee -a "$S"
