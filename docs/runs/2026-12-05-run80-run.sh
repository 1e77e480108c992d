#!/usr/bin/env bash
# Session 2026-12-05d call 2 (run 80): the default build of 314b31e (combine
# landed) tests and sanitizers; the rt1 decode build (routing weight loaded
# with the id; four ids per shared load in the FC kernels' own routing)
# tested and timed against it; the routing bench on both; ncu of the
# prefill GEMMs (Qwen3, DeepSeek-V3 at M=8192) with the SASS page.
C=$(dirname "$0")
export BUNDLE=$C
T0=$(date +%s)
left() { echo $(( ${LIMIT:-570} - ($(date +%s) - T0) )); }
bash $C/gpu-run.sh tests sanitize
B=/tmp/moe4-bundle
S=$OUT/summary.txt
gunzip -c $C/decode-rt1.ptx.gz > /tmp/rt1.ptx
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
run rt1-test-decode 150 env MOE4_PTX_FILE=/tmp/rt1.ptx $B/test-decode --test-threads=2
run rt1-test-limits 60 env MOE4_PTX_FILE=/tmp/rt1.ptx $B/test-limits --test-threads=2
run rt1-memcheck 60 env MOE4_PTX_FILE=/tmp/rt1.ptx $SAN --tool memcheck --error-exitcode 1 $B/test-decode sanitizer_case
run rt1-racecheck 60 env MOE4_PTX_FILE=/tmp/rt1.ptx $SAN --tool racecheck --error-exitcode 1 $B/test-decode sanitizer_case
for r in 1 2; do
  run ab-own-r$r 40 $B/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3 --m 1,2,8,16,64
  run ab-rt1-r$r 40 env MOE4_PTX_FILE=/tmp/rt1.ptx $B/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3 --m 1,2,8,16,64
done
run route-own 40 $B/moe4 bench route --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8,16,64,128,256,512
run route-rt1 40 env MOE4_PTX_FILE=/tmp/rt1.ptx $B/moe4 bench route --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8,16,64,128,256,512
N=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for s in Qwen3-30B-A3B DeepSeek-V3; do
  [ $(left) -gt 70 ] || { echo "=== skip ncu $s (time)" | tee -a $S; continue; }
  echo "=== ncu $s" | tee -a $S
  timeout $(( $(left) - 15 )) $N --clock-control none -k regex:moe_pfw -c 2 --set full --import-source no -f -o /tmp/prof-$s \
    $B/moe4 bench prefill --shape $s --m 8192 > /tmp/ncu.log 2>&1
  echo "rc=$?" | tee -a $S
  tail -3 /tmp/ncu.log >> $S
  timeout 60 $N -i /tmp/prof-$s.ncu-rep --page details --print-details all > $OUT/ncu-$s.txt 2>&1
  timeout 60 $N -i /tmp/prof-$s.ncu-rep -k regex:moe_pfw1 --page source --print-source sass --csv 2>/dev/null | gzip > $OUT/sass-$s.csv.gz
  grep -E "^  moe_|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Warp Cycles Per Issued|Tensor|Stall" $OUT/ncu-$s.txt | head -40 >> $S
done
echo "=== done in $(( $(date +%s) - T0 )) s" | tee -a $S
