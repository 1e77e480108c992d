#!/usr/bin/env bash
# Prepares the device call for the narrow prefill kernels (twenty-sixth
# session; docs/perf-notes.md): applies docs/runs/2026-12-08-nark-land.patch
# on a branch `nark-land`, rebuilds the PTX (checked against the sha256 the
# session recorded), commits it there, builds the GPU bundle, main's PTX
# before the patch (`pf-old`) and the `nark8` experiment into .gpu/exp, and
# copies the run script. ~16 minutes on two cores (tested 2026-12-08). Then, on the device
# (carry .gpu): OUT=$OUT PART=71 LIMIT=560 bash .gpu/run.sh, and PART=72.
set -euo pipefail
cd "$(dirname "$0")/.."
want=381ab5b59a42f9d78ad624d76927daae25ee3231b4219a63f1d520653dfb867e
base=$(git rev-parse HEAD)
git switch -c nark-land
git apply docs/runs/2026-12-08-nark-land.patch
cargo xtask build-ptx
got=$(sha256sum host/ptx/sm_90a.ptx | cut -d' ' -f1)
[ "$got" = "$want" ] || echo "prepare-nark: the rebuilt sm_90a.ptx differs from the recorded one ($got); the sources changed since?" >&2
git add -A
git commit -qm "the narrow prefill kernels (docs/runs/2026-12-08-nark-land.patch) with their PTX"
cargo xtask gpu-bundle
mkdir -p .gpu/exp
git show "$base:host/ptx/sm_90a.ptx" | xz -9 > .gpu/exp/pf-old.ptx.xz
cargo xtask exp-ptx pf-nark8 nark8
gunzip -c .gpu/exp/pf-nark8.ptx.gz | xz -9 > .gpu/exp/pf-nark8.ptx.xz
rm .gpu/exp/pf-nark8.ptx.gz
cp scripts/next-device-call.sh .gpu/run.sh
git rev-parse --short HEAD > .gpu/BUILT_FROM
du -sh .gpu
echo "prepare-nark: ready; device: OUT=\$OUT PART=71 LIMIT=560 bash .gpu/run.sh (carry .gpu), then PART=72"
