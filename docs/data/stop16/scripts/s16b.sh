#!/usr/bin/env bash
# stop 16, call 2: old / host / new (call 1's builds) side by side on the synthetic Qwen3-8B
# geometry (q4_0 weights, OSCAR rotations for K and V): llama-bench decode and prefill at depth
# 0 / 16k / 64k, windows on and off; ncu launches per layer for old and new; perplexity equal
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/src-old.tar.xz WEIGHTS=q4_0 SYNTH_OSCAR=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
{
date +%T
CUDA_BUILD_DIR=/tmp/old BIN_TAR=.dB/bin-old.tar.xz timeout 60 bash $S build | tail -1
for v in host new; do
  CUDA_BUILD_DIR=/tmp/$v BIN_TAR=.dB/bin-old.tar.xz BIN_PATCH=.dB/$v.tar.zst timeout 60 bash $S build | tail -1
done
CUDA_BUILD_DIR=/tmp/new timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
date +%T
bench() { # build, file tag, arguments
  LD_LIBRARY_PATH=/tmp/$1/bin:$CUDART timeout 90 /tmp/$1/bin/llama-bench -m $SYN -ngl 99 -fa 1 -r 1 -o jsonl ${@:3} > $RET/bench-$2.jsonl 2>/dev/null || echo "bench $2 rc=$?"
}
bench new f16 -ctk f16 -ctv f16 -d 0,16384,65536 -p 512 -n 32
for b in old host new; do
  bench $b oscar2-$b -ctk oscar2 -ctv oscar2 -d 0,16384,65536 -p 512 -n 32
done
for b in old new; do
  bench $b oscar2-$b-nowin -ctk oscar2 -ctv oscar2 -d 0,65536 -p 0 -n 32 --kv-sink 0 --kv-recent 0
done
for b in new old; do
  bench $b oscar2-$b-rep -ctk oscar2 -ctv oscar2 -d 0,65536 -p 0 -n 32
done
python3 - $RET/bench-*.jsonl <<'PY'
import json,sys
for f in sys.argv[1:]:
    for l in open(f):
        r=json.loads(l); k="pp" if r["n_prompt"] else "tg"
        print(f'  {f.split("/")[-1][6:-6]:22} depth {r["n_depth"]:>6} {k} {r["avg_ts"]:9.1f}')
PY
date +%T
for b in old new; do
  GGML_CUDA_DISABLE_GRAPHS=1 LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART timeout 100 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/k-$b.csv \
     /tmp/$b/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -p 0 -n 2 -r 1 > /dev/null 2>&1
  xz -c $OUT/k-$b.csv > $RET/k-$b.csv.xz
done
python3 scripts/ncu-kernel-table.py $OUT/k-old.csv $OUT/k-new.csv
date +%T
head -c 60000 .dB/wiki.test.raw > /tmp/w60k.txt
for b in old host new; do
  LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART timeout 45 /tmp/$b/bin/llama-perplexity -m $SYN -f /tmp/w60k.txt -c 512 --chunks 2 -b 512 -ub 8 -ctk oscar2 -ctv oscar2 -fa on -ngl 99 > $OUT/ppl-$b.log 2>&1
  echo "ppl ub8 $b: $(grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' $OUT/ppl-$b.log)"
done
date +%T
} 2>&1 | tee $RET/s16b-printed.txt
