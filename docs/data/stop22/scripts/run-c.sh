# Stop 22, call C (about 7 minutes; the device tool, carry [".dB"]). Prepared here:
# .dB/nb.tar.zst (call B: the 33 patches, 0033 the P.V fragments where the codes lie) and
# .dB/rb.tar.zst (the same with the one-kernel rotations for up to 512 rows instead of 64, so
# that a decode step of up to 10 sequences keeps them and their RoPE in one launch;
# docs/data/stop22/tried/rot-512-rows.diff), both zstd patches of .dB/bin.tar.xz made from
# build-cuda-local/bin as in call A.
# Steps: the tests on n, and the rotation tests on r; the oscar2 attention cases' errors by
# path on n; the model table (oscar-bench: f16, q4_0, oscar2 at depths 0 / 16k / 64k / 128k)
# on n; batch decode at 64k per sequence, 1 / 2 / 4 / 8 sequences, oscar2 and f16 on n;
# 8 sequences of 64k, oscar2, n and r twice, alternating.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz
mkdir -p $OUT /tmp/m
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
{
date +%T
CUDA_BUILD_DIR=/tmp/n BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/nb.tar.zst timeout 90 bash $S build >/dev/null || exit 1
CUDA_BUILD_DIR=/tmp/r BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/rb.tar.zst timeout 90 bash $S build >/dev/null || exit 1
CUDA_BUILD_DIR=/tmp/n timeout 150 bash $S test
cp $OUT/test-*.log /tmp/m/
for s in "" 1; do
  GGML_CUDA_ROT_SYNC=$s CUDA_BUILD_DIR=/tmp/r timeout 60 bash $S run test-backend-ops test -b CUDA0 -o MUL_MAT_ROTATION > /tmp/m/test-rot-r$s.log 2>&1
  grep -E "tests passed|FAIL" /tmp/m/test-rot-r$s.log | head -5 | sed "s/^/r ROT_SYNC=${s:-unset}: /"
done
GGML_TEST_PRINT_ERR=1 CUDA_BUILD_DIR=/tmp/n timeout 120 bash $S run test-backend-ops test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 > /tmp/m/fa-err.log 2>&1
python3 docs/data/stop18/next/fa-err-summary.py /tmp/m/fa-err.log | grep -E "^path|oscar2/oscar2"
date +%T
CUDA_BUILD_DIR=/tmp/n TYPES="f16 q4_0 oscar2" REPS=1 timeout 220 bash $S bench
CUDA_BUILD_DIR=/tmp/n TYPES="oscar2 f16" BATCH_NPP=65536 BATCH_NPL=1,2,4,8 BATCH_PPS=1 timeout 200 bash $S batched
date +%T
for r in 1 2; do for b in n r; do
  CUDA_BUILD_DIR=/tmp/$b timeout 60 bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk oscar2 -ctv oscar2 -c $((8*66048)) -b 2048 -ub 2048 \
    -npp 65536 -ntg 32 -npl 8 -pps > /tmp/m/bb8-$b-$r.log 2>&1
  grep -E "^\| +[0-9]" /tmp/m/bb8-$b-$r.log | sed "s/^/oscar2 8x64k $b: /"
done; done
date +%T
} 2>&1 | tee $RET/c-printed.txt
xz -T4 /tmp/m/fa-err.log
cp $OUT/batched-*.log /tmp/m/ 2>/dev/null
tar -C $OUT -cJf $RET/bench.tar.xz --exclude='*.gguf' --exclude='test-*' --exclude='batched-*' .
tar -C /tmp/m -cJf $RET/logs.tar.xz .
