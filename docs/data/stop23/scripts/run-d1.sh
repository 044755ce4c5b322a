# Stop 23, call D1 (seconds; carry [".dP1"], right after call C on the machine it warmed):
# part 1 of the converted SmolLM2 (scripts/device-split.sh, PART_MB=48) into /tmp/sp.
mkdir -p /tmp/sp && cp .dP1/part.* .dP1/sha256 /tmp/sp/ && ls -la /tmp/sp && [ -x /tmp/b/bin/llama-perplexity ] && echo warm
