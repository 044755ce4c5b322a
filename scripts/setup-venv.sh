#!/usr/bin/env bash
# Python environment .venv/: the oscar package (editable), our fork's gguf-py, and
# llama-cpp-python 0.3.36 built from the same checked source distribution without
# its own llama.cpp (it loads build/bin/libllama.so through LLAMA_CPP_LIB_PATH).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VENV=.venv
SDIST=${OSCAR_CACHE:-$ROOT/.cache}/llama_cpp_python-0.3.36.tar.gz
STAMP=$VENV/.oscar-venv
want=$(cat pyproject.toml scripts/setup-venv.sh | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    exit 0
fi
[ -f "$SDIST" ] || scripts/fetch-llama.sh
echo "setup-venv: creating $VENV"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" -e llama.cpp/gguf-py
CMAKE_ARGS="-DLLAMA_BUILD=OFF" "${pip[@]}" "$SDIST"
"${pip[@]}" -e ".[test,calib]"
echo "$want" > "$STAMP"
echo "setup-venv: ready ($("$VENV/bin/python" --version))"
