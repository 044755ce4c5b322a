#!/usr/bin/env bash
# stop 14, call 7: the decode attention kernels in the model at depth 64k, windows on and off (ncu durations)
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/gguf-py.tar.xz WEIGHTS=q4_0 SYNTH_OSCAR=2
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
zst() { if command -v zstd >/dev/null; then zstd "$@"; else LD_LIBRARY_PATH=.dB/zbin .dB/zbin/zstd "$@"; fi; }
CUDART=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
{
date +%T
CUDA_BUILD_DIR=/tmp/old BIN_TAR=.dB/bin-series-c073838.tar.xz timeout 60 bash $S build >/dev/null
xz -dc .dB/bin-series-c073838.tar.xz > /tmp/old.tar
mkdir -p /tmp/C/bin && zst -q -d --long=28 --patch-from=/tmp/old.tar .dB/new-kvC.tar.zst -o /tmp/C.tar && tar -xf /tmp/C.tar -C /tmp/C/bin
CUDA_BUILD_DIR=/tmp/C timeout 60 bash $S synth
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar-foldv.gguf
for w in on off; do
  a=""; [ $w = off ] && a="--kv-sink 0 --kv-recent 0"
  LD_LIBRARY_PATH=/tmp/C/bin:$CUDART timeout 150 ncu --csv --metrics gpu__time_duration.sum --kernel-name regex:"oscar2_fa_partial|oscar2_fa_combine" \
     /tmp/C/bin/llama-bench -m $SYN -ngl 99 -fa 1 -p 0 -n 4 -r 1 -d 65536 -ctk oscar2 -ctv oscar2 $a > $OUT/ncu-$w.csv 2>/dev/null
  python3 - $OUT/ncu-$w.csv $w <<'PY'
import csv,sys,re,collections,io
lines=[l for l in open(sys.argv[1]) if l.startswith('"')]
d=collections.defaultdict(list)
for r in csv.DictReader(io.StringIO("".join(lines))):
    k=re.sub(r"\(.*","",r["Kernel Name"])[:40]+" "+r["Grid Size"]
    d[k].append(float(r["Metric Value"].replace(",",""))/1000)
for k,v in sorted(d.items()):
    tail=v[-36*4:] if len(v)>=144 else v
    print(f"  windows {sys.argv[2]:3} {k:60} n={len(v):6} last {len(tail)}: mean {sum(tail)/len(tail):7.2f} us")
PY
  xz -c $OUT/ncu-$w.csv > $RET/ncu-$w.csv.xz
done
date +%T
} 2>&1 | tee $RET/ncufa-printed.txt
