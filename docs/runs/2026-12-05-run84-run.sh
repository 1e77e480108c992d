#!/usr/bin/env bash
# Session 2026-12-05e call 2 (run 84): FC2 waiting per column group
# (readiness counters, `Tuning::deps`): the new build's tests and
# sanitizers, three alternating rounds of the full decode bench against the
# previous commit's bundle (d2b6846), and the tune bench's "no FC deps"
# column (same binary, same PTX) on three shapes.
C=$(dirname "$0")
T0=$(date +%s)
left() { echo $(( ${LIMIT:-560} - ($(date +%s) - T0) )); }
mkdir -p /tmp/b0 /tmp/b1 && tar xJf $C/base.tar.xz -C /tmp/b0 && tar xJf $C/bundle.tar.xz -C /tmp/b1
S=$OUT/summary.txt
export MOE4_REQUIRE_GPU=1 RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv | tee -a $S
run() { # name timeout cmd...
  local n=$1 t=$2; shift 2
  [ $(left) -gt $((t/2)) ] || { echo "=== skip $n (time)" | tee -a $S; return; }
  echo "=== $n" | tee -a $S
  local s0=$(date +%s)
  timeout $t "$@" > /tmp/step.log 2>&1
  echo "rc=$? ($n, $(( $(date +%s) - s0 )) s)" | tee -a $S
  grep -E "test result|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY| M=|pairs=|copy|per-group" /tmp/step.log | head -80 | tee -a $S
  { echo "=== $n"; cat /tmp/step.log; } >> $OUT/all.log
}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
run info-new 90 /tmp/b1/moe4 info
run test-decode 240 /tmp/b1/test-decode --test-threads=2
run test-limits 60 /tmp/b1/test-limits --test-threads=2
run memcheck-decode 60 $SAN --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
run racecheck-decode 60 $SAN --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
run info-base 90 /tmp/b0/moe4 info
for r in 1 2 3; do
  run ab-base-r$r 40 /tmp/b0/moe4 bench decode
  run ab-deps-r$r 40 /tmp/b1/moe4 bench decode --json $OUT/decode-r$r.json
done
run tune 200 /tmp/b1/moe4 bench tune --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3 --m 1,8,64
for t in test-prefill test-w4a4 test-lib test-checkpoint test-formats test-smoke; do
  run $t 120 /tmp/b1/$t --test-threads=2
done
echo "=== done in $(( $(date +%s) - T0 )) s" | tee -a $S
