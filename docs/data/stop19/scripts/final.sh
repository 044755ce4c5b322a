# Stop 19, final call: the 28-patch series (0027 PDL, 0028 RoPE angles once per token) built
# from its own source tarball and tested; oscar-bench figures on the synthetic Qwen3-8B
# (f16, q4_0, oscar2 at depths 0 / 16k / 64k / 128k, llama-bench -r 1; q8_0 is upstream's
# path, unchanged since its figures in RESULTS); oscar2 with V's rotation folded into the
# weights (--fold-v) at depth 0 / 64k; on a two-GPU machine the split step (-sm layer).
#   prepare: scripts/device-pack.sh llama.cpp .dP1/llama-src.tar.xz
#   run (device tool, carry [".dP1"]): bash docs/data/stop19/scripts/final.sh
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res CUDA_BUILD_DIR=/tmp/b WEIGHTS=q4_0
mkdir -p $OUT
{
date +%T
SRC_TAR=.dP1/llama-src.tar.xz timeout 340 bash $S build test || { tail -30 $OUT/build.log; exit 1; }
SYNTH_OSCAR=1 TYPES="f16 q4_0 oscar2" REPS=1 timeout 200 bash $S bench
SYNTH_OSCAR=2 timeout 30 bash $S synth | grep -v Writing
echo "oscar2 with --fold-v, decode tok/s at depth 0 / 65536 (llama-bench -n 32 -r 1):" \
  $(timeout 60 bash $S run llama-bench -m /tmp/qwen3-8b-geometry-q4_0-oscar-foldv.gguf -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 \
      -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')
if [ $SECONDS -lt 470 ]; then
  SYNTH_OSCAR=1 SPLIT_TYPES="f16 oscar2" SPLIT_DEPTHS=0,65536 PPL_TEXT=.dP1/wiki.test.raw timeout $((580 - SECONDS)) bash $S split
else
  echo "final: split step not run: out of time (${SECONDS}s)"
fi
date +%T
} 2>&1 | tee $RET/final-printed.txt
tar -C $OUT -cJf $RET/final.tar.xz --exclude='*.gguf' .
