# Stop 24, call C (right after B and C0 on the machine they warmed; carry [".dP2"]): part 2 of
# the converted SmolLM2 (C0 copied part 1), then the GPU's logits against the CPU's with
# 4-token batches (the decode kernel), oscar2, ctx 1024, 16 chunks: call B's builds "a" (the
# 35 patches) and "n" (with the fix), each with the grid's chunks (one tile per warp on
# SmolLM2's 3 KV heads) and with GGML_CUDA_OSCAR2_CHUNK=1024 (one chunk of 8 tiles per warp,
# the path that a model at depth takes).
RET=$OUT
export OUT=/tmp/kl; mkdir -p $OUT
{
cp .dP2/part.* /tmp/sp/ && scripts/device-split.sh --join /tmp/sp /tmp/sp/model.gguf || exit 1
date +%T
a=(-m /tmp/sp/model.gguf -f .dP2/wiki.test.raw -c 1024 --chunks 16 -b 1024 -ub 4 -fa on -ctk oscar2 -ctv oscar2)
CUDA_VISIBLE_DEVICES= CUDA_BUILD_DIR=/tmp/ab-n-k36 bash scripts/device-cuda.sh run llama-perplexity "${a[@]}" -ngl 0 -t 16 \
    --kl-divergence-base $OUT/cpu.kld > $OUT/kld-cpu.log 2>&1
date +%T
for b in a:k35 n:k36; do for chunk in 0 1024; do
    GGML_CUDA_OSCAR2_CHUNK=$chunk CUDA_BUILD_DIR=/tmp/ab-${b%%:*}-${b#*:} bash scripts/device-cuda.sh run llama-perplexity "${a[@]}" -ngl 99 \
        --kl-divergence-base $OUT/cpu.kld --kl-divergence > $OUT/kld-${b%%:*}-$chunk.log 2>&1
    printf "%s chunk %-5s %s | %s | %s | %s\n" ${b%%:*} $chunk \
        "$(grep -m1 -o 'Mean ln(PPL(Q)/PPL(base)).*' $OUT/kld-${b%%:*}-$chunk.log | sed 's/  */ /g')" \
        "$(grep -m1 -o 'Mean    KLD:.*' $OUT/kld-${b%%:*}-$chunk.log | sed 's/  */ /g')" \
        "$(grep -m1 -o 'Same top p:.*' $OUT/kld-${b%%:*}-$chunk.log | sed 's/  */ /g')" \
        "$(grep -m1 -o 'Mean PPL(Q)  *:.*' $OUT/kld-${b%%:*}-$chunk.log | sed 's/  */ /g')"
done; done
date +%T
} 2>&1 | tee $RET/c-printed.txt
rm -f $OUT/cpu.kld
tar -C $OUT -cJf $RET/logs.tar.xz --exclude='*.kld' --exclude='*.gguf' .
