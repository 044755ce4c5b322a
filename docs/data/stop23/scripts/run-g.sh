# Stop 23, call G (about 4 minutes; the device tool, carry [".dB"]): batch decode at 64k per
# sequence, 1 / 2 / 4 / 8 sequences, oscar2 and f16 side by side, on the 34 patches
# (.dB/km.tar.zst, a zstd patch of .dB/bin.tar.xz; patch 0034's build).
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz CUDA_BUILD_DIR=/tmp/ga
mkdir -p $OUT
{
date +%T
BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/km.tar.zst timeout 90 bash $S build >/dev/null || exit 1
TYPES="oscar2 f16" BATCH_NPP=65536 BATCH_NPL=1,2,4,8 BATCH_PPS=1 timeout 230 bash $S batched
date +%T
} 2>&1 | tee $RET/g-printed.txt
tar -C $OUT -cJf $RET/logs.tar.xz --exclude='*.gguf' .
