#!/usr/bin/env python3
"""Executed instructions and stall samples of one kernel, by function and by source line.

Input: the CSV of ncu's source view with CUDA lines and their SASS, from a build with
-lineinfo (lab/device/device-cuda.sh with CUDA_LINEINFO=1):
    ncu --import-source yes --section SourceCounters -k regex:KERNEL -c 1 -o REP PROGRAM ...
    ncu -i REP.ncu-rep --page source --csv --print-source cuda,sass > SRC.csv
and the source file as it was built (SOURCE; its functions name the regions). Lines of other
files (inlined headers) are summed per file. --per N divides the counts (say, by the number of
32-cell tiles the kernel walked, to get instructions per tile and warp).
usage: lab/profiling/ncu-source-table.py SRC.csv[.xz] SOURCE [--file NAME] [--per N] [--lines K]
(--file: the source's name in the CSV, when SOURCE is a copy under another name, e.g. from
`git show COMMIT:ggml/src/ggml-cuda/fattn-oscar2.cu > /tmp/fa.cu`)
"""
from __future__ import annotations

import argparse
import collections
import csv
import lzma
import re
from pathlib import Path


def read_lines(path: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(file name, line) -> (warp instructions executed, stall samples) of the CUDA lines."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    cur, cols = "?", None
    with (lzma.open(path, "rt") if path.endswith(".xz") else open(path)) as raw:
        rows = list(csv.reader(raw))
    for r in rows:
        if not r or r[0] == "Function Name":
            continue
        if r[0] == "File Path":
            cur = Path(r[1]).name
            continue
        if r[0] == "Line No":  # a header: the columns of the counts (None: its rows are skipped)
            want = ("Instructions Executed", "Warp Stall Sampling (All Samples)")
            cols = tuple(r.index(c) for c in want) if all(c in r for c in want) else None
            continue
        if r[0] == "" or cols is None:  # a SASS row under its CUDA line
            continue
        try:
            inst, smp = int(r[cols[0]]), int(r[cols[1]])
        except ValueError:
            continue
        out[(cur, int(r[0]))] = (inst, smp)
    return out


FUNC = re.compile(r"^(?:template\s*<[^>]*>\s*)?static\s+(?:__device__|__global__)[^(]*?(\w+)\s*\(")
LAMBDA = re.compile(r"^\s*auto\s+(\w+)\s*=\s*\[")


def regions(source: Path) -> list[tuple[int, str]]:
    """(first line, name) of each function and lambda of the source, in order."""
    starts = []
    for i, line in enumerate(source.read_text().splitlines(), 1):
        if m := FUNC.match(line):
            starts.append((i, m.group(1) + "()"))
        elif m := LAMBDA.match(line):
            starts.append((i, m.group(1) + " (lambda, and what follows it)"))
    return starts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("source", type=Path)
    ap.add_argument("--file", help="the source's file name in the CSV (default: SOURCE's name)")
    ap.add_argument("--per", type=float, default=1.0, help="divide the counts by this (e.g. tiles)")
    ap.add_argument("--lines", type=int, default=40, help="how many of the busiest lines to list")
    args = ap.parse_args()

    lines = read_lines(args.csv)
    src = args.source.read_text().splitlines()
    starts = regions(args.source)
    name = args.file or args.source.name
    tot_i = sum(v[0] for v in lines.values()) or 1
    tot_s = sum(v[1] for v in lines.values()) or 1

    def region(n: int) -> str:
        r = "(file start)"
        for s, nm in starts:
            if s <= n:
                r = nm
        return r

    by = collections.Counter()
    by_s = collections.Counter()
    for (f, n), (i, s) in lines.items():
        key = region(n) if f == name else f
        by[key] += i
        by_s[key] += s
    print(f"{tot_i} warp instructions, {tot_s} stall samples; per {args.per:g}: {tot_i / args.per:.1f}")
    print("| instructions | share | stall samples | region |\n|---:|---:|---:|---|")
    for k, v in by.most_common():
        print(f"| {v / args.per:.1f} | {100 * v / tot_i:.1f} % | {100 * by_s[k] / tot_s:.1f} % | {k} |")
    print(f"\nbusiest lines of {name}:\n| line | instructions | stall samples | source |\n|---:|---:|---:|---|")
    rows = sorted(((i, s, n) for (f, n), (i, s) in lines.items() if f == name), reverse=True)[:args.lines]
    for i, s, n in sorted(rows, key=lambda r: r[2]):
        text = src[n - 1].strip().replace("|", "\\|")[:90] if n <= len(src) else "?"
        print(f"| {n} | {i / args.per:.1f} | {s} | `{text}` |")


if __name__ == "__main__":
    main()
