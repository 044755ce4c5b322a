# Next stop, first call (about 7 minutes). Prepare here:
#   git -C llama.cpp apply ../docs/data/stop19/next/k-mma-occ3.diff
#   rm -rf .dP1 && mkdir .dP1 && scripts/device-pack.sh llama.cpp .dP1/llama-src.tar.xz
#   git -C llama.cpp checkout .
# then (device tool, carry [".dP1"]): bash docs/data/stop19/next/run-occ3.sh
# Builds the series + k-mma-occ3.diff; every oscar2 test-backend-ops case with 3 blocks per SM
# (the default where they fit) and FLASH_ATTN_EXT also with GGML_CUDA_OSCAR2_BLOCKS=2; the op at
# 4k / 64k cells both ways; ncu's launch, occupancy and scheduler sections of the 64k op both
# ways; decode at depth 0 / 64k, f16 and oscar2 both ways, two rounds.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res CUDA_BUILD_DIR=/tmp/b WEIGHTS=q4_0 SYNTH_OSCAR=1
mkdir -p $OUT
P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|65536),nb=1,.*type_K=oscar2,type_V=oscar2"
{
date +%T
SRC_TAR=.dP1/llama-src.tar.xz timeout 330 bash $S build test || { tail -30 $OUT/build.log; exit 1; }
GGML_CUDA_OSCAR2_BLOCKS=2 timeout 60 bash $S run test-backend-ops test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 2>&1 \
    | grep -E "tests passed|FAIL" | head -5 | sed 's/^/BLOCKS=2 /'
for nb in 2 3; do
  GGML_CUDA_OSCAR2_BLOCKS=$nb timeout 40 bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" 2>&1 \
    | grep -E "^ *FLASH_ATTN_EXT" | sed -E 's/\x1b\[[0-9;]*m//g; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max)=[^,)]*//g; s/ +/ /g' \
    | cut -c1-150 | sed "s/^/BLOCKS=$nb /"
  GGML_CUDA_OSCAR2_BLOCKS=$nb timeout 60 ncu --clock-control none --cache-control none -k regex:oscar2_fa_partial -c 1 \
      --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats \
      bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,nb=1,.*type_K=oscar2,type_V=oscar2" \
      > $OUT/ncu-64k-blocks$nb.txt 2>&1
  grep -E "Registers Per Thread|Grid Size|Achieved Active Warps|Theoretical Active Warps|Issued Warp Per Scheduler|Warp Cycles Per Issued|Duration" \
      $OUT/ncu-64k-blocks$nb.txt | sed "s/^/BLOCKS=$nb /"
done
timeout 30 bash $S synth | grep -v Writing
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
echo "decode tok/s at depth 0 / 65536 (llama-bench -n 32 -r 1)"
tg() { # label, environment, cache type
  echo "$(env $2 timeout 60 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk $3 -ctv $3 -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
     | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')  $1"
}
for r in 1 2; do
  tg f16 "" f16
  tg "oscar2, 2 blocks per SM" GGML_CUDA_OSCAR2_BLOCKS=2 oscar2
  tg "oscar2, 3 blocks per SM" "" oscar2
done
date +%T
} 2>&1 | tee $RET/occ3-printed.txt
tar -C $OUT -cJf $RET/occ3.tar.xz --exclude='*.gguf' .
