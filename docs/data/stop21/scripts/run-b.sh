# Stop 21, call B (the device tool, carry [".dP2"], right after call A on the machine it
# warmed): stop 20's next/run-b.sh without its ncu step (device time kept for later calls):
# the GPU's logits against the CPU's for the converted SmolLM2 with 4-token batches (the decode
# kernel), and the perplexity check at ctx 4096. This is the command line that ran,
# laid out as a script.
export CUDA_BUILD_DIR=/tmp/b WEIGHTS=q4_0 SYNTH_OSCAR=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/kl; mkdir -p $OUT
{
[ -x /tmp/b/bin/llama-perplexity ] || { echo cold; exit 1; }
cp .dP2/part.* /tmp/sp/ && scripts/device-split.sh --join /tmp/sp /tmp/sp/model.gguf || exit 1
date +%T
PPL_MODEL=/tmp/sp/model.gguf PPL_TEXT=.dP2/wiki.test.raw KLD_UB=4 timeout 330 bash $S kld
date +%T
PPL_MODEL=/tmp/sp/model.gguf PPL_TEXT=.dP2/wiki.test.raw timeout 150 bash $S ppl
date +%T
} 2>&1 | tee $RET/run-b-printed.txt
tar -C $OUT -cJf $RET/logs.tar.xz --exclude='*.kld' --exclude='*.gguf' .
