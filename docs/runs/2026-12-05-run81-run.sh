#!/usr/bin/env bash
# Session 2026-12-05d call 3 (run 81): the late3 and late3+stages6 prefill
# builds tested (test-prefill, test-limits, the prefill sanitizer case under
# memcheck, racecheck, synccheck) and timed against the bundle's own PTX
# (c08a354), three alternating rounds at M = 2048 and 8192.
C=$(dirname "$0")
T0=$(date +%s)
left() { echo $(( ${LIMIT:-300} - ($(date +%s) - T0) )); }
mkdir -p /tmp/moe4-bundle && tar xJf $C/bundle.tar.xz -C /tmp/moe4-bundle
B=/tmp/moe4-bundle
S=$OUT/summary.txt
export MOE4_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv | tee -a $S
for v in late3 late3s6; do gunzip -c $C/p-$v.ptx.gz > /tmp/$v.ptx; done
run() { # name timeout cmd...
  local n=$1 t=$2; shift 2
  [ $(left) -gt $((t/2)) ] || { echo "=== skip $n (time)" | tee -a $S; return; }
  echo "=== $n" | tee -a $S
  timeout $t "$@" > /tmp/step.log 2>&1
  echo "rc=$? ($n)" | tee -a $S
  grep -E "test result|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY| M=" /tmp/step.log | head -40 | tee -a $S
  { echo "=== $n"; cat /tmp/step.log; } >> $OUT/all.log
}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for v in late3 late3s6; do
  run $v-test-prefill 60 env MOE4_PTX_FILE=/tmp/$v.ptx $B/test-prefill --test-threads=2
  run $v-test-limits 60 env MOE4_PTX_FILE=/tmp/$v.ptx $B/test-limits --test-threads=2
  for tool in memcheck racecheck synccheck; do
    run $v-$tool 60 env MOE4_PTX_FILE=/tmp/$v.ptx $SAN --tool $tool --error-exitcode 1 $B/test-prefill prefill_sanitizer_case
  done
done
for r in 1 2 3; do
  run ab-own-r$r 40 $B/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 2048,8192
  for v in late3 late3s6; do
    run ab-$v-r$r 40 env MOE4_PTX_FILE=/tmp/$v.ptx $B/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 2048,8192
  done
done
echo "=== done in $(( $(date +%s) - T0 )) s" | tee -a $S
