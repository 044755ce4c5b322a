# Stop 25, call C (the device tool, carry [".dC"], about 9 minutes): the final figures of the 37
# patches (.dC/k40.tar.zst: stop 24's build of next/subnormal-codes.diff, which is patch 0037 less
# a comment; its whole test step passed in call A).
# 1. the model table, f16 / q4_0 / oscar2 at depths 0 / 16k / 64k / 128k, two reps (R_V stored,
#    SYNTH_OSCAR=1, as in every stop's table);
# 2. oscar2 on the same weights with R_V folded (SYNTH_OSCAR=2, oscar-convert --fold-v), depths
#    0 / 64k / 128k, two reps;
# 3. batch decode at 64k per sequence, 1 / 2 / 4 / 8 sequences, oscar2 and f16.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SRC_TAR=.dC/gguf-py.tar.xz CUDA_BUILD_DIR=/tmp/final
mkdir -p $OUT/foldv
{
date +%T
BIN_TAR=.dC/bin.tar.xz BIN_PATCH=.dC/k40.tar.zst timeout 90 bash $S build >/dev/null || exit 1
SYNTH_OSCAR=1 TYPES="f16 q4_0 oscar2" REPS=2 timeout 250 bash $S bench
OUT=/tmp/res/foldv SYNTH_OSCAR=2 TYPES="oscar2" DEPTHS=0,65536,131072 REPS=2 timeout 120 bash $S bench
SYNTH_OSCAR=1 TYPES="oscar2 f16" BATCH_NPP=65536 BATCH_NPL=1,2,4,8 BATCH_PPS=1 timeout 200 bash $S batched
date +%T
} 2>&1 | tee $RET/call-c-printed.txt
tar -C $OUT -cJf $RET/logs.tar.xz --exclude='*.gguf' .
