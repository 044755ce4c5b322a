# Stop 18, call A: part 1 of the converted SmolLM2 to /tmp/sp, the series (patches 0001-0026)
# built from its own source tarball, test-backend-ops on every oscar2 case, MUL_MAT_ROTATION also
# with GGML_CUDA_ROT_SYNC=1 (every rotation group through the grid barrier).
#   run (device tool, carry [".dP1"]): bash docs/data/stop18/scripts/s18a.sh
mkdir -p /tmp/sp && cp .dP1/part.* .dP1/sha256 /tmp/sp/
{
SRC_TAR=.dP1/llama-src.tar.xz CUDA_BUILD_DIR=/tmp/bb timeout 500 bash scripts/device-cuda.sh build test
GGML_CUDA_ROT_SYNC=1 CUDA_BUILD_DIR=/tmp/bb timeout 60 bash scripts/device-cuda.sh run test-backend-ops test -b CUDA0 -o MUL_MAT_ROTATION \
    > $OUT/test-rot-sync.log 2>&1; grep -E "tests passed|FAIL" $OUT/test-rot-sync.log | head -5 | sed "s/^/ROT_SYNC=1 /"
} 2>&1 | tee $OUT/s18a-printed.txt
