# Next stop (prepared in stop 23, not run; about 4 minutes; the device tool, carry [".dB"]):
# why the next tile's K dot (docs/data/stop23/tried/k-tile-ahead.diff) loses at 4k cells.
# Three builds, made here in stop 23 (build-cuda-local, incremental) as zstd patches of
# .dB/bin.tar.xz: "a" .dB/km.tar.zst (the 34 patches), "b" .dB/kp2.tar.zst (k-tile-ahead.diff:
# five stages for heads up to 128), "c" .dB/kp4.tar.zst (next/kp4.diff: the same with four
# stages). Steps: FLASH_ATTN_EXT oscar2 on "c"; the op at 4k / 16k / 64k cells (plain, and with
# windows 64 / 256 at 64k), the three builds twice, alternating; 8 sequences of 64k, each twice.
# If .dB lacks them: build each from the series (scripts/build-cuda-nogpu.sh's directory, the
# diff applied to llama.cpp/) and pack as in docs/data/stop22/scripts/run-a.sh's header.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz
mkdir -p $OUT
P="(hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|16384|65536),nb=1,.*type_K=oscar2,type_V=oscar2|hs=128,nh=8,gqa=4,kv=65536,nb=1,ns=1,n_sink=64,n_recent=256,type_K=oscar2,type_V=oscar2)"
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
{
date +%T
for b in a b c; do
  f=$(case $b in a) echo km;; b) echo kp2;; c) echo kp4;; esac)
  CUDA_BUILD_DIR=/tmp/n$b BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/$f.tar.zst timeout 90 bash $S build >/dev/null || exit 1
done
CUDA_BUILD_DIR=/tmp/nc timeout 120 bash $S run test-backend-ops test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 2>&1 | grep -E "tests passed|FAIL" | head -5 | sed "s/^/c: /"
for r in 1 2; do for b in a b c; do
  CUDA_BUILD_DIR=/tmp/n$b timeout 60 bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" 2>&1 \
    | grep -E "^ *FLASH_ATTN_EXT" | sed -E 's/\x1b\[[0-9;]*m//g; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max|hsk|hsv|nh|nr23|nb|type_K|type_V|gqa|ns|hot_K|hot_V|shuffled)=[^,)]*//g; s/ +/ /g' \
    | cut -c1-120 | sed "s/^/$b: /"
done; done
CUDA_BUILD_DIR=/tmp/na timeout 40 bash $S synth >/dev/null 2>&1
for r in 1 2; do for b in a b c; do
  CUDA_BUILD_DIR=/tmp/n$b timeout 60 bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk oscar2 -ctv oscar2 -c $((8*66048)) -b 2048 -ub 2048 \
    -npp 65536 -ntg 32 -npl 8 -pps 2>&1 | grep -E "^\| +[0-9]" | sed "s/^/oscar2 8x64k $b: /"
done; done
date +%T
} 2>&1 | tee $RET/next-a-printed.txt
