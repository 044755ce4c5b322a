#!/usr/bin/env bash
# Build every stage of the patch series: for each commit of llama.cpp/ after `upstream`, in
# order, a worktree at that commit builds ggml, llama, common and three tools on the CPU (and
# test-backend-ops at the last); with CUDA=1 a second build directory, configured for CUDA,
# compiles the .cu files each stage changes (nvcc and the cuBLAS headers needed: a GPU machine,
# or scripts/build-cuda-nogpu.sh's setup). Each stage is configured afresh (a new file joins the
# build) and built incrementally.
#   scripts/check-series.sh                 JOBS (default nproc), CUDA=1, CUDA_ARCH (default 90)
# About 8 min on 16 cores with CUDA=1 (an H200 machine), most of it the stages that change ggml.h.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/llama.cpp
JOBS=${JOBS:-$(nproc)}
die() { echo "check-series: error: $*" >&2; exit 1; }
[ -d "$DEST/.git" ] || die "llama.cpp/ is not a git repo; run scripts/fetch-llama.sh first"
command -v ninja >/dev/null || die "ninja not found (apt-get install ninja-build)"
WT=$(mktemp -d "${TMPDIR:-/tmp}/oscar-series.XXXXXX")
BLD=$WT.build
BLDC=$WT.build-cuda
trap 'git -C "$DEST" worktree remove --force "$WT" >/dev/null 2>&1; rm -rf "$WT" "$BLD" "$BLDC" "$BLD.log"' EXIT
rmdir "$WT"
git -C "$DEST" worktree add -q --detach "$WT" upstream || die "could not make a worktree of llama.cpp/"
commits=$(git -C "$DEST" rev-list --reverse upstream..HEAD)
n_total=$(echo "$commits" | wc -l)
cfg=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF)
cfg_cuda=("${cfg[@]}" -DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90}")
fail=0 n=0
for c in $commits; do
    n=$((n + 1))
    git -C "$WT" checkout -q --detach "$c"
    subj=$(git -C "$WT" log -1 --format=%s)
    if ! cmake -S "$WT" -B "$BLD" "${cfg[@]}" > "$BLD.log" 2>&1; then
        echo "[$n/$n_total] $subj: configure FAILED"; tail -20 "$BLD.log"; fail=1; break
    fi
    targets=(llama-bench llama-perplexity llama-cli)
    [ $n = "$n_total" ] && targets+=(test-backend-ops)
    t0=$(date +%s)
    if ! ninja -C "$BLD" -j "$JOBS" "${targets[@]}" > "$BLD.log" 2>&1; then
        echo "[$n/$n_total] $subj: FAILED"; grep -m 10 -E 'error|undefined reference' "$BLD.log"; fail=1; continue
    fi
    cu=$(git -C "$WT" diff --name-only "$c~1" "$c" -- '*.cu')
    if [ "${CUDA:-0}" = 1 ] && [ -n "$cu" ]; then
        if ! cmake -S "$WT" -B "$BLDC" "${cfg_cuda[@]}" > "$BLD.log" 2>&1; then
            echo "[$n/$n_total] $subj: CUDA configure FAILED"; tail -20 "$BLD.log"; fail=1; break
        fi
        objs=()
        for f in $cu; do
            o=$(ninja -C "$BLDC" -t targets all | grep -F "/$(basename "$f").o:" | head -1 | cut -d: -f1)
            [ -n "$o" ] && objs+=("$o")
        done
        if ! ninja -C "$BLDC" -j "$JOBS" "${objs[@]}" > "$BLD.log" 2>&1; then
            echo "[$n/$n_total] $subj: CUDA FAILED"; grep -m 10 -E 'error' "$BLD.log"; fail=1; continue
        fi
    fi
    echo "[$n/$n_total] $subj: ok ($(( $(date +%s) - t0 )) s)"
done
[ $fail = 0 ] && echo "check-series: all $n_total stages build" || echo "check-series: some stages do not build"
exit $fail
