#!/usr/bin/env bash
# The main job on the demo model, end to end:
#   1. oscar-convert SmolLM2-135M with its zoo rotations (calibrated by this project), so the GGUF
#      carries its rotations, clip ratios, centring means and precision plan;
#   2. a question over ~1400 tokens of text whose answer (a number) sits at token ~500: past the
#      64 sink tokens and more than 256 tokens before the question, so an oscar2 cache reads it
#      from the 2-bit tier, not from the 16-bit windows;
#   3. the answers with an f16 cache and with -ctk oscar2 -ctv oscar2, side by side;
#   4. the cache of the oscar2 run by tier, and the KV memory at 4096 tokens by type.
# (scripts/demo.sh runs after `make build`; make demo does both.)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
die() { echo "demo: error: $*" >&2; exit 1; }
[ -x build/bin/llama-completion ] && [ -x .venv/bin/oscar-convert ] || die "build/bin or .venv is missing: run make build first"
scripts/fetch-models.sh smollm2
BASE=models/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL=${MODEL:-models/smollm2-oscar-zoo.gguf}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -f "$MODEL" ]; then
    echo "demo: [1/4] oscar-convert $BASE --rotations zoo -o $MODEL"
    .venv/bin/oscar-convert smollm2-135m --rotations zoo -o "$MODEL"
else
    echo "demo: [1/4] $MODEL exists (made by oscar-convert smollm2-135m --rotations zoo; delete it to convert again)"
fi

# the prompt: oscar's passkey text (py/oscar/eval/passkey.py) with 40 filler paragraphs, the key after 12
KEY=${KEY:-73914}
read -r n_tok key_tok < <(.venv/bin/python - "$MODEL" "$work/prompt.txt" "$KEY" <<'EOF'
import sys
from pathlib import Path
from oscar.eval import evaluate, passkey
model, out, key = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
text = passkey.compose(key, 40, 12)
out.write_text(text)
head = Path(str(out) + ".head")
head.write_text(text[:text.index(f"The secret number is {key}")])
print(evaluate.count_tokens(model, out), evaluate.count_tokens(model, head))
EOF
)
echo "demo: [2/4] the prompt: $n_tok tokens; the secret number $KEY is at token $key_tok (16-bit windows: the first 64"
echo "      tokens and the last 256 before each query; the number is read from the 2-bit tier)"

answer() { # $1: cache type -> the continuation; the log in $work/$1.log
    build/bin/llama-completion -m "$MODEL" -ctk "$1" -ctv "$1" -fa on -c 4096 -n 12 --temp 0 -no-cnv \
        --no-display-prompt -f "$work/prompt.txt" -v 2>"$work/$1.log" | tr '\n' ' ' \
        || { tail -5 "$work/$1.log" >&2; die "llama-completion with $1 failed"; }
}
echo "demo: [3/4] \"What is the secret number mentioned in the text? The secret number is ...\" (greedy, 12 tokens)"
a16=$(answer f16)
ao2=$(answer oscar2)
printf "  %-30s %s\n" "f16 cache:" "$a16" "oscar2 cache (-ctk/-ctv oscar2):" "$ao2"
ok=0
for a in "$a16" "$ao2"; do [[ $a == *"$KEY"* ]] && ok=$((ok + 1)); done

echo "demo: [4/4] the oscar2 run's cache, by tier (llama.cpp's start-up line):"
grep -o "oscar: .*" "$work/oscar2.log" | grep "bits/value" | head -1 | sed 's/; /\n    /g; s/^/  /'
echo "demo: KV cache at 4096 tokens of context, by type (llama.cpp's own accounting):"
for t in f16 q8_0 q4_0 oscar2; do
    extra=()
    [ $t = oscar2 ] && extra=(--kv-sink 0 --kv-recent 0 --kv-plan off)
    size=$(build/bin/llama-completion -m "$BASE" -ctk $t -ctv $t -fa on -c 4096 -n 1 -no-cnv -p x -v "${extra[@]}" 2>&1 \
        | grep "llama_kv_cache: size" | head -1 | sed -E 's/.*size = +([0-9.]+ MiB).*/\1/' || true)
    printf "  %-8s %s%s\n" "$t" "$size" "$([ $t = oscar2 ] && echo "  (2-bit tier alone; the windows' pool is shown above)")"
done
echo "demo: done: $ok of 2 caches answered $KEY"
