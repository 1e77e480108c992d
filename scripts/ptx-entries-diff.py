#!/usr/bin/env python3
"""Per-kernel comparison of two PTX files (plain or .gz): for each entry of
A, whether B's entry of the same name is the same text, the same modulo
label / register numbering and comments (what a change elsewhere in the
module or a folded branch shifts), or different. Use it before landing a
change that should leave some kernels alone: their lines must say `same`
or `renumbered`.

    python3 scripts/ptx-entries-diff.py A.ptx[.gz] B.ptx[.gz] [NAME_REGEX]
"""
import gzip
import re
import sys


def entries(path):
    text = gzip.open(path, "rt").read() if path.endswith(".gz") else open(path).read()
    parts = re.split(r"(?m)^(?=\.visible \.entry )", text)
    return {p.split("(")[0].split()[-1]: p for p in parts[1:]}


def normal(body):
    body = re.sub(r"//.*", "", body)
    # (Trailing blanks too: a comment's padding follows its label's width.)
    body = "\n".join(l.rstrip() for l in body.splitlines() if l.strip() and not l.strip().startswith(".reg"))
    names = {}

    def rename(m):
        kind = re.sub(r"\d+", "", m.group(0))
        seen = names.setdefault(kind, {})
        return f"{kind}#{seen.setdefault(m.group(0), len(seen))}"

    return re.sub(r"\$L__BB\d+_\d+|%[a-z]+\d+", rename, body)


a, b = entries(sys.argv[1]), entries(sys.argv[2])
pick = re.compile(sys.argv[3] if len(sys.argv) > 3 else "")
counts = {"same": 0, "renumbered": 0, "different": 0, "missing": 0}
for name in sorted(a):
    if not pick.search(name):
        continue
    if name not in b:
        verdict = "missing"
    elif a[name] == b[name]:
        verdict = "same"
    elif normal(a[name]) == normal(b[name]):
        verdict = "renumbered"
    else:
        verdict = "different"
    counts[verdict] += 1
    if verdict in ("different", "missing"):
        print(f"{verdict:10s} {name}")
print(", ".join(f"{k} {v}" for k, v in counts.items()))
