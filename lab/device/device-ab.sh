#!/usr/bin/env bash
# Time several CUDA builds side by side in one device call (the device tool), alternating, so
# that their ratios come from one machine state. Each build is a zstd patch of a bin/ tarball
# made on a machine without a GPU (scripts/build-cuda-nogpu.sh's directory), packed against
# the base tarball BIN_TAR:
#   xz -dc .dB/bin.tar.xz > /tmp/base.tar; tar -C build-cuda-local/bin -cf /tmp/cur.tar .
#   zstd -19 --long=28 --patch-from=/tmp/base.tar /tmp/cur.tar -o .dB/cur.tar.zst
#
#   lab/device/device-ab.sh NAME=PATCH [NAME=PATCH ...]
#
# e.g. lab/device/device-ab.sh a=.dB/km.tar.zst b=.dB/kp2.tar.zst. The last build is the one on
# trial: it runs the whole test step (lab/device/device-cuda.sh test) and the attention cases with
# each case's error by path. Then, builds alternating, ROUNDS times each (default 2): the
# attention op alone (test-backend-ops perf, cases matching PERF, default the oscar2 decode at
# 4k and 64k cells, 8 KV heads x GQA 4, head 128); decode at depth 0 and 64k (llama-bench, one
# rep) on the synthetic Qwen3-8B (q4_0 weights, OSCAR tensors); and BATCH sequences of 64k
# each (default 8; llama-batched-bench -pps; BATCH=0 skips it). STEPS picks among
# test,perf,decode,batch (default all) and err: first, each build's error on the attention
# cases matching ERR_P, one line per case, with GGML_CUDA_OSCAR2_CHUNK at each of ERR_CHUNKS
# (default "0 1024"; 0 is the grid's own chunks); ERR_TEST=NAME runs every build's kernels
# under build NAME's test-backend-ops (cases the other builds' programs lack). Environment:
# BIN_TAR (default .dB/bin.tar.xz), SRC_TAR (default .dB/gguf-py.tar.xz), OUT (the call's
# returned folder).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
S=lab/device/device-cuda.sh
RET=${OUT:-$ROOT/results/device}
mkdir -p "$RET"
[ $# -ge 1 ] || { echo "usage: lab/device/device-ab.sh NAME=PATCH [NAME=PATCH ...]" >&2; exit 2; }
export OUT=/tmp/ab-res WEIGHTS=q4_0 SYNTH_OSCAR=1
export SRC_TAR=${SRC_TAR:-.dB/gguf-py.tar.xz}
BIN_TAR=${BIN_TAR:-.dB/bin.tar.xz}
ROUNDS=${ROUNDS:-2}
BATCH=${BATCH:-8}
STEPS=${STEPS:-test,perf,decode,batch}
PERF=${PERF:-hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|65536),nb=1,.*type_K=oscar2,type_V=oscar2}
ERR_P=${ERR_P:-kv=(4096|16384),nb=1.*type_K=oscar2,type_V=oscar2}
ERR_CHUNKS=${ERR_CHUNKS:-0 1024}
ERR_TEST=${ERR_TEST:-}
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
mkdir -p "$OUT" /tmp/ab-logs
names=()
for arg in "$@"; do
    name=${arg%%=*}
    patch=${arg#*=}
    [ -f "$patch" ] || { echo "device-ab: error: $patch (build $name) not found; pack it first" >&2; exit 2; }
    # a directory per build and patch, so that a warm machine's other builds are never reused
    dir=/tmp/ab-$name-$(basename "$patch" .tar.zst)
    CUDA_BUILD_DIR=$dir BIN_TAR=$BIN_TAR BIN_PATCH=$patch timeout 90 bash $S build > /dev/null || { echo "device-ab: build $name failed" >&2; exit 1; }
    names+=("$name:$dir")
done
dir_of() { local nd; for nd in "${names[@]}"; do [ "${nd%%:*}" = "$1" ] && echo "${nd#*:}"; done; }
last=${names[-1]%%:*}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
{
date +%T
if has err; then
    prog=${ERR_TEST:+$(dir_of "$ERR_TEST")/bin/test-backend-ops}
    for nd in "${names[@]}"; do
        dir=${nd#*:}
        if [ -n "$prog" ] && [ "$dir/bin/test-backend-ops" != "$prog" ]; then
            # this build's kernels (its libraries) under ERR_TEST's test program
            rm -rf "$dir-err" && cp -a "$dir" "$dir-err" && cp "$prog" "$dir-err/bin/" && dir=$dir-err
        fi
        for chunk in $ERR_CHUNKS; do
            GGML_TEST_PRINT_ERR=1 GGML_CUDA_OSCAR2_CHUNK=$chunk CUDA_BUILD_DIR=$dir timeout 120 bash $S run test-backend-ops test -b CUDA0 \
                -o FLASH_ATTN_EXT -p "$ERR_P" 2>&1 | grep -E "FLASH_ATTN_EXT\]|tests passed" \
                | sed -E 's/\x1b\[[0-9;]*m//g; s/\[NONE\][^F]*//; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max|hsv|type_K|type_V|hot_K|hot_V)=[^,)]*//g' \
                | cut -c1-150 | sed "s/^/${nd%%:*} chunk $chunk: /"
        done
    done
fi
if has test; then
    CUDA_BUILD_DIR=$(dir_of "$last") timeout 170 bash $S test
    cp "$OUT"/test-*.log /tmp/ab-logs/ 2>/dev/null
    GGML_TEST_PRINT_ERR=1 CUDA_BUILD_DIR=$(dir_of "$last") timeout 120 bash $S run test-backend-ops test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 \
        > /tmp/ab-logs/fa-err-$last.log 2>&1
    python3 lab/device/fa-err-summary.py /tmp/ab-logs/fa-err-$last.log | grep -E "^path|oscar2/oscar2"
    xz -T4 -f /tmp/ab-logs/fa-err-$last.log
fi
if has perf; then
    for r in $(seq "$ROUNDS"); do
        for nd in "${names[@]}"; do
            CUDA_BUILD_DIR=${nd#*:} timeout 60 bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$PERF" 2>&1 \
                | grep -E "^ *FLASH_ATTN_EXT" | sed -E 's/\x1b\[[0-9;]*m//g; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max|hsk|hsv|nh|nr23|nb|type_K|type_V|gqa|ns|hot_K|hot_V)=[^,)]*//g; s/ +/ /g' \
                | cut -c1-140 | sed "s/^/${nd%%:*}: /"
        done
    done
fi
if has decode || { has batch && [ "$BATCH" -gt 0 ]; }; then
    CUDA_BUILD_DIR=$(dir_of "${names[0]%%:*}") timeout 60 bash $S synth > /dev/null 2>&1
fi
if has decode; then
    echo "decode tok/s at depth 0 / 65536 (llama-bench -n 32 -r 1)"
    for r in $(seq "$ROUNDS"); do
        for nd in "${names[@]}"; do
            echo "$(CUDA_BUILD_DIR=${nd#*:} timeout 60 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
                | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')  ${nd%%:*}"
        done
    done
fi
if has batch && [ "$BATCH" -gt 0 ]; then
    for r in $(seq "$ROUNDS"); do
        for nd in "${names[@]}"; do
            n=${nd%%:*}
            CUDA_BUILD_DIR=${nd#*:} timeout 90 bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk oscar2 -ctv oscar2 \
                -c $((BATCH*66048)) -b 2048 -ub 2048 -npp 65536 -ntg 32 -npl "$BATCH" -pps > /tmp/ab-logs/bb$BATCH-$n-$r.log 2>&1
            grep -E "^\| +[0-9]" /tmp/ab-logs/bb$BATCH-$n-$r.log | sed "s/^/oscar2 ${BATCH}x64k $n: /"
        done
    done
fi
date +%T
} 2>&1 | tee "$RET/ab-printed.txt"
tar -C /tmp/ab-logs -cJf "$RET/ab-logs.tar.xz" .
