#!/usr/bin/env bash
# The next device calls, prepared 2026-12-06 (eighth to tenth sessions).
# PART may list several parts, run in that order. Run 91 ran PART=5,4,3
# (H200), run 92 PART=6, run 93 PART=7, run 94 PART=8 (H100); next:
# run 95 PART=9, run 96 PART=3,10, run 97 PART=11, run 98 PART=12
# (H100); next: PART=13 (the landed stv4 PTX, which differs from run 98's
# pf-stv4 in its n256 kernels' register numbering and the bulk waits
# removed: prefill tests, sanitizers, one bench round; run 99); next:
# PART=3 on an H200 (issue 3's and 5's tables there predate the ninth
# session), PART=14 (the 128-pair kernels' copy-out without bulk copies:
# cargo xtask exp-ptx pf-stv4w stv4w), PART=15 (the n256 kernels'
# copy out deferred into the next tile: exp-ptx pf-dco dco, pf-dco1 dco1;
# run 100 ran PART=3,15,14 on an H100), PART=16 (L2 policies: exp-ptx
# pf-evf evf, pf-evl evl; run 101), PART=17 (6 stages and no epilogue
# proxy fence in the n256 kernels: exp-ptx pf-s6 s6w256, pf-nfe nfe; run
# 102), PART=18 (ncu of the n256 FC1 and FC2, Qwen3 M = 8192; run 103),
# PART=19 (the epilogue loads earlier: exp-ptx pf-epl ""; run 105, landed),
# PART=20 (the same for the 128-pair kernels: exp-ptx pf-eplw eplw; not
# run 107, landed). Parts
# 14-17 are records: their cfgs left the kernels once measured
# (the commits named in docs/gpu-results.md hold them). Eleventh session
# (runs 107-115): PART=21 (decode tune + ncu; run 107), 22 (routing and
# warp rules; 108), 3,20 (109, an H200), 23-24 (the crossover; 110-111),
# 3,25,24,26 (the final state; 112), 27 (SASS stall samples; 113), 28
# (`nbar`; 114), 29 (`nbar` in `_rt` only; 115, a bit-for-bit test failed).
# Twelfth session: PART=30 (the narrow-slot decode kernels, `c2`),
# PART=31 (`nbar` against the own build, bit for bit; runs 116-117),
# PART=32 (`nbar` with immediate barrier ids; run 118: equal bits, no
# gain). Thirteenth session: PART=34 (n64 tails of the n256 kernels),
# PART=33 (the decode grid at small batches), PART=3 on an
# H200 (its last tables are run 109's). Fourteenth: PART=36,3 (run 122),
# PART=37 (FC1's grid on other small layers, custom bench shapes; run
# 123), PART=38 (the rule FC1_FEW_PAIRS against the one it replaced;
# run 124), PART=39,3 (6237da3 bit for bit against 967c2c9, the tables;
# run 125), PART=40 (the final commit's choices; FC2 at few pairs).
# Fifteenth: PART=41 (the combine inside FC2, `fcomb`), then PART=40
# (run 126); PART=42,3 (the FC2_FEW_MAX_CHUNKS rule; the tables; run
# 127), PART=43 (the few-pairs settings at 16-32 pairs).
# Sixteenth: PART=44 (FC2 with an epilogue warpgroup, `ewg`; run 129,
# H200), PART=45 (`ewx`; run 130); both removed. PART=46 (ncu of the
# landed and `ewx` FC2) prepared, not run: `pf-ewx` must be rebuilt from
# commit 3039628's kernels.
# PART=47: the TMA tile smoke check (needs a bundle from 10cb9f6 or later;
# run 131 hung: the probe's barrier, duplicated by LLVM, was `bar.sync`).
# Seventeenth session: PART=48 (FC2 fed by TMA, `tma`). Eighteenth:
# PART=50 (PART=48 reordered for a short call, plus `pf-land`; run 132),
# PART=51 (`tmac`: codes and scales by cp.async onto the mbarriers).
# Nineteenth: PART=3,52 (the tables; loads-only decode, `cmaj`, ncu; run
# 134, H100), PART=53 (the chunk-major layout against the previous bundle;
# run 135, H100: not landed). Twentieth: PART=55 (the decode timeline; on
# an H200 the tables first; run 136), PART=56 (the combine's ids before
# its wait, `cids`; run 137, landed), PART=57 (the landed `cids`; the
# routing kernel in one warp up to 64 pairs, `rw`; run 138), PART=58 (the
# landed `route_warp`, up to 16 pairs, against a2a081f; run 139), PART=55
# again (run 140), PART=59 (the in-block routing in one warp, `rtw`; run
# 141, landed in b7cb769).
# Twenty-first: PART=3,60 (the final state on b7cb769's bundle; where
# Qwen3 M = 1 goes: stages, FC1's grid, ncu; run 142), PART=61 (branch
# `land` = pair_of + `xz`, and `xs`, `xw`: the empty activation columns;
# FC1 on 2 blocks per SM). No device came for PART=61 in that session.
# Twenty-second: PART=61 (run 143, H100: none faster, not landed),
# PART=62 (SourceCounters: the codes' cp.async.cg copies ask L2 for each
# sector twice; run 144, H100), PART=63 (`cca`, `cldg`) built, not run.
# Twenty-third: PART=63 (run 145, H100: `cca` halves FC1's L2 sectors and
# is bit-exact, not faster; `cldg` differs only by its grid, M = 1 +15 %),
# PART=64 (`cbulk`: codes and scales by `cp.async.bulk`; the 4-warp grid
# at M = 2-8, with `cca`; on an H200 the landed tables and checks).
# PART=64 ran as run 146 (H100; cbulk refused by the driver: static
# shared memory beside the host's full dynamic limit), PART=65 (cbulk on
# a bundle whose host subtracts the static shared memory).
# NEXT CALL: OUT=$OUT PART=65 LIMIT=560 bash .gpu/run.sh (carry .gpu:
# bundle of 47a52dd (main's kernels, the host fixes), exp/decode-cbulk.ptx.xz
# and exp/decode-cca1.ptx.xz built by cargo xtask exp-ptx decode-X X,
# recompressed with xz -9). No device came for PART=65 in the
# twenty-third session.
# Twenty-fourth: no device came (ten calls found none; loans paused for
# half an hour). PART=66,65: the prefill tails, then PART=65. `bench prefill` now
# also times each point on a balanced routing (every expert the same
# count), so Qwen3 / DeepSeek-V3 at M = 8192 (no tails: 512 / 256 pairs
# per expert), 8704 (every expert a 32 / 16-pair tail) and 9216 (64 / 32)
# measure what the experts' partial and narrow tiles cost.
# NEXT CALL: OUT=$OUT PART=66,65 LIMIT=560 bash .gpu/run.sh (carry .gpu:
# bundle of 8a38033 or later, the same two exp PTX files).
# Twenty-fifth: PART=66,65 ran as run 147 (H100): balanced routing 3.9 %
# (Qwen3) / 14.8 % (DeepSeek-V3) faster at M = 8192, the narrow tails
# DRAM-bound; cbulk slower everywhere, cca1 mixed; neither landed.
# PART=67: `nfirst` (odd blocks run their narrow tiles first); run 148
# ran its cut-down PART=68 (H100): bit-exact, no faster, not landed.
# PART=69: Nsight Compute of DeepSeek-V3's mix256 FC1 / FC2 at M = 8704
# (what the narrow tiles' k-loop waits on).
# Twenty-sixth session (no device lent): the narrow kernels (`moe_pfn*`)
# built, kept as docs/runs/2026-12-08-nark-land.patch (branches do not
# outlive a session): the narrow kernels by default, PTX to rebuild
# (`git apply` it, `cargo xtask build-ptx`; sha256 in perf-notes), and
# the `nark8` experiment. PART=71 / 72: the patched bundle against
# main's PTX before it (`.gpu/exp/pf-old.ptx.xz`) and `nark8`. (PART=70,
# the first `nark`-only experiment, was removed: its build was not kept.)
# NEXT CALL (docs/perf-notes.md, twenty-sixth session): bash
# scripts/prepare-nark.sh (16 min here; it does what follows), or by hand: apply the patch,
# cargo xtask build-ptx, commit on a branch; cargo xtask gpu-bundle;
# git show main:host/ptx/sm_90a.ptx | xz -9 > .gpu/exp/pf-old.ptx.xz;
# cargo xtask exp-ptx pf-nark8 nark8 (then xz -9 its .gz into
# .gpu/exp/pf-nark8.ptx.xz); cp scripts/next-device-call.sh .gpu/run.sh;
# then OUT=$OUT PART=71 LIMIT=560 bash .gpu/run.sh (carry .gpu), and
# PART=72 on the warm machine. PART=69 (Nsight Compute of the old mix256
# kernels) is superseded by PART=72's profile of the narrow kernel.
# PART=3: the landed state (n256 and fdiv in the default PTX): tests,
#         sanitizers, prefill and decode benches (run 89 on an H100).
# PART=5: FC2 waiting per column group where the FC kernels route the
#         pairs themselves (`_rt_dp`, the deps build): its tests and
#         sanitizer, then decode at M = 1-8 with the waits forced on.
# PART=4: the prefill k-loops with one part left out (nosync, noload,
#         nowgmma, nofence builds): what bounds n128 and n256.
# Done (kept for the record): PART=0 (run 87: the n256 build, the decode
# timeline), PART=1 (run 88: deps / fdiv A/B), PART=2 (partly run 90; its
# n256 and fdiv builds are the default now). They need PTX files that
# .gpu/exp no longer holds (n256, decode-fdiv); the `run` steps whose
# files are missing fail on their own.
# Before the calls (here; .gpu/BUILT_FROM names the commit they hold):
#   cargo xtask gpu-bundle            # wait for it to return
#   cargo xtask exp-ptx pf-X X        # X = nosync, noload, nowgmma, nofence
#   cargo xtask exp-ptx decode-deps deps
#   cargo xtask exp-ptx decode-trace trace
#   cp scripts/next-device-call.sh .gpu/run.sh
# On the device (carry .gpu):  OUT=$OUT PART=3,5 bash .gpu/run.sh  (then PART=4)
# Afterwards: python3 scripts/ab-steps.py $OUT/all.log own  (the A/B table).
# Steps are in order of value; `run` skips what no longer fits the call.
C=$(dirname "$0")
. scripts/steps.sh
mkdir -p /tmp/b1 && tar xJf "$C/bundle.tar.xz" -C /tmp/b1
for x in deps trace fdiv; do [ -f "$C/exp/decode-$x.ptx.gz" ] && gunzip -c "$C/exp/decode-$x.ptx.gz" > /tmp/$x.ptx; done
[ -f "$C/exp/n256.ptx.gz" ] && gunzip -c "$C/exp/n256.ptx.gz" > /tmp/n256.ptx
for x in nosync noload nowgmma nofence w epi noepi silu sd0 nobulk stv4 stv4w dco dco1 evf evl s6 nfe epl eplw land fcomb fcomb2 ewg ewx tmaprobe tma tmac; do [ -f "$C/exp/pf-$x.ptx.gz" ] && gunzip -c "$C/exp/pf-$x.ptx.gz" > /tmp/pf-$x.ptx; done
D="env MOE4_PTX_FILE=/tmp/deps.ptx"
T="env MOE4_PTX_FILE=/tmp/trace.ptx"
F="env MOE4_PTX_FILE=/tmp/fdiv.ptx"
N="env MOE4_PTX_FILE=/tmp/n256.ptx"
# The bundle's tests and sanitizers (PART=3, 53), and its prefill and
# decode tables (PART=3, 53), on its own PTX.
landed_checks() {
  [ -n "$OWN_JIT" ] || run info-own 90 /tmp/b1/moe4 info
  OWN_JIT=1
  run smoke 60 /tmp/b1/moe4 smoke
  run test-prefill 120 /tmp/b1/test-prefill --test-threads=2
  run test-decode 200 /tmp/b1/test-decode --test-threads=2
  run test-limits 60 /tmp/b1/test-limits --test-threads=2
  run memcheck-prefill 60 "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-prefill 60 "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run memcheck-decode 60 "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
}
landed_tables() {
  run bench-prefill 60 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B \
    --m 2048,8192 --json "$OUT/prefill.json"
  run bench-decode 40 /tmp/b1/moe4 bench decode --json "$OUT/decode.json"
  run test-smoke 60 /tmp/b1/test-smoke --test-threads=2
  run test-w4a4 90 /tmp/b1/test-w4a4 --test-threads=2
}
# An experimental build (`cargo xtask exp-ptx decode-NAME ...`) against
# the bundle's own PTX: both through the JIT, then every output of the two
# compared bit for bit (`moe4 compare-ptx`). Sets X, the prefix that runs a
# command on it. The bundle's own PTX goes through the JIT once per call.
#   exp_compare NAME COMPARE_TIMEOUT
exp_compare() {
  if [ -f "$C/exp/decode-$1.ptx.xz" ]; then xz -dc "$C/exp/decode-$1.ptx.xz"; else gunzip -c "$C/exp/decode-$1.ptx.gz"; fi > "/tmp/$1.ptx"
  X="env MOE4_PTX_FILE=/tmp/$1.ptx"
  [ -n "$OWN_JIT" ] || run info-own 90 /tmp/b1/moe4 info
  OWN_JIT=1
  run "info-$1" 90 $X /tmp/b1/moe4 info
  run "compare-$1" "$2" /tmp/b1/moe4 compare-ptx "/tmp/$1.ptx"
}
# The twenty-sixth session's two PTX files (PART=71, 72), from .gpu/exp:
# main's before the narrow kernels (`O` runs a command on it) and the
# `nark8` build (`K`).
nark_ptx() {
  xz -dc "$C/exp/pf-old.ptx.xz" > /tmp/old.ptx
  xz -dc "$C/exp/pf-nark8.ptx.xz" > /tmp/nark8.ptx
  O="env MOE4_PTX_FILE=/tmp/old.ptx"
  K="env MOE4_PTX_FILE=/tmp/nark8.ptx"
}
# True on an H200 (issues 3 and 5 name its figures).
on_h200() { nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; }
for PART in $(echo "${PART:-3}" | tr , ' '); do
if [ "$PART" = 4 ]; then
  # Issue 5: what bounds the prefill k-loops (n128 and n256 alike): each
  # build leaves one part of the chunk out (wrong results, timings only);
  # the bench's width column times n64 / n128 / n256 under each.
  # Before: cargo xtask exp-ptx pf-X X, for X in nosync noload nowgmma nofence.
  for x in nosync noload nowgmma nofence; do run info-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 info; done
  for r in 1 2; do
    run ab-own-r$r 60 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
    for x in nosync noload nowgmma nofence; do
      run ab-$x-r$r 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
    done
  done
