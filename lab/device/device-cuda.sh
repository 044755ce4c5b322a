#!/usr/bin/env bash
# Build, check and measure the CUDA backend on a GPU machine, in one call.
#
# The GPU machine cannot fetch anything: lab/device/device-pack.sh packs the patched
# llama.cpp source into .device/llama-src.tar.xz; .device/ also holds the evaluation
# text (wiki.test.raw) and a converted SmolLM2 (smollm2-oscar-zoo.gguf). Steps:
#   build    CUDA build (sm_$CUDA_ARCH, default 90) of test-backend-ops and the tools
#   test     test-backend-ops, CUDA against the CPU, for every oscar2 and oscar3 case (also with the decode
#            grid's chunks fixed, GGML_CUDA_OSCAR2_CHUNK) and the rotations
#   ppl      llama-perplexity of SmolLM2 + OSCAR on the GPU and on the CPU (same binary)
#   perf     test-backend-ops perf: the attention op alone at depth (f16, q8_0, q4_0, oscar2)
#            and the cache write (SET_ROWS)
#   bench    llama-bench decode/prefill against depth on a synthetic Qwen3-8B, and the
#            oscar-bench report of those results (oscar-bench --from-jsonl)
#   kld      the GPU's logits against the CPU's on PPL_MODEL (KL divergence; KLD_UB, KLD_TYPES)
#   batched  llama-batched-bench, batch 1/8/32 decode (BATCH_NPP tokens per sequence, default 4096;
#            BATCH_NPL; BATCH_PPS=1 decodes the prompt once and copies it to each sequence)
#   diag     decode at depth 0 and $DIAG_DEPTH (default 65536) with the 16-bit windows as the
#            model has them, smallest (sink 0, recent 1) and off, f16 beside; CUDA graphs on and
#            off; graph splits
#   split    the model split over the machine's GPUs (-sm layer) against one GPU: llama-bench
#            (cache types SPLIT_TYPES, default oscar2; depths SPLIT_DEPTHS, default 0,16384) and
#            llama-perplexity (equal results), with the start-up line on where attention runs;
#            says so and skips on a one-GPU machine
#   run      (alone, first) run PROGRAM [ARGS...] from $BIN with the right LD_LIBRARY_PATH:
#            CUDA_BUILD_DIR=/tmp/new lab/device/device-cuda.sh run llama-bench -m ... (for scripts
#            that time several builds side by side, such as lab/device/device-ab.sh)
# Usage: lab/device/device-cuda.sh build test ppl bench batched    (results under $OUT)
# Environment: SRC_TAR (default .device/llama-src.tar.xz); CUDA_LINEINFO=1 builds with -lineinfo
# (ncu's source view by CUDA line; the code is the same); BIN_TAR, a tarball of a bin/ directory
# built elsewhere for this machine (build then only unpacks it); BIN_PATCH, with
# BIN_TAR: another build's bin/ as a zstd --patch-from of BIN_TAR's uncompressed tar (a few MB
# where a whole tarball is 43; zstd from PATH, else zbin/zstd beside the patch); CUDA_ARCH;
# DEPTHS, TYPES, REPS, WEIGHTS (q8_0 or q4_0), SYNTH for bench; SYNTH_OSCAR=1 gives the synthetic
# model random OSCAR rotations and clip ratios (the path of a converted model; without them
# oscar2 takes upstream's Hadamard rotation), SYNTH_OSCAR=2 the same with the V rotation folded
# into the weights (oscar-convert --fold-v), SYNTH_OSCAR=3 random rotations with centring means and a
# precision plan of the zoo's shape (K in q4_0 in layers 14, 19, 23, 30 of 36: the calibrated default); PPL_MODEL, PPL_TEXT, PPL_TYPES; CUDA_BUILD_DIR
# (default build-cuda/), so that two builds (say, two kernels' BIN_TAR) can be timed in one call;
# BUILD_TARGETS (default: test-backend-ops llama-bench llama-perplexity llama-batched-bench).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/results/device}
mkdir -p "$OUT"
SRC=$ROOT/build-cuda-src
BLD=${CUDA_BUILD_DIR:-$ROOT/build-cuda}
BIN=$BLD/bin
ARCH=${CUDA_ARCH:-90}
DEPTHS=${DEPTHS:-0,16384,65536,131072}
TYPES=${TYPES:-f16 q8_0 q4_0 oscar2}
WEIGHTS=${WEIGHTS:-q8_0}
SYNTH_OSCAR=${SYNTH_OSCAR:-0}
if [ "$SYNTH_OSCAR" = 3 ]; then
    SYNTH=${SYNTH:-/tmp/qwen3-8b-geometry-$WEIGHTS-oscar-plan.gguf}
