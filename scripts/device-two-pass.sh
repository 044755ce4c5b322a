#!/usr/bin/env bash
# On a GPU machine (the device tool): the oscar2 decode kernel's two schedules side by side, the
# two-pass one (GGML_CUDA_OSCAR2_TWO_PASS=1, patch 0019) against the one-pass default.
#   1. build test-backend-ops (scripts/device-cuda.sh build; SRC_TAR, default .device/llama-src.tar.xz
#      from scripts/device-pack.sh)
#   2. test-backend-ops FLASH_ATTN_EXT, CUDA against the CPU, every oscar2/oscar3 case, two-pass at
#      the grid's chunks and at GGML_CUDA_OSCAR2_CHUNK 1024 and 160; one-pass at the grid's chunks
#   3. the attention op (test-backend-ops perf), Qwen3-8B geometry, the cache's layout with its
#      windows (oscar2 or oscar3 K beside oscar2 V) at 4k-128k cells and 8 streams, and each head
#      contiguous at 64k beside f16: ROUNDS rounds (default 2), the two schedules alternating
#   4. Nsight Compute of both at 64k cells (time, DRAM bytes and throughput, instructions, issue
#      rate, registers, warps), where ncu is on PATH
#   model (given as the argument, instead of 2-4): llama-bench decode of a synthetic Qwen3-8B
#      (q4_0 weights, random OSCAR rotations: a converted model's path) at depths DEPTHS (default
#      65536,131072), f16 and oscar2 with each schedule, ROUNDS rounds alternating
# Results under $OUT (perf.txt, test-*.txt, ncu-*.csv, decode.txt).
#   scripts/device-two-pass.sh          (about 6 minutes on an H100: build, test, perf, ncu)
#   scripts/device-two-pass.sh model    (about 8 minutes)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
T0=$(date +%s)
OUT=${OUT:-$ROOT/results/device}
mkdir -p "$OUT"
export SRC_TAR=${SRC_TAR:-.device/llama-src.tar.xz}
log() { echo "[$(date +%T) +$(( $(date +%s) - T0 ))s] $*"; }
strip() { sed -E 's/\x1b\[[0-9;]*m//g; s/ +/ /g'; }

MODE=${1:-op}
log build
if [ "$MODE" = model ]; then
    BUILD_TARGETS="test-backend-ops llama-bench" bash scripts/device-cuda.sh build 2>&1 | tail -2
else
    BUILD_TARGETS=${BUILD_TARGETS:-test-backend-ops} bash scripts/device-cuda.sh build 2>&1 | tail -2
fi
B=${CUDA_BUILD_DIR:-build-cuda}/bin
for lib in libcublas.so.13 libcudart.so.13; do
    d=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
    [ -n "$d" ] && export LD_LIBRARY_PATH="$(dirname "$d")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH=$PWD/$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -x "$B/test-backend-ops" ] || { log "no test-backend-ops in $B"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader

if [ "$MODE" = model ]; then
    SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
    log "synth: $SYN"
    [ -f "$SYN" ] || PYTHONPATH=build-cuda-src/gguf-py:py python3 -m oscar.synthetic qwen3-8b -o "$SYN" --weights q4_0 --oscar 2>&1 | tail -1
    log "decode (llama-bench -p 0 -n 32 -r 1 -ub 2048 -d ${DEPTHS:-65536,131072})"
    for r in $(seq "${ROUNDS:-2}"); do
        for cfg in "f16 0" "oscar2 1" "oscar2 0"; do
            set -- $cfg
            GGML_CUDA_OSCAR2_TWO_PASS=$2 timeout 240 "$B/llama-bench" -m "$SYN" -ngl 99 -fa 1 -ctk $1 -ctv $1 -p 0 -n 32 -r 1 -ub 2048 \
                -d "${DEPTHS:-65536,131072}" -o csv 2>/dev/null | tail -n +2 \
                | awk -F, -v c="round $r $1 two_pass=$2" '{printf "%s: d%s %s tok/s\n", c, $(NF-5), $(NF-1)}' | tr -d '"' | tee -a "$OUT/decode.txt"
        done
    done
    log done
    exit 0
fi

log "test"
for ch in 0 1024 160; do
    GGML_CUDA_OSCAR2_TWO_PASS=1 GGML_CUDA_OSCAR2_CHUNK=$ch "$B/test-backend-ops" test -b CUDA0 -o FLASH_ATTN_EXT -p "oscar[23]" \
        > "$OUT/test-two-pass-chunk$ch.txt" 2>&1
    echo "two-pass, chunk $ch: rc $? $(grep -E 'tests passed' "$OUT/test-two-pass-chunk$ch.txt") $(grep -c FAIL "$OUT/test-two-pass-chunk$ch.txt") FAIL"
    grep FAIL "$OUT/test-two-pass-chunk$ch.txt" | strip | cut -c1-220 | head -5
done
"$B/test-backend-ops" test -b CUDA0 -o FLASH_ATTN_EXT -p "oscar[23]" > "$OUT/test-one-pass.txt" 2>&1
echo "one-pass, chunk 0: rc $? $(grep -E 'tests passed' "$OUT/test-one-pass.txt") $(grep -c FAIL "$OUT/test-one-pass.txt") FAIL"

log "perf"
P='hs=128,nh=8,gqa=4,kv=[0-9]+,nb=1,ns=(1|8),n_sink=64,n_recent=256,type_K=(oscar2|oscar3),type_V=oscar2,hot_K=1,hot_V=1,shuffled=0|hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,.*type_K=(f16|oscar2)'
for r in $(seq "${ROUNDS:-2}"); do
    for tp in 1 0; do
        GGML_CUDA_OSCAR2_TWO_PASS=$tp timeout 120 "$B/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" 2>&1 \
            | grep -E "^ *FLASH" | strip | sed "s/^/round $r two_pass=$tp /" | tee -a "$OUT/perf.txt" | cut -c1-230
    done
done

if command -v ncu > /dev/null; then
    log "ncu"
    for tp in 1 0; do
        GGML_CUDA_OSCAR2_TWO_PASS=$tp timeout 90 ncu --clock-control none -k regex:oscar2_fa_partial -c 2 --csv \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,launch__registers_per_thread,sm__warps_active.avg.per_cycle_active \
            "$B/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT -p 'hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,nb=1,.*type_K=oscar2,type_V=oscar2' \
            > "$OUT/ncu-two-pass$tp.csv" 2>&1
        python3 - "$OUT/ncu-two-pass$tp.csv" "$tp" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10 and r[0].isdigit()]
for r in rows:
    print(f"two_pass={sys.argv[2]} launch {r[0]} {r[4][:48]}: {r[-3]} = {r[-1]} {r[-2]}")
if not rows:
    print("ncu: no rows; " + open(sys.argv[1]).read()[-300:])
PY
    done
fi
log done
