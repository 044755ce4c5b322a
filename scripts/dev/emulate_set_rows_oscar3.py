#!/usr/bin/env python3
"""Emulate, lane by lane, oscar3_quantize_block_warp (ggml-cuda/oscar2.cuh), the CUDA cache write
of a 64-value oscar3 block by one warp (lane l holds elements l and l + 32): the minimum and
maximum with the first index on ties (the sign of a zero extreme), the step and minimum in f16,
the codes in round-to-nearest float32 steps, the low two bits packed with one shuffle and the
third bits with two ballots. Its bytes are compared with ggml's quantize_row_oscar3_ref (the C
library of a CPU build, OSCAR_GGML_BASE or build/bin/libggml-base.so; without one, oscar.core.quant's
copy of it), which the CUDA write must equal byte for byte: random blocks and edge cases (signed
zeros, NaN, values past the f16 range, constant blocks, ties at half steps).

    python3 scripts/dev/emulate_set_rows_oscar3.py [--blocks N]
"""
import argparse
import ctypes
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
QK = 64
F16_MAX = np.float32(65504.0)


def f32(x) -> np.float32:
    return np.float32(x)


def warp_quantize(x: np.ndarray) -> bytes:
    """The 28 bytes oscar3_quantize_block_warp writes for the 64 float32 values x."""
    sat = lambda v: np.clip(v, -F16_MAX, F16_MAX) if not np.isnan(v) else v  # noqa: E731 (oscar2_saturate)
    v0 = [sat(f32(x[lane])) for lane in range(32)]
    v1 = [sat(f32(x[lane + 32])) for lane in range(32)]
    # each lane's own minimum and maximum with its index, then the butterfly reductions
    mn, jn, mx, jx = [], [], [], []
    for lane in range(32):
        a, b = v0[lane], v1[lane]
        n_v, n_j = (f32(np.inf), 2 * QK) if np.isnan(a) else (a, lane)
        if not np.isnan(b) and b < n_v:
            n_v, n_j = b, lane + 32
        x_v, x_j = (f32(-np.inf), 2 * QK) if np.isnan(a) else (a, lane)
        if not np.isnan(b) and b > x_v:
            x_v, x_j = b, lane + 32
        mn.append(n_v); jn.append(n_j); mx.append(x_v); jx.append(x_j)
    off = 16
    while off > 0:
        nmn, njn, nmx, njx = list(mn), list(jn), list(mx), list(jx)
        for lane in range(32):
            o = lane ^ off
            if mn[o] < mn[lane] or (mn[o] == mn[lane] and jn[o] < jn[lane]):
                nmn[lane], njn[lane] = mn[o], jn[o]
            if mx[o] > mx[lane] or (mx[o] == mx[lane] and jx[o] < jx[lane]):
                nmx[lane], njx[lane] = mx[o], jx[o]
        mn, jn, mx, jx = nmn, njn, nmx, njx
        off //= 2
    lo_v, hi_v = mn[0], mx[0]
    if lo_v > hi_v:
        lo_v = hi_v = f32(0.0)
    dh = np.float16(f32(f32(hi_v - lo_v) / f32(7.0)))
    mh = np.float16(lo_v)
    df, mf = f32(dh), f32(mh)
    idv = f32(f32(1.0) / df) if df > 0 else f32(0.0)
    c0, c1 = [], []
    for lane in range(32):
        for v, out in ((v0[lane], c0), (v1[lane], c1)):
            with np.errstate(invalid="ignore"):
                q = f32(f32(v - mf) * idv)
            q = q if q > 0 else f32(0.0)  # also maps NaN to 0
            q = q if q < 7 else f32(7.0)
            out.append(int(np.rint(q)))
    part = [((c0[lane] & 3) << (2 * (lane // 16))) | ((c1[lane] & 3) << (2 * (lane // 16) + 4)) for lane in range(32)]
    byte = [part[lane] | part[lane ^ 16] for lane in range(32)]
    h0 = sum((c0[lane] >> 2) << lane for lane in range(32))  # __ballot_sync
    h1 = sum((c1[lane] >> 2) << lane for lane in range(32))
    qs = bytes(byte[lane] & 0xFF for lane in range(16))
    qh = bytes(((h0 if lane < 4 else h1) >> (8 * (lane % 4))) & 0xFF for lane in range(8))
    return np.array([dh]).view(np.uint8).tobytes() + np.array([mh]).view(np.uint8).tobytes() + qs + qh


def reference():
    """quantize_row_oscar3_ref from a CPU build of ggml, or oscar.core.quant's copy; (function, name)."""
    lib = os.environ.get("OSCAR_GGML_BASE", str(ROOT / "build" / "bin" / "libggml-base.so"))
    if Path(lib).exists():
        try:
            so = ctypes.CDLL(lib)
            fn = so.quantize_row_oscar3_ref
        except (OSError, AttributeError):
            fn = None
        if fn is not None:
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]

            def q(x: np.ndarray) -> bytes:
                x = np.ascontiguousarray(x, dtype=np.float32)
                y = np.zeros(28, dtype=np.uint8)
                fn(x.ctypes.data, y.ctypes.data, QK)
                return y.tobytes()
            return q, f"quantize_row_oscar3_ref ({lib})"
    sys.path.insert(0, str(ROOT / "py"))
    from oscar.core.quant import quantize_oscar3
    return (lambda x: quantize_oscar3(np.asarray(x, dtype=np.float32)).tobytes()), "oscar.core.quant.quantize_oscar3"


def blocks(rng, n: int):
    for _ in range(n):
        yield rng.normal(size=QK).astype(np.float32) * f32(rng.uniform(0.01, 10.0))
    z = np.zeros(QK, dtype=np.float32)
    yield z
    x = z.copy(); x[5] = -0.0; x[40] = 1.0; yield x  # a -0.0 minimum after +0.0
    x = -z; x[0] = -0.0; x[33] = 2.0; yield x  # -0.0 first
    x = rng.normal(size=QK).astype(np.float32); x[7] = np.nan; x[50] = np.nan; yield x
    yield np.full(QK, np.nan, dtype=np.float32)
    x = rng.normal(size=QK).astype(np.float32) * f32(1e5); yield x  # past the f16 range
    yield np.full(QK, 3.25, dtype=np.float32)
    x = (np.arange(QK, dtype=np.float32) % 15) * f32(0.5); yield x  # codes on half steps (ties)
    x = rng.integers(-4, 4, QK).astype(np.float32) * f32(1.0 / 3.0); yield x
    for _ in range(20):  # zeros of both signs as the extremes, at random places
        x = np.where(rng.random(QK) < 0.5, f32(0.0), f32(-0.0)).astype(np.float32)
        x[rng.integers(0, QK, 3)] = f32(rng.choice([-1.0, 1.0]))
        x[0] = f32(rng.choice([-1.0, 1.0]))  # (a zero is then not the first element)
        yield x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=300, help="random blocks (besides the edge cases)")
    args = ap.parse_args()
    ref, name = reference()
    rng = np.random.default_rng(11)
    n = bad = 0
    for x in blocks(rng, args.blocks):
        n += 1
        if warp_quantize(x) != ref(x):
            bad += 1
            if bad <= 3:
                print("differs:", warp_quantize(x).hex(), ref(x).hex())
    print(f"reference: {name}")
    print(f"{'ok' if bad == 0 else 'FAILED'}: {n - bad} of {n} blocks byte-identical")
    raise SystemExit(0 if bad == 0 else 1)


if __name__ == "__main__":
    main()
