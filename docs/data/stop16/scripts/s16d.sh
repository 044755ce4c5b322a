#!/usr/bin/env bash
# stop 16, call 4 (nvidia-h200-x2): the new build with the model split over two GPUs (-sm layer)
# against one (-sm none): llama-bench and llama-perplexity (equal results), start-up lines
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/src-old.tar.xz WEIGHTS=q4_0 SYNTH_OSCAR=1 PPL_TEXT=.dB/wiki.test.raw
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
CUDA_BUILD_DIR=/tmp/new BIN_TAR=.dB/bin-old.tar.xz BIN_PATCH=.dB/new.tar.zst timeout 400 bash scripts/device-cuda.sh build synth split 2>&1 \
  | grep -v Writing | tee $RET/s16d-printed.txt
