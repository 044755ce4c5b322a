# Stop 19, call 4 (carry [".dP1"]: the series + docs/data/stop19/tried/k-mma.diff as a source tarball,
# scripts/device-pack.sh):
# build; the oscar2 attention cases with the tensor-core K dot (default) and their errors by
# path; the op at 4k / 64k cells and decode at depth 0 / 64k with GGML_CUDA_OSCAR2_K_MMA=0 and 1
# side by side. About 6 minutes.
#   run (device tool): bash docs/data/stop19/scripts/run-k-mma.sh
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res CUDA_BUILD_DIR=/tmp/b WEIGHTS=q4_0 SYNTH_OSCAR=1
mkdir -p $OUT
{
date +%T
SRC_TAR=.dP1/llama-src.tar.xz timeout 300 bash $S build || { tail -30 $OUT/build.log; exit 1; }
GGML_TEST_PRINT_ERR=1 timeout 60 bash $S run test-backend-ops test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 > $OUT/fa-err.log 2>&1
grep -E "tests passed|FAIL" $OUT/fa-err.log | head -10
python3 docs/data/stop18/next/fa-err-summary.py $OUT/fa-err.log | grep -E "path|oscar2/oscar2"
timeout 30 bash $S synth | grep -v Writing
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
echo "decode tok/s at depth 0 / 65536 (llama-bench -n 32 -r 1)"
for r in 1 2; do for k in 0 1; do
  [ $SECONDS -lt 345 ] || { echo "out of time (${SECONDS}s)"; break 2; }
  echo "$(GGML_CUDA_OSCAR2_K_MMA=$k timeout 60 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
     | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')  K_MMA=$k"
done; done
for k in 0 1; do
  [ $SECONDS -lt 370 ] || { echo "op not timed: out of time (${SECONDS}s)"; break; }
  GGML_CUDA_OSCAR2_K_MMA=$k timeout 40 bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT \
      -p "hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|65536),nb=1,.*type_K=oscar2,type_V=oscar2" 2>&1 \
    | grep -E "^ *FLASH_ATTN_EXT" | sed -E 's/\x1b\[[0-9;]*m//g; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max)=[^,)]*//g; s/ +/ /g' \
    | cut -c1-150 | sed "s/^/K_MMA=$k /"
done
date +%T
} 2>&1 | tee $RET/k-mma-printed.txt
xz -c $OUT/fa-err.log > $RET/fa-err.log.xz