elif [ "$SYNTH_OSCAR" = 2 ]; then
    SYNTH=${SYNTH:-/tmp/qwen3-8b-geometry-$WEIGHTS-oscar-foldv.gguf}
elif [ "$SYNTH_OSCAR" = 1 ]; then
    SYNTH=${SYNTH:-/tmp/qwen3-8b-geometry-$WEIGHTS-oscar.gguf}
else
    SYNTH=${SYNTH:-/tmp/qwen3-8b-geometry-$WEIGHTS.gguf}
fi
REPS=${REPS:-2}
SRC_TAR=${SRC_TAR:-.device/llama-src.tar.xz}
# the CUDA libraries of the machine, for binaries built elsewhere
for lib in libcublas.so.13 libcudart.so.13; do
    d=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
    [ -n "$d" ] && export LD_LIBRARY_PATH="$(dirname "$d")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

log() { echo "[$(date +%T)] $*"; }

step_build() {
    if [ -x "$BIN/llama-bench" ] && [ -x "$BIN/test-backend-ops" ]; then
        log "build: reusing $BLD"
        return 0
    fi
    rm -rf "$SRC" && mkdir -p "$SRC" && tar -xJf "$SRC_TAR" -C "$SRC" || return 1
    if [ -n "${BIN_TAR:-}" ]; then
        log "build: unpacking $BIN_TAR"
        mkdir -p "$BIN" && tar -xJf "$BIN_TAR" -C "$BIN" || return 1
        if [ -n "${BIN_PATCH:-}" ]; then
            log "build: replacing it with $BIN_PATCH"
            local zstd=(zstd)
            command -v zstd >/dev/null || zstd=(env LD_LIBRARY_PATH="$(dirname "$BIN_PATCH")/zbin" "$(dirname "$BIN_PATCH")/zbin/zstd")
            xz -dc "$BIN_TAR" > "$BLD/base.tar" &&
                "${zstd[@]}" -q -d -f --long=28 --patch-from="$BLD/base.tar" "$BIN_PATCH" -o "$BLD/bin.tar" &&
                rm -rf "$BIN" && mkdir -p "$BIN" && tar -xf "$BLD/bin.tar" -C "$BIN" || return 1
            rm -f "$BLD/base.tar" "$BLD/bin.tar"
        fi
        "$BIN/test-backend-ops" -l 2>&1 | head -3
        return 0
    fi
    log "build: configuring (sm_$ARCH)"
    cmake -S "$SRC" -B "$BLD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        ${CUDA_LINEINFO:+-DCMAKE_CUDA_FLAGS=-lineinfo} > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; return 1; }
    log "build: compiling"
    cmake --build "$BLD" -j"$(nproc)" --target ${BUILD_TARGETS:-test-backend-ops llama-bench llama-perplexity llama-batched-bench} \
        > "$OUT/build.log" 2>&1 || { grep -m 20 -A 5 "error" "$OUT/build.log"; return 1; }
    log "build: done"
}

