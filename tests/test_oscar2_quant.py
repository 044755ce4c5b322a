"""oscar2 quantisation: ggml's C reference against the numpy reference, bit for bit."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from oscar.core import quant


def c_quantize(bin_dir, tmp_path, x: np.ndarray, kind: str = "oscar2") -> tuple[np.ndarray, np.ndarray]:
    """Blocks and dequantised values from ggml (build/bin/test-oscar2 quant IN OUT KIND)."""
    src, dst = tmp_path / "x.f32", tmp_path / "q.bin"
    x.astype(np.float32).tofile(src)
    subprocess.run([str(bin_dir / "test-oscar2"), "quant", str(src), str(dst), kind], check=True)
    raw = np.fromfile(dst, dtype=np.uint8)
    block = {"oscar2": quant.BLOCK_BYTES, "oscar3": quant.OSCAR3_BLOCK_BYTES, "oscar2s": quant.OSCAR2S_BLOCK_BYTES}[kind]
    nq = x.size // quant.QK * block
    return raw[:nq].reshape(-1, block), raw[nq:].view(np.float32)


def edge_cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = 64 * 64
    half_steps = np.repeat(np.array([0, 1, 2, 3], np.float32), 16)  # codes exactly on the grid
    ties = np.tile(np.array([0.0, 0.5, 1.5, 2.5, 3.0] + [1.0] * 59, np.float32), 8)  # values on rounding ties
    return {
        "normal": rng.standard_normal(n).astype(np.float32),
        "offset": (rng.standard_normal(n) * 0.1 + 7.0).astype(np.float32),
        "outliers": np.where(rng.random(n) < 0.02, 50.0, 1.0).astype(np.float32) * rng.standard_normal(n).astype(np.float32),
        "constant": np.full(n, 0.3, np.float32),
        "constant_negative": np.full(n, -1234.5, np.float32),
        "zeros": np.zeros(n, np.float32),
        "huge": (rng.standard_normal(n) * 1e6).astype(np.float32),  # beyond f16: saturated
        "f16_edge": np.tile(np.array([65504.0, -65504.0, 65520.0, -70000.0], np.float32), n // 4),
        "tiny": (rng.standard_normal(n) * 1e-6).astype(np.float32),  # f16 subnormal steps
        "grid": np.tile(half_steps, 8),
        "ties": ties,
        "uniform": rng.uniform(-3, 3, n).astype(np.float32),
        # +0 and -0 compare equal: the first of them in a block is its minimum and maximum, as in C
        "signed_zeros": np.where(rng.random(n) < 0.5, np.float32(0.0), np.float32(-0.0)),
    }


@pytest.mark.parametrize("case", list(edge_cases(np.random.default_rng(0))))
def test_c_and_numpy_agree_bit_for_bit(bin_dir, tmp_path, case):
    x = edge_cases(np.random.default_rng(1234))[case]
    blocks_c, deq_c = c_quantize(bin_dir, tmp_path, x)
    blocks_np = quant.quantize(x)
    assert blocks_np.shape == blocks_c.shape
    mismatch = np.nonzero((blocks_np != blocks_c).any(axis=1))[0]
    assert mismatch.size == 0, f"{mismatch.size} blocks differ, first {mismatch[0]}: C {blocks_c[mismatch[0]]} numpy {blocks_np[mismatch[0]]}"
    deq_np = quant.dequantize(blocks_np)
    assert np.array_equal(deq_c.view(np.uint32), deq_np.view(np.uint32)), "dequantised values differ"


def test_error_bound_against_float():
    """Every value lands within half a step of its block's grid (plus f16 rounding of m and d)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((512, 64)) * rng.uniform(0.01, 100, (512, 1))).astype(np.float32)
    xq = quant.fake_quantize(x)
    blocks = quant.quantize(x)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float64)[:, 0]
    m = blocks[:, 2:4].copy().view(np.float16).astype(np.float64)[:, 0]
    lo, hi = x.min(axis=1).astype(np.float64), x.max(axis=1).astype(np.float64)
    bound = 0.5 * d + np.abs(m - lo) + 3 * np.abs(d - (hi - lo) / 3) + 1e-6 * np.abs(x).max(axis=1)
    err = np.abs(xq.astype(np.float64) - x).max(axis=1)
    assert np.all(err <= bound), f"worst block error {err.max()} exceeds its bound"
    # and the bound is not vacuous: the error is a good fraction of half a step
    assert np.median(err / (0.5 * d)) > 0.5


