"""The lane-by-lane numpy emulators of the CUDA decode kernel's tensor-core steps
(scripts/dev/emulate_*.py) against their plain references: the fragments' layouts, the code
bit tricks, and the tensor cores' f32 rounding over a warp of several tiles. They run without a
GPU, so that a kernel change's arithmetic is checked on every CI run, not only when a GPU is lent.

The rounding check runs both forms of the P.V offsets: taken out per tile, they must pass the
bound, and kept to the end of the chunk (a loss of precision that the GPU decode tests show once
their warps take several tiles, GGML_CUDA_OSCAR2_CHUNK) they must fail it, so that the check is
known to see the fault. The kernel's form, the codes as f16 subnormals with no offsets, is held
to its bound by the script's own run (test_v_tile_mma_emulation_matches_reference)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np

from oscar.core import paths

DEV = paths.ROOT / "scripts" / "dev"


def _run(script: str, *args: str) -> str:
    r = subprocess.run([sys.executable, str(DEV / script), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_k_tile_mma_emulation_matches_cpu_dot():
    out = _run("emulate_k_tile_mma.py")
    assert out.rstrip().splitlines()[-1].startswith("ok")


def test_set_rows_oscar3_warp_quantiser_matches_cpu_bytes():
    """The CUDA oscar3 cache write's warp quantiser (oscar3_quantize_block_warp) gives the bytes of
    quantize_row_oscar3_ref (a CPU build's library, else oscar.core.quant's copy)."""
    assert _run("emulate_set_rows_oscar3.py").rstrip().splitlines()[-1].startswith("ok")


def test_k_hot_mma_emulation_matches_reference():
    assert _run("emulate_k_hot_mma.py").rstrip().endswith("ok")


def test_v_tile_mma_emulation_matches_reference():
    out = _run("emulate_v_tile_mma.py", "--trials", "1", "--tiles", "4")
    assert out.rstrip().endswith("ok")
    assert "per tile" in out


def _load_v():
    spec = importlib.util.spec_from_file_location("emulate_v_tile_mma", DEV / "emulate_v_tile_mma.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_v_offsets_kept_to_the_end_fail_the_bound():
    """The rounding model sees the fault of offsets kept to the end: 6 tiles with them exceed the
    NMSE bound that the per-tile form meets by far."""
    v = _load_v()
    cut = v.warp_tiles_nmse(np.random.default_rng(7), 64, 6, 0, ("end", "tile"))
    assert cut["tile"] < 5e-6
    assert cut["end"] > 5e-5 > 10 * cut["tile"]
    # control: with exact sums (the same tiles) both forms are right, so the 'end' form fails above
    # by its rounding alone and not by a fault of its own in the emulation
    exact = v.warp_tiles_nmse(np.random.default_rng(7), 64, 6, None, ("end", "tile"))
    assert exact["end"] < 1e-6 and exact["tile"] < 1e-6