step_test() {
    log "test: test-backend-ops, CUDA0 against CPU, oscar2 and oscar3 cases"
    local rc=0
    for op in SET_ROWS CPY FLASH_ATTN_EXT; do
        "$BIN/test-backend-ops" test -b CUDA0 -o "$op" -p "oscar[23]" > "$OUT/test-$op.log" 2>&1 || rc=1
        grep -E "tests passed|FAIL" "$OUT/test-$op.log" | head -20
    done
    # the decode kernel with chunks fixed (GGML_CUDA_OSCAR2_CHUNK): the grid's own choice gives each
    # warp one tile for every cache a test builds on a large GPU; 1024 cells give warps several
    # tiles (the online softmax across tiles, the stages' rotation) and small caches one chunk
    # (the direct write), 160 cells a block whose warps take 2, 1, 1 and 1 tiles
    for chunk in 1024 160; do
        GGML_CUDA_OSCAR2_CHUNK=$chunk "$BIN/test-backend-ops" test -b CUDA0 -o FLASH_ATTN_EXT -p "oscar[23]" > "$OUT/test-FLASH_ATTN_EXT-chunk$chunk.log" 2>&1 || rc=1
        grep -E "tests passed|FAIL" "$OUT/test-FLASH_ATTN_EXT-chunk$chunk.log" | head -20 | sed "s/^/chunk $chunk /"
    done
    # the one-kernel rotations (GGML_HINT_SRC0_IS_ROTATION, rot.cu) and their grouped launches
    # (a layer's rotations in one k_rot launch, the RoPE of Q and K inside it), also with every
    # group through the read-then-write launch (GGML_CUDA_ROT_SYNC=1)
    "$BIN/test-backend-ops" test -b CUDA0 -o MUL_MAT_ROTATION > "$OUT/test-MUL_MAT_ROTATION.log" 2>&1 || rc=1
    grep -E "tests passed|FAIL" "$OUT/test-MUL_MAT_ROTATION.log" | head -5
    GGML_CUDA_ROT_SYNC=1 "$BIN/test-backend-ops" test -b CUDA0 -o MUL_MAT_ROTATION > "$OUT/test-MUL_MAT_ROTATION-sync.log" 2>&1 || rc=1
    grep -E "tests passed|FAIL" "$OUT/test-MUL_MAT_ROTATION-sync.log" | head -5 | sed 's/^/ROT_SYNC=1 /'
    # the upstream f16/q8_0 attention cases still pass beside ours
    "$BIN/test-backend-ops" test -b CUDA0 -o FLASH_ATTN_EXT -p "hsk=128,hsv=128,nh=4,nr23=\[4,1\].*type_K=(f16|q8_0),type_V=(f16|q8_0)" > "$OUT/test-fa-upstream.log" 2>&1 || rc=1
    grep -E "tests passed|FAIL" "$OUT/test-fa-upstream.log" | head -5
    return $rc
}

