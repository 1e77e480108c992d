#!/usr/bin/env bash
# Session 2026-12-05e call 1 (run 83): the current state's decode, prefill
# and routing tables (d2b6846); rt2's A/B (the PTX before it, c08a354, as
# the experimental build); three L2-prefetch decode builds (l2pf4: one
# line prefetch per lane, 4 chunks ahead; l2pfb4 / l2pfb2: one bulk
# prefetch of a layout task's codes per chunk from lane 0, 4 / 2 chunks
# ahead) against the default, two alternating rounds; then the default's
# tests and l2pfb4's decode tests and sanitizers as time allows.
C=$(dirname "$0")
T0=$(date +%s)
left() { echo $(( ${LIMIT:-560} - ($(date +%s) - T0) )); }
mkdir -p /tmp/moe4-bundle && tar xJf $C/bundle.tar.xz -C /tmp/moe4-bundle
B=/tmp/moe4-bundle
S=$OUT/summary.txt
export MOE4_REQUIRE_GPU=1 RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv | tee -a $S
for n in pre-rt2 l2pf4 l2pfb4 l2pfb2; do gunzip -c $C/decode-$n.ptx.gz > /tmp/$n.ptx; done
run() { # name timeout cmd...
  local n=$1 t=$2; shift 2
  [ $(left) -gt $((t/2)) ] || { echo "=== skip $n (time)" | tee -a $S; return; }
  echo "=== $n" | tee -a $S
  local s0=$(date +%s)
  timeout $t "$@" > /tmp/step.log 2>&1
  echo "rc=$? ($n, $(( $(date +%s) - s0 )) s)" | tee -a $S
  grep -E "test result|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY| M=|pairs=|copy|rows=" /tmp/step.log | head -80 | tee -a $S
  { echo "=== $n"; cat /tmp/step.log; } >> $OUT/all.log
}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
run info 90 $B/moe4 info
run bench-decode 90 $B/moe4 bench decode --json $OUT/decode.json
run bench-prefill 120 $B/moe4 bench prefill --json $OUT/prefill.json
run bench-route 60 $B/moe4 bench route --json $OUT/route.json
SH=Qwen3-30B-A3B,DeepSeek-V3,Mixtral-8x7B,GPT-OSS-120B
MS=1,4,16,32,64
for r in 1 2; do
  t=$([ $r = 1 ] && echo 120 || echo 60)
  run ab-own-r$r 60 $B/moe4 bench decode --shape $SH --m $MS
  for n in pre-rt2 l2pf4 l2pfb4 l2pfb2; do
    run ab-$n-r$r $t env MOE4_PTX_FILE=/tmp/$n.ptx $B/moe4 bench decode --shape $SH --m $MS
  done
done
run route-own 30 $B/moe4 bench route --shape Qwen3-30B-A3B,DeepSeek-V3 --m 16,64,128,512
run route-pre-rt2 30 env MOE4_PTX_FILE=/tmp/pre-rt2.ptx $B/moe4 bench route --shape Qwen3-30B-A3B,DeepSeek-V3 --m 16,64,128,512
run l2pfb4-test-decode 150 env MOE4_PTX_FILE=/tmp/l2pfb4.ptx $B/test-decode --test-threads=2
run l2pfb4-test-limits 40 env MOE4_PTX_FILE=/tmp/l2pfb4.ptx $B/test-limits --test-threads=2
run l2pfb4-memcheck 40 env MOE4_PTX_FILE=/tmp/l2pfb4.ptx $SAN --tool memcheck --error-exitcode 1 $B/test-decode sanitizer_case
run l2pfb4-racecheck 40 env MOE4_PTX_FILE=/tmp/l2pfb4.ptx $SAN --tool racecheck --error-exitcode 1 $B/test-decode sanitizer_case
for t in test-prefill test-limits test-w4a4 test-lib test-checkpoint test-formats test-smoke test-decode; do
  run $t 150 $B/$t --test-threads=2
done
echo "=== done in $(( $(date +%s) - T0 )) s" | tee -a $S
