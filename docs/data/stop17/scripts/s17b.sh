#!/usr/bin/env bash
# stop 17, call 2: base (call 1's bin/, the series at 45ca81d) against rot (the series with the
# output rotation in oscar2_fa_combine, built here from .dB/src-rot.tar.xz) and exp (rot with an
# OSCAR2_FA_CELLS_MIN switch for the decode grid's chunk size, an experiment only):
# test-backend-ops on rot, ncu kernel tables at depth 0 (base, rot), rot and exp back as zstd
# patches of base for call 3 (decode figures)
export PYTHONUNBUFFERED=1 WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/src-rot.tar.xz
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT /tmp/m
Z=$PWD/.dB/zbin
zst() { if command -v zstd >/dev/null; then zstd "$@"; else LD_LIBRARY_PATH=$Z $Z/zstd "$@"; fi; }
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
targets="test-backend-ops llama-bench llama-perplexity llama-batched-bench"
{
date +%T
CUDA_BUILD_DIR=/tmp/v-base BIN_TAR=.dB/bin-base.tar.xz timeout 60 bash $S build | tail -1
xz -dc .dB/bin-base.tar.xz > /tmp/base.tar &
CUDA_BUILD_DIR=/tmp/b timeout 330 bash $S build || { tail -30 $OUT/build.log; exit 1; }
mkdir -p /tmp/v-rot && cp -a /tmp/b/bin /tmp/v-rot/
date +%T
CUDA_BUILD_DIR=/tmp/v-rot timeout 100 bash $S test
mkdir -p /tmp/tl && cp $OUT/test-*.log /tmp/tl/
tar -m -xf .dB/exp-files.tar -C build-cuda-src
cmake --build /tmp/b -j16 --target $targets > $OUT/b-exp.log 2>&1 || { grep -m 10 -A 5 error $OUT/b-exp.log; exit 1; }
mkdir -p /tmp/v-exp && cp -a /tmp/b/bin /tmp/v-exp/
date +%T
wait
for v in rot exp; do
  tar -C /tmp/v-$v/bin -cf /tmp/$v.tar . && zst -q -9 -T0 --long=28 --patch-from=/tmp/base.tar /tmp/$v.tar -o $RET/$v.tar.zst && echo "packed $v: $(du -h $RET/$v.tar.zst | cut -f1)"
done
CUDA_BUILD_DIR=/tmp/v-rot timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
date +%T
for b in base rot; do
  GGML_CUDA_DISABLE_GRAPHS=1 LD_LIBRARY_PATH=/tmp/v-$b/bin:$CUDART timeout 100 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/k-$b.csv \
     /tmp/v-$b/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -p 0 -n 2 -r 1 > /dev/null 2>&1
  xz -c $OUT/k-$b.csv > /tmp/m/k-$b.csv.xz
done
python3 scripts/ncu-kernel-table.py $OUT/k-base.csv $OUT/k-rot.csv
date +%T
for b in exp; do
  for cm in 0 32 64 256; do
    OSCAR2_FA_CELLS_MIN=$cm LD_LIBRARY_PATH=/tmp/v-$b/bin:$CUDART timeout 40 /tmp/v-$b/bin/test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hs=128,nh=8,gqa=4,kv=(512|4096),nb=1,ns=1," > $OUT/perf-$cm.log 2>&1
    echo "== perf cells_min $cm"; grep -E '^ *FLASH_ATTN_EXT' $OUT/perf-$cm.log | sed -E 's/\x1b\[[0-9;]*m//g; s/,(type_K|type_V|nb|ns|hs|nh|gqa|hot_V)=[^,)]*//g; s/ +/ /g' | cut -c1-110
    OSCAR2_FA_CELLS_MIN=$cm LD_LIBRARY_PATH=/tmp/v-$b/bin:$CUDART timeout 40 /tmp/v-$b/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -p 0 -n 64 -r 2 -o csv 2>/dev/null | tail -n +2 | awk -F, -v c=$cm '{print "  tg64 depth 0 cells_min", c, $(NF-1)}'
  done
done
tar -C /tmp/tl -cJf /tmp/m/test-logs.tar.xz . ; tar -C /tmp/m -cf $RET/misc.tar .
date +%T
} 2>&1 | tee $RET/s17b-printed.txt
