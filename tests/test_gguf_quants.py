"""gguf-py reads OSCAR's KV-cache types: gguf.quants dequantises (and quantises) oscar2,
oscar3 and oscar2s exactly as ggml's C reference in build/bin/libggml-base.so does, bit for bit,
and a GGUF file holding such a tensor is read back by gguf's own reader."""
from __future__ import annotations

import ctypes
import shutil

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

from oscar.core import paths, quant

GGML_BASE = paths.BUILD_BIN / "libggml-base.so"

# name: (gguf type, block bytes, the numpy twin's dequantiser)
TYPES = {
    "oscar2": (T.OSCAR2, quant.BLOCK_BYTES, quant.dequantize),
    "oscar3": (T.OSCAR3, quant.OSCAR3_BLOCK_BYTES, quant.dequantize_oscar3),
    "oscar2s": (T.OSCAR2S, quant.OSCAR2S_BLOCK_BYTES, quant.dequantize_oscar2s),
}
ROW = 256  # four blocks a row, so that gguf's row handling is part of what is checked


class CRef:
    """ggml's quantize_row_<type>_ref and dequantize_row_<type> through ctypes."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        for name in TYPES:
            for fn in (f"quantize_row_{name}_ref", f"dequantize_row_{name}"):
                f = getattr(lib, fn)
                f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
                f.restype = None

    def quantize(self, name: str, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        out = np.zeros((x.size // quant.QK, TYPES[name][1]), np.uint8)
        getattr(self.lib, f"quantize_row_{name}_ref")(x.ctypes.data, out.ctypes.data, x.size)
        return out

    def dequantize(self, name: str, blocks: np.ndarray) -> np.ndarray:
        blocks = np.ascontiguousarray(blocks, np.uint8)
        n = blocks.size // TYPES[name][1] * quant.QK
        out = np.zeros(n, np.float32)
        getattr(self.lib, f"dequantize_row_{name}")(blocks.ctypes.data, out.ctypes.data, n)
        return out


@pytest.fixture(scope="module")
def c_ref(tmp_path_factory) -> CRef:
    if not GGML_BASE.exists():
        pytest.fail(f"{GGML_BASE} is missing: run `make build` first")
    lib_path = tmp_path_factory.mktemp("ggml") / "libggml-base.so"  # a copy: a rebuild meanwhile does not touch it
    shutil.copy(GGML_BASE.resolve(), lib_path)
    return CRef(ctypes.CDLL(str(lib_path)))


def test_gguf_has_the_oscar_types() -> None:
    """The gguf package under test registers the three types (else every other test here fails on
    NotImplementedError: the diff to gguf-py/gguf/quants.py is not in the gguf that is imported)."""
    for name, (qtype, block_bytes, _) in TYPES.items():
        assert gguf.GGML_QUANT_SIZES[qtype] == (quant.QK, block_bytes), name
        assert qtype in gguf.quants._type_traits, f"{gguf.__file__} cannot (de)quantise {name}"


def data(seed: int) -> np.ndarray:
    """[rows, 256] float32 whose blocks of 64 reach every branch of the quantisers: scales from f16
    subnormal steps to beyond the f16 range, values on the grid and on rounding ties, NaN (single
    and a whole block), infinities, constants, zeros of both signs."""
    rng = np.random.default_rng(seed)
    blocks = [
        rng.uniform(-1, 1, (96, 64)) * 10.0 ** rng.uniform(-7, 5.5, (96, 1)),
        rng.standard_normal((64, 64)) + rng.uniform(-20, 20, (64, 1)),
        np.round(rng.uniform(-1, 1, (32, 64)) * 14) / 4,                      # ties for oscar2/oscar3
        rng.integers(0, 8, (16, 64)) * 0.125 - 0.5,                           # on the grid
        np.tile(np.array([1.5, -1.5, -1.0, 0.0, 1.0, 0.25] + [0.5] * 58), (8, 1)),  # oscar2s ties
        np.full((4, 64), 0.25), np.full((4, 64), -1234.5), np.zeros((4, 64)),
        np.tile(np.array([65504.0, -65504.0, 65520.0, -70000.0]), (4, 16)),
        np.where(rng.random((16, 64)) < 0.5, -0.0, 0.0),                    # zeros of both signs
    ]
    x = np.concatenate(blocks).astype(np.float32)
    x[0, 5] = np.nan
    x[1, :] = np.nan
    x[2, 7], x[3, 9] = np.inf, -np.inf
    x[4, 11] = 1e6
    x[5, 0:32] = np.nan
    x[-8:-4, rng.integers(0, 64, 3)] = 0.25                                    # and a few values
    x[-1, :] = 0.0
    x[-1, 3] = -0.0  # C keeps the first of equal minima/maxima: here +0, in the next block -0
    x[-2, :] = -0.0
    x[-2, 10] = 0.0
    x[-3, ::2] = -0.0
    x[-3, 1::2] = 0.25
    return x.reshape(-1, ROW)


@pytest.mark.parametrize("name", list(TYPES))
def test_dequantize_matches_the_c_reference(c_ref, name) -> None:
    """gguf.quants.dequantize of blocks that the C quantiser wrote gives, bit for bit in f32, the C
    dequantize_row_<type> values and the numpy twin's (py/oscar/core/quant.py)."""
    qtype, block_bytes, twin = TYPES[name]
    x = data(seed=1)
    blocks = c_ref.quantize(name, x)
    rows = blocks.reshape(x.shape[0], -1)
    assert rows.shape[1] == ROW // quant.QK * block_bytes

    got = dequantize(rows, qtype)
    assert got.dtype == np.float32 and got.shape == x.shape
    ref = c_ref.dequantize(name, blocks).reshape(x.shape)
    assert not np.isnan(ref).any()
    bad = np.flatnonzero((got.view(np.uint32) != ref.view(np.uint32)).any(axis=1))
    assert bad.size == 0, f"{bad.size} rows differ from C, first {bad[0]}: {got[bad[0]][:8]} vs {ref[bad[0]][:8]}"
    assert np.array_equal(got.view(np.uint32), twin(blocks).reshape(x.shape).view(np.uint32))
    # and the values are a quantisation of x, not something unrelated
    fin = np.isfinite(x) & (np.abs(x) < 1e3)
    assert np.median(np.abs(got - x)[fin]) < 0.5


