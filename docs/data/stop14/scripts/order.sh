#!/usr/bin/env bash
# stop 14, call 6: test-backend-ops with the in-order window layout of llama.cpp's cache
# (stale slots = the tokens just demoted), final kernel (C)
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/gguf-py.tar.xz
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
cp .dB/tbo/test-backend-ops /tmp/C/bin/test-backend-ops
CUDA_BUILD_DIR=/tmp/C timeout 150 bash $S test; cp $OUT/test-FLASH_ATTN_EXT.log $RET/test-FLASH_ATTN_EXT.log
for r in 1 2; do
  LD_LIBRARY_PATH=/tmp/C/bin:$CUDART /tmp/C/bin/test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "hs=128,nh=8,gqa=4,kv=(4096|65536|131072),nb=1,ns=1," > $OUT/perf.log 2>&1
  cat $OUT/perf.log >> $RET/perf-order.log
  echo "== perf round $r"; grep FLASH_ATTN_EXT $OUT/perf.log | sed -E 's/\x1b\[[0-9;]*m//g; s/,(type_K|type_V|nb|ns|hs|nh|gqa|hot_V)=[^,)]*//g; s/ +/ /g' | cut -c1-110
done
command -v nsys ncu
date +%T
} 2>&1 | tee $RET/order-printed.txt
