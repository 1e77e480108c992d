#!/usr/bin/env python3
"""Compares the `exp` steps of a gpu-run.sh log: for each experimental PTX,
per bench point the median time of the bundle's own build (exp-own-for-X*)
and of the experimental one (exp-X*) over the repeats, their ratio
(exp / own: above 1, the bundle is faster), and the geometric mean of the
ratios per M (or rows).   python3 scripts/exp-compare.py OUT/all.log"""
import math
import re
import statistics
import sys
from collections import defaultdict

log = open(sys.argv[1]).read()
times = defaultdict(lambda: defaultdict(list))  # (exp, side) -> point -> [us]
for sec in re.split(r"^=== ", log, flags=re.M):
    name = sec.split(":")[0]
    m = re.match(r"exp-(own-for-)?(.+?)(-r\d+)?$", name)
    if not m or "rc=" in sec.splitlines()[0]:
        continue
    # exp-tests' steps (exp-test-*, exp-memcheck-*, ...) hold no bench.
    if re.match(r"(test|memcheck|racecheck|synccheck)-", m.group(2)):
        continue
    side = "own" if m.group(1) else "exp"
    for p in re.finditer(r"^\s+(\S+) (M|rows)=(\d+) (?:prefill )?([\d.]+) us", sec, re.M):
        times[(m.group(2), side)][(p.group(1), int(p.group(3)))].append(float(p.group(4)))
for exp in sorted({e for e, _ in times}):
    own, new = times[(exp, "own")], times[(exp, "exp")]
    print(f"{exp}: exp / own (median of {len(next(iter(own.values()), []))} runs each)")
    by_m = defaultdict(list)
    for k in sorted(own, key=lambda k: (k[1], k[0])):
        if k not in new:
            continue
        a, b = statistics.median(own[k]), statistics.median(new[k])
        by_m[k[1]].append(b / a)
        print(f"  {k[0]:<20} {k[1]:>5} own {a:9.1f} exp {b:9.1f}  {b / a:.3f}")
    for mm, rs in sorted(by_m.items()):
        print(f"  M={mm}: geometric mean {math.exp(sum(map(math.log, rs)) / len(rs)):.3f} over {len(rs)}")