def test_codes_cover_the_range():
    x = np.linspace(-1, 2, 64, dtype=np.float32)
    c = quant.codes(quant.quantize(x))[0]
    assert c[0] == 0 and c[-1] == 3
    assert np.all(np.diff(c.astype(int)) >= 0)
    assert set(c.tolist()) == {0, 1, 2, 3}


def test_size_is_two_and_a_half_bits():
    assert quant.BLOCK_BYTES * 8 / quant.QK == 2.5
    import gguf
    bs, ts = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.OSCAR2]
    assert (bs, ts) == (quant.QK, quant.BLOCK_BYTES)
    assert int(gguf.GGMLQuantizationType.OSCAR2) == quant.GGML_TYPE_OSCAR2 == 43


# ----------------------------------------------------------------------------- oscar3

@pytest.mark.parametrize("case", list(edge_cases(np.random.default_rng(0))))
def test_oscar3_c_and_numpy_agree_bit_for_bit(bin_dir, tmp_path, case):
    x = edge_cases(np.random.default_rng(4321))[case]
    blocks_c, deq_c = c_quantize(bin_dir, tmp_path, x, "oscar3")
    blocks_np = quant.quantize_oscar3(x)
    assert blocks_np.shape == blocks_c.shape
    mismatch = np.nonzero((blocks_np != blocks_c).any(axis=1))[0]
    assert mismatch.size == 0, f"{mismatch.size} blocks differ, first {mismatch[0]}: C {blocks_c[mismatch[0]]} numpy {blocks_np[mismatch[0]]}"
    assert np.array_equal(deq_c.view(np.uint32), quant.dequantize_oscar3(blocks_np).view(np.uint32))


def test_oscar3_codes_and_error():
    """A ramp uses all eight codes in order; random blocks land within half a step of the grid,
    and the error is about 3/7 of oscar2's (the step is (max - min)/7 instead of /3)."""
    c = quant.codes_oscar3(quant.quantize_oscar3(np.linspace(-1, 2, 64, dtype=np.float32)))[0]
    assert c[0] == 0 and c[-1] == 7 and np.all(np.diff(c.astype(int)) >= 0) and set(c.tolist()) == set(range(8))
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((512, 64)) * rng.uniform(0.01, 100, (512, 1))).astype(np.float32)
    b = quant.quantize_oscar3(x)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float64)[:, 0]
    lo, hi = x.min(axis=1).astype(np.float64), x.max(axis=1).astype(np.float64)
    m = b[:, 2:4].copy().view(np.float16).astype(np.float64)[:, 0]
    err3 = np.abs(quant.fake_as(x, "oscar3").astype(np.float64) - x)
    bound = 0.5 * d + np.abs(m - lo) + 7 * np.abs(d - (hi - lo) / 7) + 1e-6 * np.abs(x).max(axis=1)
    assert np.all(err3.max(axis=1) <= bound)
    err2 = np.abs(quant.fake_quantize(x).astype(np.float64) - x)
    ratio = np.sqrt((err3 ** 2).mean() / (err2 ** 2).mean())
    assert 0.35 < ratio < 0.5, ratio


def test_oscar3_size_and_gguf_constant():
    assert quant.OSCAR3_BITS_PER_VALUE == 3.5
    import gguf
    bs, ts = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.OSCAR3]
    assert (bs, ts) == (quant.QK, quant.OSCAR3_BLOCK_BYTES)
    assert int(gguf.GGMLQuantizationType.OSCAR3) == quant.GGML_TYPE_OSCAR3 == 44


