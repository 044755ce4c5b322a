#!/usr/bin/env bash
# stop 14, call 1: kv_info as group starts + entries (cells with a slot), against c073838's binaries
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/gguf-py.tar.xz WEIGHTS=q4_0 SYNTH_OSCAR=2
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
zst() { if command -v zstd >/dev/null; then zstd "$@"; else LD_LIBRARY_PATH=.dB/zbin .dB/zbin/zstd "$@"; fi; }
{
date +%T
CUDA_BUILD_DIR=/tmp/old BIN_TAR=.dB/bin-series-c073838.tar.xz timeout 60 bash $S build
xz -dc .dB/bin-series-c073838.tar.xz > /tmp/old.tar
zst -q -d --long=28 --patch-from=/tmp/old.tar .dB/new-kvinfo.tar.zst -o /tmp/new.tar
mkdir -p /tmp/new/bin && tar -xf /tmp/new.tar -C /tmp/new/bin && ls /tmp/new/bin | wc -l
CUDA_BUILD_DIR=/tmp/new timeout 150 bash $S test; cp $OUT/test-*.log $RET/
date +%T
for b in old new; do
  /tmp/$b/bin/test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hs=128,nh=8,gqa=4,kv=(4096|65536|131072)," > $RET/perf-$b.log 2>&1
  echo "== perf $b"; grep FLASH_ATTN_EXT $RET/perf-$b.log | sed -E 's/\x1b\[[0-9;]*m//g; s/,(hot_K|hot_V|type_V|nb|ns|hs|nh|gqa)=[^,)]*//g; s/ +/ /g' | cut -c1-150
done
date +%T
CUDA_BUILD_DIR=/tmp/new timeout 60 bash $S synth
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar-foldv.gguf
export LD_LIBRARY_PATH=$(dirname $(find /usr/local /opt /usr/lib -name libcudart.so.13 2>/dev/null | head -1))
tg() { # label, build, depths, args
  r=$(LD_LIBRARY_PATH=/tmp/$2/bin:$LD_LIBRARY_PATH /tmp/$2/bin/llama-bench -m $SYN -ngl 99 -fa 1 -p 0 -n 64 -r 2 -d $3 -o csv $4 2>/dev/null \
      | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')
  printf "  %-28s d=%-20s %s\n" "$1" "$3" "$r"
}
tg "f16 new"              new 0,65536        "-ctk f16 -ctv f16"
tg "oscar2 old"           old 0,65536,131072 "-ctk oscar2 -ctv oscar2"
tg "oscar2 new"           new 0,65536,131072 "-ctk oscar2 -ctv oscar2"
tg "oscar2 new no windows" new 65536         "-ctk oscar2 -ctv oscar2 --kv-sink 0 --kv-recent 0"
tg "oscar2 old"           old 65536          "-ctk oscar2 -ctv oscar2"
tg "oscar2 new"           new 65536          "-ctk oscar2 -ctv oscar2"
date +%T
} 2>&1 | grep -v "Writing:" | tee $RET/kvinfo-printed.txt
