#!/usr/bin/env bash
# stop 16, call 6: every kernel of whole decoded tokens at depth 65536, windows on and off (ncu,
# graphs off), with the depth's prompt batches skipped (--launch-skip, counted from runs at depth
# 1024 and 1536: kernels per 512-token batch). Binaries: the final series (call 1 "new").
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/src-old.tar.xz WEIGHTS=q4_0 SYNTH_OSCAR=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
{
date +%T
CUDA_BUILD_DIR=/tmp/new BIN_TAR=.dB/bin-old.tar.xz BIN_PATCH=.dB/new.tar.zst timeout 60 bash $S build | tail -1
CUDA_BUILD_DIR=/tmp/new timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
export LD_LIBRARY_PATH=/tmp/new/bin:$CUDART GGML_CUDA_DISABLE_GRAPHS=1
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv"
first_partial() { python3 - "$1" <<'PY'
import sys, importlib.util
spec = importlib.util.spec_from_file_location("t", "scripts/ncu-kernel-table.py"); t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
ks = t.read_kernels(sys.argv[1])
print(next(i for i, (k, _) in enumerate(ks) if "oscar2_fa_partial" in k))
PY
}
for w in on off; do
  a=""; [ $w = off ] && a="--kv-sink 0 --kv-recent 0"
  for d in 1024 1536; do
    timeout 90 $NCU --log-file $OUT/c-$w-$d.csv /tmp/new/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d $d -p 0 -n 1 --no-warmup -r 1 $a > /dev/null 2>&1
  done
  f1=$(first_partial $OUT/c-$w-1024.csv); f2=$(first_partial $OUT/c-$w-1536.csv)
  skip=$(( f1 + (65536 - 1024)/512*(f2 - f1) - 3000 ))
  echo "windows $w: first decode attention kernel at $f1 (depth 1024), $f2 (1536): $((f2 - f1)) kernels per batch; skip $skip at 65536"
  date +%T
  timeout 200 $NCU --launch-skip $skip --log-file $OUT/k64-$w.csv /tmp/new/bin/llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -d 65536 -p 0 -n 5 --no-warmup -r 1 $a > /dev/null 2>&1
  echo "rc=$? $(wc -l < $OUT/k64-$w.csv) lines"; date +%T
  xz -c $OUT/k64-$w.csv > $RET/k64-$w.csv.xz
  python3 scripts/ncu-kernel-table.py --skip-first-token --top 24 $OUT/k64-$w.csv
done
date +%T
} 2>&1 | tee $RET/s16g-printed.txt
