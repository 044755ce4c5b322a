#!/bin/bash
# GPU prefill at depth 16k: f16 against oscar2 with and without its 16-bit windows, two rounds,
# and the attention op of a 512-token batch over 16k cells (docs/RESULTS.md, "Batch 1").
# Run on the GPU machine from the repository root (scripts/device-pack.sh first); $OUT receives the logs.
cd "$(dirname "$0")/.."
CUDA_ARCH=90 scripts/device-cuda.sh build > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
SYNTH=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
PYTHONPATH=build-cuda-src/gguf-py:py python3 -m oscar.synthetic qwen3-8b -o $SYNTH --weights q4_0 --oscar > $OUT/synth.log 2>&1 || { tail $OUT/synth.log; exit 1; }
B=build-cuda/bin
export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
run() { echo "== $*"; "$B/llama-bench" -m $SYNTH -ngl 99 -fa 1 -p 512 -n 0 -r 3 "$@" -o md 2>/dev/null | grep -E "pp512"; }
for r in 1 2; do
  run -ctk f16 -ctv f16 -d 0,16384
  run -ctk oscar2 -ctv oscar2 -d 0,16384
  run -ctk oscar2 -ctv oscar2 --kv-sink 0 --kv-recent 0 -d 0,16384
done
"$B/test-backend-ops" perf -b CUDA0 -o FLASH_ATTN_EXT -p 'kv=16384,nb=512' 2>&1 | grep -E "FLASH|us/run" | head
