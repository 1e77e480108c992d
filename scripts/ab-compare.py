#!/usr/bin/env python3
"""Median per point of scripts/ab-decode.sh's log: old and new µs, old/new
(above 1: the new build is faster)."""
import re, statistics, sys
runs = {"old": {}, "new": {}}
v = None
for line in open(sys.argv[1]):
    m = re.match(r"=== ab (old|new) ", line)
    if m:
        v = m.group(1)
        continue
    m = re.match(r"\s+(\S+) M=(\d+) ([\d.]+) us", line)
    if m and v:
        runs[v].setdefault((m.group(1), int(m.group(2))), []).append(float(m.group(3)))
for k in runs["new"]:
    if k in runs["old"]:
        o, n = statistics.median(runs["old"][k]), statistics.median(runs["new"][k])
        print(f"{k[0]:18s} M={k[1]:<3d} old {o:8.1f}  new {n:8.1f}  old/new {o / n:.3f}")
