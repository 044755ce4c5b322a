#!/usr/bin/env bash
# stop 15, call 1: the chunks merged by the decode kernel's last block (no combine launch),
# the clip rank on 4 lanes per key, the K rotation done by the oscar2 write. Old = stop 14's final (C).
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/gguf-py.tar.xz WEIGHTS=q4_0 SYNTH_OSCAR=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
{
date +%T
CUDA_BUILD_DIR=/tmp/old BIN_TAR=.dB/bin-series-c073838.tar.xz BIN_PATCH=.dB/new-kvC.tar.zst timeout 60 bash $S build | tail -1
CUDA_BUILD_DIR=/tmp/new BIN_TAR=.dB/bin-series-c073838.tar.xz BIN_PATCH=.dB/new-s15a.tar.zst timeout 60 bash $S build | tail -1
cp /tmp/new/bin/test-backend-ops /tmp/old/bin/test-backend-ops  # the same cases for both
CUDA_BUILD_DIR=/tmp/new timeout 170 bash $S test; for f in $OUT/test-*.log; do cp $f $RET/; done
grep -E 'rot_d=[1-9].*(OK|FAIL)|rot_d=[1-9]' $OUT/test-SET_ROWS.log | sed -E 's/\x1b\[[0-9;]*m//g' | head -12
date +%T
for b in old new old new; do
  LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART /tmp/$b/bin/test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hs=128,nh=8,gqa=4,kv=(512|4096|65536|131072),nb=1,ns=1," > $OUT/perf-$b.log 2>&1
  LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART /tmp/$b/bin/test-backend-ops perf -b CUDA0 -o SET_ROWS -p "4096" >> $OUT/perf-$b.log 2>&1
  echo "### $b" >> $RET/perf-old-new.log; cat $OUT/perf-$b.log >> $RET/perf-old-new.log
  echo "== perf $b"; grep -E '^ *(FLASH_ATTN_EXT|SET_ROWS)' $OUT/perf-$b.log | sed -E 's/\x1b\[[0-9;]*m//g; s/,(type_K|type_V|nb|ns|hs|nh|gqa|hot_V)=[^,)]*//g; s/ +/ /g' | cut -c1-120
done
date +%T
CUDA_BUILD_DIR=/tmp/new timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
# per-kernel GPU time of a decoded token at depth 0 (graphs off)
for b in old new; do
  GGML_CUDA_DISABLE_GRAPHS=1 LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART timeout 100 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/k-$b.csv \
     /tmp/$b/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -p 0 -n 2 -r 1 > /dev/null 2>&1
  xz -c $OUT/k-$b.csv > $RET/k-$b.csv.xz
done
python3 scripts/ncu-kernel-table.py $OUT/k-old.csv $OUT/k-new.csv
date +%T
# the model: f16, old, new side by side
LD_LIBRARY_PATH=/tmp/new/bin:$CUDART timeout 70 /tmp/new/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk f16 -ctv f16 -d 0,16384,65536 -p 512 -n 32 -r 1 -o jsonl > $RET/bench-f16.jsonl 2>/dev/null
for b in old new; do
  LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART timeout 80 /tmp/$b/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 0,16384,65536 -p 512 -n 32 -r 1 -o jsonl > $RET/bench-oscar2-$b.jsonl 2>/dev/null
done
python3 - $RET/bench-f16.jsonl $RET/bench-oscar2-old.jsonl $RET/bench-oscar2-new.jsonl <<'PY'
import json,sys
for f in sys.argv[1:]:
    for l in open(f):
        r=json.loads(l); k="pp" if r["n_prompt"] else "tg"
        print(f'  {f.split("/")[-1]:24} depth {r["n_depth"]:>6} {k} {r["avg_ts"]:9.1f}')
PY
date +%T
# the decode path in a model: perplexity with 8-token batches, fusion on and off (same binary), old beside
for v in new:0 new:1 old:0; do
  b=${v%%:*}; fu=${v#*:}
  GGML_CUDA_DISABLE_FUSION=$fu LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART timeout 60 /tmp/$b/bin/llama-perplexity -m $SYN -f .dB/wiki.test.raw -c 1024 --chunks 2 -b 8 -ub 8 -ctk oscar2 -ctv oscar2 -fa on -ngl 99 > $OUT/ppl-$b-$fu.log 2>&1
  echo "ppl ub8 $b fusion_off=$fu: $(grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' $OUT/ppl-$b-$fu.log)"
done
date +%T
} 2>&1 | tee $RET/s15a-printed.txt
