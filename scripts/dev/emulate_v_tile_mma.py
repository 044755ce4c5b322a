#!/usr/bin/env python3
"""Emulate, lane by lane, the P.V step of the oscar2 CUDA decode kernel (oscar2_fa_v_tile_mma,
fattn-oscar2.cu) with numpy, and compare it with the plain sum over cells of p * dequantised V.

A development check for kernel changes that cannot run on a GPU yet: it repeats the kernel's
register arithmetic (byte permutes, shifts, the fragment layouts of mma.m16n8k16 with f16
inputs and f32 accumulators, as the PTX ISA documents them) on random rows, for several forms
of the step: one that builds V from m + d*c in the fragments ("scaled"); one that moves d to P
and adds the minima and the 1024 offsets with two extra mma ("folded"); and one that takes
each code where it lies ("bits"), in three forms: under an exponent that gives it weight 1,
with the offsets that this adds taken out at the end of each tile from sums of P' by an mma
with A all ones (form 'tile') or once per chunk (form 'end', which loses precision over warps
of many tiles), or as an f16 subnormal with no offsets at all (form 'subnormal', the kernel's
form). "bits" also runs the 16-bit pool rows' path (oscar2_fa_v_hot_mma) into the
same accumulators, for the cells read from the pool. With TC_EXTRA_BITS set, the mma's f32 sums
are cut as tensor cores cut them (tc_add), and a warp of several tiles (--tiles) shows what
that does to each form.

    python3 scripts/dev/emulate_v_tile_mma.py [--trials N] [--tiles N]
"""
import argparse

import numpy as np

QK = 64


def prmt(x: int, y: int, sel: int) -> int:
    """__byte_perm(x, y, sel): byte i of the result is byte (sel >> 4i) & 7 of y:x."""
    b = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
    return sum(b[(sel >> (4 * i)) & 7] << (8 * i) for i in range(4))


def h2_of(u: int) -> np.ndarray:
    return np.array([u & 0xFFFF, u >> 16], dtype=np.uint16).view(np.float16)


def u_of(h: np.ndarray) -> int:
    v = np.asarray(h, dtype=np.float16).view(np.uint16)
    return int(v[0]) | (int(v[1]) << 16)


