#!/usr/bin/env bash
# One device call for stop 17's pending diffs (after prepare.sh; carry .dB): the series built on
# the GPU machine, then rot-group-sync, rope-rot and q-early as incremental rebuilds, each on
# the one before; test-backend-ops on each (MUL_MAT_ROTATION also with GGML_CUDA_ROT_SYNC=1:
# every group through the barrier kernel); the attention op (rope-rot against q-early); ncu
# kernel tables at depth 0; decode at depth 0 / 64k side by side.
#   run (device tool): bash docs/data/stop17/next/run.sh   (about 10 minutes: trim it if the call is shorter)
export PYTHONUNBUFFERED=1 WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/src-series.tar.xz
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT /tmp/m
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
targets="test-backend-ops llama-bench llama-perplexity llama-batched-bench"
tests() { # variant
  CUDA_BUILD_DIR=/tmp/v-$1 timeout 90 bash $S test 2>&1 | sed "s/^/  $1 /"
  GGML_CUDA_ROT_SYNC=1 LD_LIBRARY_PATH=/tmp/v-$1/bin:$CUDART timeout 60 /tmp/v-$1/bin/test-backend-ops test -b CUDA0 -o MUL_MAT_ROTATION \
    > $OUT/test-rot-sync.log 2>&1; grep -E "tests passed|FAIL" $OUT/test-rot-sync.log | head -5 | sed "s/^/  $1 ROT_SYNC=1 /"
  mkdir -p /tmp/tl/$1 && cp $OUT/test-*.log /tmp/tl/$1/
}
{
date +%T
CUDA_BUILD_DIR=/tmp/b timeout 330 bash $S build || { tail -30 $OUT/build.log; exit 1; }
mkdir -p /tmp/v-series && cp -a /tmp/b/bin /tmp/v-series/
tests series
for v in rot-group-sync rope-rot q-early; do
  tar -m -xf .dB/$v-files.tar -C build-cuda-src
  cmake --build /tmp/b -j16 --target $targets > $OUT/b-$v.log 2>&1 || { grep -m 10 -A 5 error $OUT/b-$v.log; exit 1; }
  mkdir -p /tmp/v-$v && cp -a /tmp/b/bin /tmp/v-$v/
  date +%T; tests $v
done
tar -C /tmp/tl -cJf $RET/test-logs.tar.xz .
for v in rope-rot q-early rope-rot q-early; do
  LD_LIBRARY_PATH=/tmp/v-$v/bin:$CUDART timeout 40 /tmp/v-$v/bin/test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hs=128,nh=8,gqa=4,kv=(512|65536),nb=1,ns=1," > $OUT/perf-$v.log 2>&1
  echo "== perf $v"; grep -E '^ *FLASH_ATTN_EXT' $OUT/perf-$v.log | sed -E 's/\x1b\[[0-9;]*m//g; s/,(type_K|type_V|nb|ns|hs|nh|gqa|hot_V)=[^,)]*//g; s/ +/ /g' | cut -c1-110
done
CUDA_BUILD_DIR=/tmp/v-series timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
for v in series rot-group-sync rope-rot; do
  GGML_CUDA_DISABLE_GRAPHS=1 LD_LIBRARY_PATH=/tmp/v-$v/bin:$CUDART timeout 60 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/k-$v.csv \
     /tmp/v-$v/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -p 0 -n 2 -r 1 > /dev/null 2>&1
  xz -c $OUT/k-$v.csv > /tmp/m/k-$v.csv.xz
done
python3 scripts/ncu-kernel-table.py $OUT/k-series.csv $OUT/k-rot-group-sync.csv $OUT/k-rope-rot.csv
date +%T
bench() { # build, tag, cache type
  LD_LIBRARY_PATH=/tmp/v-$1/bin:$CUDART timeout 100 /tmp/v-$1/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk $3 -ctv $3 -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
    | tail -n +2 | awk -F, -v t=$2 '{print "  " t, $(NF-1)}' | tr -d '"' | tee -a /tmp/m/bench.txt
}
bench series f16 f16
for r in 1 2; do for v in series rot-group-sync rope-rot q-early; do bench $v $v oscar2; done; done
tar -C /tmp/m -cf $RET/misc.tar .
date +%T
} 2>&1 | tee $RET/run-printed.txt
