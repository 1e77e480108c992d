#!/usr/bin/env bash
# The next device call, prepared 2026-12-05 (sixth session, no device lent):
# the `trace` build's decode timeline, the `deps` build's tests and A/B, and
# two host rules A/B'd with one program (`bench decode --tuning`).
# Before the call (here):
#   cargo xtask gpu-bundle            # wait for it to return
#   cargo xtask exp-ptx decode-deps deps
#   cargo xtask exp-ptx decode-trace trace
#   cp scripts/next-device-call.sh .gpu/run.sh
# On the device (carry .gpu):  OUT=$OUT bash .gpu/run.sh
# Afterwards: python3 scripts/ab-steps.py $OUT/all.log own  (the A/B table).
C=$(dirname "$0")
. scripts/steps.sh
mkdir -p /tmp/b1 && tar xJf "$C/bundle.tar.xz" -C /tmp/b1
gunzip -c "$C/exp/decode-deps.ptx.gz" > /tmp/deps.ptx
gunzip -c "$C/exp/decode-trace.ptx.gz" > /tmp/trace.ptx
D="env MOE4_PTX_FILE=/tmp/deps.ptx"
T="env MOE4_PTX_FILE=/tmp/trace.ptx"
# First loads of each PTX (the driver's JIT: 20-40 s each).
run info-trace 120 $T /tmp/b1/moe4 info
run info-deps 120 $D /tmp/b1/moe4 info
run info-own 90 /tmp/b1/moe4 info
# 1. Where a decode call's time goes (perf-notes, next steps 1).
run timeline 200 $T /tmp/b1/moe4 bench timeline --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3 \
  --m 1,2,4,8,16,64 --json "$OUT/timeline.json"
# 2. The deps build: tests, sanitizers, three alternating rounds.
run test-decode-deps 240 $D /tmp/b1/test-decode --test-threads=2
run test-limits-deps 60 $D /tmp/b1/test-limits --test-threads=2
run memcheck-deps 90 $D "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
run racecheck-deps 90 $D "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
for r in 1 2 3; do
  run ab-own-r$r 40 /tmp/b1/moe4 bench decode
  run ab-deps-r$r 40 $D /tmp/b1/moe4 bench decode --json "$OUT/decode-deps-r$r.json"
done
# 3. Host rules from the tune leads, one program: DeepSeek-V3 M = 1 on two
#    column tiles; Qwen3 M = 16 on the 4-warp kernels.
for r in 1 2 3; do
  run ab-own-r$((r + 3)) 40 /tmp/b1/moe4 bench decode --shape DeepSeek-V3,DeepSeek-V4-Pro --m 1,2
  run ab-nt2-r$r 40 /tmp/b1/moe4 bench decode --shape DeepSeek-V3,DeepSeek-V4-Pro --m 1,2 --tuning nt=2
  run ab-own-r$((r + 6)) 40 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 8,16,32
  run ab-w4-r$r 40 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 8,16,32 --tuning wide=false
done
# 4. The trace build's notes change no result.
run test-decode-trace 240 $T /tmp/b1/test-decode --test-threads=2
echo "=== done in $(( $(date +%s) - T0 )) s" | tee -a "$S"