# ----------------------------------------------------------------------------- oscar2s

@pytest.mark.parametrize("case", list(edge_cases(np.random.default_rng(0))) + ["nan", "centred"])
def test_oscar2s_c_and_numpy_agree_bit_for_bit(bin_dir, tmp_path, case):
    rng = np.random.default_rng(2468)
    cases = edge_cases(rng)
    cases["nan"] = np.where(rng.random(64 * 64) < 0.05, np.nan, rng.standard_normal(64 * 64)).astype(np.float32)
    # values on the level ties of a block whose largest magnitude is 1.5 (d = 1): x + 1.5 = 0.5, 1.5, 2.5
    cases["centred"] = np.tile(np.array([1.5, -1.5, -1.0, 0.0, 1.0, 0.25] + [0.5] * 58, np.float32), 64)
    x = cases[case]
    blocks_c, deq_c = c_quantize(bin_dir, tmp_path, x, "oscar2s")
    blocks_np = quant.quantize_oscar2s(x)
    assert blocks_np.shape == blocks_c.shape == (x.size // 64, 18)
    mismatch = np.nonzero((blocks_np != blocks_c).any(axis=1))[0]
    assert mismatch.size == 0, f"{mismatch.size} blocks differ, first {mismatch[0]}: C {blocks_c[mismatch[0]]} numpy {blocks_np[mismatch[0]]}"
    assert np.array_equal(deq_c.view(np.uint32), quant.dequantize_oscar2s(blocks_np).view(np.uint32))


def test_oscar2s_levels_and_error():
    """The four levels are -3d/2, -d/2, d/2, 3d/2 with the outer ones at the block's largest
    magnitude; every value lands within half a step of the grid; on zero-mean blocks the error is
    about oscar2's, on blocks far from zero (which centring removes) it is far larger."""
    x = np.concatenate([np.linspace(-3, 3, 64), np.linspace(-1, 2, 64)]).astype(np.float32)
    v = quant.fake_as(x, "oscar2s").reshape(2, 64)
    assert sorted(set(v[0].tolist())) == [-3.0, -1.0, 1.0, 3.0]
    d1 = np.float32(np.float16(np.float32(2) / np.float32(1.5)))  # the f16 step of amax 2
    assert v[1].max() == np.float32(1.5) * d1 and v[1].min() == np.float32(-0.5) * d1  # -1 rounds to -d/2
    rng = np.random.default_rng(5)
    z = (rng.standard_normal((512, 64)) * rng.uniform(0.01, 100, (512, 1))).astype(np.float32)
    d = quant.quantize_oscar2s(z)[:, 0:2].copy().view(np.float16).astype(np.float64)[:, 0]
    err = np.abs(quant.fake_as(z, "oscar2s").astype(np.float64) - z)
    assert np.all(err.max(axis=1) <= 0.5 * d * (1 + 1e-3) + 1e-6)
    e2s = np.sqrt((err ** 2).mean())
    e2 = np.sqrt(((quant.fake_quantize(z).astype(np.float64) - z) ** 2).mean())
    assert 0.8 < e2s / e2 < 1.3, (e2s, e2)
    off = z + 10 * np.abs(z).max(axis=1, keepdims=True)
    assert np.abs(quant.fake_as(off, "oscar2s") - off).mean() > 5 * np.abs(quant.fake_quantize(off) - off).mean()


def test_oscar2s_size_and_gguf_constant():
    assert quant.OSCAR2S_BITS_PER_VALUE == 2.25
    import gguf
    bs, ts = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.OSCAR2S]
    assert (bs, ts) == (quant.QK, quant.OSCAR2S_BLOCK_BYTES)
    assert int(gguf.GGMLQuantizationType.OSCAR2S) == quant.GGML_TYPE_OSCAR2S == 45
