#!/usr/bin/env python3
"""The README's decode table from a `moe4 bench decode --json` file:
per shape and M, "µs (of copy BW; floor of copy BW)".

    python3 scripts/decode-table.py docs/runs/DATE-runN-decode.json
"""
import json
import sys

runs = json.load(open(sys.argv[1]))
rows = runs[0]["decode"]
ms = sorted({r["m"] for r in rows})
shapes = []
for r in rows:
    if r["shape"] not in shapes:
        shapes.append(r["shape"])
print(f"copy bandwidth {runs[0]['copy_gbps']:.0f} GB/s\n")
print("| shape | " + " | ".join(f"M={m}" for m in ms) + " |")
print("|---|" + "---:|" * len(ms))
for s in shapes:
    cells = []
    for m in ms:
        r = next((r for r in rows if r["shape"] == s and r["m"] == m), None)
        cells.append("" if r is None else f"{r['us']:.1f} ({r['of_copy']:.2f}; {r['floor_of_copy']:.2f})")
    print(f"| {s} | " + " | ".join(cells) + " |")
