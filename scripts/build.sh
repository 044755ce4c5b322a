#!/usr/bin/env bash
# Build everything: llama.cpp/ (fetched and patched if needed), the programs in
# build/bin, and the Python environment .venv/. Incremental: reruns only what changed.
#   CUDA=1 scripts/build.sh      a CUDA build in build-cuda/ (GGML_CUDA=ON, with test-backend-ops);
#                                CUDA_ARCH sets the architectures (default 75;80;86;89;90, sm_90 = Hopper)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
JOBS=${JOBS:-$(nproc)}
# ccache (used by ggml's CMake when installed) shares objects between clones of the repo
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}
if [ "${CUDA:-0}" = 1 ]; then
    BUILD=${BUILD_DIR:-build-cuda}
else
    BUILD=${BUILD_DIR:-build}
fi

scripts/fetch-llama.sh

cmake_args=(-DCMAKE_BUILD_TYPE=Release)
[ "${CUDA:-0}" = 1 ] && cmake_args+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-75;80;86;89;90}" -DLLAMA_BUILD_TESTS=ON)
[ -n "${CMAKE_EXTRA:-}" ] && cmake_args+=(${CMAKE_EXTRA})
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD" "${cmake_args[@]}" >"$BUILD.configure.log" 2>&1 \
        || { tail -30 "$BUILD.configure.log" >&2; echo "build: error: cmake configure failed (log: $BUILD.configure.log)" >&2; exit 1; }
fi
targets=(llama llama-server llama-cli llama-completion llama-perplexity llama-bench llama-batched-bench llama-quantize test-oscar2 test-oscar-clip)
[ "${CUDA:-0}" = 1 ] && targets+=(test-backend-ops)
echo "build: compiling ${targets[*]} with $JOBS jobs"
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}"

scripts/setup-venv.sh
echo "build: done: programs in $BUILD/bin, Python environment in .venv"
