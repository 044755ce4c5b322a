# Stop 23, call A2 (about 2 minutes; carry [".dP1"], right after A1 on the machine it warmed):
# the model table's oscar2 row (oscar-bench: depths 0 / 16k / 64k / 128k, one rep) on A1's
# build "a" (the series as committed; f16 and q4_0 take kernels patch 0033 does not touch, so
# stop 22's rows stand), then part 1 of the converted SmolLM2 (scripts/device-split.sh,
# PART_MB=48) into /tmp/sp for A3.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res2 WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz CUDA_BUILD_DIR=/tmp/a
mkdir -p $OUT /tmp/sp
{
[ -x /tmp/a/bin/llama-bench ] || { echo cold; exit 1; }
date +%T
TYPES="oscar2" REPS=1 timeout 150 bash $S bench
cp .dP1/part.* .dP1/sha256 /tmp/sp/ && ls -la /tmp/sp
date +%T
} 2>&1 | tee $RET/a2-printed.txt
tar -C $OUT -cJf $RET/bench.tar.xz --exclude='*.gguf' .
