#!/usr/bin/env bash
# Cross-build ggml and test-oscar2 for aarch64 with Debian's gcc-aarch64-linux-gnu,
# static, NEON + dotprod (armv8.2-a), into build-aarch64/. The test suite runs the
# result under qemu-user (qemu-aarch64 -L /usr/aarch64-linux-gnu).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
for t in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64; do
    command -v $t >/dev/null || { echo "build-aarch64: error: $t not found: apt-get install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user" >&2; exit 1; }
done
scripts/fetch-llama.sh >/dev/null
B=build-aarch64
if [ ! -f $B/CMakeCache.txt ]; then
    cmake -S . -B $B -DCMAKE_TOOLCHAIN_FILE=tests/c/aarch64.cmake -DCMAKE_BUILD_TYPE=Release \
        -DOSCAR_GGML_ONLY=ON -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod \
        -DCMAKE_EXE_LINKER_FLAGS=-static >$B.configure.log 2>&1 || { tail -20 $B.configure.log >&2; exit 1; }
fi
cmake --build $B -j "${JOBS:-$(nproc)}" --target test-oscar2
