#!/usr/bin/env bash
# Build the CUDA programs (sm_90 by default) on a machine without a GPU or driver, and pack
# them for a GPU machine that cannot build quickly or fetch anything:
#   scripts/build-cuda-nogpu.sh            -> build-cuda-local/, .dB/bin.tar.xz, .dB/gguf-py.tar.xz
# Needs nvcc (CUDA 13 here), pip (for the cuBLAS wheel), gcc, cmake and ninja. The first build
# takes about 25 min on 2 cores; after a kernel change it rebuilds in under a minute.
# Then, on the GPU machine (carry .dB):
#   BIN_TAR=.dB/bin.tar.xz SRC_TAR=.dB/gguf-py.tar.xz lab/device/device-cuda.sh build test perf bench
# Environment: CUDA_ARCH (default 90), BUILD_DIR (default build-cuda-local), CUBLAS_DIR (where
# the cuBLAS wheel is unpacked, default /tmp/oscar-cublas), OUT_DIR (default .dB); CONFIGURE_ONLY=1
# stops after the configure (the compile commands that scripts/cuda-arch-check.sh reads).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ARCH=${CUDA_ARCH:-90}
BLD=${BUILD_DIR:-build-cuda-local}
CUB=${CUBLAS_DIR:-/tmp/oscar-cublas}
OUTD=${OUT_DIR:-.dB}

command -v nvcc >/dev/null || { echo "build-cuda-nogpu: error: nvcc not found (install the CUDA toolkit)" >&2; exit 1; }
scripts/fetch-llama.sh

# cuBLAS: the toolkit here has none; the PyPI wheel has its headers and libraries
CU=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
L=$CUB/nvidia/cu$CU
if [ ! -f "$L/lib/libcublas.so" ]; then
    echo "build-cuda-nogpu: fetching cuBLAS for CUDA $CU (PyPI wheel nvidia-cublas)"
    mkdir -p "$CUB/whl"
    python3 -m pip download -q nvidia-cublas --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_27_x86_64 -d "$CUB/whl"
    unzip -q -o "$CUB"/whl/nvidia_cublas-*.whl "nvidia/cu$CU/*" -d "$CUB"
    (cd "$L/lib" && ln -sf "libcublas.so.$CU" libcublas.so && ln -sf "libcublasLt.so.$CU" libcublasLt.so)
fi

# the driver library is linked against, and loaded from the GPU machine at run time: a stub
# with the entry points ggml-cuda calls and the real library's soname
STUB=$CUB/cudastub
if [ ! -f "$STUB/libcuda.so" ]; then
    mkdir -p "$STUB"
    for s in cuDeviceGet cuDeviceGetAttribute cuGetErrorString cuMemAddressFree cuMemAddressReserve cuMemCreate \
             cuMemGetAllocationGranularity cuMemMap cuMemRelease cuMemSetAccess cuMemUnmap; do
        echo "int $s(void) { return 999; }"
    done > "$STUB/stub.c"
    gcc -shared -fPIC -o "$STUB/libcuda.so.1" -Wl,-soname,libcuda.so.1 "$STUB/stub.c"
    ln -sf libcuda.so.1 "$STUB/libcuda.so"
fi

if [ ! -f "$BLD/CMakeCache.txt" ]; then
    cmake -S llama.cpp -B "$BLD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        "-DCMAKE_CUDA_ARCHITECTURES=$ARCH" -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
        "-DCUDA_cublas_LIBRARY=$L/lib/libcublas.so" "-DCUDA_cublasLt_LIBRARY=$L/lib/libcublasLt.so" \
        "-DCUDA_cuda_driver_LIBRARY=$STUB/libcuda.so" "-DCMAKE_CUDA_FLAGS=-I$L/include" "-DCMAKE_CXX_FLAGS=-I$L/include" \
        > "$BLD.configure.log" 2>&1 \
        || { tail -30 "$BLD.configure.log" >&2; echo "build-cuda-nogpu: error: cmake configure failed (log: $BLD.configure.log)" >&2; exit 1; }
fi
if [ -n "${CONFIGURE_ONLY:-}" ]; then # (for scripts/cuda-arch-check.sh, which needs only the compile commands)
    echo "build-cuda-nogpu: configured $BLD (sm_$ARCH)"
    exit 0
fi
echo "build-cuda-nogpu: compiling into $BLD (sm_$ARCH)"
cmake --build "$BLD" -j "${JOBS:-$(nproc)}" --target test-backend-ops llama-bench llama-perplexity llama-batched-bench

mkdir -p "$OUTD"
tar -C "$BLD/bin" -cf - . | xz -T0 -6 > "$OUTD/bin.tar.xz"
tar -C llama.cpp -cJf "$OUTD/gguf-py.tar.xz" gguf-py
case "$OUTD" in /*) ;; *) grep -qx "/$OUTD/" .git/info/exclude 2>/dev/null || echo "/$OUTD/" >> .git/info/exclude ;; esac
echo "build-cuda-nogpu: done: $(du -h "$OUTD/bin.tar.xz" | cut -f1) $OUTD/bin.tar.xz, $OUTD/gguf-py.tar.xz (carry $OUTD)"
