#!/usr/bin/env bash
# stop 16, call 3: old / new with the V rotation folded (oscar-convert --fold-v); depth 128k for
# f16 and new; llama-batched-bench batch 1/8/32 (f16, oscar2 old and new)
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/src-old.tar.xz WEIGHTS=q4_0
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
{
date +%T
CUDA_BUILD_DIR=/tmp/old BIN_TAR=.dB/bin-old.tar.xz timeout 60 bash $S build | tail -1
CUDA_BUILD_DIR=/tmp/new BIN_TAR=.dB/bin-old.tar.xz BIN_PATCH=.dB/new.tar.zst timeout 60 bash $S build | tail -1
SYNTH_OSCAR=1 CUDA_BUILD_DIR=/tmp/new timeout 60 bash $S synth | grep -v Writing | tail -1
SYNTH_OSCAR=2 CUDA_BUILD_DIR=/tmp/new timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
FOLD=/tmp/qwen3-8b-geometry-q4_0-oscar-foldv.gguf
date +%T
bench() { # build, file tag, model, arguments
  LD_LIBRARY_PATH=/tmp/$1/bin:$CUDART timeout 120 /tmp/$1/bin/llama-bench -m $3 -ngl 99 -fa 1 -r 1 -o jsonl ${@:4} > $OUT/bench-$2.jsonl 2>/dev/null || echo "bench $2 rc=$?"
}
for b in old new; do
  bench $b foldv-$b $FOLD -ctk oscar2 -ctv oscar2 -d 0,16384,65536 -p 0 -n 32
done
bench new d128k-f16 $SYN -ctk f16 -ctv f16 -d 131072 -p 512 -n 32
bench new d128k-oscar2-new $SYN -ctk oscar2 -ctv oscar2 -d 131072 -p 512 -n 32
python3 - $OUT/bench-*.jsonl <<'PY'
import json,sys
for f in sys.argv[1:]:
    for l in open(f):
        r=json.loads(l); k="pp" if r["n_prompt"] else "tg"
        print(f'  {f.split("/")[-1][6:-6]:22} depth {r["n_depth"]:>6} {k} {r["avg_ts"]:9.1f}')
PY
cat $OUT/bench-*.jsonl > $RET/bench-all.jsonl
date +%T
for v in new:f16 new:oscar2 old:oscar2; do
  b=${v%%:*}; kv=${v#*:}
  LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART timeout 150 /tmp/$b/bin/llama-batched-bench -m $SYN -ngl 99 -fa on -ctk $kv -ctv $kv -c 135168 -b 2048 -ub 512 \
      -npp 4096 -ntg 32 -npl 1,8,32 > $OUT/batched-$b-$kv.log 2>&1 || tail -3 $OUT/batched-$b-$kv.log
  echo "== batched $b $kv"; grep -E "^\|\s+[0-9]" $OUT/batched-$b-$kv.log
done
tar -C $OUT -cJf $RET/batched-logs.tar.xz $(cd $OUT && ls batched-*.log)
date +%T
} 2>&1 | tee $RET/s16c-printed.txt
