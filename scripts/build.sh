#!/usr/bin/env bash
# Build everything: llama.cpp/ (fetched and patched if needed), the programs in
# build/bin, and the Python environment .venv/. Incremental: reruns only what changed.
#   CUDA=1 scripts/build.sh      a CUDA build in build-cuda/ (GGML_CUDA=ON);
#                                CUDA_ARCH sets the architectures (default 75;80;86;89;90, sm_90 = Hopper)
#   OSCAR_UI=0 scripts/build.sh  llama-server without its built-in web UI (by default the UI is built
#                                from llama.cpp/tools/ui with npm by scripts/build-ui.sh and embedded)
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

# llama-server's web UI: built with npm before CMake runs, into the folder upstream's CMake step
# embeds (LLAMA_BUILD_UI=ON then finds it current and runs no npm of its own)
if [ "${OSCAR_UI:-1}" = 0 ]; then
    ui=OFF
    echo "build: WARNING: OSCAR_UI=0: llama-server is built WITHOUT its web UI (a browser opening the server gets an error page; the API is unaffected)" >&2
    rm -rf "$BUILD/llama.cpp/tools/ui/dist" "$BUILD/ui-src.oscar-stamp"
else
    ui=ON
    scripts/build-ui.sh "$BUILD"
fi

# GGML_RPC: the RPC backend (ggml-rpc-server, and --rpc HOST:PORT,... in every tool), llama.cpp's way
# of spreading a model over several machines
# LLAMA_BUILD_TESTS: test-backend-ops, which checks each backend's ops against the CPU's (on the CPU:
# the optimised kernels against upstream's reference row loop)
cmake_args=(-DCMAKE_BUILD_TYPE=Release "-DLLAMA_BUILD_UI=$ui" -DGGML_RPC=ON -DLLAMA_BUILD_TESTS=ON)
[ "${CUDA:-0}" = 1 ] && cmake_args+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-75;80;86;89;90}")
# upstream's AMX matrix products (chosen by -march=native on Sapphire Rapids and later) die with
# SIGILL on the Firecracker VMs we build and test on (a tilezero in a worker thread, after its tile
# configuration was lost); without AMX the same CPUs take the AVX512-VNNI kernels. OSCAR_AMX=1 keeps it
cflags=""
if [ "${OSCAR_AMX:-0}" != 1 ] && [ "$(uname -m)" = x86_64 ] && grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
    cflags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi
cmake_args+=("-DCMAKE_C_FLAGS=$cflags" "-DCMAKE_CXX_FLAGS=$cflags")
[ -n "${CMAKE_EXTRA:-}" ] && cmake_args+=(${CMAKE_EXTRA})
# configure a new build directory, and again when the AMX choice changed (an older build/)
if [ ! -f "$BUILD/CMakeCache.txt" ] || ! grep -qx "CMAKE_C_FLAGS:STRING=$cflags" "$BUILD/CMakeCache.txt" \
   || ! grep -qx "LLAMA_BUILD_UI:BOOL=$ui" "$BUILD/CMakeCache.txt" || ! grep -qx "GGML_RPC:BOOL=ON" "$BUILD/CMakeCache.txt" \
   || ! grep -qx "LLAMA_BUILD_TESTS:BOOL=ON" "$BUILD/CMakeCache.txt"; then
    cmake -S . -B "$BUILD" "${cmake_args[@]}" >"$BUILD.configure.log" 2>&1 \
        || { tail -30 "$BUILD.configure.log" >&2; echo "build: error: cmake configure failed (log: $BUILD.configure.log)" >&2; exit 1; }
fi
targets=(llama llama-server llama-cli llama-completion llama-perplexity llama-bench llama-batched-bench llama-quantize ggml-rpc-server test-oscar2 test-oscar-clip test-backend-ops)
echo "build: compiling ${targets[*]} with $JOBS jobs"
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}"
# the generated header says whether llama-server embeds the UI: it must be what was asked for
if [ $ui = ON ] && ! grep -q "^#define LLAMA_UI_HAS_ASSETS 1" "$BUILD/llama.cpp/tools/ui/ui.h"; then
    echo "build: error: llama-server was built without the web UI although scripts/build-ui.sh built it into $BUILD/llama.cpp/tools/ui/dist (see the 'UI:' lines above)" >&2
    exit 1
fi

scripts/setup-venv.sh
echo "build: done: programs in $BUILD/bin, Python environment in .venv"
