#!/usr/bin/env python3
"""Per-layer GPU time of one decoded token, by kernel, from an Nsight Compute CSV.

Input: the CSV of
    GGML_CUDA_DISABLE_GRAPHS=1 ncu --clock-control none --cache-control none \\
        --metrics gpu__time_duration.sum --csv --log-file K.csv \\
        llama-bench -m MODEL -ngl 99 -fa 1 -ctk T -ctv T -p 0 -n 2 -r 1
(one warm-up token and two timed ones; .csv or .csv.xz). The last half of the kernels is
taken, the number of tokens in it counted by the attention kernels (one per layer), and
each kernel's time divided by tokens and layers. With --skip-first-token (for runs whose
first kernels are a prompt's, e.g. llama-bench -d DEPTH -n 3 --no-warmup) the kernels taken
are those from after the first token's last attention kernel to the last attention kernel:
whole decoded tokens only, each period holding one token's kernels.
usage: scripts/ncu-kernel-table.py [--layers 36] [--skip-first-token] K.csv[.xz] ...
"""
from __future__ import annotations

import argparse
import collections
import csv
import io
import lzma
import sys

ATTN = ("flash_attn_ext_vec", "oscar2_fa_partial", "flash_attn_ext_f16", "flash_attn_tile")
DECODE_ATTN = ("flash_attn_ext_vec", "oscar2_fa_partial")  # one-token attention (a prompt's takes the others)


def read_kernels(path: str) -> list[tuple[str, float]]:
    """(kernel name, microseconds) in launch order."""
    raw = lzma.open(path, "rt") if path.endswith(".xz") else open(path)
    with raw as f:
        rows = [r for r in csv.reader(io.StringIO(f.read())) if len(r) > 10]
    hdr, rows = rows[0], rows[1:]
    ki, ui, vi = hdr.index("Kernel Name"), hdr.index("Metric Unit"), hdr.index("Metric Value")
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    return [(r[ki], float(r[vi].replace(",", "")) * scale[r[ui]]) for r in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--skip-first-token", action="store_true",
                    help="take whole tokens after the first decoded one (the run starts with a prompt)")
    ap.add_argument("--decode-attn", action="append", metavar="NAME",
                    help="with --skip-first-token: the decode step's attention kernel, by a part of its name "
                         f"(default {', '.join(DECODE_ATTN)}; at batch, f16 decodes with e.g. 'flash_attn_ext_f16<128, 128, 2,')")
    a = ap.parse_args(argv)
    decode_attn = tuple(a.decode_attn) if a.decode_attn else DECODE_ATTN
    for path in a.csv:
        ks = read_kernels(path)
        if a.skip_first_token:
            marks = [i for i, (k, _) in enumerate(ks) if any(s in k for s in decode_attn)]
            if len(marks) < 2*a.layers:
                print(f"{path}: fewer than two decoded tokens", file=sys.stderr)
                return 1
            tail = ks[marks[a.layers - 1] + 1: marks[-1] + 1]
            tokens = (len(marks) - a.layers) / a.layers
        else:
            tail = ks[len(ks) // 2:]
            n_attn = sum(1 for k, _ in tail if any(s in k for s in ATTN))
            if n_attn == 0:
                print(f"{path}: no attention kernel found", file=sys.stderr)
                return 1
            tokens = n_attn / a.layers
        per = collections.defaultdict(lambda: [0, 0.0])
        for k, t in tail:
            name = k.split("(")[0].replace("void ", "")[:64]
            per[name][0] += 1
            per[name][1] += t
        total = sum(t for _, t in tail) / tokens
        print(f"\n{path}: {total:.0f} us of kernels per token ({total / a.layers:.1f} per layer)")
        print("| us per layer | launches per layer | kernel |\n|---:|---:|---|")
        for name, (n, t) in sorted(per.items(), key=lambda x: -x[1][1])[: a.top]:
            print(f"| {t / tokens / a.layers:.2f} | {n / tokens / a.layers:.2f} | `{name}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
