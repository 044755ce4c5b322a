"""Bit-exact numpy reference of the ``oscar2`` KV-cache type.

A block holds ``QK = 64`` consecutive values of one row (one attention head of 64,
or a 64-wide part of a larger head) as 2-bit codes ``c`` with an f16 step ``d`` and
an f16 minimum ``m``: ``x ~= m + c*d``. 20 bytes per 64 values, 2.5 bits per value.

Byte layout of one block: ``d`` (f16, little endian), ``m`` (f16), then 16 bytes
``qs`` where the code of element ``j + 16*k`` (``j < 16``, ``k < 4``) is in bits
``2k..2k+1`` of ``qs[j]``.

The quantiser follows ggml's ``quantize_row_oscar2_ref`` step by step in float32,
so both produce the same bytes (tests/test_oscar2_quant.py checks this).
"""
from __future__ import annotations

import numpy as np

QK = 64
BLOCK_BYTES = 20
BITS_PER_VALUE = 8 * BLOCK_BYTES / QK  # 2.5
F16_MAX = np.float32(65504.0)

#: ggml type id of ``oscar2`` in our fork (after upstream's last id, q2_0 = 42)
GGML_TYPE_OSCAR2 = 43


def _asym_codes(x: np.ndarray, top: int, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The steps ggml's oscar2 (``top`` 3) and oscar3 (``top`` 7) quantisers share, in float32:
    x (flattened) as blocks of 64 saturated to the f16 range, each block's minimum and maximum
    with NaN skipped (0 and 0 for an all-NaN block), the f16 step ``(max - min)/top`` and minimum,
    and the codes rounded half to even against the stored f16 values, clamped to ``0..top`` (NaN
    to 0). Returns ``(codes [n, 64] uint8, d16 [n], m16 [n])``."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    if x.size % QK:
        raise ValueError(f"{name} needs a multiple of {QK} values, got {x.size}")
    xb = np.clip(x.reshape(-1, QK), -F16_MAX, F16_MAX)  # NaN stays NaN
    # the first of equal extremes, as C's running `v < mn` / `v > mx` keeps it (+0 and -0 tie)
    lo = np.where(np.isnan(xb), np.float32(np.inf), xb)
    hi = np.where(np.isnan(xb), np.float32(-np.inf), xb)
    rows = np.arange(xb.shape[0])
    mn = lo[rows, np.argmin(lo, axis=1)]
    mx = hi[rows, np.argmax(hi, axis=1)]
    all_nan = mn > mx
    mn[all_nan] = 0
    mx[all_nan] = 0
    d16 = ((mx - mn) / np.float32(top)).astype(np.float16)
    m16 = mn.astype(np.float16)
    df = d16.astype(np.float32)
    mf = m16.astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(df > 0, np.float32(1.0) / np.where(df > 0, df, np.float32(1)), np.float32(0))
    v = (xb - mf[:, None]) * idv[:, None].astype(np.float32)
    v = np.where(v > 0, v, np.float32(0))  # NaN -> 0, like the C code
    v = np.where(v < top, v, np.float32(top))
    return np.rint(v).astype(np.uint8), d16, m16  # round half to even, as ggml's nearest_int


def _pack_2bit(c: np.ndarray) -> np.ndarray:
    """oscar2's ``qs`` ([n, 16] uint8) of 2-bit codes ``c`` ([n, 64]): element j + 16k in bits
    2k..2k+1 of byte j (also the low bits of oscar3's codes)."""
    return (c[:, 0:16] | (c[:, 16:32] << 2) | (c[:, 32:48] << 4) | (c[:, 48:64] << 6)).astype(np.uint8)


def _unpack_2bit(qs: np.ndarray) -> np.ndarray:
    """The [n, 64] uint8 codes of ``qs`` bytes ([n, 16], laid out as :func:`_pack_2bit` writes them)."""
    return np.concatenate([(qs >> (2 * k)) & 3 for k in range(4)], axis=1)


def _values(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``m + d*c`` in float32 (flat) for blocks ``b`` whose first 4 bytes are the f16 step and
    minimum and whose codes are ``c`` ([n, 64]), as ggml dequantises oscar2 and oscar3."""
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
    m = b[:, 2:4].copy().view(np.float16).astype(np.float32)
    return (m + d * c.astype(np.float32)).reshape(-1).astype(np.float32)


def quantize(x: np.ndarray) -> np.ndarray:
    """Quantise float32 values to ``oscar2`` blocks.

    x: any shape whose size is a multiple of 64, flattened in C order.
    Returns a uint8 array of shape ``[x.size // 64, 20]`` (one row per block).
    """
    codes, d16, m16 = _asym_codes(x, 3, "oscar2")
    qs = _pack_2bit(codes)
    out = np.empty((codes.shape[0], BLOCK_BYTES), dtype=np.uint8)
    out[:, 0:2] = d16.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = m16.view(np.uint8).reshape(-1, 2)
    out[:, 4:] = qs
    return out


def codes(blocks: np.ndarray) -> np.ndarray:
    """2-bit codes of ``blocks`` ([n, 20] uint8) as an [n, 64] uint8 array."""
    return _unpack_2bit(np.asarray(blocks, dtype=np.uint8).reshape(-1, BLOCK_BYTES)[:, 4:])


def dequantize(blocks: np.ndarray) -> np.ndarray:
    """Values of ``blocks`` ([n, 20] uint8) as a flat float32 array of n*64 values.

    Computes ``m + d*c`` in float32 like ggml's ``dequantize_row_oscar2`` (exact:
    d and m are f16, so d*c and the sum round only once)."""
    b = np.ascontiguousarray(np.asarray(blocks, dtype=np.uint8).reshape(-1, BLOCK_BYTES))
    return _values(b, codes(b))


def fake_quantize(x: np.ndarray) -> np.ndarray:
    """``dequantize(quantize(x))`` with the shape of ``x`` (rows must be multiples of 64)."""
    x = np.asarray(x, dtype=np.float32)
    return dequantize(quantize(x)).reshape(x.shape)


# ----------------------------------------------------------------------------- oscar3

#: ``oscar3``: the 3-bit step between oscar2 and q4_0 that a precision plan gives a layer's keys.
#: Blocks of 64 values ``x ~= m + c*d``, c in 0..7, f16 d and m: 28 bytes, 3.5 bits per value.
#: Bytes: d, m, then 16 bytes of the codes' low two bits laid out as oscar2's ``qs``, then 8
#: bytes ``qh`` whose bit i (of the 64-bit little-endian word) is the high bit of element i.
OSCAR3_BLOCK_BYTES = 28
OSCAR3_BITS_PER_VALUE = 8 * OSCAR3_BLOCK_BYTES / QK  # 3.5
GGML_TYPE_OSCAR3 = 44


def quantize_oscar3(x: np.ndarray) -> np.ndarray:
    """Quantise float32 values to ``oscar3`` blocks as ggml's ``quantize_row_oscar3_ref`` does
    (oscar2's steps with the step ``(max - min)/7`` and codes clamped to 0..7).

    x: any shape whose size is a multiple of 64, flattened in C order.
    Returns a uint8 array of shape ``[x.size // 64, 28]``."""
    c, d16, m16 = _asym_codes(x, 7, "oscar3")
    qs = _pack_2bit(c & 3)
    qh = np.packbits((c >> 2).astype(np.uint8), axis=1, bitorder="little")
    out = np.empty((c.shape[0], OSCAR3_BLOCK_BYTES), dtype=np.uint8)
    out[:, 0:2] = d16.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = m16.view(np.uint8).reshape(-1, 2)
    out[:, 4:20] = qs
    out[:, 20:28] = qh
    return out


def codes_oscar3(blocks: np.ndarray) -> np.ndarray:
    """3-bit codes of ``oscar3`` blocks ([n, 28] uint8) as an [n, 64] uint8 array."""
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, OSCAR3_BLOCK_BYTES)
    hi = np.unpackbits(b[:, 20:28], axis=1, bitorder="little")
    return (codes(b[:, :BLOCK_BYTES]) | (hi << 2)).astype(np.uint8)  # the first 20 bytes as an oscar2 block


def dequantize_oscar3(blocks: np.ndarray) -> np.ndarray:
    """Values of ``oscar3`` blocks ([n, 28] uint8) as a flat float32 array (``m + d*c`` in float32)."""
    b = np.ascontiguousarray(np.asarray(blocks, dtype=np.uint8).reshape(-1, OSCAR3_BLOCK_BYTES))
    return _values(b, codes_oscar3(b))


# ----------------------------------------------------------------------------- oscar2s

#: ``oscar2s``: oscar2 without its minimum, for a cache that OSCAR's means have centred. Blocks of
#: 64 values ``x ~= d*(c - 3/2)``, c in 0..3 (levels -3d/2, -d/2, d/2, 3d/2 with d = amax/1.5), an
#: f16 step: 18 bytes, 2.25 bits per value. Bytes: d, then 16 bytes laid out as oscar2's ``qs``.
OSCAR2S_BLOCK_BYTES = 18
OSCAR2S_BITS_PER_VALUE = 8 * OSCAR2S_BLOCK_BYTES / QK  # 2.25
GGML_TYPE_OSCAR2S = 45


def quantize_oscar2s(x: np.ndarray) -> np.ndarray:
    """Quantise float32 values to ``oscar2s`` blocks as ggml's ``quantize_row_oscar2s_ref`` does,
    in float32: values saturated to the f16 range, ``amax`` the largest magnitude (NaN skipped),
    ``d = f16(amax/1.5)``, codes ``round-half-even(clamp((x + 1.5 d) / d, 0, 3))`` against the
    stored d (NaN to code 2).

    x: any shape whose size is a multiple of 64, flattened in C order.
    Returns a uint8 array of shape ``[x.size // 64, 18]``."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    if x.size % QK:
        raise ValueError(f"oscar2s needs a multiple of {QK} values, got {x.size}")
    xb = np.clip(x.reshape(-1, QK), -F16_MAX, F16_MAX)  # NaN stays NaN
    amax = np.where(np.isnan(xb), np.float32(0), np.abs(xb)).max(axis=1)
    d16 = (amax / np.float32(1.5)).astype(np.float16)
    df = d16.astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(df > 0, np.float32(1.0) / np.where(df > 0, df, np.float32(1)), np.float32(0)).astype(np.float32)
    v = ((xb + (np.float32(1.5) * df)[:, None]) * idv[:, None]).astype(np.float32)
    v = np.where(np.isnan(v), np.float32(2), v)
    v = np.clip(v, np.float32(0), np.float32(3))
    c = np.rint(v).astype(np.uint8)  # round half to even, as ggml's nearest_int
    out = np.empty((c.shape[0], OSCAR2S_BLOCK_BYTES), dtype=np.uint8)
    out[:, 0:2] = d16.view(np.uint8).reshape(-1, 2)
    out[:, 2:] = _pack_2bit(c)
    return out


def codes_oscar2s(blocks: np.ndarray) -> np.ndarray:
    """2-bit codes of ``oscar2s`` blocks ([n, 18] uint8) as an [n, 64] uint8 array."""
    return _unpack_2bit(np.asarray(blocks, dtype=np.uint8).reshape(-1, OSCAR2S_BLOCK_BYTES)[:, 2:])


def dequantize_oscar2s(blocks: np.ndarray) -> np.ndarray:
    """Values of ``oscar2s`` blocks ([n, 18] uint8) as a flat float32 array: ``m + d*c`` with
    ``m = -1.5 d`` in float32, as ggml's ``dequantize_row_oscar2s``."""
    b = np.ascontiguousarray(np.asarray(blocks, dtype=np.uint8).reshape(-1, OSCAR2S_BLOCK_BYTES))
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
    m = (np.float32(-1.5) * d).astype(np.float32)
    return (m + d * codes_oscar2s(b).astype(np.float32)).reshape(-1).astype(np.float32)


# ----------------------------------------------------------------------------- other cache types

#: the cache types a precision plan may name, cheapest first (llama.cpp's names and its
#: llama_oscar_plan_type_ok)
PLAN_TYPES = ("oscar2s", "oscar2", "oscar3", "q4_0", "q8_0", "f16")


def fake_q8_0(x: np.ndarray) -> np.ndarray:
    """ggml's ``q8_0`` round trip (blocks of 32 along the last axis: f16 step ``amax/127``,
    codes rounded half away from zero) with the shape of ``x``."""
    x = np.asarray(x, dtype=np.float32)
    b = x.reshape(-1, 32)
    d = np.abs(b).max(axis=1) / np.float32(127)
    idv = np.where(d > 0, np.float32(1) / np.where(d > 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
    v = b * idv[:, None]
    q = np.trunc(v + np.copysign(np.float32(0.5), v))
    d16 = d.astype(np.float16).astype(np.float32)
    return (q * d16[:, None]).reshape(x.shape).astype(np.float32)


def fake_q4_0(x: np.ndarray) -> np.ndarray:
    """ggml's ``q4_0`` round trip (blocks of 32: step ``d = -max/8`` where max is the value of
    largest magnitude, codes ``min(15, trunc(x/d + 8.5))``, value ``(code - 8)*d`` with d f16)."""
    x = np.asarray(x, dtype=np.float32)
    b = x.reshape(-1, 32)
    mx = np.take_along_axis(b, np.abs(b).argmax(axis=1)[:, None], axis=1)[:, 0]
    d = mx / np.float32(-8)
    idv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
    q = np.minimum(np.float32(15), np.trunc(b * idv[:, None] + np.float32(8.5)))
    d16 = d.astype(np.float16).astype(np.float32)
    return ((q - 8) * d16[:, None]).reshape(x.shape).astype(np.float32)


def fake_as(x: np.ndarray, kv_type: str) -> np.ndarray:
    """``x`` (float32, last axis a multiple of 64) stored as ``kv_type`` and read back."""
    if kv_type == "oscar2":
        return fake_quantize(x)
    if kv_type == "oscar3":
        x = np.asarray(x, dtype=np.float32)
        return dequantize_oscar3(quantize_oscar3(x)).reshape(x.shape)
    if kv_type == "oscar2s":
        x = np.asarray(x, dtype=np.float32)
        return dequantize_oscar2s(quantize_oscar2s(x)).reshape(x.shape)
    if kv_type == "q8_0":
        return fake_q8_0(x)
    if kv_type == "q4_0":
        return fake_q4_0(x)
    if kv_type == "f16":
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)
    raise ValueError(f"cache type '{kv_type}': known are {', '.join(PLAN_TYPES)}")