elif [ "$PART" = 3 ]; then
  # The landed state (n256 kernels and fdiv in the default PTX): tests,
  # sanitizers, the prefill and decode benches, all on the bundle's own PTX.
  landed_checks
  landed_tables
elif [ "$PART" = 61 ]; then
  # Twenty-first session, issue 3: `land` (the sm_90a PTX of branch
  # `land`: `pair_of`, the in-block routing's refactor, and `xz`, whose
  # decode FC kernels give an empty column's activations their zeros by
  # `st.shared` instead of `cp.async`'s ignore-src form). Why: run 142's
  # Nsight Compute counted L2 read sectors at ~2x the weights' in FC1 and
  # FC2 at Qwen3 M = 1, as if each empty column's 128 bytes per chunk were
  # read: 7 of 8 columns there, all on one x row's 32 lines. Predicted:
  # every output equal bit for bit; Qwen3 / GPT-OSS M = 1-2 -3 to -15 % if
  # those hot lines bound the streaming, 0 to -2 % if not; M = 64 within
  # 1 %. Then FC1 on 2 blocks per SM (run 142: FC1 alone
  # 10.9 against 11.8 us at Qwen3 M = 1) in the whole layer; Nsight
  # Compute of FC1 and FC2 (each build) and of the floor, with the L2
  # slices' max and mean.
  # Each build by name and the prefix that runs a command on it.
  declare -A P=([own]="")
  exp_compare land 60
  P[land]="$X"
  B="own land"
  # `xs` (cargo xtask exp-ptx decode-xs xs on branch `land`): the empty
  # columns' lanes copy and store nothing. `cargo xtask sass`, chunk loop
  # of `moe_fc2_bf16_nt4_r64`: own 419 instructions (11 LDS), `land` 469
  # (35 LDS, 8 STS: ptxas reloads what the stores might alias), `xs` 443
  # (23 LDS); FC1 `_rt` (pair_of too): 234 / 248 / 240.
  # `xw` (exp-ptx decode-xw xw on `land`): an empty column reads its
  # chunk's line of scales instead (the reads stay, spread over the
  # weights' lines: no hot x lines, no extra instructions). Against `xs`
  # it tells the L2 traffic from the hot lines.
  for x in xs xw; do
    if [ -f "$C/exp/decode-$x.ptx.xz" ]; then exp_compare $x 60; P[$x]="$X"; B="$B $x"; fi
  done
  # In order of value (the call may be cut short): the A/B, the tests,
  # the sanitizers, the grid rule, then Nsight Compute.
  DS=Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V4-Flash,DeepSeek-V3,Mixtral-8x7B
  ab_round() { for b in $B; do run ab-$b-r$1 60 ${P[$b]} /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,16,64; done; }
  ab_round 1
  ab_round 2
  L="${P[land]}"
  run test-decode-land 160 $L /tmp/b1/test-decode --test-threads=2
  run memcheck-land 40 $L "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run racecheck-land 40 $L "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  ab_round 3
  for r in 1 2; do
    run ab-b264-r$r 30 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V4-Flash --m 1,2,4 --tuning fc1_blocks=264
  done
  M="dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.max,lts__t_sectors_srcunit_tex_op_read.avg,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
  for b in $B; do
    run ncu-$b 60 ${P[$b]} "$NCU" --clock-control none -k "regex:moe_fc[12]_" -c 2 --metrics $M /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1
  done
  run ncu-floor 60 "$NCU" --clock-control none -k "regex:moe4_read_floor" -c 1 --metrics $M /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1
  # On an H200 (issue 3's and 5's cards; its tables are run 109's), the
  # landed state's tables and checks where time is left.
  if on_h200; then
    landed_tables
    landed_checks
  fi
elif [ "$PART" = 66 ]; then
  # Twenty-fourth session. Issue 5: what the experts' uneven counts cost
  # the prefill layer. Run 104's FC2 samples put 13 % in the narrow tail
  # tiles (64 pairs, 256 weight rows: each decodes all its expert's
  # weights again for at most 64 pairs) at Qwen3 M = 8192, where about
  # half the experts have one; at DeepSeek-V3 M = 8192 (256 pairs per
  # expert on average) half the experts add a tail to their one 256-pair
  # tile. The bench's balanced routing gives every expert the same count:
  # at 8192 none has a tail, at 8704 / 9216 every expert has one (Qwen3
  # 32 / 64 pairs, DeepSeek-V3 16 / 32). Predicted (run 119: 128-pair
  # tails -> 64 saved 3.3 / 2.9 %, a 64-pair tile costing ~0.65 of a
  # 128-pair one, so the 64-pair tails are ~6 / ~5 % of the layer):
  # balanced 8192 faster than random by 4-8 % on both; balanced 8704 and
  # 9216 slower than 8192 scaled by the pairs by 5-10 %. (A 256 + 64-pair
  # tile, one decode of the weights for both `wgmma`s, does not fit the
  # n256 kernels' registers: a compile-only probe made ptxas serialize
  # the `wgmma`s; docs/perf-notes.md, twenty-fourth session.) Called as
  # PART=66,65: issue 3's PART=65 follows.
  run prefill-tails 150 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704,9216
elif [ "$PART" = 71 ]; then
  # Twenty-sixth session: the narrow kernels landed (the bundle's own PTX,
  # docs/runs/2026-12-08-nark-land.patch applied), against the PTX before them (main's at 8b6835b,
  # `.gpu/exp/pf-old.ptx.xz`, whose `_mix256` kernels run the narrow
  # groups themselves): bit for bit (compare-ptx), the prefill tests, an
  # A/B round; then the `nark8` build (`cargo xtask exp-ptx pf-nark8
  # nark8`: the narrow kernels on 8-warp blocks of 128 rows, two per SM,
  # the `_w8` kernels the host prefers), compared bit for bit and timed;
  # then the sanitizers. PART=72 follows (the second round, the tables,
  # Nsight Compute). Predicted, own against old: DeepSeek-V3 M = 8192
  # (random) -5 to -7 %, 8704 -8 to -12 %; Qwen3 8192 -1 to -2 %, 8704 -3
  # to -5 %; bit for bit equal. nark8 against own: within +-3 % (the same
  # warps per SM; its blocks do not wait on each other's barriers).
  nark_ptx
  [ -n "$OWN_JIT" ] || run info-own 90 /tmp/b1/moe4 info
  OWN_JIT=1
  # (compare-ptx puts the other PTX through the JIT first: cached for its
  # bench.)
  run compare-old 120 /tmp/b1/moe4 compare-ptx /tmp/old.ptx
  run test-prefill 120 /tmp/b1/test-prefill --test-threads=2
  run pf-own-r1 60 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704
  run pf-old-r1 60 $O /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704
  run compare-nark8 120 /tmp/b1/moe4 compare-ptx /tmp/nark8.ptx
  run pf-nark8-r1 60 $K /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704
  run memcheck-prefill 60 "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-prefill 60 "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run test-limits 60 /tmp/b1/test-limits --test-threads=2
elif [ "$PART" = 72 ]; then
  # After PART=71 on the same bundle (the JIT cache warm if the machine
  # is): the second A/B round, test-prefill on nark8, smoke, the H200
  # tables if an H200 came, Nsight Compute of the narrow FC1.
  nark_ptx
  run pf-own-r2 80 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704
  run pf-old-r2 80 $O /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704
  run pf-nark8-r2 80 $K /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704
  run test-prefill-nark8 120 $K /tmp/b1/test-prefill --test-threads=2
  run smoke 60 /tmp/b1/moe4 smoke
  if on_h200; then landed_tables; fi
  SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters"
  run ncu-pfn1 150 "$NCU" --clock-control none -k "regex:moe_pfn1_bf16$" -c 1 $SEC \
    --import-source no -f -o /tmp/prof-pfn1 /tmp/b1/moe4 bench prefill --shape DeepSeek-V3 --m 8704 --quick
  run ncu-pfn1-details 60 "$NCU" -i /tmp/prof-pfn1.ncu-rep --page details --print-details all
elif [ "$PART" = 69 ]; then
  # Twenty-fifth session, issue 5, after run 148 (`nfirst`: the narrow
  # tiles are not slow for streaming their weights all at once): what the
  # narrow tiles' k-loop waits on. Nsight Compute of one DeepSeek-V3 FC1
  # launch at M = 8704 (random routing: most experts one 256-pair group and
  # a 1-64-pair rest), per-instruction stalls (SourceCounters) and warp
  # states; the SASS table as CSV, to split the samples between the wide
  # loop and the narrow one (`cargo xtask sass moe_pfw1_bf16_mix256` here
  # gives the loops' instruction ranges). Then the same for FC2.
  SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters"
  for fc in 1 2; do
    run ncu-pfw$fc 200 "$NCU" --clock-control none -k "regex:moe_pfw${fc}_bf16_mix256$" -c 1 $SEC \
      --import-source no -f -o /tmp/prof-pfw$fc /tmp/b1/moe4 bench prefill --shape DeepSeek-V3 --m 8704 --quick
    run ncu-pfw$fc-details 60 "$NCU" -i /tmp/prof-pfw$fc.ncu-rep --page details --print-details all
    run ncu-pfw$fc-sass 60 sh -c "'$NCU' -i /tmp/prof-pfw$fc.ncu-rep --page source --print-source sass --csv | gzip > '$OUT/ncu-pfw$fc-sass.csv.gz'"
  done
  # On an H200, the landed tables as well (issue 5's H200 figures are
  # still runs 109 / 129).
  if on_h200; then landed_tables; fi
elif [ "$PART" = 68 ]; then
  # PART=67 cut to what fits ~3 minutes (the session's last device time):
  # one A/B round (each bench pays its build's JIT first), then compare-ptx.
  xz -dc "$C/exp/pf-nfirst.ptx.xz" > /tmp/nfirst.ptx
  N="env MOE4_PTX_FILE=/tmp/nfirst.ptx"
  run pf-own-r1 95 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704
  run pf-nfirst-r1 95 $N /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704
  run compare-nfirst 20 /tmp/b1/moe4 compare-ptx /tmp/nfirst.ptx
elif [ "$PART" = 67 ]; then
  # Twenty-fifth session, issue 5: the narrow tiles' DRAM reads overlapped
  # with other blocks' wide tiles. Run 147: a DeepSeek-V3 tail costs
  # ~10.5 µs of layer per expert whatever its pairs (16 or 32), its
  # 24.8 MB of weights at ~2.4 TB/s: the narrow tiles, which every block
  # runs at the end of each mixed FC kernel, look DRAM-bound. `nfirst`
  # (exp-ptx pf-nfirst nfirst): odd blocks run their narrow tiles first,
  # so half the blocks stream narrow tiles while the others run
  # compute-bound wide ones; the same tiles per block, bit for bit equal.
  # Predicted: DeepSeek-V3 M = 8192 (random) -4 to -8 %, 8704 -6 to -10 %;
  # Qwen3 8192 -1 to -3 %, 8704 -3 to -6 %; the balanced 8192 column (no
  # tails) within 1 %.
  xz -dc "$C/exp/pf-nfirst.ptx.xz" > /tmp/nfirst.ptx
  N="env MOE4_PTX_FILE=/tmp/nfirst.ptx"
  [ -n "$OWN_JIT" ] || run info-own 90 /tmp/b1/moe4 info
  OWN_JIT=1
  run info-nfirst 90 $N /tmp/b1/moe4 info
  run compare-nfirst 30 /tmp/b1/moe4 compare-ptx /tmp/nfirst.ptx
  for r in 1 2; do
    run pf-own-r$r 80 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704
    run pf-nfirst-r$r 80 $N /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192,8704
    # (After the first round: the tests before the second.)
    [ $r = 1 ] && run test-prefill-nfirst 120 $N /tmp/b1/test-prefill --test-threads=2
  done
  run test-limits-nfirst 60 $N /tmp/b1/test-limits --test-threads=2
  run memcheck-nfirst 60 $N "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-nfirst 60 $N "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-nfirst-k64 90 $N "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_one_chunk_k
  # On an H200 (issue 5's card; its prefill table is run 129's), the
  # landed tables.
  if on_h200; then landed_tables; fi
