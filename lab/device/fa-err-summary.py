#!/usr/bin/env python3
"""Summarise test-backend-ops output run with GGML_TEST_PRINT_ERR=1: the error of each passing
FLASH_ATTN_EXT case, grouped by the CUDA path that ran it (the decode kernel for up to
OSCAR2_FA_DECODE_MAX_Q queries, the f16 expansion above) and by windows or not, K/V types and head size.
    python3 lab/device/fa-err-summary.py fa-err.log [max_decode_q]"""
import re
import statistics
import sys

path = sys.argv[1]
max_q = int(sys.argv[2]) if len(sys.argv) > 2 else 8
groups: dict[str, list[float]] = {}
for line in open(path, errors="replace"):
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    # the line: [FLASH_ATTN_EXT] err = E (max T) [NONE] err = ... FLASH_ATTN_EXT(args): OK
    # (the first error is the op's, the others the graph's other nodes)
    m = re.search(r"^\[FLASH_ATTN_EXT\] err = ([0-9.e+-]+).*?FLASH_ATTN_EXT\((.*?)\): *OK", line)
    if not m:
        continue
    args = dict(kv.split("=", 1) for kv in re.findall(r"(\w+=[^,()\[\]]+|\w+=\[[^\]]*\])", m.group(2)))
    nb = int(args.get("nb", "1"))
    kind = "windows" if "n_sink" in args else "plain"
    pair = f'{args.get("type_K", "?")}/{args.get("type_V", "?")}'
    hs = args.get("hsk", args.get("hs", "?"))
    key = f'{"decode" if nb <= max_q else "expand"} {kind} {pair} D={hs}'
    groups.setdefault(key, []).append(float(m.group(1)))
print(f"{'path, cases, K/V':40} {'n':>4} {'median err':>11} {'max err':>10}")
for key in sorted(groups):
    v = groups[key]
    print(f"{key:40} {len(v):4d} {statistics.median(v):11.2e} {max(v):10.2e}")
