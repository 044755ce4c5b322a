#!/usr/bin/env bash
# stop 15, call 3: where the 16-bit windows' cost at depth 64k goes. Every kernel of whole decoded
# tokens at depth 65536 (after one token), windows on and off, graphs off (ncu); then llama-bench
# windows on/off, graphs on/off. Binaries: stop 14's final series (C).
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
  GGML_CUDA_DISABLE_GRAPHS=1 timeout 220 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/k64-$w.csv \
     /tmp/old/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 65536 -p 0 -n 3 -ub 8192 -b 8192 --no-warmup -r 1 $a > $OUT/k64-$w.out 2>&1
  echo "ncu windows $w: rc=$? $(wc -l < $OUT/k64-$w.csv) lines"; date +%T
  xz -c $OUT/k64-$w.csv > $RET/k64-$w.csv.xz
  python3 scripts/ncu-kernel-table.py --skip-first-token --top 20 $OUT/k64-$w.csv
done
for g in 0 1; do
  for w in on off; do
    a=""; [ $w = off ] && a="--kv-sink 0 --kv-recent 0"
    GGML_CUDA_DISABLE_GRAPHS=$g timeout 80 /tmp/old/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 65536 -p 0 -n 32 -r 2 $a -o jsonl > $OUT/b-$g-$w.jsonl 2>/dev/null
    python3 -c "
import json
for l in open('$OUT/b-$g-$w.jsonl'):
    r=json.loads(l); print('  graphs_off=$g windows $w depth', r['n_depth'], 'tg', round(r['avg_ts'],1), '+-', round(r['stddev_ts'],1))"
  done
done
date +%T
} 2>&1 | tee $RET/s15c-printed.txt