elif [ "$PART" = 65 ]; then
  # Twenty-third session, issue 3: `cbulk` again on a bundle whose host
  # sets each kernel's dynamic shared memory limit less its static shared
  # memory (run 146: with the full limit the driver refused cbulk's
  # kernels, CUDA_ERROR_INVALID_VALUE; nothing of cbulk ran). Prediction
  # as in PART=64, less the SASS's +54 instructions per chunk (288 against
  # 234): Qwen3 M = 1 within -3 to +5 %. `cca1` (exp-ptx decode-cca1
  # cca1): `.ca` codes in FC1 only (run 145's Nsight Compute: FC1 alone
  # -2.5 %, FC2 +3.2 % with `cca`). Predicted: Qwen3 M = 1 -1 to +1 %,
  # M = 4 -2 to -4 % (`cca` there -3.4 / -3.6 %); bit for bit equal.
  declare -A P=([own]="")
  B=own
  for x in cbulk cca1; do
    if [ -f "$C/exp/decode-$x.ptx.xz" ]; then exp_compare $x 30; P[$x]="$X"; B="$B $x"; fi
  done
  M="dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum"
  [ -n "${P[cbulk]+x}" ] && run ncu-cbulk 30 ${P[cbulk]} "$NCU" --clock-control none -k "regex:moe_fc[12]_" -c 2 --metrics $M /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1
  for r in 1 2 3; do
    for b in $B; do run ab-$b-r$r 20 ${P[$b]} /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3,Qwen1.5-MoE:2048:1408:60:4 --m 1,2,4,16,64; done
  done
  for b in $B; do
    run ldonly-$b 20 ${P[$b]} /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1,2 --tuning launches=2,load_only=true
  done
  if [ -n "${P[cbulk]+x}" ]; then
    run test-decode-cbulk 160 ${P[cbulk]} /tmp/b1/test-decode --test-threads=2
    run memcheck-cbulk 40 ${P[cbulk]} "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  fi
  # On an H200 (issue 3's and 5's cards; its tables are run 109's / 129's),
  # the landed state's tables and checks.
  if on_h200; then
    landed_tables
    landed_checks
  fi
elif [ "$PART" = 64 ]; then
  # Twenty-third session, issue 3 (after run 145: `cca` asks L2 once per
  # sector and makes the loads-only FC1 10 % faster, but the layer is not
  # faster). (1) `cbulk` (exp-ptx decode-cbulk cbulk): each chunk's codes
  # and scales as two `cp.async.bulk` copies by lane 0 completing on the
  # slot's `mbarrier` (once per sector, past L1 and the LSU; the
  # activations keep `cp.async`). Predicted: L2 read sectors as `cca`
  # (~450K at FC1); if `cca`'s loss was its path through L1, Qwen3 /
  # GPT-OSS M = 1-4 -3 to -8 %, else within 2 %; bit for bit equal where
  # the grid is (256 bytes of static shared memory per block; the 8-warp
  # FC1 spills a word). (2) The grid at M = 2-8: `cldg` (M = 2 / 4, FC1
  # on 4 blocks per SM instead of 5), `cca` (M = 4) and FC1 on 264 blocks
  # (run 143, M = 4) were 3-4 % faster there; the host gives every
  # resident block beyond 8 pairs. Both FC kernels on 2 / 3 / 4 blocks per
  # SM (`fc_blocks`, clamped to the resident count: the 8-warp kernels
  # hold 3), FC1 alone on 4, `cca` on 4. Predicted: if the grid is what
  # `cldg` bought, `fc528` -2 to -4 % at Qwen3 M = 2-4; M = 1 slower off
  # 396 (runs 120-124).
  declare -A P=([own]="")
  B="own"
  for x in cbulk cca; do
    if [ -f "$C/exp/decode-$x.ptx.xz" ]; then exp_compare $x 30; P[$x]="$X"; B="$B $x"; fi
  done
  M="dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum"
  [ -n "${P[cbulk]+x}" ] && run ncu-cbulk 30 ${P[cbulk]} "$NCU" --clock-control none -k "regex:moe_fc[12]_" -c 2 --metrics $M /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1
  P[fc528]=""; P[fc1b528]=""; P[fc396]=""; P[fc264]=""
  B="$B fc528 fc1b528 fc396 fc264"
  [ -n "${P[cca]+x}" ] && { P[cca528]="${P[cca]}"; B="$B cca528"; }
  declare -A TU=([own]="" [cbulk]="" [cca]="" [fc264]="--tuning fc_blocks=264" [fc396]="--tuning fc_blocks=396" \
    [fc528]="--tuning fc_blocks=528" [fc1b528]="--tuning fc1_blocks=528" [cca528]="--tuning fc_blocks=528")
  SH=Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V4-Flash,Qwen1.5-MoE:2048:1408:60:4,OLMoE:2048:1024:64:8
  for r in 1 2 3; do
    for b in $B; do run ab-$b-r$r 30 ${P[$b]} /tmp/b1/moe4 bench decode --shape $SH --m 1,2,4,8 ${TU[$b]}; done
  done
  for b in own cbulk cca; do
    [ -n "${P[$b]+x}" ] && run ldonly-$b 20 ${P[$b]} /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1,2 --tuning launches=2,load_only=true
  done
  if [ -n "${P[cbulk]+x}" ]; then
    run ab-cbulk-big 40 ${P[cbulk]} /tmp/b1/moe4 bench decode --shape DeepSeek-V3,Mixtral-8x7B --m 1,16,64
    run ab-own-big 40 /tmp/b1/moe4 bench decode --shape DeepSeek-V3,Mixtral-8x7B --m 1,16,64
    run test-decode-cbulk 160 ${P[cbulk]} /tmp/b1/test-decode --test-threads=2
    run memcheck-cbulk 40 ${P[cbulk]} "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  fi
  if on_h200; then
    landed_tables
    landed_checks
  fi
elif [ "$PART" = 63 ]; then
  # Twenty-second session, issue 3 (after run 144's SourceCounters): each
  # decode FC kernel's codes copy (`cp.async.cg`, 16 bytes a lane, a warp's
  # 512 bytes contiguous) asks L2 for 32 sectors where 16 hold the bytes
  # (FC1 at Qwen3 M = 1: 786K of its 842K L2 read sectors are codes,
  # twice their 393K), while the 4-byte `.ca` scale copies coalesce.
  # `cca` (exp-ptx decode-cca cca, branch `cca`): the same copies `.ca`.
  # Predicted: if `.ca` coalesces them, FC1's L2 read sectors ~450K; the
  # time changes only if the doubled sector requests bound the stream
  # (Qwen3 / GPT-OSS M = 1-4 faster), else within 1 %.
  # `cldg` (exp-ptx decode-cldg cldg, branch `cldg`): the `_rt` 4-warp
  # kernels (Qwen3 M = 1-4, GPT-OSS M = 1) load a task's later chunks'
  # codes with `ld.global` 16 bytes a lane (once per sector, as the floor)
  # into registers S - 1 = 3 chunks ahead and store them into the slot
  # just before the chunk is read. 118-122 registers against 80-84: 4
  # resident blocks per SM instead of 6, so only M = 1 (3 per SM by the
  # few-pairs rule) compares like for like; M = 2-4 run on fewer blocks.
  declare -A P=([own]="")
  B=own
  for x in cca cldg; do
    if [ -f "$C/exp/decode-$x.ptx.xz" ]; then exp_compare $x 30; P[$x]="$X"; B="$B $x"; fi
  done
  M="dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum"
  for b in $B; do
    run ncu-$b 30 ${P[$b]} "$NCU" --clock-control none -k "regex:moe_fc[12]_" -c 2 --metrics $M /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1
  done
  for r in 1 2 3; do
    for b in $B; do run ab-$b-r$r 20 ${P[$b]} /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3 --m 1,2,4,16,64; done
  done
  # The loads-only FC1 (the `_ld_rt` kernel, which `cldg` changes too).
  for b in $B; do
    run ldonly-$b 20 ${P[$b]} /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1,2 --tuning launches=2,load_only=true
  done
  if [ -n "${P[cldg]+x}" ]; then
    run test-decode-cldg 160 ${P[cldg]} /tmp/b1/test-decode --test-threads=2
    run memcheck-cldg 40 ${P[cldg]} "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
    run racecheck-cldg 40 ${P[cldg]} "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  fi
elif [ "$PART" = 62 ]; then
  # Twenty-second session, issue 3 (after run 143): run 143's Nsight
  # Compute counted the same L2 read sectors (FC1 842K, FC2 422K at Qwen3
  # M = 1) for own, `xz`, `xs` (no copy at all for empty columns) and
  # `xw`: the ~32 extra sectors per chunk (all L2 hits; 25 requests per
  # chunk where codes, scales and x make ~11) are not the empty columns.
  # Which instructions make them: the SourceCounters section (excessive
  # sectors per instruction), on the full kernels and the loads-only FC1,
  # and the per-instruction table of the source page.
  Q=Qwen3-30B-A3B
  M="dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum,lts__t_sectors_srcunit_tex_op_write.sum"
  run ncu-src 150 "$NCU" --clock-control none -k "regex:moe_fc[12]_" -c 2 --section SourceCounters --section MemoryWorkloadAnalysis_Tables \
    --import-source no -f -o /tmp/prof-src /tmp/b1/moe4 bench decode --shape $Q --m 1
  run ncu-src-details 60 "$NCU" -i /tmp/prof-src.ncu-rep --page details --print-details all
  run ncu-src-sass 60 sh -c "'$NCU' -i /tmp/prof-src.ncu-rep --page source --print-source sass --csv > '$OUT/ncu-src-sass.csv'; ls -la '$OUT'"
  run ncu-ld 60 "$NCU" --clock-control none -k "regex:moe_fc1_" -c 1 --metrics $M /tmp/b1/moe4 bench decode --shape $Q --m 1 --tuning launches=2,load_only=true
  run ncu-full 60 "$NCU" --clock-control none -k "regex:moe_fc[12]_" -c 2 --metrics $M /tmp/b1/moe4 bench decode --shape $Q --m 1
  cp /tmp/prof-src.ncu-rep "$OUT/" 2>/dev/null
elif [ "$PART" = 60 ]; then
  # Twenty-first session, issue 3: where Qwen3-30B-A3B's M = 1 goes (H100
  # run 140: FC1 streams 14 MB from 1.4 to 8.5-9.5 us after its wait,
  # ~1.8 TB/s, where the floor kernel reads at ~3). The stages alone by
  # `launches` (FC1; FC1 + FC2; the layer), FC1's grid swept with the full
  # and the loads-only kernels (FC1 alone), then Nsight Compute of FC1 and
  # FC2 (memory tables: DRAM, L2 hit rate, L1 requests; warp states).
  Q=Qwen3-30B-A3B
  for r in 1 2; do
    for l in 2 3 4; do run ab-l$l-r$r 30 /tmp/b1/moe4 bench decode --shape $Q,GPT-OSS-120B --m 1,2 --tuning launches=$l; done
    for b in 132 264 396 528 660; do
      run ab-fc1b$b-r$r 30 /tmp/b1/moe4 bench decode --shape $Q --m 1,2 --tuning launches=2,fc1_blocks=$b
      run ab-fc1b$b-ld-r$r 30 /tmp/b1/moe4 bench decode --shape $Q --m 1,2 --tuning launches=2,fc1_blocks=$b,load_only=true
    done
  done
  run ncu-q1 120 "$NCU" --clock-control none -k "regex:moe_fc[12]_" -c 2 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats \
    --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    -f -o /tmp/prof-q1 /tmp/b1/moe4 bench decode --shape $Q --m 1
  run ncu-q1-details 60 "$NCU" -i /tmp/prof-q1.ncu-rep --page details --print-details all
  cp /tmp/prof-q1.ncu-rep "$OUT/" 2>/dev/null
elif [ "$PART" = 0 ]; then
  # Issue 5: the 128-row x 256-pair wgmma prefill kernels (n256 build):
  # the instruction, the layer against the reference, then the prefill
  # bench (its width column times n64 / n128 / n256 in one run).
  run info-n256 120 $N /tmp/b1/moe4 info
  run smoke-n256 60 $N /tmp/b1/moe4 smoke
  run test-prefill-n256 120 $N /tmp/b1/test-prefill --test-threads=2
  for r in 1 2; do
    run ab-n256-r$r 60 $N /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 2048,8192 \
      --json "$OUT/prefill-n256-r$r.json"
  done
  run memcheck-n256 120 $N "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-n256 120 $N "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run bench-prefill-n256 150 $N /tmp/b1/moe4 bench prefill --json "$OUT/prefill-n256-all.json"
  # Then the decode timeline (PART=1's first step).
  run info-trace 120 $T /tmp/b1/moe4 info
  run timeline 200 $T /tmp/b1/moe4 bench timeline --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3 \
    --m 1,2,4,8,16,64 --json "$OUT/timeline.json"
elif [ "$PART" = 1 ]; then
  # First loads of each PTX (the driver's JIT: 20-40 s each).
  run info-trace 120 $T /tmp/b1/moe4 info
  # 1. Where a decode call's time goes (perf-notes, next steps 1).
  run timeline 200 $T /tmp/b1/moe4 bench timeline --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3 \
    --m 1,2,4,8,16,64 --json "$OUT/timeline.json"
  run info-deps 120 $D /tmp/b1/moe4 info
  run info-fdiv 120 $F /tmp/b1/moe4 info
  run info-own 90 /tmp/b1/moe4 info
  # 2. The deps and fdiv builds: tests, then three alternating rounds.
  run test-decode-deps 240 $D /tmp/b1/test-decode --test-threads=2
  run test-decode-fdiv 240 $F /tmp/b1/test-decode --test-threads=2
  run test-limits-deps 60 $D /tmp/b1/test-limits --test-threads=2
  run test-limits-fdiv 60 $F /tmp/b1/test-limits --test-threads=2
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode
    run ab-deps-r$r 40 $D /tmp/b1/moe4 bench decode --json "$OUT/decode-deps-r$r.json"
    run ab-fdiv-r$r 40 $F /tmp/b1/moe4 bench decode --json "$OUT/decode-fdiv-r$r.json"
  done
  run memcheck-deps 90 $D "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run racecheck-deps 90 $D "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
