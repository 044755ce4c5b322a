# Stop 24, call F (about 1 minute; carry [".dC"]): test_flash_attn_ext_jump with V in
# [-50, 150] (call E's V in [-100, 100] made the result a small difference of large sums, so
# that its NMSE of 2e-5 measured the f16 weights' rounding more than the range fault), on the
# kernels before patch 0036 (k36's library under k38's test program) and with it (k38: the 36
# patches with the new data).
export SRC_TAR=.dC/gguf-py.tar.xz
S=scripts/device-cuda.sh
RET=$OUT
for b in a:k36 m:k38; do
    CUDA_BUILD_DIR=/tmp/ab-${b%%:*}-${b#*:} BIN_TAR=.dC/bin.tar.xz BIN_PATCH=.dC/${b#*:}.tar.zst timeout 90 bash $S build > /dev/null || echo "build $b failed"
done
rm -rf /tmp/ab-o-mix && cp -a /tmp/ab-a-k36 /tmp/ab-o-mix && cp /tmp/ab-m-k38/bin/test-backend-ops /tmp/ab-o-mix/bin/
{
for b in o:mix m:k38; do
    for chunk in 0 1024; do
        GGML_TEST_PRINT_ERR=1 GGML_CUDA_OSCAR2_CHUNK=$chunk CUDA_BUILD_DIR=/tmp/ab-${b%%:*}-${b#*:} timeout 90 bash $S run test-backend-ops test -b CUDA0 \
            -o FLASH_ATTN_EXT -p "kv=16384,type_K=" 2>&1 | grep -E "FLASH_ATTN_EXT\]|NaN|tests passed" | sed -E 's/\x1b\[[0-9;]*m//g; s/\[NONE\][^F]*//' \
            | cut -c1-160 | sed "s/^/${b%%:*} chunk $chunk: /"
    done
done
} 2>&1 | tee $RET/jump-err.txt
