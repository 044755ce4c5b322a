# Stop 20, call C (about 5 minutes). Prepare here (after a local CUDA build of the 30 patches,
# scripts/build-cuda-nogpu.sh, which leaves .dB/bin.tar.xz and .dB/gguf-py.tar.xz):
#   the lean tile loop (now patch 0031) applied to llama.cpp/, then
#   cmake --build build-cuda-local --target test-backend-ops llama-bench llama-batched-bench
#   xz -dc .dB/bin.tar.xz > /tmp/base.tar; tar -C build-cuda-local/bin -cf /tmp/lean.tar .
#   zstd -19 --long=28 --patch-from=/tmp/base.tar /tmp/lean.tar -o .dB/lean.tar.zst
#   mkdir -p .dB/zbin; cp /usr/bin/zstd libz, liblzma, liblz4 there (for a machine without zstd)
# then (device tool, carry [".dB"]): bash docs/data/stop20/scripts/run-c.sh
# Two builds: "grid" (the 30 patches: 0030 sizes the decode grid by whole waves) and "lean"
# (plus the lean tile loop). FLASH_ATTN_EXT oscar2 cases on both; the op at 4k / 64k cells;
# decode at depth 0 / 64k (f16 once, oscar2 grid / lean twice, alternating); batch decode at
# 64k per sequence, 1 / 2 / 4 / 8 sequences, oscar2 (grid).
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz
mkdir -p $OUT
command -v zstd >/dev/null || export PATH=$PWD/.dB/zbin:$PATH LD_LIBRARY_PATH=$PWD/.dB/zbin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|65536),nb=1,.*type_K=oscar2,type_V=oscar2"
{
date +%T
CUDA_BUILD_DIR=/tmp/g BIN_TAR=.dB/bin.tar.xz timeout 90 bash $S build || exit 1
CUDA_BUILD_DIR=/tmp/l BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/lean.tar.zst timeout 90 bash $S build || exit 1
for b in g l; do
  CUDA_BUILD_DIR=/tmp/$b timeout 60 bash $S run test-backend-ops test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 > $OUT/fa-$b.log 2>&1
  grep -E "tests passed|FAIL" $OUT/fa-$b.log | head -5 | sed "s/^/$b: /"
  CUDA_BUILD_DIR=/tmp/$b timeout 40 bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" 2>&1 \
    | grep -E "^ *FLASH_ATTN_EXT" | sed -E 's/\x1b\[[0-9;]*m//g; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max|hsk|hsv|nh|nr23|nb|type_K|type_V)=[^,)]*//g; s/ +/ /g' \
    | cut -c1-120 | sed "s/^/$b: /"
done
CUDA_BUILD_DIR=/tmp/g timeout 30 bash $S synth | grep -v Writing
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
echo "decode tok/s at depth 0 / 65536 (llama-bench -n 32 -r 1)"
tg() { # build, cache type, label
  echo "$(CUDA_BUILD_DIR=/tmp/$1 timeout 60 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk $2 -ctv $2 -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
     | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')  $3"
}
tg g f16 f16
for r in 1 2; do tg g oscar2 "oscar2 grid"; tg l oscar2 "oscar2 lean"; done
CUDA_BUILD_DIR=/tmp/g TYPES=oscar2 BATCH_NPP=65536 BATCH_NPL=1,2,4,8 BATCH_PPS=1 timeout 150 bash $S batched
date +%T
} 2>&1 | tee $RET/c-printed.txt
cp $OUT/batched-*.log $OUT/fa-*.log $RET/ 2>/dev/null
