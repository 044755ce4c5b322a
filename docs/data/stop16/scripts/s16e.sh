mkdir -p /tmp/sp && cp .dP1/part.* .dP1/sha256 /tmp/sp/ && SRC_TAR=.dS/llama-src.tar.xz CUDA_BUILD_DIR=/tmp/bb timeout 500 bash scripts/device-cuda.sh build test 2>&1 | tee $OUT/s16e-printed.txt
