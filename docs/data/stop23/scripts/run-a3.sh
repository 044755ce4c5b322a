# Stop 23, call A3 (about 2 minutes; carry [".dP2"], right after A2): part 2 of the model and
# the evaluation text; the GPU's logits against the CPU's with 4-token batches (the decode
# kernel, patch 0033's P.V), f16 and oscar2, with call A1's build "a" (the series as committed).
export CUDA_BUILD_DIR=/tmp/a
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/kl; mkdir -p $OUT
{
[ -x /tmp/a/bin/llama-perplexity ] || { echo cold; exit 1; }
cp .dP2/part.* /tmp/sp/ && scripts/device-split.sh --join /tmp/sp /tmp/sp/model.gguf || exit 1
date +%T
PPL_MODEL=/tmp/sp/model.gguf PPL_TEXT=.dP2/wiki.test.raw KLD_UB=4 timeout 330 bash $S kld
date +%T
} 2>&1 | tee $RET/a3-printed.txt
tar -C $OUT -cJf $RET/logs.tar.xz --exclude='*.kld' --exclude='*.gguf' .