def make_rows(rng, n_cells: int, D: int, d_range=(0.01, 0.5), m_range=(-2.0, 2.0)) -> tuple[np.ndarray, np.ndarray]:
    """oscar2 rows as ints (5 per 64-value block: d|m<<16, then 16 code bytes) and their values."""
    nb = D // QK
    rows = np.zeros((n_cells, 5 * nb), dtype=np.uint64)
    vals = np.zeros((n_cells, D))
    for c in range(n_cells):
        for b in range(nb):
            d = np.float16(rng.uniform(*d_range))
            m = np.float16(rng.uniform(*m_range))
            codes = rng.integers(0, 4, QK)
            qs = np.zeros(16, dtype=np.int64)
            for e in range(QK):
                qs[e % 16] |= codes[e] << (2 * (e // 16))
            rows[c, 5 * b] = int(np.array([d]).view(np.uint16)[0]) | (int(np.array([m]).view(np.uint16)[0]) << 16)
            for w in range(4):
                rows[c, 5 * b + 1 + w] = int(qs[4 * w]) | int(qs[4 * w + 1]) << 8 | int(qs[4 * w + 2]) << 16 | int(qs[4 * w + 3]) << 24
            vals[c, QK * b:QK * (b + 1)] = np.float32(m) + np.float32(d) * codes
    return rows, vals


# how the emulated tensor cores add up: None, exactly (float64); an int n, as published
# measurements describe NVIDIA's f32 accumulation on V100, T4 and A100 (Fasi et al., "Numerical
# behavior of NVIDIA tensor cores", PeerJ CS 2021; Hopper not measured there): the products are
# exact, every term (the accumulator among them) keeps 24 + n bits counted from the largest
# term's leading bit (cut toward zero 23 + n bits below it), and the sum is cut to f32 toward
# zero. The errors of the oscar2 decode tests on the H200 fit n = 0
TC_EXTRA_BITS = None


def tc_add(acc: np.ndarray, terms: np.ndarray, extra: int) -> np.ndarray:
    """acc + sum(terms, axis 0) as the tensor cores round it (TC_EXTRA_BITS); elementwise."""
    allt = np.concatenate([acc[None], terms])
    big = np.abs(allt).max(axis=0)
    e = np.floor(np.log2(np.where(big > 0, big, 1.0)))
    q = 2.0 ** (e - 23 - extra)
    s = (np.trunc(allt / q) * q).sum(axis=0)
    e2 = np.floor(np.log2(np.where(s != 0, np.abs(s), 1.0)))
    q2 = 2.0 ** (e2 - 23)
    return np.where(s != 0, np.trunc(s / q2) * q2, 0.0)


def mma(acc, A, B):
    """acc[lane][4] += A.B for one warp: A[lane][4] and B[lane][2] are fragment registers."""
    Am = np.zeros((16, 16))
    Bm = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for r, (row, k0) in enumerate([(g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8)]):
            Am[row, k0:k0 + 2] = h2_of(A[lane][r]).astype(np.float64)
        for r, k0 in enumerate([2 * t, 2 * t + 8]):
            Bm[k0:k0 + 2, g] = h2_of(B[lane][r]).astype(np.float64)
    C0 = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        C0[g, 2 * t], C0[g, 2 * t + 1], C0[g + 8, 2 * t], C0[g + 8, 2 * t + 1] = acc[lane]
    if TC_EXTRA_BITS is None:
        C = C0 + Am @ Bm
    else:
        prods = Am[:, :, None] * Bm[None, :, :]  # [row][k][col], exact
        C = tc_add(C0, prods.transpose(1, 0, 2), TC_EXTRA_BITS)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        acc[lane] = np.array([C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t], C[g + 8, 2 * t + 1]])


def lane_cells(rows, p_t, k0: int, lane: int):
    """What lane 4g + t reads for k-step k0: B's registers b0, b1 (P^T of query vector g, cells
    2t, 2t + 1 and 2t + 8, 2t + 9) and the four cells' rows."""
    g, t = lane // 4, lane % 4
    b0 = u_of(p_t[g, k0 + 2 * t:k0 + 2 * t + 2])
    b1 = u_of(p_t[g, k0 + 2 * t + 8:k0 + 2 * t + 10])
    return b0, b1, [rows[k0 + 2 * t + o] for o in (0, 1, 8, 9)]


def block_headers(r4, b: int):
    """Block b's d and m of the four cells, as the half2 pairs (cells 0, 1) and (cells 8, 9)."""
    h0, h1, h8, h9 = (int(r[5 * b]) for r in r4)
    return prmt(h0, h1, 0x5410), prmt(h0, h1, 0x7632), prmt(h8, h9, 0x5410), prmt(h8, h9, 0x7632)


def mma_dim(mt: int, r: int) -> int:
    return 64 * (mt // 4) + 8 * (r % 8) + 2 * (mt % 4) + r // 8


def mma_dim_bits(mt: int, r: int) -> int:
    return 64 * (mt // 4) + 16 * (mt % 4) + 2 * (r % 8) + r // 8


def units(accm, e: int) -> None:
    """oscar2_fa_v_units: m-tile 4b + k times 2^(e (24 - 2k)) (f32, exact)."""
    for mt in range(accm.shape[1]):
        accm[:, mt] = (accm[:, mt].astype(np.float32) * np.float32(2.0 ** (e * (24 - 2 * (mt % 4)))))


FORMS = ('end', 'tile', 'subnormal')


def v_tiles_bits(tiles, D: int, form: str = 'tile'):
    """The "bits" step over a warp's tiles: each tile's 2-bit rows with weights p_t and 16-bit
    rows (hot_rows[cell], f16 values or None) with weights p_hot, into one set of accumulators;
    O^T[dim][query vector]. tiles: a list of (rows, p_t, hot_rows, p_hot). form (FORMS):
    'tile', the offsets leave the accumulators at the end of each tile, their sums from an mma
    with A all ones; 'end', once at the end, from each lane's f32 sums of P'; 'subnormal', the
    codes as f16 subnormals, exponent field 0 (c * 2^(2k - 24), no offsets), m-tile 4b + k
    summing in units of 2^(2k - 24), brought to plain units around the 16-bit rows' mma and at
    the end (the kernel's form)."""
    assert form in FORMS, form
    subnormal = form == 'subnormal'
    nb = D // QK
    accm = np.zeros((32, D // 16, 4))
    accb = np.zeros((32, nb, 4))
    accp = np.zeros((32, nb), dtype=np.float32)
    ones = 0x3C003C00
    for rows, p_t, hot_rows, p_hot in tiles:
        accs = np.zeros((32, nb, 4))
        for k0 in range(0, 32, 16):
            A = {}
            for lane in range(32):
                g, t = lane // 4, lane % 4
                wq, bq = 1 + g // 2, 2 * (g % 2)
                sel = bq | (bq + 1) << 4 | (bq + 4) << 8 | (bq + 5) << 12
                b0, b1, (r0, r1, r8, r9) = lane_cells(rows, p_t, k0, lane)
                for b in range(nb):
                    d01, m01, d89, m89 = block_headers((r0, r1, r8, r9), b)
                    pb0 = u_of(h2_of(b0) * h2_of(d01))
                    pb1 = u_of(h2_of(b1) * h2_of(d89))
                    A.setdefault(('b', b), []).append(((m01, m01, m89, m89), (b0, b1)))
                    if form == 'tile':
                        A.setdefault(('s', b), []).append(((ones,) * 4, (pb0, pb1)))
                    elif form == 'end':
                        accp[lane, b] += np.float32(h2_of(pb0).astype(np.float32).sum() + h2_of(pb1).astype(np.float32).sum())
                    y01 = prmt(int(r0[5 * b + wq]), int(r1[5 * b + wq]), sel)
                    y89 = prmt(int(r8[5 * b + wq]), int(r9[5 * b + wq]), sel)
                    z01, z89 = y01 >> 8, y89 >> 8
                    for k in range(4):
                        mask = 0x00030003 << (2 * k)
                        ex = 0 if subnormal else ((25 - 2 * k) << 10) * 0x00010001
                        a = tuple((x & mask) | ex for x in (y01, z01, y89, z89))
                        A.setdefault(('m', 4 * b + k), []).append((a, (pb0, pb1)))
                # the 16-bit rows: word 8mt + g of each row (dims 16mt + 2g, 16mt + 2g + 1)
                hb0, hb1, hot4 = lane_cells(hot_rows, p_hot, k0, lane)
                for mt in range(D // 16):
                    u = [u_of(h[16 * mt + 2 * g:16 * mt + 2 * g + 2]) if h is not None else 0 for h in hot4]
                    a = (prmt(u[0], u[1], 0x5410), prmt(u[0], u[1], 0x7632), prmt(u[2], u[3], 0x5410), prmt(u[2], u[3], 0x7632))
                    A.setdefault(('h', mt), []).append((a, (hb0, hb1)))
            # one mma per entry of each lane's list, in order (the 16-bit rows' after the codes',
            # as in the kernel; in plain units when the codes sum in units of 2^(2k - 24))
            for (kind, i), regs in sorted(A.items(), key=lambda kv: kv[0][0] == 'h'):
                if kind == 'h' and subnormal and i == 0:
                    units(accm, 1)
                n = len(regs) // 32
                for j in range(n):
                    part = [regs[lane * n + j] for lane in range(32)]
                    acc = {'b': accb, 's': accs}.get(kind, accm)
                    mma(acc[:, i], [r[0] for r in part], [r[1] for r in part])
                if kind == 'h' and subnormal and i == D // 16 - 1:
                    units(accm, -1)
        if form == 'tile':  # oscar2_fa_v_offsets: f32 FFMA
            for lane in range(32):
                for b in range(nb):
                    s0, s1 = accs[lane, b, 0], accs[lane, b, 1]
                    for k in range(4):
                        off = np.float32(1024 >> (2 * k))
                        x = accm[lane, 4 * b + k].astype(np.float32)
                        accm[lane, 4 * b + k] = x - off * np.array([s0, s1, s0, s1], dtype=np.float32)
    if subnormal:
        units(accm, 1)
    elif form == 'end':
        # 'end': sum over the lanes of each query vector g, then off_k times it out
        tot = np.array([[accp[4 * g:4 * g + 4, b].sum() for b in range(nb)] for g in range(8)])  # [g][b]
        for lane in range(32):
            t = lane % 4
            for b in range(nb):
                for k in range(4):
                    off = 1024 >> (2 * k)
                    accm[lane, 4 * b + k] -= off * np.array([tot[2 * t, b], tot[2 * t + 1, b], tot[2 * t, b], tot[2 * t + 1, b]])
    O = np.zeros((D, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for mt in range(D // 16):
            x = accm[lane, mt] + accb[lane, mt // 4]
            for r in range(2):
                e = mma_dim_bits(mt, g + 8 * r)
                O[e, 2 * t] = x[2 * r]
                O[e, 2 * t + 1] = x[2 * r + 1]
    return O


def v_tile(rows, p_t, D: int, folded: bool):
    """The kernel's accumulators after one tile (32 cells), as O^T[dim][query vector]."""
    nb = D // QK
    accm = np.zeros((32, D // 16, 4))
    accb = np.zeros((32, nb, 4))
    for k0 in range(0, 32, 16):
        A = {}  # (mt) -> per lane regs
        Bs = {}
        for lane in range(32):
            g, t = lane // 4, lane % 4
            shift = 2 * (g // 2)
            wq = 1 + 2 * (g % 2)
            b0, b1, (r0, r1, r8, r9) = lane_cells(rows, p_t, k0, lane)
            for b in range(nb):
                d01, m01, d89, m89 = block_headers((r0, r1, r8, r9), b)
                if folded:
                    pb0 = u_of(h2_of(b0) * h2_of(d01))  # __hmul2: f16 product, rounded
                    pb1 = u_of(h2_of(b1) * h2_of(d89))
                    Bs.setdefault(('m', b), []).append(((m01, m01, m89, m89), (b0, b1)))
                    Bs.setdefault(('c', b), []).append(((0xE400E400,) * 4, (pb0, pb1)))
                for w in range(2):
                    A0, A1 = int(r0[5 * b + wq + w]), int(r1[5 * b + wq + w])
                    A8, A9 = int(r8[5 * b + wq + w]), int(r9[5 * b + wq + w])
                    for h in range(2):
                        sel = 0x7362 if h else 0x5140
                        x01 = (prmt(A0, A1, sel) >> shift) & 0x03030303
                        x89 = (prmt(A8, A9, sel) >> shift) & 0x03030303
                        if folded:
                            a = (prmt(x01, 0x64, 0x4140), prmt(x01, 0x64, 0x4342),
                                 prmt(x89, 0x64, 0x4140), prmt(x89, 0x64, 0x4342))
                            B = (pb0, pb1)
                        else:
                            def codes_h2(c, s, dd, mm):
                                x = (h2_of(prmt(c, 0x64, s)) - np.float16(1024)).astype(np.float16)
                                return u_of((x * h2_of(dd)).astype(np.float16) + h2_of(mm))  # hfma2 (rounded once in hw; close)
                            a = (codes_h2(x01, 0x4140, d01, m01), codes_h2(x01, 0x4342, d01, m01),
                                 codes_h2(x89, 0x4140, d89, m89), codes_h2(x89, 0x4342, d89, m89))
                            B = (b0, b1)
                        A.setdefault(4 * b + 2 * w + h, []).append((a, B))
        for mt, regs in A.items():
            mma(accm[:, mt], [r[0] for r in regs], [r[1] for r in regs])
        for (kind, b), regs in Bs.items():
            mma(accb[:, b], [r[0] for r in regs], [r[1] for r in regs])
    O = np.zeros((D, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for mt in range(D // 16):
            x = accm[lane, mt] + (accb[lane, mt // 4] if folded else 0)
            for r in range(2):
                e = mma_dim(mt, g + 8 * r)
                O[e, 2 * t] = x[2 * r]
                O[e, 2 * t + 1] = x[2 * r + 1]
    return O


def warp_tiles_nmse(rng, D: int, n_tiles: int, extra: int | None, forms=FORMS) -> dict[str, float]:
    """NMSE (as test-backend-ops counts it) of each form of v_tiles_bits over one warp's n_tiles
    tiles of 4 query vectors, with the mma's f32 sums cut keeping `extra` bits (None: exact).
    The values are as test-backend-ops makes them (uniform in [-1, 1], so that the weighted sum
    is small beside its terms), the weights exp of uniform [-1.5, 0]."""
    global TC_EXTRA_BITS
    tiles, ref = [], np.zeros((D, 8))
    for _ in range(n_tiles):
        rows, vals = make_rows(rng, 32, D, d_range=(0.62, 0.68), m_range=(-1.02, -0.95))
        p = np.zeros((8, 40), dtype=np.float16)
        p[:4, :32] = np.exp(rng.uniform(-1.5, 0, (4, 32))).astype(np.float16)
        tiles.append((rows, p, [None] * 32, np.zeros((8, 40), dtype=np.float16)))
        ref += (p[:, :32].astype(np.float64) @ vals).T
    ref = ref[:, :4]
    saved, TC_EXTRA_BITS = TC_EXTRA_BITS, extra
    try:
        out = {}
        for form in forms:
            O = v_tiles_bits(tiles, D, form)[:, :4]
            out[form] = ((O - ref) ** 2).sum() / (ref ** 2).sum()
        return out
    finally:
        TC_EXTRA_BITS = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--trials', type=int, default=3)
    ap.add_argument('--tiles', type=int, default=8, help='tiles of one warp in the rounding check')
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for D in (64, 128, 256):
        for trial in range(args.trials):
            rows, vals = make_rows(rng, 32, D)
            QV = [1, 2, 4, 8][trial % 4]
            p = np.zeros((8, 40), dtype=np.float16)
            p[:QV, :32] = rng.uniform(0, 1, (QV, 32)).astype(np.float16)
            p[:QV, rng.integers(0, 32, 5)] = 0  # cells read from the pool
            ref = (p[:, :32].astype(np.float64) @ vals).T  # [D][8]
            for folded in (False, True):
                O = v_tile(rows, p, D, folded)
                err = np.abs(O - ref).max() / np.abs(ref).max()
                print(f"D={D:3d} QV={QV} {'folded' if folded else 'scaled'}: max rel err {err:.2e}")
                assert err < 5e-3, "mismatch"
            # bits: some cells' V from 16-bit rows, with their own weights
            hot = rng.integers(0, 32, 6)
            hot_rows = [None] * 32
            p_hot = np.zeros((8, 40), dtype=np.float16)
            for c in hot:
                hot_rows[c] = rng.uniform(-3, 3, D).astype(np.float16)
                p_hot[:QV, c] = rng.uniform(0, 1, QV).astype(np.float16)
            ref_h = ref + sum((p_hot[:, c].astype(np.float64)[None, :] * hot_rows[c].astype(np.float64)[:, None]
                               for c in set(hot.tolist())), np.zeros((D, 8)))
            for form in ('tile', 'subnormal'):
                O = v_tiles_bits([(rows, p, hot_rows, p_hot)], D, form)
                err = np.abs(O - ref_h).max() / np.abs(ref_h).max()
                print(f"D={D:3d} QV={QV} bits, {form} (with 16-bit rows): max rel err {err:.2e}")
                assert err < 5e-3, "mismatch"
    # a warp over several tiles with the tensor cores' rounding: the offsets kept to the end,
    # taken out per tile, and the subnormal codes (the kernel's form)
    for extra in (0, 3):
        for D in (64, 128):
            nmse = warp_tiles_nmse(rng, D, args.tiles, extra)
            print(f"D={D:3d} {args.tiles} tiles, f32 sums cut with {extra} extra bits: NMSE offsets at the end "
                  f"{nmse['end']:.2e}, per tile {nmse['tile']:.2e}, subnormal codes {nmse['subnormal']:.2e}")
            assert nmse['tile'] < 5e-6, "per-tile offsets: NMSE too large"
            assert nmse['subnormal'] < 1e-6, "subnormal codes: NMSE too large"
    print("ok")


if __name__ == '__main__':
    main()
