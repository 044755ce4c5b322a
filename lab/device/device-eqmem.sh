#!/usr/bin/env bash
# On a GPU machine (the device tool): the oscar2 decode kernel's correctness and speed at
# 64k-128k cells beside f16, and equal-memory throughput (oscar-bench --equal-memory). Steps, in order, each skipped
# when the call's deadline (DEADLINE_S seconds from the start, default 540) would pass it
# (rerun with the skipped steps; the build and the model in /tmp are reused while the
# machine is warm):
#   build   lab/device/device-cuda.sh build into /tmp/b (SRC_TAR, default .cache/stage-cuda/llama-src.tar.xz)
#   test    test-backend-ops FLASH_ATTN_EXT oscar2 cases, CUDA against the CPU, at the grid's
#           chunks and at GGML_CUDA_OSCAR2_CHUNK 1024 and 160
#   perf    test-backend-ops perf of the attention op at 64k and 128k cells, two rounds
#   ncu     Nsight Compute of the decode kernel at 64k cells: time, DRAM bytes and throughput, instructions
#   eqmem   oscar-bench --equal-memory EQ_CTX (default 32768) -n 32: KV types EQ_KV (default
#           f16,oscar2,q8_0,q4_0) (report in $OUT/eqmem/)
#   decode  llama-bench decode at depths 65536 and 131072 (-n 32 -r 1): f16, oscar2, q8_0 at 65536
# Usage: lab/device/device-eqmem.sh build test perf ncu eqmem decode    (results under $OUT)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
T0=$(date +%s)
DEADLINE=${DEADLINE_S:-540}
RET=${OUT:-$ROOT/results/device}
LOGS=/tmp/eqmem-logs
mkdir -p "$RET" "$LOGS"
export CUDA_BUILD_DIR=/tmp/b SRC_TAR=${SRC_TAR:-.cache/stage-cuda/llama-src.tar.xz} WEIGHTS=q4_0 SYNTH_OSCAR=1 OUT=$LOGS
S=lab/device/device-cuda.sh
BIN=/tmp/b/bin
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
EQ_CTX=${EQ_CTX:-32768}
EQ_KV=${EQ_KV:-f16,oscar2,q8_0,q4_0}
run() { bash $S run "$@"; }
log() { echo "[$(date +%T) +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
want() { # step, seconds it needs
    if [ "$(left)" -lt "$2" ]; then log "$1: skipped ($(left) s left of the call, it needs about $2)"; return 1; fi
    log "$1"
}
strip() { sed -E 's/\x1b\[[0-9;]*m//g; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max|hsv|nr23|nb|gqa|hot_K|hot_V)=[^,)]*//g; s/ +/ /g'; }

step_build() {
    nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.max.sm,clocks.max.mem --format=csv,noheader
    timeout 480 bash $S build || return 1
    if [ -f "$SYN" ]; then touch /tmp/synth.done; else (bash $S synth > $LOGS/synth.log 2>&1; touch /tmp/synth.done) & fi # (the model, beside the tests)
}

step_test() {
    local c
    for c in 0 1024 160; do
        GGML_CUDA_OSCAR2_CHUNK=$c timeout 150 "$BIN/test-backend-ops" test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 \
            > $LOGS/test-chunk$c.log 2>&1
        echo "chunk=$c: $(grep -E 'tests passed' $LOGS/test-chunk$c.log | tail -1) $(grep -c FAIL $LOGS/test-chunk$c.log) FAIL"
        grep FAIL $LOGS/test-chunk$c.log | strip | cut -c1-200 | head -5
    done
}

step_perf() {
    local r pat
    for r in 1 2; do
        pat='(hs=128,nh=8,gqa=4|hsk=128,hsv=128,nh=8,nr23=\[4,1\]),kv=(65536|131072),nb=1,.*oscar2'
        [ $r = 1 ] && pat='(hs=128,nh=8,gqa=4|hsk=128,hsv=128,nh=8,nr23=\[4,1\]),kv=(65536|131072),nb=1,'
        timeout 90 "$BIN/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT -p "$pat" 2>&1 \
            | grep -E "^ *FLASH_ATTN_EXT" | strip | cut -c1-170 | sed "s/^/round $r: /"
    done
}

step_ncu() {
    command -v ncu > /dev/null || { echo "ncu: not on PATH"; return 0; }
    timeout 90 ncu --clock-control none -k regex:oscar2_fa_partial -c 2 --csv \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,launch__registers_per_thread,sm__warps_active.avg.per_cycle_active \
            "$BIN/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT -p 'hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,nb=1,.*type_K=oscar2,type_V=oscar2' \
            > $LOGS/ncu.csv 2>&1
    python3 - $LOGS/ncu.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10 and r[0].isdigit()]
for r in rows:
    print(f"ncu id {r[0]} {r[4][:40]}: {r[-3]} = {r[-1]} {r[-2]}")
if not rows:
    print("ncu: no rows; " + open(sys.argv[1]).read()[-400:])
PY
}

wait_synth() {
    local i
    for i in $(seq 150); do [ -f /tmp/synth.done ] && [ -f "$SYN" ] && return 0; sleep 2; done
    echo "no synthetic model: $(tail -3 $LOGS/synth.log 2>/dev/null)"; return 1
}

step_eqmem() {
    wait_synth || return 1
    local mem
    mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{printf "%.1f", $1/1024}')
    PYTHONPATH=py:build-cuda-src/gguf-py PYTHONUNBUFFERED=1 timeout 330 python3 -m oscar.bench.bench "$SYN" --equal-memory "$EQ_CTX" --kv "$EQ_KV" -n 32 -ngl 99 \
        --bin-dir "$BIN" --mem-gib "$mem" --out "$RET/eqmem" 2>&1 | grep -E "^\||oscar-bench"
}

step_decode() {
    wait_synth || return 1
    tg() { # label, environment, arguments
        printf "  %-26s %s\n" "$1" "$(env $2 timeout 150 "$BIN/llama-bench" -m "$SYN" -ngl 99 -fa 1 -p 0 -n 32 -r 1 -ub 2048 -o csv $3 2>/dev/null \
            | tail -n +2 | awk -F, '{printf "d%s %s tok/s  ", $(NF-5), $(NF-1)}' | tr -d '"')"
    }
    log "decode tok/s (llama-bench -p 0 -n 32 -r 1 -ub 2048)"
    tg "f16"                  "" "-ctk f16 -ctv f16 -d 65536,131072"
    tg "oscar2"               "" "-ctk oscar2 -ctv oscar2 -d 65536,131072"
    tg "q8_0"                 "" "-ctk q8_0 -ctv q8_0 -d 65536"
}

need_s() { case $1 in build) echo 360;; test) echo 100;; perf) echo 80;; ncu) echo 60;; eqmem) echo 400;; decode) echo 200;; *) echo 0;; esac; }
[ $# -gt 0 ] || set -- build test perf ncu eqmem decode
{
for step in "$@"; do
    want "$step" "$(need_s "$step")" || continue
    "step_$step" || { log "step $step failed"; [ "$step" = build ] && break; }
done
log "done"
} 2>&1 | tee -a "$RET/printed.txt"
tar -C $LOGS -cJf "$RET/logs.tar.xz" . 2>/dev/null