elif [ "$PART" = 2 ]; then
  run info-own 90 /tmp/b1/moe4 info
  # 3. Host rules from the tune leads, one program: DeepSeek-V3 / V4-Pro
  #    M = 1-2 on two column tiles; Qwen3 M = 8-32 on the 4-warp kernels.
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape DeepSeek-V3,DeepSeek-V4-Pro,Qwen3-30B-A3B --m 1,2,8,16,32
    run ab-nt2-r$r 40 /tmp/b1/moe4 bench decode --shape DeepSeek-V3,DeepSeek-V4-Pro --m 1,2 --tuning nt=2
    run ab-w4-r$r 40 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 8,16,32 --tuning wide=false
  done
  # 4. The trace build's notes change no result; the fdiv build under the
  #    sanitizers.
  run info-trace 120 $T /tmp/b1/moe4 info
  run test-decode-trace 240 $T /tmp/b1/test-decode --test-threads=2
  run info-fdiv 120 $F /tmp/b1/moe4 info
  run memcheck-fdiv 90 $F "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run racecheck-fdiv 90 $F "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  # 5. m64n256k16 from registers x a 256-row swizzled B: the 128 x 256
  #    prefill tile's instruction, against the CPU (issue 5's lead).
  run smoke-n256 120 env MOE4_PTX_FILE=/tmp/n256.ptx /tmp/b1/moe4 smoke
elif [ "$PART" = 6 ]; then
  # The knobs alone, one round, each build's JIT (info) just before it.
  run info-own 90 /tmp/b1/moe4 info
  run ab-own-r1 60 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
  for x in nowgmma noload nosync nofence; do
    run info-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 info
    run ab-$x-r1 30 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
  done
elif [ "$PART" = 7 ]; then
  # Issue 5, two prefill candidates (n256 kernels), each against the
  # default in alternating rounds: `w` (the tile's own chunks 8-12 ahead
  # into L2) and `epi` (FC1's epilogue without a branch per output, the
  # tile switch's token divisions by a reciprocal). Tests first; the first
  # own step pays the default PTX's JIT.
  for x in w epi; do
    run info-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 info
    run test-prefill-$x 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/test-prefill --test-threads=2
  done
  run memcheck-epi 60 env MOE4_PTX_FILE=/tmp/pf-epi.ptx "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-epi 60 env MOE4_PTX_FILE=/tmp/pf-epi.ptx "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run ab-own-r1 90 /tmp/b1/moe4 bench prefill --shape DeepSeek-V3,Qwen3-30B-A3B --m 8192
  for r in 1 2 3; do
    for x in w epi; do
      run ab-$x-r$r 30 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 bench prefill --shape DeepSeek-V3,Qwen3-30B-A3B --m 8192
    done
    [ $r = 1 ] || run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape DeepSeek-V3,Qwen3-30B-A3B --m 8192
  done
elif [ "$PART" = 8 ]; then
  # The landed state with `epi` (run 93 measured it on an H100 only):
  # prefill tests and sanitizers, the prefill bench, then the `noepi` knob
  # (the n256 / n128 epilogues left out: what the per-tile epilogue costs
  # of the ~6.7k cycles a Qwen3 tile spends outside its k-loop), then the
  # decode side and the rest of the tests.
  run info-own 90 /tmp/b1/moe4 info
  run test-prefill 120 /tmp/b1/test-prefill --test-threads=2
  run smoke 60 /tmp/b1/moe4 smoke
  run memcheck-prefill 60 "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-prefill 60 "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run bench-prefill 60 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B \
    --m 2048,8192 --json "$OUT/prefill.json"
  run info-noepi 90 env MOE4_PTX_FILE=/tmp/pf-noepi.ptx /tmp/b1/moe4 info
  for r in 1 2; do
    run ab-noepi-r$r 30 env MOE4_PTX_FILE=/tmp/pf-noepi.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
  done
  run test-decode 200 /tmp/b1/test-decode --test-threads=2
  run memcheck-decode 60 "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run bench-decode 40 /tmp/b1/moe4 bench decode --json "$OUT/decode.json"
  run test-limits 60 /tmp/b1/test-limits --test-threads=2
  run test-smoke 60 /tmp/b1/test-smoke --test-threads=2
  run test-w4a4 90 /tmp/b1/test-w4a4 --test-threads=2
elif [ "$PART" = 9 ]; then
  # Issue 5, the FC1 epilogue (run 94: the epilogues are 14 % of Qwen3's
  # layer): `silu` (SiLU without the clamps' 6 instructions per output
  # where the limit is +inf; bits unchanged), `sd0` (silu + each tile's
  # first wgmma overwrites the accumulators instead of 64-128 zeroing
  # instructions per tile). Tests and sanitizers first, then alternating
  # rounds against the default.
  for x in silu sd0; do
    run info-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 info
    run test-prefill-$x 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/test-prefill --test-threads=2
  done
  run memcheck-sd0 60 env MOE4_PTX_FILE=/tmp/pf-sd0.ptx "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-sd0 60 env MOE4_PTX_FILE=/tmp/pf-sd0.ptx "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run info-own 90 /tmp/b1/moe4 info
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
    for x in silu sd0; do
      run ab-$x-r$r 30 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
    done
  done
  run smoke-sd0 60 env MOE4_PTX_FILE=/tmp/pf-sd0.ptx /tmp/b1/moe4 smoke
elif [ "$PART" = 10 ]; then
  # The landed `silu` PTX against the pf-silu build that run 95 timed.
  run info-silu 90 env MOE4_PTX_FILE=/tmp/pf-silu.ptx /tmp/b1/moe4 info
  for r in 1 2; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
    run ab-silu-r$r 30 env MOE4_PTX_FILE=/tmp/pf-silu.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
  done
elif [ "$PART" = 11 ]; then
  # Issue 5: the epilogues' 14 % (run 94), split: `nobulk` writes the
  # staging tiles but copies nothing out (no bulk copies, nothing for the
  # next tile to wait on); `noepi` writes nothing. Timing only.
  run info-own 90 /tmp/b1/moe4 info
  for x in nobulk noepi; do run info-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 info; done
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
    for x in nobulk noepi; do
      run ab-$x-r$r 30 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
    done
  done
elif [ "$PART" = 12 ]; then
  # Issue 5: run 97 put ~90 of the epilogues' ~155 us (Qwen3) on the bulk
  # copies; `stv4` copies the n256 staging tiles out with coalesced
  # 16-byte loads and stores instead. Tests and sanitizers, then A/B.
  run info-stv4 90 env MOE4_PTX_FILE=/tmp/pf-stv4.ptx /tmp/b1/moe4 info
  run test-prefill-stv4 60 env MOE4_PTX_FILE=/tmp/pf-stv4.ptx /tmp/b1/test-prefill --test-threads=2
  run memcheck-stv4 60 env MOE4_PTX_FILE=/tmp/pf-stv4.ptx "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-stv4 60 env MOE4_PTX_FILE=/tmp/pf-stv4.ptx "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run info-own 90 /tmp/b1/moe4 info
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
    run ab-stv4-r$r 30 env MOE4_PTX_FILE=/tmp/pf-stv4.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
  done
elif [ "$PART" = 13 ]; then
  run info-own 90 /tmp/b1/moe4 info
  run test-prefill 60 /tmp/b1/test-prefill --test-threads=2
  run memcheck-prefill 60 "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-prefill 60 "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run smoke 30 /tmp/b1/moe4 smoke
  run bench-prefill 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
  run test-limits 40 /tmp/b1/test-limits --test-threads=2
elif [ "$PART" = 14 ]; then
  # Issue 5: the 128-pair kernels (prefill_wg.rs: the `_mix` tails of the
  # n256 layers, and every tile at M = 2048) copy their staging tiles out
  # with coalesced 16-byte stores, as the n256 kernels since run 98.
  run info-stv4w 90 env MOE4_PTX_FILE=/tmp/pf-stv4w.ptx /tmp/b1/moe4 info
  run test-prefill-stv4w 60 env MOE4_PTX_FILE=/tmp/pf-stv4w.ptx /tmp/b1/test-prefill --test-threads=2
  run memcheck-stv4w 60 env MOE4_PTX_FILE=/tmp/pf-stv4w.ptx "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-stv4w 60 env MOE4_PTX_FILE=/tmp/pf-stv4w.ptx "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run info-own 90 /tmp/b1/moe4 info
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 2048,8192
    run ab-stv4w-r$r 30 env MOE4_PTX_FILE=/tmp/pf-stv4w.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 2048,8192
  done
elif [ "$PART" = 15 ]; then
  # Issue 5: the n256 kernels' staging tile in a region of its own, copied
  # out during the next tile's first 8 chunks (dco: FC1 and FC2, FC2 with
  # 4 stages; dco1: FC1 only). The host's shared memory covers both.
  for x in dco dco1; do
    run info-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 info
    run test-prefill-$x 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/test-prefill --test-threads=2
    run memcheck-$x 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
    run racecheck-$x 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  done
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 2048,8192
    run ab-dco-r$r 30 env MOE4_PTX_FILE=/tmp/pf-dco.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 2048,8192
    run ab-dco1-r$r 30 env MOE4_PTX_FILE=/tmp/pf-dco1.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 2048,8192
  done
elif [ "$PART" = 16 ]; then
  # Issue 5: L2 policies in the n256 kernels: the copies out evict first
  # (evf), and FC1's activation loads evict last as well (evl).
  for x in evf evl; do
    run info-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 info
    run test-prefill-$x 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/test-prefill --test-threads=2
    run memcheck-$x 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  done
  run info-own 90 /tmp/b1/moe4 info
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 8192
    run ab-evf-r$r 30 env MOE4_PTX_FILE=/tmp/pf-evf.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 8192
    run ab-evl-r$r 30 env MOE4_PTX_FILE=/tmp/pf-evl.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 8192
  done
elif [ "$PART" = 17 ]; then
  # Issue 5: the n256 kernels with 6 stages (s6: loads 4 chunks ahead; the
  # host gives them 227 KiB), and without the proxy fence before the
  # epilogue's barrier (nfe: the landed candidate, correctness first).
  for x in nfe s6; do
    run info-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 info
    run test-prefill-$x 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/test-prefill --test-threads=2
    run memcheck-$x 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
    run racecheck-$x 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  done
  run info-own 90 /tmp/b1/moe4 info
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 8192
    run ab-s6-r$r 30 env MOE4_PTX_FILE=/tmp/pf-s6.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 8192
    run ab-nfe-r$r 30 env MOE4_PTX_FILE=/tmp/pf-nfe.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B --m 8192
  done
elif [ "$PART" = 18 ]; then
  # Issue 5: Nsight Compute on one FC1 and one FC2 launch of the n256
  # kernels (Qwen3-30B-A3B, M = 8192): the tensor pipe's and shared
  # memory's utilization and the stall reasons, for the structural design.
  for fc in 1 2; do
    run ncu-fc$fc 200 "$NCU" --clock-control none -k "regex:moe_pfw${fc}_bf16_(n256|mix256)" -c 1 --set full \
      --import-source no -f -o /tmp/prof-fc$fc /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B --m 8192
    run ncu-fc$fc-details 60 "$NCU" -i /tmp/prof-fc$fc.ncu-rep --page details --print-details all
    cp /tmp/prof-fc$fc.ncu-rep "$OUT/" 2>/dev/null
  done
elif [ "$PART" = 19 ]; then
  # Issue 5: the n256 epilogues with the expert's global scales loaded
  # before the drain and FC2's y rows read before the copies out (epl: the
  # source as committed, built by exp-ptx with no cfg), against the
  # bundle's own PTX.
  run info-epl 90 env MOE4_PTX_FILE=/tmp/pf-epl.ptx /tmp/b1/moe4 info
  run test-prefill-epl 60 env MOE4_PTX_FILE=/tmp/pf-epl.ptx /tmp/b1/test-prefill --test-threads=2
  run memcheck-epl 60 env MOE4_PTX_FILE=/tmp/pf-epl.ptx "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-epl 60 env MOE4_PTX_FILE=/tmp/pf-epl.ptx "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run smoke-epl 60 env MOE4_PTX_FILE=/tmp/pf-epl.ptx /tmp/b1/moe4 smoke
  run info-own 90 /tmp/b1/moe4 info
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B --m 8192
    run ab-epl-r$r 30 env MOE4_PTX_FILE=/tmp/pf-epl.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B --m 8192
  done
elif [ "$PART" = 20 ]; then
  # Issue 5: the 128-pair kernels' (prefill_wg.rs: every tile at M = 2048,
  # the `_mix256` tails at 8192) global scales loaded before the drain, as
  # `epl` did for n256 (eplw). Prediction: M = 2048 -0.5 to -1.5 %, M = 8192
  # within ±0.5 %.
  run info-eplw 90 env MOE4_PTX_FILE=/tmp/pf-eplw.ptx /tmp/b1/moe4 info
  run test-prefill-eplw 60 env MOE4_PTX_FILE=/tmp/pf-eplw.ptx /tmp/b1/test-prefill --test-threads=2
  run memcheck-eplw 60 env MOE4_PTX_FILE=/tmp/pf-eplw.ptx "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-eplw 60 env MOE4_PTX_FILE=/tmp/pf-eplw.ptx "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run info-own 90 /tmp/b1/moe4 info
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B --m 2048,8192
    run ab-eplw-r$r 30 env MOE4_PTX_FILE=/tmp/pf-eplw.ptx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B --m 2048,8192
  done
