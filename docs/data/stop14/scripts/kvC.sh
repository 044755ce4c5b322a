#!/usr/bin/env bash
# stop 14, call 4: kv_info entries, A (per-tile group copy) against C (entries with the tiles,
# pool rows prefetched into L2, no votes in tiles without entries); then the model table, converted path
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/gguf-py.tar.xz WEIGHTS=q4_0 SYNTH_OSCAR=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
zst() { if command -v zstd >/dev/null; then zstd "$@"; else LD_LIBRARY_PATH=.dB/zbin .dB/zbin/zstd "$@"; fi; }
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
{
date +%T
CUDA_BUILD_DIR=/tmp/old BIN_TAR=.dB/bin-series-c073838.tar.xz timeout 60 bash $S build >/dev/null
xz -dc .dB/bin-series-c073838.tar.xz > /tmp/old.tar
for v in A:new-kvinfo C:new-kvC; do
  mkdir -p /tmp/${v%%:*}/bin
  zst -q -d --long=28 --patch-from=/tmp/old.tar .dB/${v#*:}.tar.zst -o /tmp/${v%%:*}.tar && tar -xf /tmp/${v%%:*}.tar -C /tmp/${v%%:*}/bin
done
cp /tmp/C/bin/test-backend-ops /tmp/A/bin/test-backend-ops  # the same test cases for both kernels
CUDA_BUILD_DIR=/tmp/C timeout 150 bash $S test; cp $OUT/test-FLASH_ATTN_EXT.log $RET/test-FA-C.log; cp $OUT/test-fa-upstream.log $RET/test-fa-upstream-C.log
date +%T
for b in A C A C; do
  LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART /tmp/$b/bin/test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hs=128,nh=8,gqa=4,kv=(512|4096|65536|131072),nb=1,ns=1," > $OUT/perf-$b.log 2>&1
  echo "### $b" >> $RET/perf-AC.log; cat $OUT/perf-$b.log >> $RET/perf-AC.log
  echo "== perf $b"; grep FLASH_ATTN_EXT $OUT/perf-$b.log | sed -E 's/\x1b\[[0-9;]*m//g; s/,(type_K|type_V|nb|ns|hs|nh|gqa|hot_V)=[^,)]*//g; s/ +/ /g' | cut -c1-110
done
date +%T
CUDA_BUILD_DIR=/tmp/C TYPES="f16 oscar2" DEPTHS=0,16384,65536,131072 REPS=1 timeout 330 bash $S bench
cp $OUT/bench-*.jsonl $RET/; mv $RET/bench-oscar2.jsonl $RET/bench-oscar2-C.jsonl
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
LD_LIBRARY_PATH=/tmp/A/bin:$CUDART timeout 150 /tmp/A/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 0,16384,65536,131072 -p 512 -n 32 -r 1 -o jsonl > $RET/bench-oscar2-A.jsonl 2>/dev/null
python3 - $RET/bench-oscar2-A.jsonl <<'PY'
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l); k="pp" if r["n_prompt"] else "tg"
    print(f'  A oscar2 depth {r["n_depth"]:>6} {k} {r["avg_ts"]:9.1f}')
PY
date +%T
} 2>&1 | grep -v "Writing:" | tee $RET/kvC-printed.txt
