#!/usr/bin/env bash
# stop 15, call 2: old = stop 14's final (C); rot = the K/V rotation done by the oscar2 write;
# mma = rot + the oscar2 K dot on integer tensor cores (mma m16n8k32)
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/gguf-py.tar.xz WEIGHTS=q4_0 SYNTH_OSCAR=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
{
date +%T
for v in old:new-kvC rot:new-s15-rot mma:new-s15-mma; do
  CUDA_BUILD_DIR=/tmp/${v%%:*} BIN_TAR=.dB/bin-series-c073838.tar.xz BIN_PATCH=.dB/${v#*:}.tar.zst timeout 60 bash $S build | tail -1
done
cp /tmp/mma/bin/test-backend-ops /tmp/old/bin/test-backend-ops
CUDA_BUILD_DIR=/tmp/mma timeout 170 bash $S test
tar -C $OUT -cJf $RET/test-mma-logs.tar.xz $(cd $OUT && ls test-*.log)
LD_LIBRARY_PATH=/tmp/rot/bin:$CUDART /tmp/rot/bin/test-backend-ops test -b CUDA0 -o SET_ROWS -p oscar2 > $OUT/test-rot-SET_ROWS.log 2>&1; echo "rot SET_ROWS: $(grep 'tests passed' $OUT/test-rot-SET_ROWS.log)"
date +%T
for b in old mma old mma; do
  LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART /tmp/$b/bin/test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hs=128,nh=8,gqa=4,kv=(512|65536|131072),nb=1,ns=1," > $OUT/perf-$b.log 2>&1
  echo "### $b" >> $RET/perf-old-mma.log; cat $OUT/perf-$b.log >> $RET/perf-old-mma.log
  echo "== perf $b"; grep -E '^ *FLASH_ATTN_EXT' $OUT/perf-$b.log | sed -E 's/\x1b\[[0-9;]*m//g; s/,(type_K|type_V|nb|ns|hs|nh|gqa|hot_V)=[^,)]*//g; s/ +/ /g' | cut -c1-110
done
date +%T
CUDA_BUILD_DIR=/tmp/mma timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
for b in rot mma; do
  GGML_CUDA_DISABLE_GRAPHS=1 LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART timeout 100 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/k-$b.csv \
     /tmp/$b/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -p 0 -n 2 -r 1 > /dev/null 2>&1
  xz -c $OUT/k-$b.csv > $RET/k-$b.csv.xz
done
python3 scripts/ncu-kernel-table.py $OUT/k-rot.csv $OUT/k-mma.csv
date +%T
LD_LIBRARY_PATH=/tmp/mma/bin:$CUDART timeout 70 /tmp/mma/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk f16 -ctv f16 -d 0,16384,65536 -p 512 -n 32 -r 1 -o jsonl > $RET/bench-f16.jsonl 2>/dev/null
for b in old rot mma; do
  LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART timeout 80 /tmp/$b/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 0,16384,65536 -p 512 -n 32 -r 1 -o jsonl > $RET/bench-oscar2-$b.jsonl 2>/dev/null
done
python3 - $RET/bench-f16.jsonl $RET/bench-oscar2-old.jsonl $RET/bench-oscar2-rot.jsonl $RET/bench-oscar2-mma.jsonl <<'PY'
import json,sys
for f in sys.argv[1:]:
    for l in open(f):
        r=json.loads(l); k="pp" if r["n_prompt"] else "tg"
        print(f'  {f.split("/")[-1]:24} depth {r["n_depth"]:>6} {k} {r["avg_ts"]:9.1f}')
PY
date +%T
head -c 60000 .dB/wiki.test.raw > /tmp/w60k.txt
for v in mma:0 mma:1 rot:0 old:0; do
  b=${v%%:*}; fu=${v#*:}
  GGML_CUDA_DISABLE_FUSION=$fu LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART timeout 45 /tmp/$b/bin/llama-perplexity -m $SYN -f /tmp/w60k.txt -c 512 --chunks 2 -b 512 -ub 8 -ctk oscar2 -ctv oscar2 -fa on -ngl 99 > $OUT/ppl-$b-$fu.log 2>&1
  echo "ppl ub8 $b fusion_off=$fu: $(grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' $OUT/ppl-$b-$fu.log) $(tail -c 300 $OUT/ppl-$b-$fu.log | tr '\n' ' ' | cut -c1-200)"
done
date +%T
mkdir -p /tmp/bj && mv $RET/bench-*.jsonl /tmp/bj/ && tar -C /tmp/bj -cf $RET/bench-jsonl.tar .
} 2>&1 | tee $RET/s15b-printed.txt
