#!/usr/bin/env bash
# The system packages that `make test` needs beyond a compiler and Python: the aarch64 cross
# toolchain and qemu-user (the NEON kernels are cross-built and run under emulation), cmake,
# ninja and ccache; Node.js and npm (the build of llama-server's web UI), Chromium and its
# WebDriver (the web UI's test drives the page in headless Chromium); bubblewrap (the sandbox that
# runs generated code in oscar-eval humaneval and its tests). Installs the missing ones
# with apt-get where it can (as root, or with passwordless sudo); otherwise names them and stops.
set -euo pipefail
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v ccache >/dev/null || need+=(ccache)
command -v npm >/dev/null || need+=(nodejs npm)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
command -v clang++ >/dev/null || need+=(clang)   # the Metal emulator (tests/test_metal_emu.py)
command -v bwrap >/dev/null || need+=(bubblewrap)  # oscar.eval.sandbox (tests/test_sandbox.py, test_humaneval.py)
command -v setpriv >/dev/null || need+=(util-linux)  # oscar.eval.sandbox drops root with it
[ ${#need[@]} -eq 0 ] && exit 0
sudo=()
[ "$(id -u)" = 0 ] || { command -v sudo >/dev/null && sudo -n true 2>/dev/null && sudo=(sudo -n); }
if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || [ ${#sudo[@]} -gt 0 ]; }; then
    echo "test-deps: installing ${need[*]}"
    "${sudo[@]}" apt-get update -qq
    if DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null; then
        exit 0
    fi
fi
echo "test-deps: error: the tests need these packages, which could not be installed here: ${need[*]}" >&2
echo "test-deps: install them (Debian/Ubuntu: sudo apt-get install ${need[*]}) and run make test again" >&2
exit 1
