# Next stop, call A of two (after prepare.sh; carry [".dP1"]): part 1 of the model to /tmp/sp; the
# series built from its source tarball and tested; the oscar2 attention cases with each passing
# case's error printed (GGML_TEST_PRINT_ERR=1), summarised by path; then pdl.diff, rope-once.diff and
# rot-cluster.diff as incremental rebuilds (each on the one before) into /tmp/v-<name>, tested
# (MUL_MAT_ROTATION also with GGML_CUDA_ROT_SYNC=1, by the test step; for rot-cluster also with the cooperative
# kernel, GGML_CUDA_ROT_CLUSTER=0, and with every rotation a cluster, =2). Stop 19 added the
# two-GPU split step (device kind nvidia-h200-x2) after the series' tests. About 9 minutes.
#   run (device tool, carry [".dP1"]): bash docs/data/stop18/next/run-a.sh
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT /tmp/m /tmp/sp
cp .dP1/part.* .dP1/sha256 /tmp/sp/
tests() { # variant (device-cuda.sh's test step runs MUL_MAT_ROTATION also with GGML_CUDA_ROT_SYNC=1)
  CUDA_BUILD_DIR=/tmp/v-$1 timeout 120 bash $S test 2>&1 | sed "s/^/  $1 /"
  mkdir -p /tmp/m/tests/$1 && cp $OUT/test-*.log /tmp/m/tests/$1/
}
{
date +%T
SRC_TAR=.dP1/llama-src.tar.xz CUDA_BUILD_DIR=/tmp/b timeout 330 bash $S build || { tail -30 $OUT/build.log; exit 1; }
mkdir -p /tmp/v-series && cp -a /tmp/b/bin /tmp/v-series/
tests series
GGML_TEST_PRINT_ERR=1 CUDA_BUILD_DIR=/tmp/v-series timeout 120 bash $S run test-backend-ops test -b CUDA0 \
    -o FLASH_ATTN_EXT -p oscar2 > /tmp/m/fa-err.log 2>&1
python3 docs/data/stop18/next/fa-err-summary.py /tmp/m/fa-err.log
# two GPUs (stop 19, on nvidia-h200-x2): the synthetic Qwen3-8B split by layer against one GPU,
# decode/prefill for f16 and oscar2 at depths 0 and 64k, perplexity equal (skipped on one GPU)
CUDA_BUILD_DIR=/tmp/v-series WEIGHTS=q4_0 SYNTH_OSCAR=1 SPLIT_TYPES="f16 oscar2" SPLIT_DEPTHS=0,65536 \
    PPL_TEXT=.dP1/wiki.test.raw timeout 240 bash $S split
mkdir -p /tmp/m/split && cp $OUT/split-* /tmp/m/split/
for v in pdl rope-once rot-cluster; do
  [ $SECONDS -lt 450 ] || { echo "run-a: $v and after not built: out of time (${SECONDS}s)"; break; }
  tar -m -xf .dP1/$v-files.tar -C build-cuda-src
  cmake --build /tmp/b -j16 --target test-backend-ops llama-bench llama-perplexity llama-batched-bench > $OUT/b-$v.log 2>&1 \
    || { grep -m 10 -A 5 error $OUT/b-$v.log; exit 1; }
  mkdir -p /tmp/v-$v && cp -a /tmp/b/bin /tmp/v-$v/
  date +%T; tests $v
done
[ -x /tmp/v-rot-cluster/bin/test-backend-ops ] && for e in "GGML_CUDA_ROT_SYNC=1 GGML_CUDA_ROT_CLUSTER=0" "GGML_CUDA_ROT_CLUSTER=2"; do
  env $e CUDA_BUILD_DIR=/tmp/v-rot-cluster timeout 60 bash $S run test-backend-ops test -b CUDA0 -o MUL_MAT_ROTATION > $OUT/t.log 2>&1
  grep -E "tests passed|FAIL" $OUT/t.log | head -5 | sed "s/^/  rot-cluster $e /"
done
xz -T4 /tmp/m/fa-err.log
tar -C /tmp/m -cJf $RET/tests.tar.xz .
date +%T
} 2>&1 | tee $RET/run-a-printed.txt
