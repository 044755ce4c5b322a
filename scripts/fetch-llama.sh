#!/usr/bin/env bash
# Reconstitute llama.cpp/ from the pinned upstream source and our patch series.
#
# Upstream: the llama.cpp tree vendored in the llama-cpp-python 0.3.36 source
# distribution on PyPI, checked by sha256. llama.cpp/ becomes a small git repo:
# the pristine tree is the first commit (tag `upstream`), then one commit per
# patch in ggml-patches/series. Edit there, then run scripts/export-patches.sh.
#
# Usage: scripts/fetch-llama.sh [--force]
#   --force  rebuild llama.cpp/ even if it is up to date (edits there are lost)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKG=llama-cpp-python
VER=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
CACHE=${OSCAR_CACHE:-$ROOT/.cache}
SDIST=$CACHE/llama_cpp_python-$VER.tar.gz
DEST=$ROOT/llama.cpp
PATCHES=$ROOT/ggml-patches
STAMP=$DEST/.oscar-series

die() { echo "fetch-llama: error: $*" >&2; exit 1; }

series_hash() {
    (cd "$PATCHES" && cat series $(grep -v '^#' series | grep -v '^$')) | sha256sum | cut -d' ' -f1
}

force=0
[ "${1:-}" = "--force" ] && force=1

want=$(series_hash)
if [ $force = 0 ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    echo "fetch-llama: llama.cpp/ is up to date with ggml-patches/series"
    exit 0
fi
if [ $force = 0 ] && [ -d "$DEST/.git" ] && [ -n "$(git -C "$DEST" status --porcelain 2>/dev/null)" ]; then
    die "llama.cpp/ has uncommitted edits; commit them there and run scripts/export-patches.sh, or rerun with --force to discard them"
fi

mkdir -p "$CACHE"
if [ ! -f "$SDIST" ]; then
    echo "fetch-llama: downloading $PKG==$VER source distribution with pip"
    tmp=$(mktemp -d)
    if ! python3 -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
            "$PKG==$VER" -d "$tmp" >"$tmp/log" 2>&1 \
       && ! python3 -m pip download --quiet --no-deps --no-binary :all: \
            "$PKG==$VER" -d "$tmp" >"$tmp/log" 2>&1; then
        tail -5 "$tmp/log" >&2
        die "could not download $PKG==$VER from the package index (no network?). Place the file at $SDIST by hand to build offline."
    fi
    mv "$tmp"/llama_cpp_python-$VER.tar.gz "$SDIST.part"
    rm -rf "$tmp"
    mv "$SDIST.part" "$SDIST"
fi

got=$(sha256sum "$SDIST" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
    die "checksum mismatch for $SDIST: got $got, expected $SHA256. Delete the file and rerun to download it again."
fi

apply_series() { # $1: git work tree at `upstream`; applies every patch or fails
    local tree=$1 p n=0
    while IFS= read -r p || [ -n "$p" ]; do
        case "$p" in ''|'#'*) continue ;; esac
        [ -f "$PATCHES/$p" ] || { echo "fetch-llama: error: ggml-patches/series names $p, which does not exist" >&2; return 1; }
        if ! git -C "$tree" -c user.name=oscar -c user.email=oscar@localhost -c commit.gpgsign=false \
                am -q --keep-cr --committer-date-is-author-date "$PATCHES/$p" >"$tree.am.log" 2>&1; then
            cat "$tree.am.log" >&2
            echo "fetch-llama: error: patch $p does not apply to the upstream tree; llama.cpp/ was left as it was" >&2
            return 1
        fi
        n=$((n + 1))
    done < "$PATCHES/series"
    rm -f "$tree.am.log"
    echo "fetch-llama: applied $n patches"
}

# Fast path: llama.cpp/ already holds the pristine upstream commit. Apply the series
# in a scratch worktree, then move llama.cpp/ to the result: only files whose content
# changed are rewritten, so an incremental build stays incremental.
if [ $force = 0 ] && [ -d "$DEST/.git" ] && git -C "$DEST" rev-parse -q --verify upstream >/dev/null; then
    wt=$(mktemp -d "$ROOT/.llama.cpp.wt.XXXXXX")
    rmdir "$wt"
    git -C "$DEST" worktree add -q --detach "$wt" upstream
    if apply_series "$wt"; then
        new=$(git -C "$wt" rev-parse HEAD)
        git -C "$DEST" worktree remove --force "$wt"
        rm -f "$STAMP"
        git -C "$DEST" reset -q --hard "$new"
        echo "$want" > "$STAMP"
        echo "fetch-llama: llama.cpp/ updated to the series"
        exit 0
    fi
    git -C "$DEST" worktree remove --force "$wt"
    exit 1
fi

# Build the tree next to its destination, move it into place only when every patch applied.
work=$(mktemp -d "$ROOT/.llama.cpp.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "fetch-llama: unpacking vendor/llama.cpp"
tar -xzf "$SDIST" -C "$work" "llama_cpp_python-$VER/vendor/llama.cpp"
tree=$work/llama_cpp_python-$VER/vendor/llama.cpp
rm -rf "$tree/.git"  # a submodule pointer in the sdist
git_q() { git -C "$tree" -c user.name=oscar -c user.email=oscar@localhost -c commit.gpgsign=false "$@"; }
git_q init -q -b main
git_q add -A -f .
git_q commit -q -m "upstream: llama.cpp vendored in $PKG $VER"
git_q tag upstream

apply_series "$tree" || exit 1

echo "$want" > "$tree/.oscar-series"
echo ".oscar-series" >> "$tree/.git/info/exclude"
rm -rf "$DEST"
mv "$tree" "$DEST"
echo "fetch-llama: llama.cpp/ ready: upstream $PKG $VER + ggml-patches/series"
