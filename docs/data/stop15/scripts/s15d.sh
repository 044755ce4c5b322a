#!/usr/bin/env bash
# stop 15, call 4: llama-bench -v at depth 65536, windows on and off: graph reuse, splits, CUDA graph messages
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/gguf-py.tar.xz WEIGHTS=q4_0 SYNTH_OSCAR=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
{
date +%T
CUDA_BUILD_DIR=/tmp/old BIN_TAR=.dB/bin-series-c073838.tar.xz BIN_PATCH=.dB/new-kvC.tar.zst timeout 60 bash $S build | tail -1
CUDA_BUILD_DIR=/tmp/old timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
export LD_LIBRARY_PATH=/tmp/old/bin:$CUDART
for w in on off; do
  a=""; [ $w = off ] && a="--kv-sink 0 --kv-recent 0"
  timeout 100 /tmp/old/bin/llama-bench -v -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 65536 -p 0 -n 32 -r 1 $a > $OUT/v-$w.log 2>&1
  echo "== windows $w: rc=$?"
  grep -v 'llama_graph_n_input_tensors\|llama_model_loader\|print_info\|load_tensors' $OUT/v-$w.log | grep -i -E 'graphs reused|splits|cuda graph|warmup|tg32|sched_reserve: graph|disabling|update' | sort | uniq -c | sort -rn | head -25 | cut -c1-200
  xz -c $OUT/v-$w.log > $RET/v-$w.log.xz
done
date +%T
} 2>&1 | tee $RET/s15d-printed.txt
