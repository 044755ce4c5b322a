# Stop 22, call G (about 4 minutes; carry [".dB"]): "n" (.dB/nb.tar.zst, patch 0033 as in calls
# B and C: the offsets of the codes taken out by one more mma per m-tile) against "n2"
# (.dB/nb2.tar.zst: each lane sums its P' in f32 and the offsets come out once, at the end;
# call F's profile put the per-m-tile mma and the registers they need at 80 of 999 instructions
# per tile). FLASH_ATTN_EXT oscar2 on n2 with each case's error; the op at 4k / 64k, n and n2
# twice, alternating; decode at depth 0 / 64k, twice each, alternating; 8 sequences of 64k, twice each.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz
mkdir -p $OUT
P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|65536),nb=1,.*type_K=oscar2,type_V=oscar2"
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
{
date +%T
CUDA_BUILD_DIR=/tmp/n BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/nb.tar.zst timeout 90 bash $S build >/dev/null || exit 1
CUDA_BUILD_DIR=/tmp/n2 BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/nb2.tar.zst timeout 90 bash $S build >/dev/null || exit 1
GGML_TEST_PRINT_ERR=1 CUDA_BUILD_DIR=/tmp/n2 timeout 120 bash $S run test-backend-ops test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 > $OUT/fa-err-n2.log 2>&1
grep -E "tests passed|FAIL" $OUT/fa-err-n2.log | head -5 | sed "s/^/n2: /"
python3 docs/data/stop18/next/fa-err-summary.py $OUT/fa-err-n2.log | grep -E "^path|oscar2/oscar2"
for r in 1 2; do for b in n n2; do
  CUDA_BUILD_DIR=/tmp/$b timeout 40 bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" 2>&1 \
    | grep -E "^ *FLASH_ATTN_EXT" | sed -E 's/\x1b\[[0-9;]*m//g; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max|hsk|hsv|nh|nr23|nb|type_K|type_V)=[^,)]*//g; s/ +/ /g' \
    | cut -c1-120 | sed "s/^/$b: /"
done; done
date +%T
CUDA_BUILD_DIR=/tmp/n timeout 40 bash $S synth >/dev/null 2>&1
echo "decode tok/s at depth 0 / 65536 (llama-bench -n 32 -r 1)"
tg() { # build, label
  echo "$(CUDA_BUILD_DIR=/tmp/$1 timeout 60 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
     | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')  $2"
}
for r in 1 2; do tg n "oscar2 n"; tg n2 "oscar2 n2"; done
date +%T
for r in 1 2; do for b in n n2; do
  CUDA_BUILD_DIR=/tmp/$b timeout 60 bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk oscar2 -ctv oscar2 -c $((8*66048)) -b 2048 -ub 2048 \
    -npp 65536 -ntg 32 -npl 8 -pps > $OUT/bb8-$b-$r.log 2>&1
  grep -E "^\| +[0-9]" $OUT/bb8-$b-$r.log | sed "s/^/oscar2 8x64k $b: /"
done; done
date +%T
} 2>&1 | tee $RET/g-printed.txt
xz -T4 -c $OUT/fa-err-n2.log > $RET/fa-err-n2.log.xz
