#!/usr/bin/env bash
# stop 14, call 8: the windows' cost at 64k with CUDA graphs on and off (final binaries, R_V folded)
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
CUDA_BUILD_DIR=/tmp/C timeout 60 bash $S synth >/dev/null
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar-foldv.gguf
tg() { # label, env, args
  r=$(env LD_LIBRARY_PATH=/tmp/C/bin:$CUDART $2 /tmp/C/bin/llama-bench -m $SYN -ngl 99 -fa 1 -p 0 -n 32 -r 2 -d 0,65536 -o csv $3 2>/dev/null \
      | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')
  printf "  %-36s d=0,65536 %s\n" "$1" "$r"
}
tg "windows on,  graphs on"  "GGML_CUDA_DISABLE_GRAPHS=0" "-ctk oscar2 -ctv oscar2"
tg "windows off, graphs on"  "GGML_CUDA_DISABLE_GRAPHS=0" "-ctk oscar2 -ctv oscar2 --kv-sink 0 --kv-recent 0"
tg "windows on,  graphs off" "GGML_CUDA_DISABLE_GRAPHS=1" "-ctk oscar2 -ctv oscar2"
tg "windows off, graphs off" "GGML_CUDA_DISABLE_GRAPHS=1" "-ctk oscar2 -ctv oscar2 --kv-sink 0 --kv-recent 0"
date +%T
} 2>&1 | tee $RET/graphs-printed.txt