def random_blocks(rng: np.random.Generator, n: int, block_bytes: int, n_halves: int) -> np.ndarray:
    """n blocks of random bytes whose leading f16 fields (d, and m where there is one) are finite:
    every code pattern, negative and subnormal steps."""
    b = rng.integers(0, 256, (n, block_bytes), dtype=np.uint8)
    h = b[:, : 2 * n_halves].copy().view(np.uint16)
    h = np.where((h & 0x7C00) == 0x7C00, h ^ 0x4000, h).astype(np.uint16)  # no inf/NaN
    b[:, : 2 * n_halves] = h.view(np.uint8)
    return b


@pytest.mark.parametrize("name", list(TYPES))
def test_dequantize_arbitrary_blocks_matches_the_c_reference(c_ref, name) -> None:
    qtype, block_bytes, twin = TYPES[name]
    blocks = random_blocks(np.random.default_rng(3), 4096, block_bytes, 1 if name == "oscar2s" else 2)
    got = dequantize(blocks.reshape(-1, 4 * block_bytes), qtype)
    assert got.shape == (1024, 256)
    ref = c_ref.dequantize(name, blocks)
    assert np.array_equal(got.reshape(-1).view(np.uint32), ref.view(np.uint32))
    assert np.array_equal(got.reshape(-1).view(np.uint32), twin(blocks).view(np.uint32))


