#!/usr/bin/env bash
# stop 17, call 1: on the H200, build base (the series at 45ca81d, from .dB/src-base.tar.xz), then
# pipe (the software-pipelined decode loop for K = V = oscar2), pipe5 (pipe with 5 cp.async
# stages), rot (pipe + the output rotation in oscar2_fa_combine: docs/data/stop16/next), each an
# incremental rebuild; test-backend-ops on base (stop 16's review commit) and on every variant;
# the attention op at 512 / 64k / 128k cells for base, pipe, pipe5; decode of the synthetic
# Qwen3-8B (converted path) at depth 0 and 64k for all four; base's bin/ back as xz parts and
# the variants as zstd patches of it
export PYTHONUNBUFFERED=1 WEIGHTS=q4_0 SYNTH_OSCAR=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT /tmp/m
Z=$PWD/.dB/zbin
zst() { if command -v zstd >/dev/null; then zstd "$@"; else LD_LIBRARY_PATH=$Z $Z/zstd "$@"; fi; }
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
targets="test-backend-ops llama-bench llama-perplexity llama-batched-bench"
tests() { # variant
  CUDA_BUILD_DIR=/tmp/v-$1 timeout 120 bash $S test 2>&1 | sed "s/^/  $1 /"
  LD_LIBRARY_PATH=/tmp/v-$1/bin:$CUDART /tmp/v-$1/bin/test-backend-ops test -b CUDA0 -o MUL_MAT_ROTATION 2>&1 | grep -E "tests passed|FAIL" | head -5 | sed "s/^/  $1 rot /"
  mkdir -p /tmp/tl/$1 && cp $OUT/test-*.log /tmp/tl/$1/
}
{
date +%T
SRC_TAR=.dB/src-base.tar.xz CUDA_BUILD_DIR=/tmp/b timeout 400 bash $S build || { tail -30 $OUT/build.log; exit 1; }
date +%T
mkdir -p /tmp/v-base && cp -a /tmp/b/bin /tmp/v-base/
( tar -C /tmp/v-base/bin -cf /tmp/base.tar . && xz -T4 -6 -c /tmp/base.tar > /tmp/base.tar.xz && split -b 15M /tmp/base.tar.xz $RET/base.tar.xz. && echo "packed base: $(du -h /tmp/base.tar.xz | cut -f1)" ) &
tests base
for v in pipe pipe5 rot; do
  tar -m -xf .dB/$v-files.tar -C build-cuda-src
  cmake --build /tmp/b -j16 --target $targets > $OUT/b-$v.log 2>&1 || { grep -m 10 -A 5 error $OUT/b-$v.log; exit 1; }
  echo "built $v: $(grep -c 'Building' $OUT/b-$v.log) objects"; date +%T
  mkdir -p /tmp/v-$v && cp -a /tmp/b/bin /tmp/v-$v/
  tests $v
done
tar -C /tmp/tl -cJf /tmp/m/test-logs.tar.xz .
date +%T
for b in base pipe pipe5 base pipe; do
  LD_LIBRARY_PATH=/tmp/v-$b/bin:$CUDART timeout 60 /tmp/v-$b/bin/test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hs=128,nh=8,gqa=4,kv=(512|65536|131072),nb=1,ns=1," > $OUT/perf-$b.log 2>&1
  echo "### $b" >> /tmp/m/perf-fa.log; cat $OUT/perf-$b.log >> /tmp/m/perf-fa.log
  echo "== perf $b"; grep -E '^ *FLASH_ATTN_EXT' $OUT/perf-$b.log | sed -E 's/\x1b\[[0-9;]*m//g; s/,(type_K|type_V|nb|ns|hs|nh|gqa|hot_V)=[^,)]*//g; s/ +/ /g' | cut -c1-110
done
date +%T
CUDA_BUILD_DIR=/tmp/v-base timeout 90 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
for b in base pipe pipe5 rot; do
  LD_LIBRARY_PATH=/tmp/v-$b/bin:$CUDART timeout 60 /tmp/v-$b/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 0,65536 -p 0 -n 32 -r 1 -o jsonl > /tmp/m/bench-$b.jsonl 2>/dev/null || echo "bench $b rc=$?"
done
python3 - /tmp/m/bench-*.jsonl <<'PY'
import json,sys
for f in sys.argv[1:]:
    for l in open(f):
        r=json.loads(l); k="pp" if r["n_prompt"] else "tg"
        print(f'  {f.split("/")[-1][6:-6]:10} depth {r["n_depth"]:>6} {k} {r["avg_ts"]:9.1f}')
PY
date +%T
wait
for v in pipe pipe5 rot; do
  tar -C /tmp/v-$v/bin -cf /tmp/$v.tar . && zst -q -9 -T0 --long=28 --patch-from=/tmp/base.tar /tmp/$v.tar -o /tmp/m/$v.tar.zst && echo "packed $v: $(du -h /tmp/m/$v.tar.zst | cut -f1)"
done
tar -C /tmp/m -cf $RET/misc.tar . && ls -la $RET
date +%T
} 2>&1 | tee $RET/s17a-printed.txt
