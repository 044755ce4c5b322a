#!/usr/bin/env bash
# Where a precision plan's decode time goes on a GPU (docs/RESULTS.md, "Batch 1 decode of the
# calibrated default"): every kernel of a few decode steps at depth DEPTH (default 65536), timed
# one at a time by Nsight Compute (gpu__time_duration, clocks and caches left alone), for two
# synthetic Qwen3-8B models (q4_0 weights) that differ only in what calibration adds: rotations
# only (all) and centring + a plan of the zoo's shape (K q8_0 in layers 8, 18, 30 and q4_0 in 21,
# 24, 35 of 36: both). The depth is filled in ubatches of UB (default 16384) tokens so that the
# prompt's kernels stay few. lab/profiling/ncu-kernel-table.py --compare sets the two side by side
# (the second and third decoded tokens): per kernel and per layer's attention.
# Files: $OUT/kernels-{all,both}.csv.
# Usage: lab/device/device-plan-kernels.sh          (SRC_TAR as lab/device/device-cuda.sh)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/results/device}
DEPTH=${DEPTH:-65536}
UB=${UB:-16384}
D=lab/device/device-cuda.sh
CUDA_ARCH=90 OUT=/tmp/plan-kernels-logs bash $D build 2>&1 | tail -1
export PYTHONPATH=build-cuda-src/gguf-py:py
S="python3 -m oscar.bench.synthetic qwen3-8b --weights q4_0 --oscar"
$S -o /tmp/m-all.gguf 2>/dev/null
$S --centre --k-q8_0-layers 8,18,30 --k-q4_0-layers 21,24,35 -o /tmp/m-both.gguf 2>/dev/null
BIN=${CUDA_BUILD_DIR:-$ROOT/build-cuda}/bin
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for m in all both; do
    echo "[$(date +%T)] ncu: $m"
    timeout 420 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw \
        --log-file "$OUT/kernels-$m.csv" "$BIN/llama-bench" -m /tmp/m-$m.gguf -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 \
        -p 0 -n 3 -r 1 -d "$DEPTH" -b "$UB" -ub "$UB" --no-warmup > /tmp/ncu-$m.out 2>&1
    echo "rc $? kernels $(grep -c '^"[0-9]' "$OUT/kernels-$m.csv")"; tail -2 /tmp/ncu-$m.out
done
python3 lab/profiling/ncu-kernel-table.py --layers 36 --skip-first-token --compare "$OUT/kernels-all.csv" "$OUT/kernels-both.csv"