step_perf() {
    log "perf: the attention op alone, Qwen3-8B geometry (head 128, 8 KV heads, GQA 4)"
    "$BIN/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT -p "hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(512|4096|16384|65536|131072),|hs=128,nh=8,gqa=4," \
        > "$OUT/perf-fa.log" 2>&1
    grep -E "FLASH_ATTN_EXT" "$OUT/perf-fa.log" | sed -E 's/\x1b\[[0-9;]*m//g; s/,(mask|sinks|max_bias|softcap|prec|permute|hot_K|hot_V|n_sink|n_recent)=[^,)]*//g; s/ +/ /g' | cut -c1-170
    log "perf: the cache write alone (one token, 8 heads of 128; with OSCAR clipping and without)"
    "$BIN/test-backend-ops" perf -b CUDA0 -o SET_ROWS -p "4096" 2>&1 | grep -E "^ *SET_ROWS" | sed -E 's/\x1b\[[0-9;]*m//g; s/ +/ /g' | cut -c1-170
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

# one line per llama-bench JSONL result
print_bench() {
    python3 - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    kind = "pp" if r["n_prompt"] > 0 else "tg"
    print(f'  sm={r["split_mode"]:<5} {r["type_k"]:>6} depth {r["n_depth"]:>6} {kind}{r["n_prompt"] or r["n_gen"]:<4} {r["avg_ts"]:9.1f} tok/s')
EOF
}

step_synth() {
    [ -f "$SYNTH" ] && return 0
    local extra=()
    [ "$SYNTH_OSCAR" = 1 ] && extra=(--oscar)
    [ "$SYNTH_OSCAR" = 2 ] && extra=(--oscar --fold-v)
    [ "$SYNTH_OSCAR" = 3 ] && extra=(--oscar --centre --k-q4_0-layers 14,19,23,30)
    log "synth: writing a Qwen3-8B-geometry model with random $WEIGHTS weights ${extra[*]}"
    PYTHONPATH=$SRC/gguf-py:$ROOT/py python3 -m oscar.bench.synthetic qwen3-8b -o "$SYNTH" --weights "$WEIGHTS" "${extra[@]}"
}

step_bench() {
    step_synth || return 1
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader
    for kv in $TYPES; do
        log "bench: $kv, depths $DEPTHS"
        if "$BIN/llama-bench" -m "$SYNTH" -ngl 99 -fa 1 -ctk $kv -ctv $kv -d "$DEPTHS" -p 512 -n 32 -r "$REPS" -o jsonl \
            > "$OUT/bench-$kv.jsonl" 2> "$OUT/bench-$kv.err"; then
            rm -f "$OUT/bench-$kv.err" # (the call returns at most 8 files)
        else
            tail -5 "$OUT/bench-$kv.err"
        fi
        print_bench "$OUT/bench-$kv.jsonl"
    done
    # the report: tables, the KV memory model, the largest context on this card, PNG
    local mem_gib
    mem_gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{printf "%.1f", $1/1024}')
    PYTHONPATH=$ROOT/py:$SRC/gguf-py python3 -m oscar.bench.bench "$SYNTH" --from-jsonl "$OUT"/bench-*.jsonl \
        --mem-gib "$mem_gib" --out "$OUT/oscar-bench" -q > /dev/null || return 1
}

step_diag() {
    step_synth || return 1
    local d=${DIAG_DEPTH:-65536}
    log "diag: decode tok/s at depth 0 and $d (llama-bench -n 64 -r 2)"
    tg() { # label, environment, arguments
        local r
        r=$(env $2 "$BIN/llama-bench" -m "$SYNTH" -ngl 99 -fa 1 -p 0 -n 64 -r 2 -d 0,$d -o csv $3 2>/dev/null \
            | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')
        printf "  %-34s %s\n" "$1" "$r"
    }
    tg "f16"                          ""                           "-ctk f16 -ctv f16"
    tg "oscar2, the model's windows"  ""                           "-ctk oscar2 -ctv oscar2"
    tg "oscar2, sink 0, recent 1"     ""                           "-ctk oscar2 -ctv oscar2 --kv-sink 0 --kv-recent 1"
    tg "oscar2, no windows"           ""                           "-ctk oscar2 -ctv oscar2 --kv-sink 0 --kv-recent 0"
    tg "f16, CUDA graphs off"         "GGML_CUDA_DISABLE_GRAPHS=1" "-ctk f16 -ctv f16"
    tg "oscar2, CUDA graphs off"      "GGML_CUDA_DISABLE_GRAPHS=1" "-ctk oscar2 -ctv oscar2"
    for kv in f16 oscar2; do
        "$BIN/llama-bench" -m "$SYNTH" -ngl 99 -fa 1 -ctk $kv -ctv $kv -p 0 -n 4 -r 1 -v 2>&1 | grep -E "graph splits|oscar2 KV|oscar:" | head -4
    done
}

step_split() {
    step_synth || return 1
    local f=${PPL_TEXT:-.device/wiki.test.raw} gpus n_gpu
    gpus=$(nvidia-smi -L)
    echo "$gpus"
    n_gpu=$(grep -c '^GPU' <<< "$gpus")
    if [ "$n_gpu" -lt 2 ]; then
        log "split: this machine has $n_gpu GPU; -sm layer needs two (device kind nvidia-h200-x2): not run"
        return 0
    fi
    for sm in none layer; do
        log "split: -sm $sm"
        for kv in ${SPLIT_TYPES:-oscar2}; do
            "$BIN/llama-bench" -m "$SYNTH" -ngl 99 -fa 1 -ctk $kv -ctv $kv -sm $sm -d "${SPLIT_DEPTHS:-0,16384}" -p 512 -n 32 -r 1 -o jsonl \
                > "$OUT/split-$sm-$kv.jsonl" 2> "$OUT/split-$sm-$kv.err" || tail -5 "$OUT/split-$sm-$kv.err"
            print_bench "$OUT/split-$sm-$kv.jsonl"
        done
        "$BIN/llama-perplexity" -m "$SYNTH" -f "$f" -c 2048 --chunks 3 -b 2048 -ub 512 -ctk oscar2 -ctv oscar2 -fa on -ngl 99 -sm $sm -v \
            > "$OUT/split-ppl-$sm.log" 2>&1
        printf "  ppl -sm %-5s %s\n" $sm "$(grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' "$OUT/split-ppl-$sm.log")"
        # the start-up check (INFO, so -v) and where the weights and the cache went
        grep -h -E "own devices|WARNING: oscar2|CUDA[0-9]+ (model|KV) buffer size" "$OUT/split-ppl-$sm.log" | tail -5 || true
    done
    return 0
}

# the GPU's logits against the CPU's (llama-perplexity --kl-divergence-base on the CPU, then
# --kl-divergence on the GPU, same binary): PPL_MODEL on PPL_TEXT, ctx 1024, 16 chunks, KLD_UB
# tokens per batch (default 4: the decode kernel), for KLD_TYPES (default f16 oscar2); prints
# mean ln(PPL ratio), KLD, same top token and the GPU's PPL per type
step_kld() {
    local m=${PPL_MODEL:-.device/smollm2-oscar-zoo.gguf} f=${PPL_TEXT:-.device/wiki.test.raw} ub=${KLD_UB:-4} kv
    local a=(-m "$m" -f "$f" -c 1024 --chunks 16 -b 1024 -ub "$ub" -fa on)
    for kv in ${KLD_TYPES:-f16 oscar2}; do
        log "kld: $kv, batches of $ub"
        CUDA_VISIBLE_DEVICES= "$BIN/llama-perplexity" "${a[@]}" -ngl 0 -t "$(nproc)" -ctk $kv -ctv $kv \
            --kl-divergence-base "$OUT/cpu-$kv-$ub.kld" > "$OUT/kld-cpu-$kv-$ub.log" 2>&1
        "$BIN/llama-perplexity" "${a[@]}" -ngl 99 -ctk $kv -ctv $kv --kl-divergence-base "$OUT/cpu-$kv-$ub.kld" \
            --kl-divergence > "$OUT/kld-gpu-vs-cpu-$kv-$ub.log" 2>&1
        rm -f "$OUT/cpu-$kv-$ub.kld"
        printf "GPU against CPU, %-7s ub %-4s %s | %s | %s | %s\n" $kv $ub \
            "$(grep -m1 -o 'Mean ln(PPL(Q)/PPL(base)).*' "$OUT/kld-gpu-vs-cpu-$kv-$ub.log" | sed 's/  */ /g')" \
            "$(grep -m1 -o 'Mean    KLD:.*' "$OUT/kld-gpu-vs-cpu-$kv-$ub.log" | sed 's/  */ /g')" \
            "$(grep -m1 -o 'Same top p:.*' "$OUT/kld-gpu-vs-cpu-$kv-$ub.log" | sed 's/  */ /g')" \
            "$(grep -m1 -o 'Mean PPL(Q)  *:.*' "$OUT/kld-gpu-vs-cpu-$kv-$ub.log" | sed 's/  */ /g')"
    done
}

# BATCH_NPP (default 4096) prompt tokens per sequence, BATCH_NPL (1,8,32) sequences; BATCH_PPS=1:
# the prompt decoded once and copied to every sequence (-pps: with a stream per sequence, the
# default here, each sequence still reads its own copy of the cache), so deep contexts at
# batch 32 take seconds to set up instead of minutes
step_batched() {
    step_synth || return 1
    local npp=${BATCH_NPP:-4096} npl=${BATCH_NPL:-1,8,32} pps="" maxpl log
    maxpl=$(echo "$npl" | tr , '\n' | sort -n | tail -1)
    [ "${BATCH_PPS:-0}" = 1 ] && pps=-pps
    for kv in $TYPES; do
        log "batched: $kv, $npp prompt tokens per sequence, $npl sequences${pps:+, prompt shared}"
        log=$OUT/batched-$kv$([ "$npp" = 4096 ] || echo "-npp$npp").log
        "$BIN/llama-batched-bench" -m "$SYNTH" -ngl 99 -fa on -ctk $kv -ctv $kv -c $((maxpl*(npp + 128))) -b 2048 -ub 512 \
            -npp "$npp" -ntg 32 -npl "$npl" $pps > "$log" 2>&1 || tail -5 "$log"
        grep -E "^\|\s+[0-9]" "$log"
    done
}

# run PROGRAM [ARGS...]: a program of $BIN with this build's libraries and the machine's CUDA
# libraries first in LD_LIBRARY_PATH (which a binary built elsewhere needs to find them)
if [ "${1:-}" = run ]; then
    shift
    [ $# -gt 0 ] || { echo "usage: CUDA_BUILD_DIR=DIR $0 run PROGRAM [ARGS...]" >&2; exit 2; }
    prog=$1
    shift
    [ -x "$BIN/$prog" ] || { echo "device-cuda: error: no $prog in $BIN (unpack or build it first: CUDA_BUILD_DIR=$BLD $0 build)" >&2; exit 1; }
    exec "$BIN/$prog" "$@"
fi

[ $# -gt 0 ] || set -- build test ppl
for step in "$@"; do
    "step_$step" || { log "step $step failed"; exit 1; }
done
log "done: $*"
