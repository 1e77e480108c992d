#!/usr/bin/env bash
# Session 2026-12-05d call 4 (run 82): the landed state (c08a354: batched
# combine, routing weights loaded with the ids): the decode and prefill
# benches and two more prefill rounds at M = 8192; the rt2 routing build
# (moe_route: the first pair's weight loaded before the counts; the expert
# scan reads only the warps that hold experts) tested and timed.
C=$(dirname "$0")
export BUNDLE=$C
T0=$(date +%s)
left() { echo $(( ${LIMIT:-280} - ($(date +%s) - T0) )); }
mkdir -p /tmp/moe4-bundle && tar xJf $C/bundle.tar.xz -C /tmp/moe4-bundle
B=/tmp/moe4-bundle
S=$OUT/summary.txt
export MOE4_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv | tee -a $S
gunzip -c $C/decode-rt2.ptx.gz > /tmp/rt2.ptx
run() { # name timeout cmd...
  local n=$1 t=$2; shift 2
  [ $(left) -gt $((t/2)) ] || { echo "=== skip $n (time)" | tee -a $S; return; }
  echo "=== $n" | tee -a $S
  timeout $t "$@" > /tmp/step.log 2>&1
  echo "rc=$? ($n)" | tee -a $S
  grep -E "test result|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY| M=|pairs=" /tmp/step.log | head -60 | tee -a $S
  { echo "=== $n"; cat /tmp/step.log; } >> $OUT/all.log
}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
run rt2-test-decode 150 env MOE4_PTX_FILE=/tmp/rt2.ptx $B/test-decode --test-threads=2
run rt2-test-limits 40 env MOE4_PTX_FILE=/tmp/rt2.ptx $B/test-limits --test-threads=2
run rt2-memcheck 30 env MOE4_PTX_FILE=/tmp/rt2.ptx $SAN --tool memcheck --error-exitcode 1 $B/test-decode sanitizer_case
run rt2-racecheck 30 env MOE4_PTX_FILE=/tmp/rt2.ptx $SAN --tool racecheck --error-exitcode 1 $B/test-decode sanitizer_case
for r in 1; do
  run ab-own-r$r 20 $B/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B --m 16,32,64
  run ab-rt2-r$r 20 env MOE4_PTX_FILE=/tmp/rt2.ptx $B/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B --m 16,32,64
done
run route-own 20 $B/moe4 bench route --shape Qwen3-30B-A3B,DeepSeek-V3 --m 16,64,128,512
run route-rt2 20 env MOE4_PTX_FILE=/tmp/rt2.ptx $B/moe4 bench route --shape Qwen3-30B-A3B,DeepSeek-V3 --m 16,64,128,512
echo "=== done in $(( $(date +%s) - T0 )) s" | tee -a $S
