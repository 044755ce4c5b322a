# Stop 24, call D (right after C, on the machine B warmed; no carry): the model table's f16 and
# oscar2 rows (oscar-bench: depths 0 / 16k / 64k / 128k, one rep) with call B's build "n" (the
# 35 patches with the offsets left with each tile) on B's synthetic Qwen3-8B (q4_0 weights, OSCAR tensors).
export OUT2=$OUT; export OUT=/tmp/bench-n WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dC/gguf-py.tar.xz CUDA_BUILD_DIR=/tmp/ab-n-k36; mkdir -p $OUT; ls /tmp/*.gguf; (date +%T; TYPES="f16 oscar2" REPS=1 timeout 280 bash scripts/device-cuda.sh bench; date +%T) 2>&1 | tee $OUT2/d-printed.txt | tail -40; tar -C $OUT -cJf $OUT2/bench.tar.xz --exclude='*.gguf' .
