#!/usr/bin/env bash
# Stop 17's pending diffs, ready for one device call (run.sh beside this): the series' source
# tarball and, for each diff in turn, a tarball of the files it changes (as they are with it
# and the diffs before it applied), all under .dB/ (git-ignored here through .git/info/exclude).
#   docs/data/stop17/next/prepare.sh            (from the repository root, llama.cpp/ clean)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$ROOT"
N=docs/data/stop17/next
[ -z "$(git -C llama.cpp status --short)" ] || { echo "prepare: llama.cpp/ has changes; commit or stash them first" >&2; exit 1; }
mkdir -p .dB
grep -qx '.dB/' .git/info/exclude 2>/dev/null || echo '.dB/' >> .git/info/exclude
bash scripts/device-pack.sh llama.cpp .dB/src-series.tar.xz
cd llama.cpp
for d in rot-group-sync rope-rot q-early v-skip; do
    git apply "../$N/$d.diff"
    files=$(grep '^+++ b/' "../$N/$d.diff" | sed 's#^+++ b/##')
    tar -cf "../.dB/$d-files.tar" $files
    echo "prepare: .dB/$d-files.tar:" $files
done
git checkout -q .
cd ..
if [ ! -x .dB/zbin/zstd ]; then # zstd for the GPU machine, which may lack it (the bin/ patches)
    mkdir -p .dB/zbin && cp /usr/bin/zstd .dB/zbin/ &&
        ldd /usr/bin/zstd | awk '/=> \// {print $3}' | grep -v -E 'libc\.so|libm\.so|ld-linux' | xargs -r cp -t .dB/zbin/
fi
[ -f .dB/wiki.test.raw ] || cp "$ROOT/../shared/data/wikitext-2-raw/wiki.test.raw" .dB/
