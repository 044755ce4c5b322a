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
With --compare A B (two runs of the same geometry, e.g. a model before and after a change) the
two are set side by side: each kernel's time per token in both and the difference, largest
first, then each layer's decode attention (its kernel and the combine after it).
Both of ncu's CSV layouts are read: the default (a row per metric) and --page raw (a column per
metric).
usage: lab/profiling/ncu-kernel-table.py [--layers 36] [--skip-first-token] [--compare] K.csv[.xz] ...
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


SCALE = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
TIME = "gpu__time_duration.sum"


def read_kernels(path: str) -> list[tuple[str, float]]:
    """(kernel name, microseconds) in launch order."""
    raw = lzma.open(path, "rt") if path.endswith(".xz") else open(path)
    with raw as f:
        rows = [r for r in csv.reader(io.StringIO(f.read())) if len(r) > 10]
    hdr, rows = rows[0], rows[1:]
    ki = hdr.index("Kernel Name")
    if TIME in hdr:  # --page raw: a units row, then a row per kernel
        ti = hdr.index(TIME)
        scale = SCALE[rows[0][ti]]
        return [(r[ki], float(r[ti].replace(",", "")) * scale) for r in rows[1:] if r[0].isdigit()]
    ui, vi = hdr.index("Metric Unit"), hdr.index("Metric Value")
    return [(r[ki], float(r[vi].replace(",", "")) * SCALE[r[ui]]) for r in rows]


def short(kernel: str) -> str:
    """A kernel's name without its arguments and return type (templates kept)."""
    return kernel.split("(")[0].replace("void ", "")[:64]


Kernels = list[tuple[str, float]]


def compare(runs: list[tuple[str, Kernels, float, Kernels]], layers: int, decode_attn: tuple[str, ...]) -> None:
    """Two runs' kernels per token side by side, then their attention layer by layer. A run:
    (path, its whole tokens' kernels, how many tokens, the kernels its layer table reads)."""
    (pa, ka, na, aa), (pb, kb, nb, ab) = runs
    per = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])  # launches and us per token, A then B
    for col, ks, n in ((0, ka, na), (2, kb, nb)):
        for k, t in ks:
            per[short(k)][col] += 1 / n
            per[short(k)][col + 1] += t / n
    ta, tb = sum(t for _, t in ka) / na, sum(t for _, t in kb) / nb
    print(f"\nper token: {pa} {ta:.1f} us, {pb} {tb:.1f} us, difference {tb - ta:+.1f} us ({(tb / ta - 1) * 100:+.1f} %)")
    print("| kernel | launches A | us A | launches B | us B | B - A us |\n|---|---:|---:|---:|---:|---:|")
    for name, (la, ua, lb, ub) in sorted(per.items(), key=lambda x: -abs(x[1][3] - x[1][1])):
        print(f"| `{name}` | {la:.0f} | {ua:.1f} | {lb:.0f} | {ub:.1f} | {ub - ua:+.1f} |")
    print("\n| layer | attention us A | kernel A | attention us B | kernel B |\n|---:|---:|---|---:|---|")
    layer_rows = []
    for ks, n in ((aa, na), (ab, nb)):
        t = [0.0] * layers
        name = [""] * layers
        m = -1
        for k, dt in ks:
            attn = any(s in k for s in decode_attn)
            if attn:
                m += 1
                name[m % layers] = short(k)
            if m >= 0 and (attn or "oscar2_fa_combine" in k):
                t[m % layers] += dt / n
        layer_rows.append((t, name))
    for il in range(layers):
        (t0, n0), (t1, n1) = layer_rows
        print(f"| {il} | {t0[il]:.1f} | `{n0[il]}` | {t1[il]:.1f} | `{n1[il]}` |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--skip-first-token", action="store_true",
                    help="take whole tokens after the first decoded one (the run starts with a prompt)")
    ap.add_argument("--compare", action="store_true",
                    help="two CSV files side by side: each kernel's time per token and the difference, "
                         "then each layer's decode attention")
    ap.add_argument("--decode-attn", action="append", metavar="NAME",
                    help="with --skip-first-token: the decode step's attention kernel, by a part of its name "
                         f"(default {', '.join(DECODE_ATTN)}; at batch, f16 decodes with e.g. 'flash_attn_ext_f16<128, 128, 2,')")
    a = ap.parse_args(argv)
    decode_attn = tuple(a.decode_attn) if a.decode_attn else DECODE_ATTN
    if a.compare and len(a.csv) != 2:
        print("--compare takes two CSV files", file=sys.stderr)
        return 1
    runs = []
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
        if a.compare:
            # (a layer's attention is taken with the combine after it, also the last one's)
            after = ks[marks[a.layers - 1] + 1:] if a.skip_first_token else tail
            runs.append((path, tail, tokens, after))
            continue
        per = collections.defaultdict(lambda: [0, 0.0])
        for k, t in tail:
            name = short(k)
            per[name][0] += 1
            per[name][1] += t
        total = sum(t for _, t in tail) / tokens
        print(f"\n{path}: {total:.0f} us of kernels per token ({total / a.layers:.1f} per layer)")
        print("| us per layer | launches per layer | kernel |\n|---:|---:|---|")
        for name, (n, t) in sorted(per.items(), key=lambda x: -x[1][1])[: a.top]:
            print(f"| {t / tokens / a.layers:.2f} | {n / tokens / a.layers:.2f} | `{name}` |")
    if a.compare:
        compare(runs, a.layers, decode_attn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
