# Stop 23, call D2 (about 2 minutes; carry [".dP2"], right after D1): part 2 of the model and
# the evaluation text; the GPU's logits against the CPU's with 4-token batches (the decode
# kernel, patches 0033 and 0034), f16 and oscar2, with call C's build "b" (patch 0034: the K dot on integer tensor cores).
export CUDA_BUILD_DIR=/tmp/b
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/kl; mkdir -p $OUT
{
[ -x /tmp/b/bin/llama-perplexity ] || { echo cold; exit 1; }
cp .dP2/part.* /tmp/sp/ && scripts/device-split.sh --join /tmp/sp /tmp/sp/model.gguf || exit 1
date +%T
PPL_MODEL=/tmp/sp/model.gguf PPL_TEXT=.dP2/wiki.test.raw KLD_UB=4 timeout 330 bash $S kld
date +%T
} 2>&1 | tee $RET/d-printed.txt
tar -C $OUT -cJf $RET/logs.tar.xz --exclude='*.kld' --exclude='*.gguf' .
