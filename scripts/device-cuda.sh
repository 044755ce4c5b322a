#!/usr/bin/env bash
# Build, check and measure the CUDA backend on a GPU machine, in one call.
#
# The GPU machine cannot fetch anything: scripts/device-pack.sh packs the patched
# llama.cpp source into .device/llama-src.tar.xz; .device/ also holds the evaluation
# text (wiki.test.raw) and a converted SmolLM2 (smollm2-oscar-zoo.gguf). Steps:
#   build    CUDA build (sm_$CUDA_ARCH, default 90) of test-backend-ops and the tools
#   test     test-backend-ops, CUDA against the CPU, for every oscar2 case
#   ppl      llama-perplexity of SmolLM2 + OSCAR on the GPU and on the CPU (same binary)
#   bench    llama-bench decode/prefill against depth on a synthetic Qwen3-8B
#   batched  llama-batched-bench, batch 1/8/32 decode
# Usage: scripts/device-cuda.sh build test ppl bench batched    (results under $OUT)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/results/device}
mkdir -p "$OUT"
SRC=$ROOT/build-cuda-src
BLD=$ROOT/build-cuda
BIN=$BLD/bin
ARCH=${CUDA_ARCH:-90}
DEPTHS=${DEPTHS:-0,16384,65536,131072}
TYPES=${TYPES:-f16 q8_0 q4_0 oscar2}
SYNTH=${SYNTH:-/tmp/qwen3-8b-geometry.gguf}

log() { echo "[$(date +%T)] $*"; }

step_build() {
    if [ -x "$BIN/llama-bench" ] && [ -x "$BIN/test-backend-ops" ]; then
        log "build: reusing $BLD"
        return 0
    fi
    log "build: unpacking, configuring (sm_$ARCH)"
    rm -rf "$SRC" && mkdir -p "$SRC" && tar -xJf .device/llama-src.tar.xz -C "$SRC" || return 1
    cmake -S "$SRC" -B "$BLD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; return 1; }
    log "build: compiling"
    cmake --build "$BLD" -j"$(nproc)" --target test-backend-ops llama-bench llama-perplexity llama-batched-bench \
        > "$OUT/build.log" 2>&1 || { grep -m 20 -A 5 "error" "$OUT/build.log"; return 1; }
    log "build: done"
}

step_test() {
    log "test: test-backend-ops, CUDA0 against CPU, oscar2 cases"
    local rc=0
    for op in SET_ROWS CPY FLASH_ATTN_EXT; do
        "$BIN/test-backend-ops" test -b CUDA0 -o "$op" -p "oscar2" > "$OUT/test-$op.log" 2>&1 || rc=1
        grep -E "tests passed|FAIL" "$OUT/test-$op.log" | head -20
    done
    # the upstream f16/q8_0 attention cases still pass beside ours
    "$BIN/test-backend-ops" test -b CUDA0 -o FLASH_ATTN_EXT -p "hsk=128,hsv=128,nh=4,nr23=\[4,1\].*type_K=(f16|q8_0),type_V=(f16|q8_0)" > "$OUT/test-fa-upstream.log" 2>&1 || rc=1
    grep -E "tests passed|FAIL" "$OUT/test-fa-upstream.log" | head -5
    return $rc
}

step_ppl() {
    local m=${PPL_MODEL:-.device/smollm2-oscar-zoo.gguf} f=${PPL_TEXT:-.device/wiki.test.raw}
    log "ppl: SmolLM2 + OSCAR, ctx 4096, 2 chunks, GPU and CPU"
    for kv in ${PPL_TYPES:-f16 q4_0 oscar2}; do
        "$BIN/llama-perplexity" -m $m -f $f -c 4096 --chunks 2 -b 4096 -ub 512 -ctk $kv -ctv $kv -fa on -ngl 99 \
            > "$OUT/ppl-gpu-$kv.log" 2>&1
        CUDA_VISIBLE_DEVICES= "$BIN/llama-perplexity" -m $m -f $f -c 4096 --chunks 2 -b 4096 -ub 512 -ctk $kv -ctv $kv -fa on -ngl 0 \
            -t "$(nproc)" > "$OUT/ppl-cpu-$kv.log" 2>&1
        printf "ppl %-7s GPU %s | CPU %s\n" $kv \
            "$(grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' "$OUT/ppl-gpu-$kv.log")" \
            "$(grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' "$OUT/ppl-cpu-$kv.log")"
    done
    grep -h "oscar" "$OUT/ppl-gpu-oscar2.log" | head -5
}

step_synth() {
    [ -f "$SYNTH" ] && return 0
    log "synth: writing a Qwen3-8B-geometry model with random q8_0 weights"
    PYTHONPATH=$SRC/gguf-py:$ROOT/py python3 -m oscar.synthetic qwen3-8b -o "$SYNTH" --weights q8_0
}

step_bench() {
    step_synth || return 1
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$OUT/gpu.txt"
    for kv in $TYPES; do
        log "bench: $kv, depths $DEPTHS"
        "$BIN/llama-bench" -m "$SYNTH" -ngl 99 -fa 1 -ctk $kv -ctv $kv -d "$DEPTHS" -p 512 -n 32 -r 2 -o jsonl \
            > "$OUT/bench-$kv.jsonl" 2> "$OUT/bench-$kv.err" || tail -5 "$OUT/bench-$kv.err"
        python3 - "$OUT/bench-$kv.jsonl" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    kind = "pp" if r["n_prompt"] > 0 else "tg"
    print(f'  {r["type_k"]:>6} depth {r["n_depth"]:>6} {kind}{r["n_prompt"] or r["n_gen"]:<4} {r["avg_ts"]:9.1f} tok/s')
EOF
    done
}

step_diag() {
    step_synth || return 1
    log "diag: decode at depth 0 with and without CUDA graphs; graph splits"
    for kv in f16 oscar2; do
        for g in 0 1; do
            GGML_CUDA_DISABLE_GRAPHS=$g "$BIN/llama-bench" -m "$SYNTH" -ngl 99 -fa 1 -ctk $kv -ctv $kv -p 0 -n 32 -r 2 -o csv 2>/dev/null \
                | tail -1 | awk -F, -v kv=$kv -v g=$g '{print "  " kv " graphs_disabled=" g " tg32 " $(NF-1)}'
        done
        "$BIN/llama-bench" -m "$SYNTH" -ngl 99 -fa 1 -ctk $kv -ctv $kv -p 0 -n 4 -r 1 -v 2>&1 | grep -E "graph splits|oscar2 KV|oscar:" | head -4
    done
}

step_batched() {
    step_synth || return 1
    for kv in $TYPES; do
        log "batched: $kv"
        "$BIN/llama-batched-bench" -m "$SYNTH" -ngl 99 -fa on -ctk $kv -ctv $kv -c 135168 -b 2048 -ub 512 \
            -npp 4096 -ntg 32 -npl 1,8,32 > "$OUT/batched-$kv.log" 2>&1 || tail -5 "$OUT/batched-$kv.log"
        grep -E "^\|\s+[0-9]" "$OUT/batched-$kv.log"
    done
}

[ $# -gt 0 ] || set -- build test ppl
for step in "$@"; do
    "step_$step" || { log "step $step failed"; exit 1; }
done
log "done: $*"
