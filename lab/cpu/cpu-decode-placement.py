#!/usr/bin/env python3
"""Group the runs of lab/cpu/cpu-decode-ab.sh by where the two vCPUs sat while they ran.

Each run of rounds.jsonl carries rt_ns, a cache line's round trip between CPUs 0 and 1 before
and after it (lab/cpu/cpu-pingpong.c). A run is "sharing" (the vCPUs on cores that share a
cache) when both are below --near ns, "apart" when both are above --far ns, and left out
otherwise (the placement changed while it ran, or a third one: 100-250 ns were seen too).
Prints, per depth, each build's tok/s range, median and run count in both placements and the
ratio of the oscar2 medians to each f16 build's.

    lab/cpu/cpu-decode-placement.py results/cpu-decode/rounds.jsonl [more.jsonl ...]
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict


def placement(rt: list[int], near: int, far: int) -> str | None:
    """'sharing', 'apart', or None for a run whose two round trips disagree."""
    if max(rt) < near:
        return "sharing"
    if min(rt) > far:
        return "apart"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jsonl", nargs="+", help="rounds.jsonl files of lab/cpu/cpu-decode-ab.sh")
    ap.add_argument("--near", type=int, default=100, help="round trip (ns) below which the vCPUs share a cache")
    ap.add_argument("--far", type=int, default=250, help="round trip (ns) above which they do not")
    args = ap.parse_args()

    runs: dict[tuple[int, str, str], list[float]] = defaultdict(list)
    mixed = 0
    for path in args.jsonl:
        for line in open(path):
            r = json.loads(line)
            if "rt_ns" not in r:
                continue
            where = placement(r["rt_ns"], args.near, args.far)
            if where is None:
                mixed += 1
                continue
            runs[(r["n_depth"], r["label"], where)].append(r["avg_ts"])
    if not runs:
        raise SystemExit("cpu-decode-placement: error: no run with rt_ns (rounds.jsonl of an older cpu-decode-ab.sh?)")

    for depth in sorted({d for d, _, _ in runs}):
        labels = sorted({lb for d, lb, _ in runs if d == depth})
        print(f"depth {depth}: tok/s range (median, runs)")
        print("| build, KV cache | vCPUs sharing a cache | not sharing |")
        print("|---|---|---|")
        med: dict[tuple[str, str], float] = {}
        for lb in labels:
            cells = []
            for where in ("sharing", "apart"):
                v = runs.get((depth, lb, where), [])
                if v:
                    med[(lb, where)] = statistics.median(v)
                    cells.append(f"{min(v):.2f}-{max(v):.2f} ({med[(lb, where)]:.1f}, {len(v)})")
                else:
                    cells.append("-")
            print(f"| {lb} | {cells[0]} | {cells[1]} |")
        for o in (lb for lb in labels if "oscar2" in lb):
            for f in (lb for lb in labels if "oscar2" not in lb):
                ratios = [f"{med[(o, w)]/med[(f, w)]:.2f}" if (o, w) in med and (f, w) in med else "-"
                          for w in ("sharing", "apart")]
                print(f"| {o} / {f} | " + " | ".join(ratios) + " |")
    print(f"cpu-decode-placement: {sum(len(v) for v in runs.values())} runs grouped, {mixed} left out "
          f"(placement changed during the run, or a round trip between --near and --far)")


if __name__ == "__main__":
    main()
