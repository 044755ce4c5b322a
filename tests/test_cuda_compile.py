"""The series' CUDA files compile for the oldest and the newest architecture of `CUDA=1 make
build`'s list, without a GPU: sm_75 (Turing: the m16n8k8 and m8n8k16 fallbacks, no cp.async)
and sm_90 (Hopper: PDL, thread-block clusters, cp.async). Kernels are written and changed on
machines without a GPU and run on one only now and then; this keeps what lands compilable for
both ends (Ampere-only instructions such as mma m16n8k16 and cp.async break the sm_75 build).

Uses nvcc (CUDA 13 on this project's machines) and the compile commands of a CUDA build
configured by scripts/build-cuda-nogpu.sh (CONFIGURE_ONLY=1: cuBLAS's headers and libraries
from its PyPI wheel, a stub libcuda); scripts/cuda-arch-check.sh compiles each file. About 4
minutes on 2 cores."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from oscar.core import paths

# CUDA source files that ggml-patches/ adds or changes (headers compile with them); the script
# compiles every .cu file the series changes, these at least
CUDA_FILES = ["fattn-oscar2.cu", "rot.cu", "set-rows.cu", "cpy.cu", "rope.cu", "fattn.cu", "ggml-cuda.cu"]
ARCHS = ["75", "90"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc: the CUDA compile check needs the CUDA toolkit")
def test_series_cuda_files_compile_for_sm75_and_sm90():
    root = paths.ROOT
    build = root / "build-cuda-check"
    env = dict(os.environ, CONFIGURE_ONLY="1", BUILD_DIR=str(build))
    cfg = subprocess.run(["bash", "scripts/build-cuda-nogpu.sh"], cwd=root, env=env, capture_output=True, text=True)
    assert cfg.returncode == 0, f"CUDA configure failed:\n{cfg.stdout[-3000:]}\n{cfg.stderr[-3000:]}"

    env = {k: v for k, v in os.environ.items() if k != "FILES"}
    env["CUDA_ARCH"] = ";".join(ARCHS)
    chk = subprocess.run(["bash", "scripts/cuda-arch-check.sh", str(build)], cwd=root, env=env, capture_output=True, text=True)
    results = [line.split() for line in chk.stdout.splitlines() if line.startswith("sm_")]
    ok = {(r[0], r[1]) for r in results if r[2:] == ["ok"]}
    files = {r[1].rstrip(":") for r in results}
    want = {(f"sm_{a}", f"{f}:") for f in files | set(CUDA_FILES) for a in ARCHS}
    assert chk.returncode == 0 and ok == want, (
        f"CUDA files that did not compile: {sorted(want - ok)}\n{chk.stdout[-4000:]}\n{chk.stderr[-2000:]}")
