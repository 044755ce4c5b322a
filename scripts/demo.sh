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
trap 'rm -f "$log"' EXIT
echo "demo: llama-completion -m $MODEL -ctk oscar2 -ctv oscar2 -fa on -c 4096 -n 64 --temp 0"
echo
build/bin/llama-completion -m "$MODEL" -ctk oscar2 -ctv oscar2 -fa on -c 4096 -n 64 --temp 0 \
    -no-cnv -p "$PROMPT" -v 2>"$log"
echo
echo
echo "demo: the cache of that run:"
grep -o "oscar: .*" "$log" | grep "bits/value" | head -1 | sed 's/^/  /'
echo "demo: KV cache at 4096 tokens of context, by type (llama.cpp's own accounting):"
for t in f16 q8_0 q4_0 oscar2; do
    extra=()
    [ $t = oscar2 ] && extra=(--kv-sink 0 --kv-recent 0)
    size=$(build/bin/llama-completion -m "$MODEL" -ctk $t -ctv $t -fa on -c 4096 -n 1 -no-cnv -p x -v "${extra[@]}" 2>&1 \
        | grep "llama_kv_cache: size" | head -1 | sed -E 's/.*size = +([0-9.]+ MiB).*/\1/' || true)
    printf "  %-8s %s%s\n" "$t" "$size" "$([ $t = oscar2 ] && echo "  (2-bit tier; the 16-bit windows add the pool shown above)")"
done
