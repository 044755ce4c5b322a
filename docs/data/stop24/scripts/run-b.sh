# Stop 24, call B (about 5 minutes; the device tool, carry [".dC"]). Call A found that with
# GGML_CUDA_OSCAR2_CHUNK=1024 (warps of 8 tiles) the oscar2 decode errs by 3e-3 (NMSE) on the
# caches of 4k and 16k cells, against 2e-6 with one tile per warp, and the grid's own 4 tiles
# per warp (16k) give 4.4e-4, just under the 5e-4 bound. Suspect: patch 0033's code offsets
# (the A fragments are off_k + c, off_k up to 1024), kept in the f32 accumulators over all of a
# warp's tiles and taken out at the end, so that each mma step rounds against 1024 times the
# sum that is wanted. "n" (.dC/k36.tar.zst, built here from the 35 patches and the fix) takes
# them out at the end of each tile, with the tile's sums of P' from one more mma per block.
#   a  .dC/k35.tar.zst  the 35 patches as committed
#   n  .dC/k36.tar.zst  the same with the offsets left with each tile
# First each build's errors with the chunks fixed at 1024 and 2048 cells (the 4k and 16k
# cases), then scripts/device-ab.sh: the whole test step on "n", the op at 4k / 16k / 64k and
# with windows, decode at depth 0 / 64k, 8 x 64k, the builds alternating twice.
export SRC_TAR=.dC/gguf-py.tar.xz
S=scripts/device-cuda.sh
RET=$OUT
for b in a:k35 n:k36; do
    CUDA_BUILD_DIR=/tmp/ab-${b%%:*}-${b#*:} BIN_TAR=.dC/bin.tar.xz BIN_PATCH=.dC/${b#*:}.tar.zst timeout 90 bash $S build > /dev/null || echo "build $b failed"
done
{
for b in a:k35 n:k36; do
    for chunk in 1024 2048; do
        GGML_TEST_PRINT_ERR=1 GGML_CUDA_OSCAR2_CHUNK=$chunk CUDA_BUILD_DIR=/tmp/ab-${b%%:*}-${b#*:} timeout 60 bash $S run test-backend-ops test -b CUDA0 \
            -o FLASH_ATTN_EXT -p "kv=(4096|16384),nb=1.*type_K=oscar2,type_V=oscar2" 2>&1 \
            | grep -E "FLASH_ATTN_EXT\]" | sed -E 's/\x1b\[[0-9;]*m//g; s/\[NONE\][^F]*//; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max|hsv|type_K|type_V|hot_K|hot_V)=[^,)]*//g' \
            | cut -c1-150 | sed "s/^/${b%%:*} chunk $chunk: /"
    done
done
} 2>&1 | tee $RET/chunk-err.txt
PERF="(hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|16384|65536),nb=1,.*type_K=oscar2,type_V=oscar2|hs=128,nh=8,gqa=4,kv=65536,nb=1,ns=1,n_sink=64,n_recent=256,type_K=oscar2,type_V=oscar2)" \
    BIN_TAR=.dC/bin.tar.xz bash scripts/device-ab.sh a=.dC/k35.tar.zst n=.dC/k36.tar.zst