@pytest.mark.parametrize("name", list(TYPES))
def test_quantize_matches_the_c_reference(c_ref, name) -> None:
    """gguf.quants.quantize writes the C quantiser's bytes."""
    qtype, block_bytes, _ = TYPES[name]
    for seed in (1, 2):
        x = data(seed)
        got = quantize(x, qtype)
        assert got.dtype == np.uint8 and got.shape == (x.shape[0], ROW // quant.QK * block_bytes)
        ref = c_ref.quantize(name, x)
        got = got.reshape(-1, block_bytes)
        bad = np.flatnonzero((got != ref).any(axis=1))
        assert bad.size == 0, f"seed {seed}: {bad.size} blocks differ, first {bad[0]}: {got[bad[0]]} vs C {ref[bad[0]]}"


def le16(v: float) -> list[int]:
    return list(np.array([v], np.float16).view(np.uint8))


def test_layout_by_hand() -> None:
    """Blocks written by hand from ggml-common.h's description (not by any quantiser): element
    j + 16k has its code in bits 2k..2k+1 of qs[j]; oscar3's third bit of element e is bit e of the
    little-endian qh; oscar2s has no m and levels d*(q - 3/2)."""
    e = np.arange(64)
    q2 = (e * 7 + e // 16) % 4                    # a code pattern that differs across j and k
    qs = np.zeros(16, np.uint8)
    for i in range(64):
        qs[i % 16] |= q2[i] << (2 * (i // 16))
    blk = np.array(le16(0.5) + le16(-1.0) + list(qs), np.uint8)[None]
    assert np.array_equal(dequantize(blk, T.OSCAR2)[0], (-1.0 + 0.5 * q2).astype(np.float32))

    hi = (e % 3 == 0) | (e == 63)
    qh = np.packbits(hi.astype(np.uint8), bitorder="little")
    assert qh[7] >> 7 == 1                         # element 63 is the top bit of the last byte
    blk3 = np.array(le16(0.25) + le16(2.0) + list(qs) + list(qh), np.uint8)[None]
    assert np.array_equal(dequantize(blk3, T.OSCAR3)[0], (2.0 + 0.25 * (q2 + 4 * hi)).astype(np.float32))

    blks = np.array(le16(2.0) + list(qs), np.uint8)[None]
    assert np.array_equal(dequantize(blks, T.OSCAR2S)[0], (2.0 * (q2 - 1.5)).astype(np.float32))


@pytest.mark.parametrize("name", list(TYPES))
def test_a_corrupted_byte_changes_the_values(c_ref, name) -> None:
    """The checks above can fail: one flipped bit of qs changes exactly the four elements that
    byte codes (C and gguf agree on which), one of d changes the whole block and nothing else."""
    qtype, block_bytes, _ = TYPES[name]
    x = data(seed=4)
    blocks = c_ref.quantize(name, x)
    base = dequantize(blocks.reshape(x.shape[0], -1), qtype).reshape(-1, 64)

    j, blk = 5, 10
    off = block_bytes - 16 - (8 if name == "oscar3" else 0)  # where qs starts
    bad = blocks.copy()
    bad[blk, off + j] ^= 0x55  # the low bit of each of the byte's four codes
    got = dequantize(bad.reshape(x.shape[0], -1), qtype).reshape(-1, 64)
    changed = np.argwhere(got.view(np.uint32) != base.view(np.uint32))
    assert changed.tolist() == [[blk, j], [blk, j + 16], [blk, j + 32], [blk, j + 48]]
    assert np.array_equal(got.reshape(-1).view(np.uint32), c_ref.dequantize(name, bad).view(np.uint32))

    bad = blocks.copy()
    bad[blk, 1] ^= 0x04  # an exponent bit of d
    got = dequantize(bad.reshape(x.shape[0], -1), qtype).reshape(-1, 64)
    rows_changed = np.flatnonzero((got != base).any(axis=1))
    assert rows_changed.tolist() == [blk]


@pytest.mark.parametrize("name", list(TYPES))
def test_gguf_file_round_trip(c_ref, tmp_path, name) -> None:
    """A GGUF file written by gguf.GGUFWriter with the raw blocks of a tensor of this type is read
    back by gguf.GGUFReader as that type and shape, and dequantises to the C values; a corrupted
    byte in the file's tensor data changes what is read."""
    qtype, block_bytes, _ = TYPES[name]
    x = data(seed=5)
    blocks = c_ref.quantize(name, x).reshape(x.shape[0], -1)
    ref = c_ref.dequantize(name, blocks).reshape(x.shape)

    path = tmp_path / f"{name}.gguf"
    w = gguf.GGUFWriter(path, arch="llama")
    w.add_tensor("cache_k_l0", blocks, raw_dtype=qtype)
    w.add_tensor("plain", np.arange(8, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    r = gguf.GGUFReader(path)
    t = {t.name: t for t in r.tensors}["cache_k_l0"]
    assert t.tensor_type == qtype
    assert list(t.shape) == [ROW, x.shape[0]]  # ggml's order: the row length first
    assert t.n_elements == x.size and t.n_bytes == blocks.nbytes
    got = dequantize(t.data, t.tensor_type)
    assert got.shape == x.shape
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))

    raw = bytearray(path.read_bytes())
    raw[t.data_offset + 3 * block_bytes + block_bytes - 1] ^= 0xFF  # the last qs/qh byte of block 3
    bad_path = tmp_path / f"{name}-bad.gguf"
    bad_path.write_bytes(bytes(raw))
    t2 = {t.name: t for t in gguf.GGUFReader(bad_path).tensors}["cache_k_l0"]
    got2 = dequantize(t2.data, t2.tensor_type).reshape(-1, 64)
    assert np.flatnonzero((got2 != got.reshape(-1, 64)).any(axis=1)).tolist() == [3]
