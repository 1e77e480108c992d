#!/usr/bin/env python3
"""Median per point of an A/B decode log: old and new µs, old/new (above 1:
the new build is faster). Reads scripts/ab-decode.sh's ab.log ("=== ab old"
/ "=== ab new" sections) and gpu-run.sh exp summaries of decode-*.ptx
("=== exp-own-for-NAME..." = old, "=== exp-NAME..." = new), one comparison
per experimental PTX NAME (each against its own interleaved runs of the
bundle's PTX), with the geometric mean of old/new over its points."""
import math, re, statistics, sys

# comparison name -> {"old"/"new": {(shape, M): [µs, ...]}}
runs = {}
cur = None
for line in open(sys.argv[1]):
    m = re.match(r"=== (?:ab (old|new) |exp-own-for-(\S+?)(?:-r\d+)?: |exp-(\S+?)(?:-r\d+)?: )", line)
    if m:
        if "rc=" in line:
            continue
        if m.group(1):
            cur = ("ab", m.group(1))
        else:
            cur = (m.group(2), "old") if m.group(2) else (m.group(3), "new")
        continue
    if line.startswith("==="):
        cur = None
        continue
    m = re.match(r"\s+(\S+) M=(\d+) ([\d.]+) us", line)
    if m and cur:
        name, side = cur
        pts = runs.setdefault(name, {"old": {}, "new": {}})[side]
        pts.setdefault((m.group(1), int(m.group(2))), []).append(float(m.group(3)))
for name, r in runs.items():
    if len(runs) > 1:
        print(name)
    ratios = []
    for k in r["new"]:
        if k in r["old"]:
            o, n = statistics.median(r["old"][k]), statistics.median(r["new"][k])
            ratios.append(o / n)
            print(f"{k[0]:18s} M={k[1]:<3d} old {o:8.1f}  new {n:8.1f}  old/new {o / n:.3f}")
    if ratios:
        print(f"geometric mean old/new {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} over {len(ratios)} points")