elif [ "$PART" = 21 ]; then
  # Issue 3: where the decode kernels' time goes at the points furthest
  # from their floor (H200 run 91: Qwen3 M = 4-64 0.52-0.74 against a floor
  # of 0.92-1.02, Mixtral M = 64 0.63, GPT-OSS M = 1-8 0.51-0.77): the tune
  # table (stage columns, NT and row variants in one process), then Nsight
  # Compute on one FC1 and one FC2 launch of each point.
  run tune 150 /tmp/b1/moe4 bench tune --shape Qwen3-30B-A3B,Mixtral-8x7B,GPT-OSS-120B --m 1,8,64 --json "$OUT/tune.json"
  for pt in Mixtral-8x7B:64 Qwen3-30B-A3B:8 GPT-OSS-120B:2; do
    sh=${pt%%:*}; m=${pt##*:}
    run ncu-$sh-$m 150 "$NCU" --clock-control none -k "regex:moe_fc[12]_" -c 2 --set full \
      --import-source no -f -o /tmp/prof-$sh-$m /tmp/b1/moe4 bench decode --shape $sh --m $m
    run ncu-$sh-$m-details 60 "$NCU" -i /tmp/prof-$sh-$m.ncu-rep --page details --print-details all
    cp /tmp/prof-$sh-$m.ncu-rep "$OUT/" 2>/dev/null
  done
elif [ "$PART" = 22 ]; then
  # Issue 3: two host rules the run-107 tune table questions (one round
  # each there): the routing kernel instead of the FC kernels' own routing
  # (Qwen3 M = 8 61.8 against 66.3 us, Mixtral M = 1 79.5 against 84.2) and
  # the 4-warp FC kernels (Qwen3 M = 1 16.1 against 17.0), in alternating
  # rounds of one binary and PTX.
  DS=Qwen3-30B-A3B,GPT-OSS-120B,Mixtral-8x7B,DeepSeek-V3,DeepSeek-V4-Flash
  run info-own 90 /tmp/b1/moe4 info
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16
    run ab-rk-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16 --tuning fc_route_pairs=0
    run ab-w4-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16 --tuning wide=false
  done
elif [ "$PART" = 23 ]; then
  # Issues 3 and 5: decode against prefill around the crossover (mean pairs
  # per expert 24): Mixtral at M = 64 (16 per expert) runs the 4-column-tile
  # decode kernels at 2 blocks of 4 warps per SM (175-204 registers, run
  # 107's ncu), 0.63-0.66 of copy bandwidth on the H200. Two processes each.
  run info-own 90 /tmp/b1/moe4 info
  for r in 1 2; do
    run xover-mixtral-r$r 90 /tmp/b1/moe4 bench prefill --shape Mixtral-8x7B --m 16,32,48,64,96,128,192 \
      --json "$OUT/xover-mixtral-r$r.json"
    run xover-many-r$r 120 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3,DeepSeek-V4-Flash \
      --m 128,256,384,512,768 --json "$OUT/xover-many-r$r.json"
  done
elif [ "$PART" = 24 ]; then
  # The crossover between 24 and 32 mean pairs per expert (run 110: decode
  # 10-19 % faster at 24 on every shape, prefill 3-27 % at 32): 26, 28, 30.
  for r in 1 2; do
    run xo-mixtral-r$r 60 /tmp/b1/moe4 bench prefill --shape Mixtral-8x7B --m 104,112,120 --json "$OUT/xo-mixtral-r$r.json"
    run xo-qwen3-r$r 60 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B --m 416,448,480 --json "$OUT/xo-qwen3-r$r.json"
    run xo-big-r$r 90 /tmp/b1/moe4 bench prefill --shape GPT-OSS-120B,DeepSeek-V3 --m 832,896,960 --json "$OUT/xo-big-r$r.json"
    run xo-flash-r$r 60 /tmp/b1/moe4 bench prefill --shape DeepSeek-V4-Flash --m 1110,1195,1280 --json "$OUT/xo-flash-r$r.json"
  done
elif [ "$PART" = 25 ]; then
  # Issue 3: the landed routing rule (FC_ROUTE_MAX_BYTES 256 -> 72 MB)
  # against the old one (`fc_route_pairs=64`: the FC kernels route up to 64
  # pairs on one column tile whatever the layer's size, which is the old
  # rule at every point below but DeepSeek-V3 M = 2-8), alternating rounds.
  DS=Qwen3-30B-A3B,GPT-OSS-120B,Mixtral-8x7B,DeepSeek-V3,DeepSeek-V4-Flash
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8
    run ab-old-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8 --tuning fc_route_pairs=64
  done
elif [ "$PART" = 26 ]; then
  # Issue 3 / the crossover: the decode kernels' column tiles between 12
  # and 28 pairs per expert (NT = 4 by default, 32 columns per group; an
  # expert with more pairs streams its weights once per group) against
  # NT = 2 and 32-row tasks, alternating rounds.
  for r in 1 2; do
    run ab-own-r$r 60 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B,Mixtral-8x7B --m 64,96,256,384
    run ab-nt2-r$r 60 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B,Mixtral-8x7B --m 64,96,256,384 --tuning nt=2
    run ab-r32-r$r 60 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B,Mixtral-8x7B --m 64,96,256,384 --tuning task_rows=32
  done
elif [ "$PART" = 27 ]; then
  # Issue 3: per-instruction stall samples (SASS, CSV) of the decode FC1
  # kernels run 107 profiled: Mixtral M = 64 (`nt4_r64`, 2 blocks per SM)
  # and GPT-OSS M = 2 (`nt1_w8_rt`, barrier stalls the top reason).
  for pt in Mixtral-8x7B:64 GPT-OSS-120B:2 Qwen3-30B-A3B:8; do
    sh=${pt%%:*}; m=${pt##*:}
    run ncu-src-$sh-$m 120 "$NCU" --clock-control none -k "regex:moe_fc1_" -c 1 --section SourceCounters \
      --section WarpStateStats --import-source no -f -o /tmp/src-$sh-$m /tmp/b1/moe4 bench decode --shape $sh --m $m
    "$NCU" -i /tmp/src-$sh-$m.ncu-rep --page source --print-source sass --csv > "$OUT/src-$sh-$m.csv" 2>&1
    gzip -f "$OUT/src-$sh-$m.csv"
  done
elif [ "$PART" = 28 ] || [ "$PART" = 29 ]; then
  # Issue 3, the decode K-split hand-over through the group's named
  # barriers instead of two block barriers per task (run 113: 18-30 % of
  # the small batches' FC1 samples on those). PART=28: `nbar` in every
  # kernel (cargo xtask exp-ptx decode-nbar nbar; run 114; predicted Qwen3
  # M = 8 and GPT-OSS M = 2 -5 to -10 %, M = 1-4 -3 to -8 %, M >= 16
  # ±2 %). PART=29: only in the `_rt` kernels (a source with it there:
  # cargo xtask exp-ptx land2 ""; run 115; predicted Qwen3 M = 1 / 2
  # -3 / -7 %, the rest ±0.5 %). Tests, sanitizers, three A/B rounds
  # against the bundle's own PTX.
  X=$([ "$PART" = 28 ] && echo nbar || echo land2)
  F=$([ "$PART" = 28 ] && echo decode-nbar || echo land2)
  B="env MOE4_PTX_FILE=/tmp/$X.ptx"
  gunzip -c "$C/exp/$F.ptx.gz" > /tmp/$X.ptx
  run info-own 90 /tmp/b1/moe4 info
  run info-$X 90 $B /tmp/b1/moe4 info
  run test-decode-$X 150 $B /tmp/b1/test-decode --test-threads=2
  run test-limits-$X 60 $B /tmp/b1/test-limits --test-threads=2
  run memcheck-$X 60 $B "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run racecheck-$X 90 $B "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  # Every output against the bundle's own build, bit for bit (run 115's
  # question; `moe4 compare-ptx`, from the twelfth session's bundles on).
  run compare-$X 200 /tmp/b1/moe4 compare-ptx /tmp/$X.ptx
  DS=Qwen3-30B-A3B,GPT-OSS-120B,Mixtral-8x7B,DeepSeek-V3,DeepSeek-V4-Flash
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16,64
    run ab-$X-r$r 40 $B /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16,64
  done
elif [ "$PART" = 30 ]; then
  # Issue 3, lead 1 of the eleventh session: the narrow-slot decode kernels
  # (`_c2`, cargo xtask exp-ptx decode-c2 c2): column groups of 2 pairs
  # whose slots hold only those columns' activations, so 6 (4 warps) or 5
  # (8 warps) slots per warp instead of 4 / 3. Predicted (small batches,
  # where run 113 saw 19-31 % of FC1's samples on the chunk wait): Qwen3
  # M = 1-8, GPT-OSS M = 1-8 -5 to -10 %, DeepSeek-V3 / Mixtral M = 1-2
  # -3 to -8 % (more bytes in flight on the H200 where those are below
  # 0.9); M >= 16 on 128-256 experts ±3 % (more groups: some experts
  # stream their weights twice). A/B within the c2 build (c2=true forced
  # where one column tile runs, against c2=false), three rounds; then its
  # tests and sanitizers.
  B="env MOE4_PTX_FILE=/tmp/c2.ptx"
  gunzip -c "$C/exp/decode-c2.ptx.gz" > /tmp/c2.ptx
  run info-c2 90 $B /tmp/b1/moe4 info
  DS=Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3,DeepSeek-V4-Flash
  # (One column tile at every point listed: at most 6 pairs per active
  # expert; `c2=true` is an error elsewhere.)
  for r in ${ROUNDS:-1 2 3}; do
    run ab-off-r$r 70 $B /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16,32,64 --tuning c2=false
    run ab-c2-r$r 70 $B /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16,32,64 --tuning c2=true
    run ab-off-r$r 30 $B /tmp/b1/moe4 bench decode --shape Mixtral-8x7B --m 1,2,4,8 --tuning c2=false
    run ab-c2-r$r 30 $B /tmp/b1/moe4 bench decode --shape Mixtral-8x7B --m 1,2,4,8 --tuning c2=true
  done
  run test-decode-c2 200 $B /tmp/b1/test-decode --test-threads=2
  run memcheck-c2 60 $B "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run racecheck-c2 90 $B "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run test-limits-c2 60 $B /tmp/b1/test-limits --test-threads=2
elif [ "$PART" = 31 ]; then
  # Run 115's question: `nbar`'s outputs against the bundle's own build,
  # bit for bit (`moe4 compare-ptx`: two layers, M = 1-256, the routing
  # and warp settings, both 16-bit types). Each PTX's first load first.
  gunzip -c "$C/exp/decode-nbar.ptx.gz" > /tmp/nbar.ptx
  run info-own 90 /tmp/b1/moe4 info
  run info-nbar 90 env MOE4_PTX_FILE=/tmp/nbar.ptx /tmp/b1/moe4 info
  run compare-nbar 200 /tmp/b1/moe4 compare-ptx /tmp/nbar.ptx
elif [ "$PART" = 32 ]; then
  # Issue 3: `nbar` with immediate barrier ids (cargo xtask exp-ptx
  # decode-nbar2 nbar): ptxas then reserves the barriers a block can use
  # (5 with 4 warps, 9 with 8) instead of all 16, which run 117 read as the
  # cause of the 4-warp kernels' other grids. Every output against the own
  # build (expected: all equal, also where the grids are not forced), the
  # tests and sanitizers, three A/B rounds. Predicted: Qwen3 M = 1 / 2
  # -3 / -7 % as in run 114, and no longer +0.5-0.9 % at the 4-warp points.
  B="env MOE4_PTX_FILE=/tmp/nbar2.ptx"
  gunzip -c "$C/exp/decode-nbar2.ptx.gz" > /tmp/nbar2.ptx
  run info-own 90 /tmp/b1/moe4 info
  run info-nbar2 90 $B /tmp/b1/moe4 info
  run compare-nbar2 120 /tmp/b1/moe4 compare-ptx /tmp/nbar2.ptx
  DS=Qwen3-30B-A3B,GPT-OSS-120B,Mixtral-8x7B,DeepSeek-V3,DeepSeek-V4-Flash
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16,64
    run ab-nbar2-r$r 40 $B /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16,64
  done
  run test-decode-nbar2 150 $B /tmp/b1/test-decode --test-threads=2
  run memcheck-nbar2 60 $B "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run racecheck-nbar2 90 $B "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run test-limits-nbar2 60 $B /tmp/b1/test-limits --test-threads=2
elif [ "$PART" = 33 ]; then
  # Issue 3: the grid at small batches. Run 114's register-id `nbar` build
  # was 3-7 % faster at Qwen3 M = 1-2 and run 118 (the same code with
  # immediate ids: same blocks per SM, same bits) was not, so the gain was
  # the grid. `fc_blocks` 264 (2 blocks per SM of 132: the 8-warp kernels
  # too) and 528 (4 per SM: the 4-warp kernels only; clamped to what is
  # resident, so the 8-warp kernels keep 3) against the default, and the
  # 4-warp kernels at 528, alternating rounds in one build. Predicted:
  # Qwen3 M = 1-2 -3 to -7 % with one of them, the larger layers slower
  # (fewer bytes in flight).
  run info-own 90 /tmp/b1/moe4 info
  DS=Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V4-Flash,DeepSeek-V3
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8
    run ab-g528-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8 --tuning fc_blocks=528
    run ab-g264-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8 --tuning fc_blocks=264
    run ab-w4-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8 --tuning wide=false,fc_blocks=528
  done
elif [ "$PART" = 34 ]; then
  # Issue 5: the 128-row x 256-pair kernels' tails (an expert's last 1-128
  # pairs) on one or two 64-pair tiles instead of one 128-pair tile
  # (`_mix256`, groups::tail_max). The bundle's build against the one
  # before it (.gpu/exp/old-bundle.tar.xz, its own PTX), alternating
  # rounds; the new build's prefill tests and sanitizers first.
  # Predicted (a 64-pair tile ~65 % of a 128-pair one, run 71; half of
  # DeepSeek-V3's / GPT-OSS's experts and of Qwen3's have a tail of
  # 1-60 pairs at M = 8192 under the bench's uniform routing): DeepSeek-V3
  # and GPT-OSS -2 to -5 %, Qwen3 -1 to -3 %, Mixtral (rests spread over
  # 0-255) within +-1 %.
  mkdir -p /tmp/b0 && tar xJf "$C/exp/old-bundle.tar.xz" -C /tmp/b0 moe4
  run info-own 90 /tmp/b1/moe4 info
  run info-old 90 /tmp/b0/moe4 info
  run test-prefill 150 /tmp/b1/test-prefill --test-threads=2
  run memcheck-prefill 60 "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-prefill 60 "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  for r in 1 2 3; do
    run ab-old-r$r 60 /tmp/b0/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B --m 8192
    run ab-new-r$r 60 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B --m 8192
  done
elif [ "$PART" = 35 ]; then
  # Issue 3, from run 119: the 4-warp kernels at fc_blocks = 528 were
  # 8.5 % faster at Qwen3 M = 1 (slower everywhere else). Which grid:
  # the 4-warp kernels at 264-792 blocks and the default (8-warp FC1) at
  # 132-396, Qwen3 M = 1-2, two rounds.
  run info-own 90 /tmp/b1/moe4 info
  for r in 1 2; do
    run ab-own-r$r 20 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1,2
    for b in 264 396 528 660 792; do
      run ab-w4b$b-r$r 20 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1,2 --tuning wide=false,fc_blocks=$b
    done
    run ab-w4-r$r 20 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1,2 --tuning wide=false
    for b in 132 264; do
      run ab-b$b-r$r 20 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B --m 1,2 --tuning fc_blocks=$b
    done
  done
elif [ "$PART" = 43 ]; then
  # Issue 3, data for a next rule: the few-pairs settings at 16 and 32
  # pairs (M = 2, 4 of the top-8 layers; M = 4, 8 of the top-4 one), where
  # FC1_FEW_PAIRS does not govern: both FC kernels on 4 warps x 3 per SM
  # (`both`), and FC2 alone so (`f2`: FC1 on 4 warps, every resident
  # block). Run 123 measured FC1 on fewer blocks 1-2 % slower at 16 pairs;
  # FC2's share of the gain at 8 pairs was 1-5 %. Predicted: `f2` -1 to -3 %
  # at M = 2, flat at M = 4; `both` within +-2 %.
  run info-own 90 /tmp/b1/moe4 info
  S8=Small:1024:512:32:8,Qwen3-30B-A3B,OLMoE:2048:1024:64:8
  S4=Qwen1.5-MoE:2048:1408:60:4
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench decode --shape $S8 --m 2,4
    run ab-own-r$r 30 /tmp/b1/moe4 bench decode --shape $S4 --m 4,8
    run ab-both-r$r 30 /tmp/b1/moe4 bench decode --shape $S8 --m 2,4 --tuning wide=false,fc_blocks=396
    run ab-both-r$r 30 /tmp/b1/moe4 bench decode --shape $S4 --m 4,8 --tuning wide=false,fc_blocks=396
    run ab-f2-r$r 30 /tmp/b1/moe4 bench decode --shape $S8 --m 2,4 --tuning wide=false,fc1_blocks=100000,fc_blocks=396
    run ab-f2-r$r 30 /tmp/b1/moe4 bench decode --shape $S4 --m 4,8 --tuning wide=false,fc1_blocks=100000,fc_blocks=396
  done
  run log-own 30 env MOE4_LOG_LAUNCHES=1 /tmp/b1/moe4 bench decode --shape $S8,$S4 --m 2,4,8
elif [ "$PART" = 42 ]; then
  # Issue 3: the rule FC2_FEW_MAX_CHUNKS (FC2 of the `_rt` kernels with at
  # most 8 pairs and tasks of at most 24 chunks on 4 warps x 3 blocks per
  # SM, as FC1). Launch log (expect `moe_fc2_bf16_nt1_rt` grid 396 at the
  # governed points), then the new default against run 126's measured
  # variant (`wide=false,fc_blocks=396`, which it should equal) and the old
  # rule's two FC2 choices (4 warps on every resident block, or 8 warps;
  # FC1 kept at its rule). Predicted from run 126: Small -5 %, Qwen3 -3.6 %,
  # OLMoE -1 %, Qwen1.5 -4 %, DeepSeek-V2-Lite and Qwen3 top-4 M = 2 a gain
  # of the same order; K28 and GPT-OSS (not governed) unchanged. Then PART=3.
  run info-own 90 /tmp/b1/moe4 info
  G=Small:1024:512:32:8,Qwen3-30B-A3B,OLMoE:2048:1024:64:8,Qwen1.5-MoE:2048:1408:60:4,DSV2-Lite:2048:1408:64:6,K28:2048:1792:64:8,GPT-OSS-120B
  run log-own 30 env MOE4_LOG_LAUNCHES=1 /tmp/b1/moe4 bench decode --shape $G,Qwen3-top4:2048:768:128:4 --m 1
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench decode --shape $G --m 1
    run ab-own-r$r 30 /tmp/b1/moe4 bench decode --shape Qwen3-top4:2048:768:128:4 --m 2
    run ab-f2w4b396-r$r 30 /tmp/b1/moe4 bench decode --shape $G --m 1 --tuning wide=false,fc_blocks=396
    run ab-old4-r$r 30 /tmp/b1/moe4 bench decode --shape $G --m 1 --tuning wide=false,fc1_blocks=396,fc_blocks=100000
    run ab-old4-r$r 30 /tmp/b1/moe4 bench decode --shape Qwen3-top4:2048:768:128:4 --m 2 --tuning wide=false,fc1_blocks=396,fc_blocks=100000
    run ab-old8-r$r 30 /tmp/b1/moe4 bench decode --shape $G --m 1 --tuning wide1=false,wide=true,fc1_blocks=396,fc_blocks=100000
  done
elif [ "$PART" = 48 ]; then
  # Issue 5: FC2 fed by TMA (`cargo xtask exp-ptx pf-tma tma`): the
  # 128-row FC2's stages loaded by one thread (h rows as a 2-D box from the
  # workspace's tensor map, codes and scales as bulk copies) and completed
  # on per-stage `mbarrier`s; each warp waits on its stage's barrier and
  # releases it with an arrival instead of a block barrier per chunk. The
  # host picks `_tma` wherever the build has it (`tma=false`: the same
  # PTX's cp.async kernels). First the TMA smoke checks (the bundle's own
  # PTX has `smoke_tma_tile`), then the layer bit for bit against the own
  # PTX, the prefill tests, the sanitizers, then the A/B. Predicted at
  # M = 8192: Qwen3 -2 to -4 %, DeepSeek-V3 -3 to -6 %, GPT-OSS -2 to -4 %,
  # Mixtral within +-2 %.
  E="env MOE4_PTX_FILE=/tmp/pf-tma.ptx"
  PS=Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B
  run smoke 90 /tmp/b1/moe4 smoke
  run info-tma 90 $E /tmp/b1/moe4 info
  run log-tma 30 $E env MOE4_LOG_LAUNCHES=1 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B --m 8192 --quick
  run compare-own 150 $E /tmp/b1/moe4 compare-ptx host/ptx/sm_90a.ptx
  for r in 1 2; do
    run ab-own-r$r 60 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
    run ab-tma-r$r 60 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192
    run ab-tmaoff-r$r 60 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192 --tuning tma=false
  done
  run test-prefill-tma 150 $E /tmp/b1/test-prefill --test-threads=2
  # (The own PTX's 128-row kernels were reordered by LLVM in this build:
  # the same operations; the tests against the reference on them too.)
  run test-prefill-own 150 /tmp/b1/test-prefill --test-threads=2
  run memcheck-tma 90 $E "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-tma 90 $E "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run synccheck-tma 90 $E "$SAN" --tool synccheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run ab-own-r3 60 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-tma-r3 60 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-tma-4096 60 $E /tmp/b1/moe4 bench prefill --shape $PS --m 4096
  run ab-own-4096 60 /tmp/b1/moe4 bench prefill --shape $PS --m 4096
elif [ "$PART" = 50 ]; then
  # PART=48 in order of value for a short call (eighteenth session): the
  # `tma` PTX from the commit that reapplies the k-loop producer's fresh
  # shared base (spill 4/4 bytes) and passes `tma: bool` to the prologue;
  # `pf-land` = that commit's default sm_90a PTX (its n256/mix256 kernels'
  # statements reordered by LLVM): both bit for bit against the landed PTX.
  E="env MOE4_PTX_FILE=/tmp/pf-tma.ptx"
  L="env MOE4_PTX_FILE=/tmp/pf-land.ptx"
  PS=Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B
  run smoke 90 /tmp/b1/moe4 smoke
  run ab-tma-r1 100 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-own-r1 50 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-tmaoff-r1 50 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192 --tuning tma=false
  run ab-tma-r2 50 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-own-r2 50 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run compare-tma 150 $E /tmp/b1/moe4 compare-ptx host/ptx/sm_90a.ptx
  run test-prefill-tma 150 $E /tmp/b1/test-prefill --test-threads=2
  run memcheck-tma 90 $E "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-tma 90 $E "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run synccheck-tma 90 $E "$SAN" --tool synccheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run compare-land 150 $L /tmp/b1/moe4 compare-ptx host/ptx/sm_90a.ptx
  run ab-tma-r3 50 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-own-r3 50 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-tmaoff-r2 50 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192 --tuning tma=false
  run ab-tmaoff-r3 50 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192 --tuning tma=false
  run ab-tma-4096 50 $E /tmp/b1/moe4 bench prefill --shape $PS --m 4096
  run ab-own-4096 50 /tmp/b1/moe4 bench prefill --shape $PS --m 4096
  run test-prefill-own 150 /tmp/b1/test-prefill --test-threads=2
elif [ "$PART" = 54 ]; then
  # PART=53's first checks only, for a call with ~2 minutes: the branch's
  # PTX loaded (JIT), its smoke checks, the prefill and limits tests (not
  # `landed_checks`: shorter limits, so that `run` does not skip them in a
  # LIMIT of ~110 s).
  run info-own 80 /tmp/b1/moe4 info
  run smoke 30 /tmp/b1/moe4 smoke
  run test-prefill 60 /tmp/b1/test-prefill --test-threads=2
  run test-limits 30 /tmp/b1/test-limits --test-threads=2
elif [ "$PART" = 59 ]; then
  # `rtw`: the FC kernels' in-block routing (`_rt`) builds its tables in
  # the first warp up to 32 pairs (`warp_ranks`, the counts `route_warp`
  # now shares) and publishes them with one barrier instead of three (`cargo xtask
  # exp-ptx decode-rtw ""` from 6afb702's kernels plus the change).
  # Predicted: Qwen3 M = 1-4 -1 to -2 %, GPT-OSS M = 1 -0.5 to -1 %, the
  # routing-kernel points unchanged; every output equal bit for bit.
  exp_compare rtw 60
  DS=Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V4-Flash,DeepSeek-V3
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4
    run ab-rtw-r$r 30 $X /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4
  done
  # `moe4 run` (a random 10-pair layer, routed in the FC kernels: the warp
  # form) under both sanitizers, then the decode tests.
  run racecheck-run-rtw 60 $X "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/moe4 run
  run memcheck-run-rtw 60 $X "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/moe4 run
  run test-decode-rtw 200 $X /tmp/b1/test-decode --test-threads=2
elif [ "$PART" = 58 ]; then
  # The landed `route_warp` (the routing kernel in one warp, one pair per
  # lane, up to 16 pairs; bundle of the commit that landed it): its tests
  # and sanitizers, then decode against the previous bundle (a2a081f, as
  # exp/old-bundle.tar.xz), alternating, then the tables. Predicted from
  # run 138: DeepSeek-V3 M = 1 -1 %, V4-Flash M = 1 -2 %, GPT-OSS M = 2
  # -1 %, Mixtral M = 1-8 -0.1 to -0.5 %; from 24 pairs unchanged.
  mkdir -p /tmp/b0 && tar xJf "$C/exp/old-bundle.tar.xz" -C /tmp/b0 moe4
  landed_checks
  run info-old 90 /tmp/b0/moe4 info
  DS=Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V4-Flash,DeepSeek-V3,Mixtral-8x7B
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16
    run ab-old-r$r 40 /tmp/b0/moe4 bench decode --shape $DS --m 1,2,4,8,16
  done
  landed_tables
elif [ "$PART" = 57 ]; then
  # The landed `cids` (bundle of the commit that landed it): its tests,
  # sanitizers and tables; then `rw`: the routing kernel routes up to 64
  # pairs in its first warp, by shuffles (`cargo xtask exp-ptx decode-rw
  # ""` from that commit plus the change in kernels/src/device/route.rs).
  # Run 136: the routing kernel takes 2.8 us from its wait to its end at
  # 8-64 pairs. Predicted where it runs (DeepSeek-V3 and Mixtral M = 1-4,
  # V4-Flash M = 1, GPT-OSS M = 2-8, Qwen3 M = 8): -1 to -1.5 us per call
  # (DeepSeek-V3 M = 1 -1.5 to -2 %, GPT-OSS M = 2 -2 to -3 %, Qwen3 M = 8
  # -2 %); elsewhere unchanged; every output equal bit for bit.
  landed_checks
  exp_compare rw 200
  run test-decode-rw 200 $X /tmp/b1/test-decode --test-threads=2
  run test-limits-rw 60 $X /tmp/b1/test-limits --test-threads=2
  run memcheck-decode-rw 60 $X "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run racecheck-decode-rw 60 $X "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  DS=Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V4-Flash,DeepSeek-V3,Mixtral-8x7B
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16
    run ab-rw-r$r 40 $X /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16
  done
  landed_tables
elif [ "$PART" = 56 ]; then
  # Issue 3: the combine reads the ids before its wait for FC2 (`cargo
  # xtask exp-ptx decode-cids ""` from the tree with the change: the
  # default build). Run 136's timeline: the combine's wait returns 0.6 us
  # after FC2's end, then two memory latencies (ids, then y) before the
  # output, 1.5 us at Qwen3 M = 1. Predicted: -0.5 to -0.7 us per call at
  # every decode M (Qwen3 M = 1 -3 to -4 %, GPT-OSS M = 1 -2 %, the large
  # shapes < 1 %); every output equal bit for bit (`compare-ptx`).
  exp_compare cids 200
  run test-decode-cids 200 $X /tmp/b1/test-decode --test-threads=2
  run memcheck-decode-cids 60 $X "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run racecheck-decode-cids 60 $X "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  DS=Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V4-Flash,DeepSeek-V3,Mixtral-8x7B
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16,64
    run ab-cids-r$r 40 $X /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4,8,16,64
  done
  run ab-own-r9 60 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
  run ab-cids-r9 60 $X /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B,DeepSeek-V3 --m 8192
elif [ "$PART" = 55 ]; then
  # Twentieth session: on an H200 first the landed state's checks and
  # tables (the H200's are run 109's, before the last sessions' kernels);
  # on any card then the decode timeline of the `trace` build (`cargo
  # xtask exp-ptx decode-trace trace`; the last one is run 87's, before
  # fdiv, the routing rule, the few-pairs rules) at the small batches
  # where issue 3 is furthest from its target.
  if on_h200; then
    landed_checks
    landed_tables
  fi
  run info-trace 120 $T /tmp/b1/moe4 info
  run timeline 200 $T /tmp/b1/moe4 bench timeline --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3,Mixtral-8x7B \
    --m 1,2,4,8 --json "$OUT/timeline.json"
elif [ "$PART" = 53 ]; then
  # The chunk-major weight layout (branch `chunk-major`, after run 134's
  # `cmaj`; the bundle `cargo xtask gpu-bundle` of that branch; if it
  # passes, `git checkout chunk-major -- kernels host/ptx` on main: the
  # branch head is an ancestor of main, so a merge would do nothing): its tests
  # and sanitizers, then the decode and prefill benches against the
  # previous bundle (task-major layout: `cargo xtask gpu-bundle` of
  # aaf9e54, kept as exp/old-bundle.tar.xz), alternating. Predicted from
  # run 134: decode M = 4-64 -1 to -6 %, M = 1 0 to -2 %; prefill within
  # +-2 % (its weights come mostly from L2; a tile's tasks now read as one
  # contiguous piece per chunk).
  mkdir -p /tmp/b0 && tar xJf "$C/exp/old-bundle.tar.xz" -C /tmp/b0 moe4
  DS=Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B
  landed_checks
  run info-old 90 /tmp/b0/moe4 info
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,4,16,64
    run ab-old-r$r 40 /tmp/b0/moe4 bench decode --shape $DS --m 1,4,16,64
  done
  for r in 1 2; do
    run ab-own-r$r 60 /tmp/b1/moe4 bench prefill --shape $DS --m 2048,8192
    run ab-old-r$r 60 /tmp/b0/moe4 bench prefill --shape $DS --m 2048,8192
  done
  landed_tables
elif [ "$PART" = 52 ]; then
  # Issue 3 on this card: the loads-only decode kernels (the memory side
  # alone: one column tile, so M = 1-4) against the full ones in one
  # process each, then Nsight Compute (lean sections) of FC1 and FC2 at
  # the two points furthest from the floor in H200 run 109 (Mixtral M = 1
  # 0.54, DeepSeek-V3 M = 1 0.67).
  DS=Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B
  # Then the experimental decode kernels that did not pay on the H100
  # (runs 76, 88): FC2 in slices over any warps with 6-warp FC1
  # (cargo xtask exp-ptx decode-slw6 fc2sl,w6; the host picks them by its
  # queue model).
  [ -f "$C/exp/decode-slw6.ptx.gz" ] && gunzip -c "$C/exp/decode-slw6.ptx.gz" > /tmp/slw6.ptx
  SL="env MOE4_PTX_FILE=/tmp/slw6.ptx"
  # `cmaj` (timing only, wrong results: cargo xtask exp-ptx decode-cmaj
  # cmaj at aa03e50, the only commit with that cfg): the decode kernels read each expert's chunks as if stored
  # chunk-major (chunk c of all its layout tasks side by side, so the
  # warps that run together read neighbouring KiB, as the floor kernel
  # does); H100 run 107: loads only 81.6 us against 84.2 at Mixtral M = 1,
  # both 0.8 of copy where the floor reads 1.0.
  [ -f "$C/exp/decode-cmaj.ptx.gz" ] && gunzip -c "$C/exp/decode-cmaj.ptx.gz" > /tmp/cmaj.ptx
  CM="env MOE4_PTX_FILE=/tmp/cmaj.ptx"
  DM=1,4,16,64
  run ab-own-r1 40 /tmp/b1/moe4 bench decode --shape $DS --m $DM
  run ab-loads-r1 40 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4 --tuning load_only=true
  run ab-cmaj-r1 100 $CM /tmp/b1/moe4 bench decode --shape $DS --m $DM
  run ab-cmajld-r1 40 $CM /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4 --tuning load_only=true
  run ab-own-r2 40 /tmp/b1/moe4 bench decode --shape $DS --m $DM
  run ab-cmaj-r2 40 $CM /tmp/b1/moe4 bench decode --shape $DS --m $DM
  run ab-slw6-r1 100 $SL /tmp/b1/moe4 bench decode --shape $DS --m $DM
  run ab-own-r3 40 /tmp/b1/moe4 bench decode --shape $DS --m $DM
  run ab-cmaj-r3 40 $CM /tmp/b1/moe4 bench decode --shape $DS --m $DM
  run ab-slw6-r2 40 $SL /tmp/b1/moe4 bench decode --shape $DS --m $DM
  run tune 150 /tmp/b1/moe4 bench tune --shape $DS --m 1,4 --json "$OUT/tune.json"
  for pt in Mixtral-8x7B:1 DeepSeek-V3:1; do
    sh=${pt%%:*}; m=${pt##*:}
    run ncu-$sh-$m 120 "$NCU" --clock-control none -k "regex:moe_fc[12]_" -c 2 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy \
      --section LaunchStats --section InstructionStats -f -o /tmp/prof-$sh-$m /tmp/b1/moe4 bench decode --shape $sh --m $m
    run ncu-$sh-$m-details 60 "$NCU" -i /tmp/prof-$sh-$m.ncu-rep --page details --print-details all
    cp /tmp/prof-$sh-$m.ncu-rep "$OUT/" 2>/dev/null
  done
elif [ "$PART" = 51 ]; then
  # Issue 5: `tmac` (cargo xtask exp-ptx pf-tmac tma,tmac): run 132's
  # `tma` FC2 with only the h box by TMA; the codes and scales back on
  # every thread's cp.async, completing on the stage's full barrier
  # (`cp.async.mbarrier.arrive.noinc`), every thread waiting on the empty
  # barrier before it reloads a stage (a split barrier instead of the
  # landed kernel's per-chunk block barrier). Predicted against own at
  # M = 8192: Qwen3 -1 to +2 %, DeepSeek-V3 -3 to +2 %, Mixtral -3 to +3 %.
  C2="env MOE4_PTX_FILE=/tmp/pf-tmac.ptx"
  E="env MOE4_PTX_FILE=/tmp/pf-tma.ptx"
  PS=Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B
  run test-prefill-tmac 120 $C2 /tmp/b1/test-prefill --test-threads=2
  run ab-own-r1 80 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-tmac-r1 50 $C2 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-own-r2 50 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-tmac-r2 50 $C2 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run compare-tmac 150 $C2 /tmp/b1/moe4 compare-ptx host/ptx/sm_90a.ptx
  run racecheck-tmac 90 $C2 "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run synccheck-tmac 90 $C2 "$SAN" --tool synccheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run memcheck-tmac 90 $C2 "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run ab-own-r3 50 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-tmac-r3 50 $C2 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-tma-r1 100 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192
elif [ "$PART" = 49 ]; then
  # PART=48 cut to what little device time is left: the TMA smoke checks,
  # one A/B round (the first `tma` run includes its PTX's JIT), then the
  # bit-for-bit comparison as far as it fits.
  E="env MOE4_PTX_FILE=/tmp/pf-tma.ptx"
  PS=Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B
  run smoke 70 /tmp/b1/moe4 smoke
  run ab-tma-r1 100 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-own-r1 40 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run ab-tmaoff-r1 40 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192 --tuning tma=false
  run ab-tma-r2 40 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  run compare-own 150 $E /tmp/b1/moe4 compare-ptx host/ptx/sm_90a.ptx
elif [ "$PART" = 47 ]; then
  # Issue 5 groundwork: the TMA tile check (`cargo xtask exp-ptx
  # pf-tmaprobe tmaprobe`): `moe4 smoke` under that PTX runs every smoke
  # check plus one `cp.async.bulk.tensor` 64 x 256 box with the 128-byte
  # swizzle, compared with the layout wgmma's B descriptor reads. Expected:
  # 0 mismatches (a nonzero count: the swizzle or the map's encoding).
  run smoke-tma 120 env MOE4_PTX_FILE=/tmp/pf-tmaprobe.ptx /tmp/b1/moe4 smoke
elif [ "$PART" = 46 ]; then
  # Issue 5, why `ewg` / `ewx` (runs 129-130) did not shorten FC2: Nsight
  # Compute on one FC2 launch (Qwen3-30B-A3B, M = 8192) of the landed
  # `_mix256` and of `ewx`'s `_mix256_ew`: tensor pipe, warp states (the
  # epilogue warpgroup's barrier waits included), per-instruction stalls.
  SEC="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section SourceCounters"
  run ncu-own 150 "$NCU" --clock-control none -k "regex:moe_pfw2_bf16_mix256$" -c 1 $SEC \
    --import-source no -f -o /tmp/prof-own /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B --m 8192 --quick
  run ncu-own-details 60 "$NCU" -i /tmp/prof-own.ncu-rep --page details --print-details all
  run ncu-ewx 150 env MOE4_PTX_FILE=/tmp/pf-ewx.ptx "$NCU" --clock-control none -k "regex:moe_pfw2_bf16_mix256_ew" -c 1 $SEC \
    --import-source no -f -o /tmp/prof-ewx /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B --m 8192 --quick
  run ncu-ewx-details 60 "$NCU" -i /tmp/prof-ewx.ncu-rep --page details --print-details all
  cp /tmp/prof-own.ncu-rep /tmp/prof-ewx.ncu-rep "$OUT/" 2>/dev/null
elif [ "$PART" = 45 ]; then
  # Issue 5: `ewx` (cargo xtask exp-ptx pf-ewx ewg,ewx) = `ewg` (run 129:
  # bit-exact, no gain) + the next tile's first chunks loaded in this
  # tile's last iterations (the pipeline runs on across tiles where a
  # tile's chunks are a multiple of the 4 stages: Qwen3 12, DeepSeek-V3
  # 32, Mixtral 224; not GPT-OSS's 45), the epilogue warpgroup's pairs
  # from global memory. Reading of run 129: with the copy-out gone from
  # the MMA warps, the next tile's first loads (issued after the drain)
  # were no longer hidden behind it. Predicted against own: Qwen3 -1 to
  # -4 %, DeepSeek-V3 -1 to -2 %, GPT-OSS = ewg, Mixtral within 1 %.
  E="env MOE4_PTX_FILE=/tmp/pf-ewx.ptx"
  cp host/ptx/sm_90a.ptx /tmp/own.ptx
  run info-ewx 90 $E /tmp/b1/moe4 info
  run compare-own 200 $E /tmp/b1/moe4 compare-ptx /tmp/own.ptx
  run test-prefill-ewx 180 $E /tmp/b1/test-prefill --test-threads=2
  run memcheck-ewx 90 $E "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-ewx 90 $E "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run info-ewg 90 env MOE4_PTX_FILE=/tmp/pf-ewg.ptx /tmp/b1/moe4 info
  PS=Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B
  for r in 1 2 3; do
    run ab-own-r$r 60 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
    run ab-ewx-r$r 60 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192
    run ab-ewg-r$r 60 env MOE4_PTX_FILE=/tmp/pf-ewg.ptx /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  done
  run ab-ewx-4096 60 $E /tmp/b1/moe4 bench prefill --shape $PS --m 4096
  run ab-own-4096 60 /tmp/b1/moe4 bench prefill --shape $PS --m 4096
elif [ "$PART" = 44 ]; then
  # Issue 5: FC2 with an epilogue warpgroup (`cargo xtask exp-ptx pf-ewg
  # ewg`): the mixed 128-row FC2 on 384 threads, the MMA warpgroups at 232
  # registers hand each staging tile over (named barriers) and go on, a
  # third at 40 copies it out; 4 stages instead of 5 (the staging tile has
  # a region of its own). The host picks `_ew` wherever the build has it
  # (`ewg=false`: the same PTX's landed kernels). Predicted at M = 8192:
  # Qwen3 -1 to -4 % (FC2's copy-out, ~30-50 us, off the MMA warps' path,
  # less what 4 stages cost), DeepSeek-V3 / GPT-OSS -1 to -3 %, Mixtral
  # (224 chunks a tile) within +-1 %. Tests first: the layer bit for bit
  # against the landed PTX (compare-ptx now has prefill sizes), every
  # prefill test, both sanitizers.
  E="env MOE4_PTX_FILE=/tmp/pf-ewg.ptx"
  cp host/ptx/sm_90a.ptx /tmp/own.ptx 2>/dev/null || gunzip -c "$C/exp/prev-sm90a.ptx.gz" > /tmp/own.ptx
  run info-ewg 90 $E /tmp/b1/moe4 info
  run log-ewg 30 $E env MOE4_LOG_LAUNCHES=1 /tmp/b1/moe4 bench prefill --shape Qwen3-30B-A3B --m 8192 --quick
  run compare-own 200 $E /tmp/b1/moe4 compare-ptx /tmp/own.ptx
  run test-prefill-ewg 180 $E /tmp/b1/test-prefill --test-threads=2
  run memcheck-ewg 90 $E "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run racecheck-ewg 90 $E "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  run synccheck-ewg 90 $E "$SAN" --tool synccheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  PS=Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B
  for r in 1 2 3; do
    run ab-own-r$r 60 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
    run ab-ewg-r$r 60 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192
    run ab-ewgoff-r$r 60 $E /tmp/b1/moe4 bench prefill --shape $PS --m 8192 --tuning ewg=false
  done
  run ab-ewg-4096 60 $E /tmp/b1/moe4 bench prefill --shape $PS --m 4096
  run ab-own-4096 60 /tmp/b1/moe4 bench prefill --shape $PS --m 4096
elif [ "$PART" = 41 ]; then
  # Issue 5: the combine inside FC2 (`cargo xtask exp-ptx pf-fcomb fcomb`
  # on commit b5b8de1, whose bundle has the host side; run 126, removed):
  # the n256 FC2's tiles count arrivals per (token, 128 rows); the tile
  # that completes a token sums its y rows there in k order (the combine's
  # bits), synchronously in its epilogue; no combine kernel. Only on the
  # n256 kernels without narrow tails, so the A/B is n256 + combine
  # (`narrow_tail=false`, own PTX) against n256 + fused (same tuning, the
  # fcomb PTX); the default (mix256) once for scale. Predicted at M = 8192:
  # Qwen3 -2 to +2 % (103 us of combine gone, ~2-3 us per FC2 tile of
  # atomics and owner loads added, ~31 tiles per block), DeepSeek-V3 +0 to
  # +5 % (its tiles are 3x longer but 163 per block), Mixtral (top-2) -1 to
  # -3 %. Tests first: the new bit-for-bit test against the combine kernel,
  # all prefill tests and both sanitizers under the fcomb PTX.
  run info-own 90 /tmp/b1/moe4 info
  # `fcomb2`: each thread sums two owned pieces at a time, all their
  # loads in flight (one memory latency for up to 32 owned tokens instead
  # of two): predicted ~1 us per FC2 tile less than `fcomb`.
  for x in fcomb fcomb2; do
    run info-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 info
    run test-prefill-$x 180 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/test-prefill --test-threads=2
    run memcheck-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
    run racecheck-$x 90 env MOE4_PTX_FILE=/tmp/pf-$x.ptx "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-prefill prefill_sanitizer_case
  done
  PS=Qwen3-30B-A3B,DeepSeek-V3,GPT-OSS-120B,Mixtral-8x7B
  run default-mix256 60 /tmp/b1/moe4 bench prefill --shape $PS --m 8192
  for r in 1 2 3; do
    run ab-own-r$r 60 /tmp/b1/moe4 bench prefill --shape $PS --m 8192 --tuning narrow_tail=false
    for x in fcomb fcomb2; do
      run ab-$x-r$r 60 env MOE4_PTX_FILE=/tmp/pf-$x.ptx /tmp/b1/moe4 bench prefill --shape $PS --m 8192 --tuning narrow_tail=false
    done
  done
elif [ "$PART" = 40 ]; then
  # The final commit's decode choices (launch log: FC1 `_nt1_rt` x 396 at
  # Qwen3 M = 1 as in run 124) and tests; then data for an FC2 rule in the
  # few-pairs regime: FC2 on 4 warps x 396 (`wide=false,fc_blocks=396`;
  # FC1 is on that already) against its own rules, on layers whose FC2
  # tasks have 8-48 chunks (run 123: -5 % at 22 chunks, +9 % at GPT-OSS's
  # 45). Predicted: gains up to ~24 chunks, losses from ~32.
  run info-own 90 /tmp/b1/moe4 info
  DF=Small:1024:512:32:8,Qwen3-30B-A3B,OLMoE:2048:1024:64:8,Qwen1.5-MoE:2048:1408:60:4,K28:2048:1792:64:8,K32:2048:2048:64:6,K40:2048:2560:64:4,GPT-OSS-120B,K48:1024:3072:64:4
  run log-own 30 env MOE4_LOG_LAUNCHES=1 /tmp/b1/moe4 bench decode --shape $DF --m 1
  run test-decode 160 /tmp/b1/test-decode --test-threads=2
  run test-limits 60 /tmp/b1/test-limits --test-threads=2
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench decode --shape $DF --m 1
    run ab-f2w4b396-r$r 30 /tmp/b1/moe4 bench decode --shape $DF --m 1 --tuning wide=false,fc_blocks=396
  done
elif [ "$PART" = 39 ]; then
  # 6237da3 (`global_scales` in every epilogue: the decode FC1 kernels'
  # gate-scale multiply moved after the up scale's load, the same
  # instructions): the layer's outputs bit for bit against the previous
  # PTX (967c2c9's sm_90a, `.gpu/exp/prev-sm90a.ptx.gz`), then PART=3.
  gunzip -c "$C/exp/prev-sm90a.ptx.gz" > /tmp/prev.ptx
  run info-own 90 /tmp/b1/moe4 info
  run compare-prev 200 /tmp/b1/moe4 compare-ptx /tmp/prev.ptx
elif [ "$PART" = 38 ]; then
  # Issue 3: the landed rule FC1_FEW_PAIRS (FC1 of the `_rt` kernels with
  # at most 8 pairs on 4 warps x 3 blocks per SM) against the rule it
  # replaces (8 warps on every resident block: `wide1=true,fc1_blocks=
  # 100000`, clamped to the resident count), only at the points the rule
  # governs (top-8 / top-6 layers at M = 1, top-4 at M = 1-2; the large
  # layers route with the routing kernel and keep their rules). Predicted
  # from run 123: Qwen3 M = 1 -9 %, Qwen1.5 -4 to -5 %, OLMoE -5 %, Qwen3
  # top-4 M = 2 -9 %, the rest within 1 %. Then the tests and the table.
  run info-own 90 /tmp/b1/moe4 info
  D8=Qwen3-30B-A3B,OLMoE:2048:1024:64:8,DSV2-Lite:2048:1408:64:6,Small:1024:512:32:8
  D4=GPT-OSS-120B,Qwen1.5-MoE:2048:1408:60:4,Qwen3-top4:2048:768:128:4
  run log-own 30 env MOE4_LOG_LAUNCHES=1 /tmp/b1/moe4 bench decode --shape $D8,$D4 --m 1
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench decode --shape $D8 --m 1
    run ab-own-r$r 30 /tmp/b1/moe4 bench decode --shape $D4 --m 1,2
    run ab-old-r$r 30 /tmp/b1/moe4 bench decode --shape $D8 --m 1 --tuning wide1=true,fc1_blocks=100000
    run ab-old-r$r 30 /tmp/b1/moe4 bench decode --shape $D4 --m 1,2 --tuning wide1=true,fc1_blocks=100000
  done
  run test-decode 200 /tmp/b1/test-decode --test-threads=2
  run test-limits 60 /tmp/b1/test-limits --test-threads=2
  run memcheck-decode 60 "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run racecheck-decode 90 "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run bench-decode 40 /tmp/b1/moe4 bench decode --json "$OUT/decode.json"
elif [ "$PART" = 37 ]; then
  # Issue 3, from run 122 (PART=36): FC1 on 4 warps x 396 blocks beat the
  # default only at Qwen3 M = 1 (-10 %; with FC2 on 4 warps x 396 too,
  # -13 %), the one bench point whose FC1 has at most one task per block
  # of such a grid (384 tasks; GPT-OSS M = 1 has 720). Does it hold on
  # other layers at M = 1 with <= 396 FC1 tasks, and not above? Custom
  # shapes (NAME:H:I:E:K): Qwen1.5-MoE (352 tasks, 4 pairs), Qwen3 top-4
  # (192), a small 1024:512:32:8 (256), OLMoE (512), DeepSeek-V2-Lite
  # (528), Qwen3-235B (768). Predicted: -5 to -13 % at <= 396 tasks with
  # f1w4b396 / w4b396, 0 to +10 % above. The first round logs the
  # kernels and grids the host picks (MOE4_LOG_LAUNCHES).
  run info-own 90 /tmp/b1/moe4 info
  DS=Qwen3-30B-A3B,Qwen1.5-MoE:2048:1408:60:4,Qwen3-top4:2048:768:128:4,Small:1024:512:32:8,OLMoE:2048:1024:64:8,DSV2-Lite:2048:1408:64:6,Qwen3-235B:4096:1536:128:8
  run log-own 30 env MOE4_LOG_LAUNCHES=1 /tmp/b1/moe4 bench decode --shape $DS --m 1
  for r in 1 2 3; do
    run ab-own-r$r 30 /tmp/b1/moe4 bench decode --shape $DS --m 1,2
    run ab-f1w4-r$r 30 /tmp/b1/moe4 bench decode --shape $DS --m 1,2 --tuning wide1=false
    run ab-f1w4b396-r$r 30 /tmp/b1/moe4 bench decode --shape $DS --m 1,2 --tuning wide1=false,fc1_blocks=396
    run ab-w4b396-r$r 30 /tmp/b1/moe4 bench decode --shape $DS --m 1,2 --tuning wide=false,fc_blocks=396
  done
elif [ "$PART" = 36 ]; then
  # Issue 3, from runs 120-121: FC1's warp count alone (`wide1`, FC2 left
  # to its rule) where FC1 routes at most 8 pairs in the block (the host
  # gives it 8 warps there, from run 63): Qwen3 M = 1 (8 pairs), GPT-OSS
  # M = 1 (4 pairs); M = 2 for contrast; three rounds. Predicted: Qwen3
  # M = 1 -5 to -10 % with `wide1=false`, GPT-OSS M = 1 unknown; and
  # perf-notes' reading (room on each SM for FC2's blocks): FC1 on 4 warps
  # x 396 blocks with FC2 on its default grid (`fc1_blocks`) ~14 µs at
  # Qwen3 M = 1 (default 17.3, both on 4 x 396 15.1), FC1 8 warps x 264
  # blocks (2 per SM) with FC2's default between.
  run info-own 90 /tmp/b1/moe4 info
  DS=Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V4-Flash
  for r in 1 2 3; do
    run ab-own-r$r 20 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4
    run ab-f1w4-r$r 20 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4 --tuning wide1=false
    run ab-f1w4b396-r$r 20 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4 --tuning wide1=false,fc1_blocks=396
    run ab-f1w8b264-r$r 20 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4 --tuning wide1=true,fc1_blocks=264
    run ab-w4b396-r$r 20 /tmp/b1/moe4 bench decode --shape $DS --m 1,2,4 --tuning wide=false,fc_blocks=396
  done
elif [ "$PART" = 5 ]; then
  # Issue 3: FC2 waiting per column group where the FC kernels route the
  # pairs themselves (`_rt_dp`): Qwen3 and GPT-OSS at M = 1-8 (FC2's
  # release was 2.5-3.5 us after FC1's last block at M = 1, run 87).
  run info-deps 120 $D /tmp/b1/moe4 info
  run test-deps 120 $D /tmp/b1/test-decode --test-threads=2 fc2_per_group_waits_equal_the_whole_wait
  run memcheck-deps 90 $D "$SAN" --tool memcheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  run racecheck-deps 90 $D "$SAN" --tool racecheck --error-exitcode 1 /tmp/b1/test-decode sanitizer_case
  for r in 1 2 3; do
    run ab-own-r$r 40 /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3 --m 1,2,4,8
    run ab-deps-r$r 40 $D /tmp/b1/moe4 bench decode --shape Qwen3-30B-A3B,GPT-OSS-120B,DeepSeek-V3 --m 1,2,4,8 --tuning deps=true
  done
fi
done
echo "=== done in $(( $(date +%s) - T0 )) s" | tee -a "$S"
