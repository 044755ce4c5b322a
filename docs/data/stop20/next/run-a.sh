# Next stop, call A of two (after prepare.sh; carry [".dP1"]; about 9 minutes): the 31-patch
# series built from its source tarball and tested; the oscar2 attention cases' errors by path
# (GGML_TEST_PRINT_ERR=1; patch 0031 changed the decode kernel's softmax bookkeeping); the model
# table (oscar-bench: f16, q4_0, oscar2 at depths 0 / 16k / 64k / 128k), last measured on 28
# patches in stop 19; batch decode at 64k per sequence, 1 / 2 / 4 / 8 sequences, f16 and
# oscar2 side by side (stop 20 had them from two calls); the two-GPU split where two GPUs are.
#   run (device tool, carry [".dP1"]): bash docs/data/stop20/next/run-a.sh
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res CUDA_BUILD_DIR=/tmp/b WEIGHTS=q4_0 SYNTH_OSCAR=1
mkdir -p $OUT /tmp/m /tmp/sp
cp .dP1/part.* .dP1/sha256 /tmp/sp/
{
date +%T
SRC_TAR=.dP1/llama-src.tar.xz timeout 330 bash $S build test || { tail -30 $OUT/build.log; exit 1; }
cp $OUT/test-*.log /tmp/m/
GGML_TEST_PRINT_ERR=1 timeout 120 bash $S run test-backend-ops test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 > /tmp/m/fa-err.log 2>&1
python3 docs/data/stop18/next/fa-err-summary.py /tmp/m/fa-err.log
TYPES="f16 q4_0 oscar2" REPS=1 timeout 200 bash $S bench
TYPES="oscar2 f16" BATCH_NPP=65536 BATCH_NPL=1,2,4,8 BATCH_PPS=1 timeout 200 bash $S batched
if [ $SECONDS -lt 480 ]; then
  SPLIT_TYPES="f16 oscar2" SPLIT_DEPTHS=0,65536 PPL_TEXT=.dP1/wiki.test.raw timeout $((585 - SECONDS)) bash $S split
else
  echo "run-a: split step not run: out of time (${SECONDS}s)"
fi
date +%T
} 2>&1 | tee $RET/run-a-printed.txt
xz -T4 /tmp/m/fa-err.log
cp $OUT/batched-*.log /tmp/m/ 2>/dev/null; cp $OUT/split-* /tmp/m/ 2>/dev/null
tar -C $OUT -cJf $RET/bench.tar.xz --exclude='*.gguf' --exclude='test-*' --exclude='batched-*' --exclude='split-*' .
tar -C /tmp/m -cJf $RET/logs.tar.xz .
