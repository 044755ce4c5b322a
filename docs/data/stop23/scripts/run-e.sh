# Stop 23, call E (about 4 minutes; the device tool, carry [".dB"]): the K dot a tile ahead
# (oscar2_fa_k_tile_mma of tile i + 1 runs right after tile i's P.V, in one stretch of code
# with it, so that the two interleave; a fifth cp.async stage for heads up to 128 keeps three
# tiles in flight; P.V always over the tile's 32 rows) against patch 0034 as committed.
# Binaries built here (build-cuda-local, incremental) and packed as zstd patches of
# .dB/bin.tar.xz: .dB/km.tar.zst (the 34 patches, "a") and .dB/kp.tar.zst ("b").
# Steps as call B: the whole test step on "b"; FLASH_ATTN_EXT oscar2 with each case's error on
# "b"; the op at 4k / 64k, both builds twice, alternating; decode at depth 0 / 64k and 8
# sequences of 64k, twice each, alternating.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz
mkdir -p $OUT
P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|65536),nb=1,.*type_K=oscar2,type_V=oscar2"
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
{
date +%T
CUDA_BUILD_DIR=/tmp/ea BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/km.tar.zst timeout 90 bash $S build >/dev/null || exit 1
CUDA_BUILD_DIR=/tmp/eb BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/kp.tar.zst timeout 90 bash $S build >/dev/null || exit 1
mkdir -p /tmp/m
CUDA_BUILD_DIR=/tmp/eb timeout 170 bash $S test
cp $OUT/test-*.log /tmp/m/ 2>/dev/null
GGML_TEST_PRINT_ERR=1 CUDA_BUILD_DIR=/tmp/eb timeout 120 bash $S run test-backend-ops test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 > /tmp/m/fa-err-b.log 2>&1
python3 docs/data/stop18/next/fa-err-summary.py /tmp/m/fa-err-b.log | grep -E "^path|oscar2/oscar2"
xz -T4 /tmp/m/fa-err-b.log
for r in 1 2; do for b in a b; do
  CUDA_BUILD_DIR=/tmp/e$b timeout 40 bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" 2>&1 \
    | grep -E "^ *FLASH_ATTN_EXT" | sed -E 's/\x1b\[[0-9;]*m//g; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max|hsk|hsv|nh|nr23|nb|type_K|type_V)=[^,)]*//g; s/ +/ /g' \
    | cut -c1-120 | sed "s/^/$b: /"
done; done
CUDA_BUILD_DIR=/tmp/ea timeout 40 bash $S synth >/dev/null 2>&1
echo "decode tok/s at depth 0 / 65536 (llama-bench -n 32 -r 1); a: patch 0034, b: the K dot a tile ahead"
for r in 1 2; do for b in a b; do
  echo "$(CUDA_BUILD_DIR=/tmp/e$b timeout 60 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
     | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')  $b"
done; done
for r in 1 2; do for b in a b; do
  CUDA_BUILD_DIR=/tmp/e$b timeout 60 bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk oscar2 -ctv oscar2 -c $((8*66048)) -b 2048 -ub 2048 \
    -npp 65536 -ntg 32 -npl 8 -pps > $OUT/bb8-$b-$r.log 2>&1
  grep -E "^\| +[0-9]" $OUT/bb8-$b-$r.log | sed "s/^/oscar2 8x64k $b: /"
done; done
date +%T
} 2>&1 | tee $RET/e-printed.txt
cp $OUT/bb8-*.log /tmp/m/ 2>/dev/null
tar -C /tmp/m -cJf $RET/logs.tar.xz .
