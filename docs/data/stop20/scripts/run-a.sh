# Stop 20, call A (about 9 minutes). Prepare here:
#   rm -rf .dP1 && mkdir .dP1 && scripts/device-pack.sh llama.cpp .dP1/llama-src.tar.xz
# then (device tool, carry [".dP1"]): bash docs/data/stop20/scripts/run-a.sh
# The 29-patch series built from its source tarball and tested; seq-copy-check (a copied
# sequence decodes as its source: patch 0029) on the GPU; llama-batched-bench with 16k-token
# contexts per sequence, 1 / 8 / 32 sequences, f16 / q4_0 / oscar2.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res CUDA_BUILD_DIR=/tmp/b WEIGHTS=q4_0 SYNTH_OSCAR=1
mkdir -p $OUT
{
date +%T
SRC_TAR=.dP1/llama-src.tar.xz timeout 330 bash $S build test || { tail -30 $OUT/build.log; exit 1; }
timeout 30 bash $S synth | grep -v Writing
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
g++ -O2 -std=c++17 scripts/seq-copy-check.cpp -Ibuild-cuda-src/include -Ibuild-cuda-src/ggml/include \
    -L/tmp/b/bin -lllama -Wl,-rpath,/tmp/b/bin -o /tmp/seq-copy-check && {
  for a in "f16 600 99 0" "oscar2 600 99 0" "oscar2 600 99 1" "q4_0 600 99 0"; do
    LD_LIBRARY_PATH=/tmp/b/bin timeout 60 /tmp/seq-copy-check $SYN $a 2>/dev/null; echo "rc=$?"
  done
}
TYPES="oscar2 q4_0 f16" BATCH_NPP=16384 BATCH_NPL=1,8,32 BATCH_PPS=1 timeout 300 bash $S batched
date +%T
} 2>&1 | tee $RET/a-printed.txt
cp $OUT/batched-*.log $RET/ 2>/dev/null
tar -C $OUT -cJf $RET/a-logs.tar.xz --exclude='*.gguf' --exclude='batched-*' .
