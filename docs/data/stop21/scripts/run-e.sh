# Stop 21, call E, in two device calls (the command lines that ran, laid out as a script).
# Prepare here: docs/data/stop20/next/prepare.sh with the 32 patches (llama.cpp/ clean).
# E1 (carry [".dP1"]): the 32 patches built on the GPU machine from their source tarball, tested.
# E2 (carry [".dP2"], right after E1 on the machine it warmed): the converted SmolLM2 joined from
# its parts, the perplexity check (ctx 4096, 512-token batches: the f16 expansion whose
# scratch patch 0032 moved) for oscar2 and q4_0.
if [ -d .dP1 ]; then
  export OUT2=$OUT OUT=/tmp/res CUDA_BUILD_DIR=/tmp/b; mkdir -p /tmp/res /tmp/sp; cp .dP1/part.* .dP1/sha256 /tmp/sp/
  { date +%T; SRC_TAR=.dP1/llama-src.tar.xz timeout 400 bash scripts/device-cuda.sh build test || tail -20 /tmp/res/build.log; date +%T; } 2>&1 | tee $OUT2/e-printed.txt
else
  export CUDA_BUILD_DIR=/tmp/b OUT2=$OUT OUT=/tmp/kl; mkdir -p $OUT
  { [ -x /tmp/b/bin/llama-perplexity ] || { echo cold; exit 1; }
    cp .dP2/part.* /tmp/sp/ && scripts/device-split.sh --join /tmp/sp /tmp/sp/model.gguf || exit 1
    PPL_MODEL=/tmp/sp/model.gguf PPL_TEXT=.dP2/wiki.test.raw PPL_TYPES="oscar2 q4_0" timeout 150 bash scripts/device-cuda.sh ppl; date +%T
  } 2>&1 | tee $OUT2/f-printed.txt
  cp $OUT/ppl-*.log $OUT2/ 2>/dev/null
fi
