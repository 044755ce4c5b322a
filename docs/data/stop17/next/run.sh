#!/usr/bin/env bash
# Call A of two for stop 17's pending diffs (after prepare.sh; carry .dB): the series built on the
# GPU machine, then rot-group-sync, rope-rot, q-early and v-skip as incremental rebuilds, each on
# the one before; test-backend-ops on each (MUL_MAT_ROTATION also with GGML_CUDA_ROT_SYNC=1:
# every group through the barrier kernel). Returns the series' bin/ as xz parts
# (series.tar.xz.a*) and the variants' bin/ as zstd patches of it, with the test logs, in
# misc.tar: put them in .dB/ for call B (run2.sh). About 7-8 minutes.
#   run (device tool, carry [".dB"]): bash docs/data/stop17/next/run.sh
export PYTHONUNBUFFERED=1 SRC_TAR=.dB/src-series.tar.xz
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT /tmp/m
Z=$PWD/.dB/zbin
zst() { if command -v zstd >/dev/null; then zstd "$@"; else LD_LIBRARY_PATH=$Z $Z/zstd "$@"; fi; }
targets="test-backend-ops llama-bench llama-perplexity llama-batched-bench"
variants="rot-group-sync rope-rot q-early v-skip"
tests() { # variant
  CUDA_BUILD_DIR=/tmp/v-$1 timeout 90 bash $S test 2>&1 | sed "s/^/  $1 /"
  GGML_CUDA_ROT_SYNC=1 CUDA_BUILD_DIR=/tmp/v-$1 timeout 60 bash $S run test-backend-ops test -b CUDA0 -o MUL_MAT_ROTATION \
    > $OUT/test-rot-sync.log 2>&1; grep -E "tests passed|FAIL" $OUT/test-rot-sync.log | head -5 | sed "s/^/  $1 ROT_SYNC=1 /"
  mkdir -p /tmp/m/tests/$1 && cp $OUT/test-*.log /tmp/m/tests/$1/
}
{
date +%T
CUDA_BUILD_DIR=/tmp/b timeout 330 bash $S build || { tail -30 $OUT/build.log; exit 1; }
mkdir -p /tmp/v-series && cp -a /tmp/b/bin /tmp/v-series/
( tar -C /tmp/v-series/bin -cf /tmp/series.tar . && xz -T4 -6 -c /tmp/series.tar > /tmp/series.tar.xz && split -b 15M /tmp/series.tar.xz $RET/series.tar.xz. && echo "packed series: $(du -h /tmp/series.tar.xz | cut -f1)" ) &
tests series
for v in $variants; do
  tar -m -xf .dB/$v-files.tar -C build-cuda-src
  cmake --build /tmp/b -j16 --target $targets > $OUT/b-$v.log 2>&1 || { grep -m 10 -A 5 error $OUT/b-$v.log; exit 1; }
  mkdir -p /tmp/v-$v && cp -a /tmp/b/bin /tmp/v-$v/
  date +%T; tests $v
done
wait
for v in $variants; do
  tar -C /tmp/v-$v/bin -cf /tmp/$v.tar . && zst -q -9 -T0 --long=28 --patch-from=/tmp/series.tar /tmp/$v.tar -o /tmp/m/$v.tar.zst && echo "packed $v: $(du -h /tmp/m/$v.tar.zst | cut -f1)"
done
tar -C /tmp/m -cf $RET/misc.tar .
date +%T
} 2>&1 | tee $RET/run-printed.txt
