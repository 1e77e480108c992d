#!/usr/bin/env python3
"""Median per point of an A/B decode log: old and new µs, old/new (above 1:
the new build is faster). Reads scripts/ab-decode.sh's ab.log ("=== ab old"
/ "=== ab new" sections) and gpu-run.sh exp summaries of decode-*.ptx
("=== exp-own-for-..." = old, "=== exp-..." = new)."""
import re, statistics, sys
runs = {"old": {}, "new": {}}
v = None
for line in open(sys.argv[1]):
    m = re.match(r"=== (?:ab (old|new) |(exp-own-for-)|(exp-))", line)
    if m:
        if "rc=" not in line:
            v = m.group(1) or ("old" if m.group(2) else "new")
        continue
    m = re.match(r"\s+(\S+) M=(\d+) ([\d.]+) us", line)
    if m and v:
        runs[v].setdefault((m.group(1), int(m.group(2))), []).append(float(m.group(3)))
for k in runs["new"]:
    if k in runs["old"]:
        o, n = statistics.median(runs["old"][k]), statistics.median(runs["new"][k])
        print(f"{k[0]:18s} M={k[1]:<3d} old {o:8.1f}  new {n:8.1f}  old/new {o / n:.3f}")
