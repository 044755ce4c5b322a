#!/usr/bin/env bash
# stop 17, call 3: the final series (rot, with the combine's rotation done by 2 threads per
# output row instead of a warp reduction per output) built here from .dB/src-final.tar.xz;
# test-backend-ops; ncu kernel table at depth 0; decode of the synthetic Qwen3-8B (converted path)
# for f16, base (call 1's bin/, the series at 45ca81d) and final at depth 0 / 64k, then 128k
export PYTHONUNBUFFERED=1 WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/src-final.tar.xz
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT /tmp/m
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
{
date +%T
CUDA_BUILD_DIR=/tmp/v-base BIN_TAR=.dB/bin-base.tar.xz timeout 60 bash $S build | tail -1
CUDA_BUILD_DIR=/tmp/v-fin timeout 340 bash $S build || { tail -30 $OUT/build.log; exit 1; }
date +%T
CUDA_BUILD_DIR=/tmp/v-fin timeout 60 bash $S test
tar -C $OUT -cJf $RET/test-logs.tar.xz $(cd $OUT && ls test-*.log)
CUDA_BUILD_DIR=/tmp/v-fin timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
date +%T
GGML_CUDA_DISABLE_GRAPHS=1 LD_LIBRARY_PATH=/tmp/v-fin/bin:$CUDART timeout 60 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/k-fin.csv \
   /tmp/v-fin/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -p 0 -n 2 -r 1 > /dev/null 2>&1
xz -c $OUT/k-fin.csv > $RET/k-fin.csv.xz
python3 scripts/ncu-kernel-table.py $OUT/k-fin.csv
date +%T
bench() { # build, tag, depths, cache type
  LD_LIBRARY_PATH=/tmp/v-$1/bin:$CUDART timeout 100 /tmp/v-$1/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk $4 -ctv $4 -d $3 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
    | tail -n +2 | awk -F, -v t=$2 '{print "  " t, $(NF-1)}' | tr -d '"' | tee -a $RET/bench.txt
}
bench fin f16 0,65536 f16
bench base base 0,65536 oscar2
bench fin fin 0,65536 oscar2
bench base base 0,65536 oscar2
bench fin fin 0,65536 oscar2
date +%T
bench fin fin-128k 131072 oscar2
bench fin f16-128k 131072 f16
date +%T
} 2>&1 | tee $RET/s17c-printed.txt
