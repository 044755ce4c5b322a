# Next stop, first call (prepared in stop 24, not run; about 9 minutes; the device tool, carry
# [".dC"]): the final figures of the 36 patches, which stop 24 measured only in parts (its
# model table is of the P.V fix before patch 0036; 0036 was timed against it in the op,
# decode at 0 / 64k and 8 x 64k only). .dC/k38.tar.zst is the 36 patches as committed in stop
# 24 (a zstd patch of .dC/bin.tar.xz, built here with scripts/build-cuda-nogpu.sh's directory;
# if .dC is gone, rebuild and pack as in docs/data/stop22/scripts/run-a.sh's header).
# 1. the whole test step (the jump cases and the chunk knob included);
# 2. the model table, f16 / q4_0 / oscar2 at depths 0 / 16k / 64k / 128k, two reps;
# 3. batch decode at 64k per sequence, 1 / 2 / 4 / 8 sequences, oscar2 and f16.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dC/gguf-py.tar.xz CUDA_BUILD_DIR=/tmp/final
mkdir -p $OUT
{
date +%T
BIN_TAR=.dC/bin.tar.xz BIN_PATCH=.dC/k38.tar.zst timeout 90 bash $S build >/dev/null || exit 1
timeout 150 bash $S test
TYPES="f16 q4_0 oscar2" REPS=2 timeout 240 bash $S bench
TYPES="oscar2 f16" BATCH_NPP=65536 BATCH_NPL=1,2,4,8 BATCH_PPS=1 timeout 200 bash $S batched
date +%T
} 2>&1 | tee $RET/next-a-printed.txt
tar -C $OUT -cJf $RET/logs.tar.xz --exclude='*.gguf' .
