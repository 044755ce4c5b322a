#!/usr/bin/env python3
"""Count the SASS instructions of a kernel's main loop (from cuobjdump -sass output).

The loop is the range between the target of the last backward branch and that branch.
Ranges skipped on the usual path (a forward branch over a block, e.g. the rare rescale)
are given with --skip START:END (hex addresses, END exclusive) and reported apart.
Usage: count_sass.py FILE.sass [--skip 0x3260:0x3580 ...] [--per N]  (N = KV-head tiles per iteration)
"""
import re, sys, collections, argparse

ap = argparse.ArgumentParser()
ap.add_argument("sass"); ap.add_argument("--skip", action="append", default=[])
ap.add_argument("--per", type=float, default=1.0)
a = ap.parse_args()
ins = []
for line in open(a.sass):
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if m:
        ins.append((int(m.group(1), 16), m.group(2).strip()))
# last backward branch
lo = hi = None
for addr, txt in ins:
    b = re.search(r"\bBRA\s+(0x[0-9a-f]+)", txt)
    if b and int(b.group(1), 16) < addr and int(b.group(1), 16) != addr:
        lo, hi = int(b.group(1), 16), addr
skips = [tuple(int(x, 16) for x in s.split(":")) for s in a.skip]
body, skipped = [], []
for addr, txt in ins:
    if lo <= addr <= hi:
        (skipped if any(s <= addr < e for s, e in skips) else body).append(txt)
def opc(t):
    t = re.sub(r"^@!?U?P[T0-9]+\s+", "", t)
    return t.split()[0]
hist = collections.Counter(opc(t).split(".")[0] for t in body)
print(f"loop 0x{lo:x}..0x{hi:x}: {len(body)} instructions on the usual path "
      f"({len(skipped)} skipped), {len(body)/a.per:.0f} per KV-head tile of 32 cells")
for k, v in hist.most_common():
    print(f"  {k:10s} {v}")
