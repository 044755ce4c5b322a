#!/usr/bin/env bash
# Pack the patched llama.cpp source for a build on a GPU machine that cannot fetch it:
# the parts a CUDA build of the libraries, the tools we measure with and
# test-backend-ops need, xz-compressed (about 10 MB instead of the 170 MB tree).
#   lab/device/device-pack.sh [SRC_DIR] [OUT_TAR]   (defaults: llama.cpp, .device/llama-src.tar.xz)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=${1:-$ROOT/llama.cpp}
OUT=${2:-$ROOT/.device/llama-src.tar.xz}
[ -f "$SRC/ggml/src/ggml-cuda/ggml-cuda.cu" ] || { echo "device-pack: $SRC is not a llama.cpp tree (run scripts/fetch-llama.sh)" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
tar -C "$SRC" -cJf "$OUT" \
    --exclude=.git --exclude=tools/ui \
    --exclude=ggml/src/ggml-et --exclude=ggml/src/ggml-metal --exclude=ggml/src/ggml-hexagon \
    --exclude=ggml/src/ggml-sycl --exclude=ggml/src/ggml-vulkan --exclude=ggml/src/ggml-opencl \
    --exclude=ggml/src/ggml-cann --exclude=ggml/src/ggml-webgpu --exclude=ggml/src/ggml-zdnn \
    --exclude=ggml/src/ggml-openvino --exclude=ggml/src/ggml-virtgpu \
    CMakeLists.txt cmake ggml src include common tools tests vendor gguf-py licenses LICENSE
echo "device-pack: $(du -h "$OUT" | cut -f1) $OUT"
