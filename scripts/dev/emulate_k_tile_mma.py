#!/usr/bin/env python3
"""Emulate, lane by lane, oscar2_fa_k_tile_mma (fattn-oscar2.cu): the scores of a tile's 32
oscar2 K rows against Q as q8_0 on integer tensor cores (mma.m16n8k32, s8 inputs, s32
accumulators, fragments as the PTX ISA lays them out), with the kernel's rounds of k-steps
side by side in the columns, and compare them with the CPU's sum (ggml_vec_dot_oscar2_q8_0:
per 32 values dq*(d*sum(c*q) + m*sum(q))) for 1, 2, 4 and 8 query vectors and heads of 64, 128
and 256. The same for oscar2_fa_k_tile_mma_q (q4_0 and q8_0 K rows beside oscar2 V, heads of 64
and 128) against ggml_vec_dot_q4_0_q8_0 and ggml_vec_dot_q8_0_q8_0 (per 32 values
dk*dq*sum((n - 8)*q) and dk*dq*sum(c*q)), and for oscar3 K rows (KQ OSCAR2_FA_KQ_OSCAR3: 3-bit codes,
the third bit spread into the A bytes) against ggml_vec_dot_oscar3_q8_0. A development check for
a kernel change that cannot run on a GPU yet, like emulate_v_tile_mma.py; a wrong fragment,
column, step or shuffle fails it.

    python3 scripts/dev/emulate_k_tile_mma.py [--trials N]
"""
import argparse

import numpy as np

from emulate_v_tile_mma import QK, make_rows


