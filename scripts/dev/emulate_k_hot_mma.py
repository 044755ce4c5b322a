#!/usr/bin/env python3
"""Emulate, lane by lane, oscar2_fa_k_hot_mma (fattn-oscar2.cu): the scores of a tile's pool
K rows (f16) against Q as halves on mma.m16n8k16, with the kernel's permuted k order, and
compare them with q . k computed directly. A development check, like emulate_v_tile_mma.py.

    python3 scripts/dev/emulate_k_hot_mma.py
"""
import numpy as np

from emulate_v_tile_mma import mma


def u32_pair(h: np.ndarray) -> int:
    v = np.asarray(h, dtype=np.float16).view(np.uint16)
    return int(v[0]) | (int(v[1]) << 16)


def k_hot(pool: np.ndarray, slot: np.ndarray, q_h: np.ndarray, D: int) -> np.ndarray:
    """s_hot[v][i] for the 32 cells of a tile, as the kernel leaves it."""
    s_hot = np.full((8, 32), np.nan)
    for mt in range(2):
        acc = np.zeros((32, 4))
        for j in range(D // 32):
            A0, A1, B0, B1 = [], [], [], []
            for lane in range(32):
                g, t = lane // 4, lane % 4
                i0 = 16 * mt + g

                def row16(s):  # the uint4 r[4j + t]: halves 32j + 8t .. 32j + 8t + 7
                    return pool[s, 32 * j + 8 * t:32 * j + 8 * t + 8] if s >= 0 else np.zeros(8, dtype=np.float16)
                u0, u8 = row16(slot[i0]), row16(slot[i0 + 8])
                q = q_h[g, 32 * j + 8 * t:32 * j + 8 * t + 8]
                w = lambda x, k: u32_pair(x[2 * k:2 * k + 2])  # noqa: E731  (uint4 .x .y .z .w)
                A0.append((w(u0, 0), w(u8, 0), w(u0, 1), w(u8, 1)))
                A1.append((w(u0, 2), w(u8, 2), w(u0, 3), w(u8, 3)))
                B0.append((w(q, 0), w(q, 1)))
                B1.append((w(q, 2), w(q, 3)))
            mma(acc, A0, B0)
            mma(acc, A1, B1)
        for lane in range(32):
            g, t = lane // 4, lane % 4
            i0 = 16 * mt + g
            s_hot[2 * t, i0], s_hot[2 * t + 1, i0] = acc[lane, 0], acc[lane, 1]
            s_hot[2 * t, i0 + 8], s_hot[2 * t + 1, i0 + 8] = acc[lane, 2], acc[lane, 3]
    return s_hot


def main() -> None:
    rng = np.random.default_rng(1)
    for D in (64, 128, 256):
        for QV in (1, 4, 8):
            pool = rng.normal(0, 1, (40, D)).astype(np.float16)
            slot = rng.integers(-1, 40, 32)
            q_h = np.zeros((8, D + 8), dtype=np.float16)
            q_h[:QV, :D] = rng.normal(0, 1, (QV, D)).astype(np.float16)
            s = k_hot(pool, slot, q_h, D)
            ref = np.array([[float(q_h[v, :D].astype(np.float64) @ pool[slot[i]].astype(np.float64)) if slot[i] >= 0 else 0.0
                             for i in range(32)] for v in range(8)])
            err = np.abs(s - ref).max()
            print(f"D={D:3d} QV={QV}: max abs err {err:.2e} (scores up to {np.abs(ref).max():.1f})")
            assert err < 1e-6 * max(1.0, np.abs(ref).max()), "mismatch"
    print("ok")


if __name__ == '__main__':
    main()
