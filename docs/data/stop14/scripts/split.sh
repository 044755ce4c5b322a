#!/usr/bin/env bash
# stop 14, call 5 (nvidia-h200-x2): the final binaries (window table as entries, C) split over two GPUs
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/gguf-py.tar.xz WEIGHTS=q4_0 SYNTH_OSCAR=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
zst() { if command -v zstd >/dev/null; then zstd "$@"; else LD_LIBRARY_PATH=.dB/zbin .dB/zbin/zstd "$@"; fi; }
{
date +%T
CUDA_BUILD_DIR=/tmp/old BIN_TAR=.dB/bin-series-c073838.tar.xz timeout 60 bash $S build >/dev/null
xz -dc .dB/bin-series-c073838.tar.xz > /tmp/old.tar
mkdir -p /tmp/C/bin && zst -q -d --long=28 --patch-from=/tmp/old.tar .dB/new-kvC.tar.zst -o /tmp/C.tar && tar -xf /tmp/C.tar -C /tmp/C/bin
PPL_TEXT=.dB/wiki.test.raw CUDA_BUILD_DIR=/tmp/C timeout 400 bash $S split
cp $OUT/split-*.jsonl $RET/; xz -c $OUT/split-ppl-layer.log > $RET/split-ppl-layer.log.xz
date +%T
} 2>&1 | grep -v "Writing:" | tee $RET/split-printed.txt
