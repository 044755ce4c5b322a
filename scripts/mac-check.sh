#!/usr/bin/env bash
# The oscar2 Metal kernels on a Mac with Apple silicon: build, check, measure, and say what to report.
#
#   scripts/mac-check.sh [MODEL.gguf]
#
# 1. builds the fork with Metal and test-backend-ops into build-metal/ (CMake, Xcode's command-line
#    tools; no Python needed for this step);
# 2. test-backend-ops -b MTL0 for every case whose parameters name oscar2 (the cache write with and
#    without the OSCAR clip, flash attention over oscar2 K/V with and without the 16-bit windows),
#    each against the CPU backend;
# 3. the fail-safe: a deliberately broken copy of the oscar2 Metal source (GGML_METAL_OSCAR2_SOURCE)
#    must give the loud WARNING and a working run with those ops on the CPU, never a dead backend;
# 4. llama-bench with f16, q8_0 and oscar2 caches at depths 0, 8k and 32k (decode of 32 tokens),
#    on MODEL.gguf (an oscar-convert-ed model), or without one on SmolLM2-135M converted with its zoo
#    rotations (fetched with scripts/fetch-models.sh and converted with .venv/bin/oscar-convert, so
#    that needs `make build` or scripts/setup-venv.sh first);
# 5. prints a summary to paste into an issue, and keeps every log in build-metal/mac-check/.
#
# Nothing in this repository has been run on Apple hardware by the project itself: the Metal
# kernels are checked on Linux by the emulator (metal-emu/, tests/test_metal_emu.py). This script
# is how a Mac user checks the rest.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
die() { echo "mac-check: error: $*" >&2; exit 1; }
[ "$(uname -s)" = Darwin ] || die "this is for macOS with Apple silicon (uname says $(uname -s)); on Linux the Metal kernels are checked by tests/test_metal_emu.py"
[ "$(uname -m)" = arm64 ] || echo "mac-check: WARNING: $(uname -m) is not Apple silicon; the Metal backend may be missing or slow" >&2
command -v cmake >/dev/null || die "cmake is missing: brew install cmake (and xcode-select --install for the compilers)"
BUILD=build-metal
LOGS=$BUILD/mac-check
mkdir -p "$LOGS"
JOBS=${JOBS:-$(sysctl -n hw.ncpu)}

echo "mac-check: [1/4] building the fork with Metal into $BUILD/ (log: $LOGS/build.log)"
scripts/fetch-llama.sh >"$LOGS/fetch.log" 2>&1 || { tail -20 "$LOGS/fetch.log" >&2; die "scripts/fetch-llama.sh failed"; }
{ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_METAL=ON -DLLAMA_BUILD_TESTS=ON \
  && cmake --build "$BUILD" -j "$JOBS" --target test-backend-ops llama-bench llama-cli llama-completion; } >"$LOGS/build.log" 2>&1 \
    || { tail -30 "$LOGS/build.log" >&2; die "the Metal build failed (log: $LOGS/build.log)"; }
BIN=$BUILD/bin

echo "mac-check: [2/4] test-backend-ops -b MTL0 -p oscar2 (log: $LOGS/backend-ops.log)"
"$BIN/test-backend-ops" -b MTL0 -p oscar2 >"$LOGS/backend-ops.log" 2>&1
ops_rc=$?
plain=$LOGS/backend-ops.txt   # without the terminal colours test-backend-ops prints
perl -pe 's/\e\[[0-9;]*m//g' "$LOGS/backend-ops.log" >"$plain"
ops_ok=$(grep -cE "OK$" "$plain" || true)
ops_fail=$(grep -cE "FAIL$" "$plain" || true)
ops_skip=$(grep -c "not supported" "$plain" || true)
lib_warn=$(grep -m1 "WARNING.*oscar2" "$LOGS/backend-ops.log" || true)

echo "mac-check: [3/4] fail-safe: a broken oscar2 Metal source must fall back loudly (log: $LOGS/failsafe.log)"
broken=$LOGS/oscar2-broken.metal
{ echo "#error deliberately broken by scripts/mac-check.sh"; cat llama.cpp/ggml/src/ggml-metal/kernels/oscar2.metal; } >"$broken"
GGML_METAL_OSCAR2_SOURCE=$ROOT/$broken "$BIN/test-backend-ops" -b MTL0 -o SET_ROWS -p oscar2 >"$LOGS/failsafe.log" 2>&1
fs_rc=$?
if grep -q "WARNING: the oscar2 Metal library failed to compile" "$LOGS/failsafe.log" && [ $fs_rc = 0 ]; then
    failsafe="ok (WARNING printed, backend alive, oscar2 cases reported unsupported)"
else
    failsafe="FAILED (exit $fs_rc; see $LOGS/failsafe.log)"
fi

model=${1:-}
if [ -z "$model" ]; then
    model=models/smollm2-oscar-zoo.gguf
    if [ ! -f "$model" ]; then
        [ -x .venv/bin/oscar-convert ] || die "no MODEL.gguf given and .venv/bin/oscar-convert is missing: run make build (or scripts/setup-venv.sh), or pass an oscar-convert-ed GGUF"
        scripts/fetch-models.sh smollm2 >"$LOGS/fetch-models.log" 2>&1 || die "scripts/fetch-models.sh smollm2 failed (log: $LOGS/fetch-models.log)"
        .venv/bin/oscar-convert smollm2-135m --rotations zoo -o "$model" || die "oscar-convert failed"
    fi
fi
[ -f "$model" ] || die "$model does not exist"

echo "mac-check: [4/4] llama-bench on $model: f16, q8_0, oscar2 at depths 0, 8192, 32768 (log: $LOGS/bench.log)"
: >"$LOGS/bench.log"
for t in f16 q8_0 oscar2; do
    "$BIN/llama-bench" -m "$model" -ngl 99 -fa 1 -ctk "$t" -ctv "$t" -p 0 -n 32 -d 0,8192,32768 -r 3 -o md \
        >>"$LOGS/bench.log" 2>"$LOGS/bench-$t.err" || echo "mac-check: llama-bench with $t failed (see $LOGS/bench-$t.err)" >&2
    grep -h "WARNING" "$LOGS/bench-$t.err" | sort -u >>"$LOGS/bench-warnings.log"
done

echo
echo "================ mac-check: what to report ================"
echo "machine:      $(sysctl -n machdep.cpu.brand_string 2>/dev/null), $(sysctl -n hw.memsize | awk '{printf "%.0f GiB", $1/2^30}'), macOS $(sw_vers -productVersion 2>/dev/null)"
echo "commit:       $(git rev-parse --short HEAD 2>/dev/null)"
echo "backend ops:  $ops_ok OK, $ops_fail FAIL, $ops_skip not supported (exit $ops_rc)"
[ -n "$lib_warn" ] && echo "library:      $lib_warn"
echo "fail-safe:    $failsafe"
echo "warnings while benchmarking:"; sed 's/^/  /' "$LOGS/bench-warnings.log"
echo "decode (tokens/s; columns: model, size, params, backend, ngl, type_k, type_v, fa, test, t/s):"
grep -E "^\| .*tg32" "$LOGS/bench.log" | sed 's/^/  /'
echo "logs:         $LOGS/ (attach backend-ops.log and bench.log)"
[ "$ops_fail" = 0 ] && [ $ops_rc = 0 ] && [[ $failsafe == ok* ]]
