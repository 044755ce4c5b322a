#!/usr/bin/env bash
# The main job on the demo model: generate text with a 2-bit (oscar2) KV cache,
# and show how much memory the cache takes by type.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
scripts/fetch-models.sh smollm2
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
PROMPT=${PROMPT:-"The three primary colors are"}
log=$(mktemp)
echo "demo: llama-completion -m $MODEL -ctk oscar2 -ctv oscar2 -fa on -c 4096 -n 64"
build/bin/llama-completion -m "$MODEL" -ctk oscar2 -ctv oscar2 -fa on -c 4096 -n 64 --temp 0 \
    -no-cnv -p "$PROMPT" 2>"$log"
echo
echo "demo: KV cache at 4096 tokens of context, by type (from llama.cpp's log):"
grep -E "llama_kv_cache: size" "$log" | sed 's/^/  /'
for t in f16 q8_0 q4_0; do
    build/bin/llama-completion -m "$MODEL" -ctk $t -ctv $t -fa on -c 4096 -n 1 -no-cnv -p "x" 2>&1 \
        | grep -E "llama_kv_cache: size" | sed 's/^/  /'
done
rm -f "$log"
