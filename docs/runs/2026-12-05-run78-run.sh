#!/usr/bin/env bash
# Session 2026-12-05c call 1: the default build's tests, sanitizers, decode and
# prefill benches; the skipcols decode build tested and timed against the
# default; two more prefill rounds at M=8192; combine2 A/B; ncu of the decode
# kernels of Mixtral M=64; tune with the fused build. Later steps are skipped
# once the call nears its limit (LIMIT seconds, default 560).
C=$(dirname "$0")
export BUNDLE=$C
T0=$(date +%s)
left() { echo $(( ${LIMIT:-560} - ($(date +%s) - T0) )); }
bash $C/gpu-run.sh tests sanitize decode prefill
B=/tmp/moe4-bundle
S=$OUT/summary.txt
gunzip -c $C/decode-skipcols.ptx.gz > /tmp/sk.ptx
gunzip -c $C/p-combine2.ptx.gz > /tmp/c2.ptx
gunzip -c $C/decode-fused.ptx.gz > /tmp/fused.ptx
if [ $(left) -gt 150 ]; then
  echo "=== skipcols test-decode" | tee -a $S
  MOE4_PTX_FILE=/tmp/sk.ptx timeout 150 $B/test-decode --test-threads=2 > /tmp/skt.log 2>&1
  echo "rc=$?" | tee -a $S
  grep -E "test result|FAILED|panicked" /tmp/skt.log | head -20 | tee -a $S
  { echo "=== skipcols test-decode"; cat /tmp/skt.log; } >> $OUT/all.log
fi
for r in 1 2; do
  for v in own sk; do
    [ $(left) -gt 60 ] || { echo "=== skip skipcols ab $v r$r (time)" | tee -a $S; continue; }
    if [ $v = sk ]; then E="env MOE4_PTX_FILE=/tmp/sk.ptx"; else E=env; fi
    echo "=== skipcols ab $v r$r" | tee -a $S
    timeout 60 $E $B/moe4 bench decode --shape Mixtral-8x7B --m 16,32,64 > /tmp/ab.log 2>&1
    grep -E " M=" /tmp/ab.log | tee -a $S
    cat /tmp/ab.log >> $OUT/all.log
  done
done
for r in 2 3; do
  [ $(left) -gt 60 ] || continue
  echo "=== prefill-8192 round $r" | tee -a $S
  timeout 60 $B/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192 > /tmp/p$r.log 2>&1
  echo "rc=$?" >> $S
  grep -E "M=8192" /tmp/p$r.log | tail -8 | tee -a $S
  cat /tmp/p$r.log >> $OUT/all.log
done
# combine2 (batched loads in the combine) against the bundle's own PTX:
# prefill M=8192 (the combine = total - stages[2]) and decode M=1,2,8.
for r in 1 2; do
  for v in own c2; do
    [ $(left) -gt 90 ] || { echo "=== skip ab $v r$r (time)" | tee -a $S; continue; }
    if [ $v = c2 ]; then E="env MOE4_PTX_FILE=/tmp/c2.ptx"; else E=env; fi
    echo "=== ab $v r$r" | tee -a $S
    timeout 60 $E $B/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192 > /tmp/ab.log 2>&1
    timeout 60 $E $B/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B --m 1,2,8 >> /tmp/ab.log 2>&1
    grep -E " M=" /tmp/ab.log | tee -a $S
    cat /tmp/ab.log >> $OUT/all.log
  done
done
N=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $(left) -gt 50 ]; then
  echo "=== ncu decode Mixtral M=64" | tee -a $S
  timeout $(( $(left) - 10 )) $N --clock-control none -k regex:'moe_(fc|combine|route)' -c 6 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
    $B/moe4 bench decode --shape Mixtral-8x7B --m 64 > /tmp/ncu.txt 2>&1
  echo "rc=$?" >> $S
  cat /tmp/ncu.txt >> $OUT/ncu-decode.txt
  grep -E "^  moe_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Size|Grid Size|Issue Slots Busy|Warp Cycles Per Issued" /tmp/ncu.txt | head -60 >> $S
fi
if [ $(left) -gt 60 ]; then
  echo "=== tune fused" | tee -a $S
  MOE4_PTX_FILE=/tmp/fused.ptx timeout $(( $(left) - 5 )) $B/moe4 bench tune --shape Qwen3-30B-A3B,GPT-OSS-120B --m 1,2,8 > /tmp/tune.log 2>&1
  echo "rc=$?" >> $S
  grep -E "^\|" /tmp/tune.log | tee -a $S
  cat /tmp/tune.log >> $OUT/all.log
fi
echo "=== done in $(( $(date +%s) - T0 )) s" | tee -a $S
