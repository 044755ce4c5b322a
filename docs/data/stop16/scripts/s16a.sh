#!/usr/bin/env bash
# stop 16, call 1: on the H200, build the series as it was (old), then with the host-side window
# changes (host: patches 0004/0005), then with the grouped launches (new: rotations, K+V writes);
# test-backend-ops on new; the three bin/ directories back (old as xz parts, host and new as zstd
# patches of old) for the next calls
export PYTHONUNBUFFERED=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res; mkdir -p $OUT
Z=$PWD/.dB/zbin
zst() { if command -v zstd >/dev/null; then zstd "$@"; else LD_LIBRARY_PATH=$Z $Z/zstd "$@"; fi; }
targets="test-backend-ops llama-bench llama-perplexity llama-batched-bench"
{
date +%T
SRC_TAR=.dB/src-old.tar.xz CUDA_BUILD_DIR=/tmp/b timeout 420 bash $S build || { tail -30 $OUT/build.log; exit 1; }
date +%T
cp -a /tmp/b/bin /tmp/v-old
( tar -C /tmp/v-old -cf /tmp/old.tar . && xz -T8 -6 -c /tmp/old.tar > /tmp/old.tar.xz && split -b 15M /tmp/old.tar.xz $RET/old.tar.xz. && echo "packed old: $(du -h /tmp/old.tar.xz | cut -f1)" ) &
for v in host new; do
  tar -m -xf .dB/$v-files.tar -C build-cuda-src
  cmake --build /tmp/b -j16 --target $targets > $OUT/b-$v.log 2>&1 || { grep -m 10 -A 5 error $OUT/b-$v.log; exit 1; }
  echo "built $v: $(grep -c 'Building' $OUT/b-$v.log) objects"; date +%T
  cp -a /tmp/b/bin /tmp/v-$v
done
CUDA_BUILD_DIR=/tmp/b timeout 150 bash $S test
"/tmp/b/bin/test-backend-ops" test -b CUDA0 -o MUL_MAT_ROTATION > $OUT/test-MUL_MAT_ROTATION.log 2>&1; grep -E "tests passed|FAIL" $OUT/test-MUL_MAT_ROTATION.log | head
tar -C $OUT -cJf $RET/test-logs.tar.xz $(cd $OUT && ls test-*.log)
wait
for v in host new; do
  tar -C /tmp/v-$v -cf /tmp/$v.tar . && zst -q -9 -T0 --long=28 --patch-from=/tmp/old.tar /tmp/$v.tar -o $RET/$v.tar.zst && echo "packed $v: $(du -h $RET/$v.tar.zst | cut -f1)"
done
date +%T
} 2>&1 | tee $RET/s16a-printed.txt
