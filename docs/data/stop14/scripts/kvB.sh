#!/usr/bin/env bash
# stop 14, call 3: kv_info entries prefetched with the tiles (B) against fetched per tile (A)
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
for v in A:new-kvinfo B:new-kvB; do
  mkdir -p /tmp/${v%%:*}/bin
  zst -q -d --long=28 --patch-from=/tmp/old.tar .dB/${v#*:}.tar.zst -o /tmp/${v%%:*}.tar && tar -xf /tmp/${v%%:*}.tar -C /tmp/${v%%:*}/bin
done
cp /tmp/B/bin/test-backend-ops /tmp/A/bin/test-backend-ops  # B's test cases, A's kernel
CUDA_BUILD_DIR=/tmp/B timeout 150 bash $S test; cp $OUT/test-FLASH_ATTN_EXT.log $RET/test-FA-B.log
date +%T
for b in A B A B; do
  LD_LIBRARY_PATH=/tmp/$b/bin:$CUDART /tmp/$b/bin/test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hs=128,nh=8,gqa=4,kv=(65536|131072),nb=1,ns=1," > $OUT/perf-$b.log 2>&1
  cat $OUT/perf-$b.log >> $RET/perf-AB.log
  echo "== perf $b"; grep FLASH_ATTN_EXT $OUT/perf-$b.log | sed -E 's/\x1b\[[0-9;]*m//g; s/,(type_K|type_V|nb|ns|hs|nh|gqa)=[^,)]*//g; s/ +/ /g' | cut -c1-140
done
date +%T
CUDA_BUILD_DIR=/tmp/B timeout 60 bash $S synth
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar-foldv.gguf
tg() { # label, build, depths, args
  r=$(LD_LIBRARY_PATH=/tmp/$2/bin:$CUDART /tmp/$2/bin/llama-bench -m $SYN -ngl 99 -fa 1 -p 0 -n 64 -r 2 -d $3 -o csv $4 2>/dev/null \
      | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')
  printf "  %-28s d=%-20s %s\n" "$1" "$3" "$r"
}
tg "oscar2 A"               A 65536,131072 "-ctk oscar2 -ctv oscar2"
tg "oscar2 B"               B 65536,131072 "-ctk oscar2 -ctv oscar2"
tg "oscar2 B no windows"    B 65536        "-ctk oscar2 -ctv oscar2 --kv-sink 0 --kv-recent 0"
tg "oscar2 A"               A 65536        "-ctk oscar2 -ctv oscar2"
tg "oscar2 B"               B 65536        "-ctk oscar2 -ctv oscar2"
date +%T
} 2>&1 | grep -v "Writing:" | tee $RET/kvB-printed.txt
