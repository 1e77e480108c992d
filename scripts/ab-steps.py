#!/usr/bin/env python3
"""A/B table from a device run's all.log whose bench steps are named
`ab-<build>-r<round>` (the custom run scripts in docs/runs): per decode or prefill point
(`<shape> M=<m> <t> us` or `<shape> M=<m> prefill <t> us` lines), each build's times by round and its mean's
change against the baseline build's mean.

    python3 scripts/ab-steps.py ALL_LOG [BASELINE_BUILD]   (default: own)
"""
import collections
import re
import sys

log = open(sys.argv[1]).read()
base = sys.argv[2] if len(sys.argv) > 2 else "own"
times = collections.defaultdict(dict)
builds = []
for step in re.split(r"^=== ", log, flags=re.M):
    m = re.match(r"ab-(.+)-r(\d+)$", step.split("\n", 1)[0].strip())
    if not m:
        continue
    build, rnd = m.group(1), m.group(2)
    if build not in builds:
        builds.append(build)
    for line in step.split("\n"):
        # Decode lines `<shape> M=<m> <t> us`, prefill `<shape> M=<m> prefill <t> us`.
        p = re.match(r"\s+(\S+) M=(\d+) (?:prefill )?([\d.]+) us", line)
        if p:
            times[(p.group(1), int(p.group(2)))][(build, rnd)] = float(p.group(3))
print(f"{'point':24s}" + "".join(f"{b:>26s}" for b in builds))
for point, t in times.items():
    ref = [v for (b, _), v in t.items() if b == base]
    row = f"{point[0] + ' M=' + str(point[1]):24s}"
    for b in builds:
        vals = [t[k] for k in sorted(t) if k[0] == b]
        cell = "/".join(f"{v:.1f}" for v in vals)
        if b != base and ref and vals:
            cell += f" ({100 * (sum(vals) / len(vals) / (sum(ref) / len(ref)) - 1):+.1f}%)"
        row += f"{cell:>26s}"
    print(row)
