#!/usr/bin/env bash
# Call B (after run.sh; .dB/ holds src-series.tar.xz, zbin/, and call A's series.tar.xz.a* and
# the variants' .tar.zst from its misc.tar): the attention op (rope-rot, q-early, v-skip), ncu
# kernel tables at depth 0 (series, rot-group-sync, rope-rot, v-skip), decode at depth 0 / 64k
# for f16 and each build (two rounds). About 7 minutes.
#   run (device tool, carry [".dB"]): bash docs/data/stop17/next/run2.sh
export PYTHONUNBUFFERED=1 WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/src-series.tar.xz
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT /tmp/m
variants="rot-group-sync rope-rot q-early v-skip"
{
date +%T
cat .dB/series.tar.xz.a? > /tmp/series.tar.xz
CUDA_BUILD_DIR=/tmp/v-series BIN_TAR=/tmp/series.tar.xz timeout 60 bash $S build | tail -1
for v in $variants; do
  CUDA_BUILD_DIR=/tmp/v-$v BIN_TAR=/tmp/series.tar.xz BIN_PATCH=.dB/$v.tar.zst timeout 60 bash $S build | tail -1
done
for v in rope-rot q-early v-skip rope-rot q-early v-skip; do
  CUDA_BUILD_DIR=/tmp/v-$v timeout 40 bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hs=128,nh=8,gqa=4,kv=(512|65536),nb=1,ns=1," > $OUT/perf-$v.log 2>&1
  echo "== perf $v"; grep -E '^ *FLASH_ATTN_EXT' $OUT/perf-$v.log | sed -E 's/\x1b\[[0-9;]*m//g; s/,(type_K|type_V|nb|ns|hs|nh|gqa|hot_V)=[^,)]*//g; s/ +/ /g' | cut -c1-110
  cat $OUT/perf-$v.log >> /tmp/m/perf-fa.log
done
CUDA_BUILD_DIR=/tmp/v-series timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
for v in series rot-group-sync rope-rot v-skip; do # (ncu follows device-cuda.sh's exec into llama-bench)
  GGML_CUDA_DISABLE_GRAPHS=1 CUDA_BUILD_DIR=/tmp/v-$v timeout 60 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/k-$v.csv \
     bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -p 0 -n 2 -r 1 > /dev/null 2>&1
  xz -c $OUT/k-$v.csv > /tmp/m/k-$v.csv.xz
done
python3 scripts/ncu-kernel-table.py $OUT/k-series.csv $OUT/k-rot-group-sync.csv $OUT/k-rope-rot.csv $OUT/k-v-skip.csv
date +%T
bench() { # build, tag, cache type
  CUDA_BUILD_DIR=/tmp/v-$1 timeout 100 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk $3 -ctv $3 -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
    | tail -n +2 | awk -F, -v t=$2 '{print "  " t, $(NF-1)}' | tr -d '"' | tee -a /tmp/m/bench.txt
}
bench series f16 f16
for r in 1 2; do for v in series $variants; do bench $v $v oscar2; done; done
tar -C /tmp/m -cf $RET/misc.tar .
date +%T
} 2>&1 | tee $RET/run2-printed.txt
