"""scripts/build.sh: what the CPU build compiles in for this machine."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from oscar.core import paths

AMX_INSN = re.compile(r"\b(tilezero|tileloadd|tileloaddt1|tilestored|ldtilecfg|tdpbssd|tdpbsud|tdpbusd|tdpbuud|tdpbf16ps)\b")


def amx_instructions(lib: Path) -> int:
    """How many AMX tile instructions the disassembly of lib holds."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True, check=True).stdout
    return len(AMX_INSN.findall(dis))


def test_no_amx_where_the_cpu_reports_it():
    """On CPUs that report AMX (the Firecracker VMs we build and test on), upstream's AMX
    matrix products die with SIGILL, so `make build` compiles them out unless OSCAR_AMX=1."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists() or "amx_tile" not in cpuinfo.read_text().split():
        pytest.skip("this CPU does not report AMX: nothing to leave out")
    if os.environ.get("OSCAR_AMX") == "1" or shutil.which("objdump") is None:
        pytest.skip("OSCAR_AMX=1 (AMX kept on purpose) or no objdump")
    libs = sorted(paths.BUILD_BIN.glob("libggml-cpu*.so*"))
    assert libs, f"no libggml-cpu in {paths.BUILD_BIN}: run `make build` first"
    lib = max(libs, key=lambda p: p.stat().st_size)
    n = amx_instructions(lib)
    assert n == 0, f"{lib} holds {n} AMX tile instructions: scripts/build.sh should have built with -mno-amx-*"
