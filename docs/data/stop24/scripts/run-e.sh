# Stop 24, call E (about 6 minutes; the device tool, carry [".dC"]): patch 0036, the decode
# softmax's slack 8 -> 2 (K and V oscar2) and 0 (mixed pairs), so that P' = p*d and the mixed
# pairs' half sums stay in range, with test_flash_attn_ext_jump (scores jumping 7.5 within a
# chunk, V in [-100, 100]).
#   a  .dC/k36.tar.zst  the 35 patches with stop 24's P.V fix (call B's "n")
#   m  .dC/k37.tar.zst  the same with patch 0036
# First the jump cases with a's kernels under m's test program (the kernels' library is a's),
# and with m's; then scripts/device-ab.sh a m: the whole test step on m, the op, decode at
# depth 0 / 64k, 8 x 64k, alternating twice.
export SRC_TAR=.dC/gguf-py.tar.xz
S=scripts/device-cuda.sh
RET=$OUT
for b in a:k36 m:k37; do
    CUDA_BUILD_DIR=/tmp/ab-${b%%:*}-${b#*:} BIN_TAR=.dC/bin.tar.xz BIN_PATCH=.dC/${b#*:}.tar.zst timeout 90 bash $S build > /dev/null || echo "build $b failed"
done
rm -rf /tmp/ab-o-mix && cp -a /tmp/ab-a-k36 /tmp/ab-o-mix && cp /tmp/ab-m-k37/bin/test-backend-ops /tmp/ab-o-mix/bin/
{
for b in o:mix m:k37; do
    for chunk in 0 1024; do
        GGML_TEST_PRINT_ERR=1 GGML_CUDA_OSCAR2_CHUNK=$chunk CUDA_BUILD_DIR=/tmp/ab-${b%%:*}-${b#*:} timeout 90 bash $S run test-backend-ops test -b CUDA0 \
            -o FLASH_ATTN_EXT -p "kv=16384,type_K=" 2>&1 | grep -E "FLASH_ATTN_EXT\]|NaN|tests passed" | sed -E 's/\x1b\[[0-9;]*m//g; s/\[NONE\][^F]*//' \
            | cut -c1-160 | sed "s/^/${b%%:*} chunk $chunk: /"
    done
done
} 2>&1 | tee $RET/jump-err.txt
PERF="(hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|16384|65536),nb=1,.*type_K=oscar2,type_V=oscar2|hs=128,nh=8,gqa=4,kv=65536,nb=1,ns=1,n_sink=64,n_recent=256,type_K=oscar2,type_V=oscar2)" \
    BIN_TAR=.dC/bin.tar.xz bash scripts/device-ab.sh a=.dC/k36.tar.zst m=.dC/k37.tar.zst