def quantize_q8_0(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q [QV][D] as the kernel quantises it: codes [QV][D] (int8) and f16-rounded steps [QV][D/32]."""
    qv, D = q.shape
    x = q.reshape(qv, D // 32, 32).astype(np.float32)
    d = np.abs(x).max(axis=2) / np.float32(127.0)
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0).astype(np.float32)
    codes = np.round(x * inv[:, :, None]).astype(np.int64)
    return codes.reshape(qv, D), d.astype(np.float16).astype(np.float32)


def cpu_scores(rows: np.ndarray, codes: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """s[v][cell] as ggml_vec_dot_oscar2_q8_0 sums it (float64 here)."""
    qv, D = codes.shape
    n = rows.shape[0]
    s = np.zeros((qv, n))
    for c in range(n):
        for b in range(D // QK):
            w0 = int(rows[c, 5 * b])
            d = float(np.array([w0 & 0xFFFF], dtype=np.uint16).view(np.float16)[0])
            m = float(np.array([w0 >> 16], dtype=np.uint16).view(np.float16)[0])
            cb = np.array([(int(rows[c, 5 * b + 1 + (e % 16) // 4]) >> (8 * (e % 4) + 2 * (e // 16))) & 3 for e in range(QK)])
            for v in range(qv):
                for h in range(2):
                    sl = slice(QK * b + 32 * h, QK * b + 32 * h + 32)
                    s[v, c] += qd[v, 2 * b + h] * (d * float(cb[32 * h:32 * h + 32] @ codes[v, sl]) + m * float(codes[v, sl].sum()))
    return s


def make_rows3(rng, n: int, D: int) -> np.ndarray:
    """n oscar3 rows as the kernel stages them: ints [n, 7*D/64]. Per 64 values: d|m<<16, the
    16 bytes of the codes' low two bits (element j + 16k at bits 2k, 2k + 1 of byte j), the
    64-bit word of their third bits (element e at bit e), as block_oscar3 lays them out."""
    rows = np.zeros((n, 7 * (D // QK)), dtype=np.uint64)
    for c in range(n):
        for b in range(D // QK):
            d = np.float16(rng.uniform(0.01, 0.5))
            m = np.float16(rng.uniform(-2.0, 2.0))
            codes = rng.integers(0, 8, QK)
            qs = np.zeros(16, dtype=np.int64)
            qh = 0
            for e in range(QK):
                qs[e % 16] |= (int(codes[e]) & 3) << (2 * (e // 16))
                qh |= (int(codes[e]) >> 2) << e
            rows[c, 7 * b] = int(np.array([d]).view(np.uint16)[0]) | (int(np.array([m]).view(np.uint16)[0]) << 16)
            for w in range(4):
                rows[c, 7 * b + 1 + w] = int(qs[4 * w]) | int(qs[4 * w + 1]) << 8 | int(qs[4 * w + 2]) << 16 | int(qs[4 * w + 3]) << 24
            rows[c, 7 * b + 5] = qh & 0xFFFFFFFF
            rows[c, 7 * b + 6] = qh >> 32
    return rows


def cpu_scores3(rows: np.ndarray, codes: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """s[v][cell] as ggml_vec_dot_oscar3_q8_0 sums it (float64 here), the codes read from the
    bytes as the CPU reads block_oscar3 (qs[e % 16], qh[e / 8])."""
    qv, D = codes.shape
    s = np.zeros((qv, rows.shape[0]))
    for c in range(rows.shape[0]):
        for b in range(D // QK):
            blk = np.array([int(w) for w in rows[c, 7 * b:7 * b + 7]], dtype=np.uint32).view(np.uint8)
            d = float(blk[0:2].view(np.float16)[0])
            m = float(blk[2:4].view(np.float16)[0])
            qs, qh = blk[4:20], blk[20:28]
            cb = np.array([((int(qs[e % 16]) >> (2 * (e // 16))) & 3) | (((int(qh[e // 8]) >> (e % 8)) & 1) << 2) for e in range(QK)])
            for v in range(qv):
                for h in range(2):
                    sl = slice(QK * b + 32 * h, QK * b + 32 * h + 32)
                    s[v, c] += qd[v, 2 * b + h] * (d * float(cb[32 * h:32 * h + 32] @ codes[v, sl]) + m * float(codes[v, sl].sum()))
    return s


def hi_bytes(n: int) -> int:
    """oscar2_fa_hi_bytes: bit i of the nibble n at bit 2 of byte i (the kernel's multiply)."""
    return ((n * 0x00810204) & 0xFFFFFFFF) & 0x04040404


def imma(c: np.ndarray, A: list, B: list) -> None:
    """c[lane][4] += A.B over the warp, m16n8k32: A[lane] = 4 ints (4 s8 each), B[lane] = 2 ints."""
    def s8(x: int, i: int) -> int:
        y = (x >> (8 * i)) & 0xFF
        return y - 256 if y > 127 else y
    Am = np.zeros((16, 32), dtype=np.int64)
    Bm = np.zeros((32, 8), dtype=np.int64)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for r, (row, k0) in enumerate([(g, 4 * t), (g + 8, 4 * t), (g, 16 + 4 * t), (g + 8, 16 + 4 * t)]):
            for i in range(4):
                Am[row, k0 + i] = s8(A[lane][r], i)
        for r, k0 in enumerate([4 * t, 16 + 4 * t]):
            for i in range(4):
                Bm[k0 + i, g] = s8(B[lane][r], i)
    C = Am @ Bm
    for lane in range(32):
        g, t = lane // 4, lane % 4
        c[lane] += np.array([C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t], C[g + 8, 2 * t + 1]])


def pack4(x: np.ndarray) -> int:
    return sum((int(x[i]) & 0xFF) << (8 * i) for i in range(4))


def lane_q(codes: np.ndarray, qd: np.ndarray, qsd: np.ndarray, lane: int, D: int):
    """oscar2_fa_kq::set: the lane's B registers per k-step and its columns' steps per round."""
    QV = codes.shape[0]
    NKS = D // 32
    NG = min(8 // QV, NKS)
    NR = NKS // NG
    g, t = lane // 4, lane % 4
    b = []
    for s in range(NKS):
        mine = g < NG * QV and g // QV == s % NG
        q = codes[g % QV] if mine else np.zeros(D, dtype=np.int64)
        b.append((pack4(q[32 * s + 4 * t:32 * s + 4 * t + 4]), pack4(q[32 * s + 16 + 4 * t:32 * s + 16 + 4 * t + 4])))
    qdl = np.zeros((NR, 2), dtype=np.float32)
    qsl = np.zeros((NR, 2), dtype=np.float32)
    for r in range(NR):
        for j in range(2):
            n = 2 * t + j
            sc = NG * r + n // QV
            if n < NG * QV:
                qdl[r, j] = qd[n % QV, sc]
                qsl[r, j] = qsd[n % QV, sc // 2] if sc % 2 == 0 else 0.0
    return b, qdl, qsl


def k_tile_store(acc: np.ndarray, s_k: np.ndarray, mt: int, QV: int) -> None:
    """oscar2_fa_k_tile_store: the columns' sums of m-tile mt (acc [lane][4]: cells g, g + 8 x
    columns 2t, 2t + 1) met across the lanes of a query vector, into s_k [QV][32]."""
    if QV == 1:
        acc[:, 0] += acc[:, 1]
        acc[:, 2] += acc[:, 3]
    o = 1 if QV <= 2 else 2
    while QV < 8 and o < 4:
        acc = acc + acc[np.arange(32) ^ o]
        o *= 2
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for j in range(2):
            if 2 * t + j < QV:
                s_k[2 * t + j, 16 * mt + g] = acc[lane, j]
                s_k[2 * t + j, 16 * mt + g + 8] = acc[lane, 2 + j]


def k_tile(rows: np.ndarray, codes: np.ndarray, qd: np.ndarray, D: int, o3: bool = False) -> np.ndarray:
    """s_k[v][cell] for the 32 cells of a tile, as oscar2_fa_k_tile_mma leaves it (f32 sums);
    o3: oscar3 rows (7 ints per block, the third bits from words 5 and 6)."""
    bw = 7 if o3 else 5
    QV = codes.shape[0]
    NKS = D // 32
    NG = min(8 // QV, NKS)
    qsd = np.array([[sum(np.float32(qd[v, 2 * b + h]) * np.float32(codes[v, QK * b + 32 * h:QK * b + 32 * h + 32].sum())
                         for h in range(2)) for b in range(D // QK)] for v in range(QV)], dtype=np.float32)
    lq = [lane_q(codes, qd, qsd, lane, D) for lane in range(32)]
    f16 = lambda u: np.float32(np.array([u & 0xFFFF], dtype=np.uint16).view(np.float16)[0])  # noqa: E731
    s_k = np.full((QV, 32), np.nan)
    for mt in range(2):
        acc = np.zeros((32, 4), dtype=np.float32)
        c = np.zeros((32, 4), dtype=np.int64)
        for b in range(D // QK):
            for h in range(2):
                s = 2 * b + h
                if s % NG == 0:
                    c[:] = 0
                A, B = [], []
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    w0 = int(rows[16 * mt + g, bw * b + 1 + t])
                    w8 = int(rows[16 * mt + g + 8, bw * b + 1 + t])
                    a = [(w0 >> (4 * h)) & 0x03030303, (w8 >> (4 * h)) & 0x03030303,
                         (w0 >> (4 * h + 2)) & 0x03030303, (w8 >> (4 * h + 2)) & 0x03030303]
                    if o3:
                        u0 = int(rows[16 * mt + g, bw * b + 5 + h]) >> (4 * t)
                        u8 = int(rows[16 * mt + g + 8, bw * b + 5 + h]) >> (4 * t)
                        a[0] |= hi_bytes(u0 & 0xF)
                        a[1] |= hi_bytes(u8 & 0xF)
                        a[2] |= hi_bytes((u0 >> 16) & 0xF)
                        a[3] |= hi_bytes((u8 >> 16) & 0xF)
                    A.append(tuple(a))
                    B.append(lq[lane][0][s])
                imma(c, A, B)
                if s % NG == NG - 1:
                    r = s // NG
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        bl = b if NG <= 2 else min((NG * r + 2 * t // QV) // 2, D // QK - 1)
                        _, qdl, qsl = lq[lane]
                        for i, cell in enumerate((16 * mt + g, 16 * mt + g, 16 * mt + g + 8, 16 * mt + g + 8)):
                            w = int(rows[cell, bw * bl])
                            d, m = f16(w), f16(w >> 16)
                            acc[lane, i] = np.float32(d * np.float32(np.float32(c[lane, i]) * qdl[r, i % 2]) + np.float32(m * qsl[r, i % 2] + acc[lane, i]))
        k_tile_store(acc, s_k, mt, QV)
    return s_k


BH = {"q4_0": 9, "q8_0": 17}  # halves per 32-value block as the kernel stages K rows


def make_rows_q(rng, n: int, D: int, kind: str) -> np.ndarray:
    """n q4_0 or q8_0 rows of D values as the kernel stages them: uint16 [n, BH*D/32]. Per 32
    values an f16 step, then q4_0: 16 bytes of nibbles (low nibble of byte j value j, high nibble
    value j + 16); q8_0: 32 signed bytes."""
    bh = BH[kind]
    rows = np.zeros((n, bh * D // 32), dtype=np.uint16)
    for c in range(n):
        for b in range(D // 32):
            d = np.float16(rng.normal() * 0.1)
            qs = rng.integers(0, 256, size=2 * (bh - 1), dtype=np.uint8)
            rows[c, bh * b] = np.array([d], dtype=np.float16).view(np.uint16)[0]
            rows[c, bh * b + 1:bh * (b + 1)] = qs.view(np.uint16)
    return rows


def q_values(rows: np.ndarray, D: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Codes as values (q4_0: nibble - 8, q8_0: signed byte), int [n, D], and steps float32 [n, D/32]."""
    n, bh = rows.shape[0], BH[kind]
    vals = np.zeros((n, D), dtype=np.int64)
    d = np.zeros((n, D // 32), dtype=np.float32)
    for b in range(D // 32):
        d[:, b] = rows[:, bh * b].view(np.float16).astype(np.float32)
        qs = rows[:, bh * b + 1:bh * (b + 1)].copy().view(np.uint8)
        if kind == "q4_0":
            vals[:, 32 * b:32 * b + 16] = (qs & 0x0F).astype(np.int64) - 8
            vals[:, 32 * b + 16:32 * b + 32] = (qs >> 4).astype(np.int64) - 8
        else:
            vals[:, 32 * b:32 * b + 32] = qs.view(np.int8).astype(np.int64)
    return vals, d


def cpu_scores_q(rows: np.ndarray, codes: np.ndarray, qd: np.ndarray, kind: str) -> np.ndarray:
    """s[v][cell] as ggml_vec_dot_q4_0_q8_0 / ggml_vec_dot_q8_0_q8_0 sum it (float64 here)."""
    qv, D = codes.shape
    vals, d = q_values(rows, D, kind)
    s = np.zeros((qv, rows.shape[0]))
    for b in range(D // 32):
        sl = slice(32 * b, 32 * b + 32)
        s += (vals[:, sl] @ codes[:, sl].T).T * d[:, b][None, :] * qd[:, b][:, None]
    return s


def k_tile_q(rows: np.ndarray, codes: np.ndarray, qd: np.ndarray, D: int, kind: str) -> np.ndarray:
    """s_k[v][cell] for the 32 q4_0 or q8_0 rows of a tile, as oscar2_fa_k_tile_mma_q leaves it."""
    QV = codes.shape[0]
    NKS = D // 32
    NG = min(8 // QV, NKS)
    NR = NKS // NG
    bh = BH[kind]
    off = np.float32(8.0 if kind == "q4_0" else 0.0)
    qs32 = np.array([[np.float32(qd[v, b]) * np.float32(codes[v, 32 * b:32 * b + 32].sum()) for b in range(NKS)]
                     for v in range(QV)], dtype=np.float32)
    f16 = lambda u: np.float32(np.array([u], dtype=np.uint16).view(np.float16)[0])  # noqa: E731
    lanes = []
    for lane in range(32):  # oscar2_fa_kq::set_q
        b, _, _ = lane_q(codes, qd, np.zeros((QV, D // QK), dtype=np.float32), lane, D)
        t = lane % 4
        qdl = np.zeros((NR, 2), dtype=np.float32)
        qsl = np.zeros((NR, 2), dtype=np.float32)
        for r in range(NR):
            for j in range(2):
                n = 2 * t + j
                sc = NG * r + n // QV
                if n < NG * QV:
                    qdl[r, j] = qd[n % QV, sc]
                    qsl[r, j] = off * qs32[n % QV, sc]
        lanes.append((b, qdl, qsl))

    def word(row: np.ndarray, s: int, u: int) -> int:
        return int(row[bh * s + 1 + 2 * u]) | (int(row[bh * s + 2 + 2 * u]) << 16)

    s_k = np.full((QV, 32), np.nan)
    for mt in range(2):
        acc = np.zeros((32, 4), dtype=np.float32)
        c = np.zeros((32, 4), dtype=np.int64)
        for s in range(NKS):
            if s % NG == 0:
                c[:] = 0
            A, B = [], []
            for lane in range(32):
                g, t = lane // 4, lane % 4
                r0, r8 = rows[16 * mt + g], rows[16 * mt + g + 8]
                if kind == "q4_0":
                    w0, w8 = word(r0, s, t), word(r8, s, t)
                    A.append((w0 & 0x0F0F0F0F, w8 & 0x0F0F0F0F, (w0 >> 4) & 0x0F0F0F0F, (w8 >> 4) & 0x0F0F0F0F))
                else:
                    A.append((word(r0, s, t), word(r8, s, t), word(r0, s, t + 4), word(r8, s, t + 4)))
                B.append(lanes[lane][0][s])
            imma(c, A, B)
            if s % NG == NG - 1:
                r = s // NG
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    _, qdl, qsl = lanes[lane]
                    blk = [min(NG * r + (2 * t + j) // QV, NKS - 1) for j in range(2)]
                    for i, cell in enumerate((16 * mt + g, 16 * mt + g, 16 * mt + g + 8, 16 * mt + g + 8)):
                        dk = f16(int(rows[cell, bh * blk[i % 2]]))
                        x = np.float32(np.float32(c[lane, i]) * qdl[r, i % 2] - qsl[r, i % 2])
                        acc[lane, i] = np.float32(dk * x + acc[lane, i])
        k_tile_store(acc, s_k, mt, QV)
    return s_k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1, help="random tiles per head size and query-vector count")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    worst = 0.0
    for D in (64, 128, 256):
        for QV in (1, 2, 4, 8):
            for _ in range(args.trials):
                rows, _ = make_rows(rng, 32, D)
                codes, qd = quantize_q8_0(rng.normal(size=(QV, D)))
                ref = cpu_scores(rows, codes, qd)
                got = k_tile(rows, codes, qd, D)
                err = float(np.abs(got - ref).max() / np.abs(ref).max())
                worst = max(worst, err)
                print(f"D {D:3d} QV {QV}: max |kernel - CPU| / max |CPU| = {err:.2e}")
    for D in (64, 128, 256):  # oscar3 K rows (beside an oscar2 or f16 V)
        for QV in (1, 2, 4, 8):
            for _ in range(args.trials):
                rows = make_rows3(rng, 32, D)
                codes, qd = quantize_q8_0(rng.normal(size=(QV, D)))
                ref = cpu_scores3(rows, codes, qd)
                got = k_tile(rows, codes, qd, D, o3=True)
                err = float(np.abs(got - ref).max() / np.abs(ref).max())
                worst = max(worst, err)
                print(f"oscar3 D {D:3d} QV {QV}: max |kernel - CPU| / max |CPU| = {err:.2e}")
    for kind in ("q4_0", "q8_0"):  # K rows the kernel stages beside an oscar2 V, heads up to 128
        for D in (64, 128):
            for QV in (1, 2, 4, 8):
                for _ in range(args.trials):
                    rows = make_rows_q(rng, 32, D, kind)
                    codes, qd = quantize_q8_0(rng.normal(size=(QV, D)))
                    ref = cpu_scores_q(rows, codes, qd, kind)
                    got = k_tile_q(rows, codes, qd, D, kind)
                    err = float(np.abs(got - ref).max() / np.abs(ref).max())
                    worst = max(worst, err)
                    print(f"{kind} D {D:3d} QV {QV}: max |kernel - CPU| / max |CPU| = {err:.2e}")
    ok = worst < 1e-5
    print(f"{'ok' if ok else 'FAILED'}: worst {worst:.2e}")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
