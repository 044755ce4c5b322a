#!/usr/bin/env bash
# Decode speed of KV cache types on SmolLM2-135M (docs/RESULTS.md section 3), side by side in
# one run: llama-bench decode tokens/s at depth 0 and 4096, f16 / q4_0 / oscar2 with the 16-bit
# windows, then oscar2 without them. Writes results/speed.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
M=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
REPS=${REPS:-2}
mkdir -p results
{
  for t in f16 q4_0 oscar2; do   # K = V, one run each (a list would also run the mixed pairs)
      build/bin/llama-bench -m "$M" -fa 1 -p 0 -n 32 -d 0,4096 -r $REPS -ctk $t -ctv $t -o md 2>/dev/null | grep -E "^\|" \
          | { [ $t = f16 ] && cat || grep -vE "type_k|---"; }
  done
  echo
  echo "oscar2 with the 16-bit windows off (--kv-sink 0 --kv-recent 0):"
  echo
  build/bin/llama-bench -m "$M" -fa 1 -p 0 -n 32 -d 0,4096 -r $REPS -ctk oscar2 -ctv oscar2 --kv-sink 0 --kv-recent 0 -o md 2>/dev/null | grep -E "^\|"
} > results/speed.md
cat results/speed.md
echo "results-speed: $(uname -m), $(nproc) cores, commit $(git rev-parse --short HEAD)"
