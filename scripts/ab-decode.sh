#!/bin/bash
# Same-machine A/B of two builds' decode bench, alternating (the card
# drifts by a few per cent): `moe4` from the bundle (.gpu/bundle.tar.xz)
# against an older `moe4` binary (xz-compressed, e.g. built from a git
# worktree of the old commit and put in .gpu/ after `cargo xtask gpu-bundle`,
# which empties .gpu/). All output goes to one
# file, $OUT/ab.log (the device returns at most 8 files).
#   OLD=.gpu/prev/moe4.xz AB_SHAPES=Qwen3-30B-A3B,DeepSeek-V3 AB_M=1,8,64 AB_REPEAT=3 bash scripts/ab-decode.sh
# Compare with: python3 scripts/ab-compare.py ab.log
set -u
O=${OUT:-gpu-out}
mkdir -p /tmp/moe4-ab "$O"
tar xJf "${BUNDLE:-.gpu}/bundle.tar.xz" -C /tmp/moe4-ab moe4
xz -dc "${OLD:-.gpu/prev/moe4.xz}" > /tmp/moe4-ab/moe4-old && chmod +x /tmp/moe4-ab/moe4-old
for r in $(seq "${AB_REPEAT:-3}"); do
  for v in old new; do
    b=/tmp/moe4-ab/moe4; [ "$v" = old ] && b=/tmp/moe4-ab/moe4-old
    echo "=== ab $v $r"
    "$b" bench decode --shape "${AB_SHAPES:-Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B}" --m "${AB_M:-1,2,4,8,64}" 2>&1 | grep -E "^  .* M=[0-9]+ "
  done
done >> "$O/ab.log"
