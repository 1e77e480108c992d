#!/usr/bin/env bash
# Per-instruction SASS counters of run 103's ncu reports (FC1 and FC2
# n256/mix256 launches of Qwen3-30B-A3B at M = 8192).
N=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for fc in 2; do
  timeout 200 "$N" -i .gpu/prof/prof-fc$fc.ncu-rep --page source --print-source sass --csv > "$OUT/sass-fc$fc.csv" 2> "$OUT/sass-fc$fc.err"
  echo "fc$fc rc=$? $(wc -l < "$OUT/sass-fc$fc.csv") lines"
  gzip -9 "$OUT/sass-fc$fc.csv"
done
