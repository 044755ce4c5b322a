#!/usr/bin/env bash
# llama-server's built-in web UI, built from llama.cpp's own source (llama.cpp/tools/ui, SvelteKit)
# with npm, into the folder that llama.cpp's scripts/ui-assets.cmake embeds into llama-server
# (BUILD/llama.cpp/tools/ui/dist; the CMake step turns every file there into a C array in ui.cpp).
#
# Usage: scripts/build-ui.sh [BUILD_DIR]     (default: build)
#
# The npm packages are the exact versions of the UI's package-lock.json (`npm ci`); their
# downloads are kept in .cache/npm (OSCAR_CACHE), so that once fetched the UI builds offline.
# Incremental: nothing runs when the UI's sources, lockfile and Node.js are those of the last build.
# Needs Node.js 20.19+ (or 22.12+) with npm; scripts/build.sh OSCAR_UI=0 builds without the UI.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${1:-build}
SRC=llama.cpp/tools/ui
WORK=$BUILD/ui-src                       # a copy of the sources, with its node_modules
DIST=$BUILD/llama.cpp/tools/ui/dist      # upstream's DIST_DIR: what the CMake step embeds
STAMP=$BUILD/ui-src.oscar-stamp
NPM_CACHE=${OSCAR_CACHE:-$ROOT/.cache}/npm

die() {
    echo "build-ui: error: $*" >&2
    echo "build-ui: to build llama-server without its web UI instead, rerun with OSCAR_UI=0 (make build OSCAR_UI=0)" >&2
    exit 1
}

[ -f "$SRC/package-lock.json" ] || die "$SRC/package-lock.json is missing: run scripts/fetch-llama.sh first"
command -v node >/dev/null && command -v npm >/dev/null \
    || die "the web UI is built with Node.js and npm, which are not installed. Install Node.js 20.19 or newer with npm (Debian 13 / Ubuntu 24.10+: apt-get install nodejs npm; older releases: a Node.js 20 or 22 package from nodejs.org)"
node_ver=$(node --version | sed 's/^v//')
major=${node_ver%%.*}; rest=${node_ver#*.}; minor=${rest%%.*}
if ! { [ "$major" -ge 23 ] || { [ "$major" = 22 ] && [ "$minor" -ge 12 ]; } || { [ "$major" = 21 ]; } \
       || { [ "$major" = 20 ] && [ "$minor" -ge 19 ]; }; }; then
    die "Node.js $node_ver is too old for the web UI's build (vite 7 needs 20.19+ or 22.12+): install a newer Node.js"
fi

# every input of the build: the UI's files (not node_modules or earlier output), Node.js and npm
want=$( (cd "$SRC" && find . -type f ! -path './node_modules/*' ! -path './dist/*' ! -path './.svelte-kit/*' \
            -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; node --version; npm --version) | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -f "$DIST/index.html" ]; then
    # upstream's CMake step rebuilds with npm when a source file is newer than index.html (as after
    # scripts/fetch-llama.sh recreated the tree); the content is the same, so the output is current
    touch "$DIST/index.html"
    echo "build-ui: web UI is up to date ($DIST)"
    exit 0
fi

echo "build-ui: building llama-server's web UI from $SRC with npm (Node.js $node_ver, npm $(npm --version))"
mkdir -p "$WORK" "$NPM_CACHE"
# refresh the copy of the sources, keeping node_modules
find "$WORK" -mindepth 1 -maxdepth 1 ! -name node_modules -exec rm -rf {} +
(cd "$SRC" && tar cf - --exclude=./node_modules --exclude=./dist --exclude=./.svelte-kit .) | tar xf - -C "$WORK"

# npm ci only when the lockfile differs from the one node_modules was installed from
if ! cmp -s "$WORK/package-lock.json" "$WORK/node_modules/.oscar-lock" 2>/dev/null; then
    echo "build-ui: npm ci (the lockfile's exact versions; downloads kept in $NPM_CACHE)"
    log=$BUILD/ui-npm-ci.log
    if ! (cd "$WORK" && npm ci --cache "$NPM_CACHE" --prefer-offline --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
        tail -20 "$log" >&2
        die "npm ci failed (log: $log). Offline, it needs the downloads of an earlier build in $NPM_CACHE; online, the npm registry"
    fi
    cp "$WORK/package-lock.json" "$WORK/node_modules/.oscar-lock"
fi

echo "build-ui: npm run build (vite; about a minute on 2 cores)"
rm -rf "$DIST.part"
mkdir -p "$(dirname "$DIST")"
log=$BUILD/ui-npm-build.log
if ! (cd "$WORK" && LLAMA_UI_OUT_DIR="$ROOT/$DIST.part" npm run build) >"$log" 2>&1; then
    tail -30 "$log" >&2
    die "npm run build failed (log: $log)"
fi
[ -f "$DIST.part/index.html" ] || die "npm run build wrote no index.html into $DIST.part (log: $log)"
rm -rf "$DIST"
mv "$DIST.part" "$DIST"
echo "$want" >"$STAMP"
echo "build-ui: web UI built: $(find "$DIST" -type f | wc -l) files, $(du -sh "$DIST" | cut -f1) in $DIST"
