# Next stop, call A of two (stop 18's item 0 in docs/cuda-notes.md): part 1 of the converted
# SmolLM2 to /tmp/sp; the series built from its source tarball; the oscar2 attention cases with
# each passing case's error printed (GGML_TEST_PRINT_ERR=1, patch 0013), summarised by path.
# Before: scripts/device-pack.sh llama.cpp .dP1/llama-src.tar.xz; cp it to .dP2/ too;
#         PART_MB=48 scripts/device-split.sh models/smollm2-oscar-zoo.gguf; wiki.test.raw to .dP2/
#   run (device tool, carry [".dP1"]): bash docs/data/stop18/next/kld-a.sh
mkdir -p /tmp/sp && cp .dP1/part.* .dP1/sha256 /tmp/sp/
{
SRC_TAR=.dP1/llama-src.tar.xz CUDA_BUILD_DIR=/tmp/bb timeout 500 bash scripts/device-cuda.sh build test
GGML_TEST_PRINT_ERR=1 CUDA_BUILD_DIR=/tmp/bb timeout 120 bash scripts/device-cuda.sh run test-backend-ops test -b CUDA0 \
    -o FLASH_ATTN_EXT -p oscar2 > $OUT/fa-err.log 2>&1
python3 docs/data/stop18/next/fa-err-summary.py $OUT/fa-err.log
} 2>&1 | tee $OUT/kld-a-printed.txt
