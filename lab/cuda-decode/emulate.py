#!/usr/bin/env python3
"""Lane-by-lane numpy emulation of oscar2_decode's fragment arithmetic for one KV head and one
chunk (the PTX m16n8k16 and movmatrix layouts), against float64 attention over the
dequantised rows. Checks the index logic of the kernel without a GPU."""
import numpy as np

rng = np.random.default_rng(5)
D, G, TILE = 128, 4, 32
n = 96                                   # cells (3 tiles)
sl2 = np.log2(np.e) / np.sqrt(D)

def quant(x):                            # 64 values -> d, m (f16), codes
    mn, mx = x.min(), x.max()
    d = np.float16((mx - mn) / 3); m = np.float16(mn)
    q = np.clip(np.rint((x - np.float32(m)) / np.float32(d)), 0, 3).astype(np.uint8)
    qs = np.zeros(16, np.uint8)
    for i in range(64): qs[i & 15] |= q[i] << (2 * (i >> 4))
    return d, m, qs

def row(x):                              # 128 values -> 40 bytes
    out = b""
    for b in range(2):
        d, m, qs = quant(x[64*b:64*b+64])
        out += np.array([d, m], np.float16).tobytes() + qs.tobytes()
    return np.frombuffer(out, np.uint8)

def deq(r):
    y = np.zeros(128)
    for b in range(2):
        d, m = np.frombuffer(r[20*b:20*b+4].tobytes(), np.float16).astype(np.float64)
        qs = r[20*b+4:20*b+20]
        for i in range(64): y[64*b+i] = m + d * ((qs[i & 15] >> (2*(i >> 4))) & 3)
    return y

Kx = rng.normal(size=(n, D)) + 0.5*rng.normal(size=D); Vx = rng.normal(size=(n, D)) + 0.3*rng.normal(size=D)
Kr = np.stack([row(x) for x in Kx]); Vr = np.stack([row(x) for x in Vx])
Q = 1.5 * rng.normal(size=(G, D)).astype(np.float32)

# reference
Kd = np.stack([deq(r) for r in Kr]); Vd = np.stack([deq(r) for r in Vr])
S = Q.astype(np.float64) @ Kd.T / np.sqrt(D)
P = np.exp(S - S.max(1, keepdims=True)); ref = (P @ Vd) / P.sum(1, keepdims=True)

def u32(b): return int.from_bytes(bytes(b), "little")
def h2(lo, hi): return (int(np.float16(lo).view(np.uint16)) | (int(np.float16(hi).view(np.uint16)) << 16))
def unh2(u): return np.array([u & 0xffff, u >> 16], np.uint16).view(np.float16).astype(np.float64)

# mma m16n8k16: A[l] = 4 regs, B[l] = 2 regs, C[l] = 4 floats
def mma(C, A, B):
    Am = np.zeros((16, 16)); Bm = np.zeros((16, 8))
    for l in range(32):
        g, t = l >> 2, l & 3
        for i, (r, c) in enumerate([(g, 2*t), (g+8, 2*t), (g, 2*t+8), (g+8, 2*t+8)]):
            Am[r, c:c+2] = unh2(A[l][i])
        for i, k in enumerate([2*t, 2*t+8]):
            Bm[k:k+2, g] = unh2(B[l][i])
    Cm = Am @ Bm
    out = []
    for l in range(32):
        g, t = l >> 2, l & 3
        out.append([C[l][0] + Cm[g, 2*t], C[l][1] + Cm[g, 2*t+1], C[l][2] + Cm[g+8, 2*t], C[l][3] + Cm[g+8, 2*t+1]])
    return out

def movtrans(X):                         # X[l] = packed (row g, cols 2t, 2t+1)
    M = np.zeros((8, 8), np.uint16)
    for l in range(32):
        g, t = l >> 2, l & 3
        M[g, 2*t], M[g, 2*t+1] = X[l] & 0xffff, X[l] >> 16
    T = M.T
    return [int(T[l >> 2, 2*(l & 3)]) | (int(T[l >> 2, 2*(l & 3)+1]) << 16) for l in range(32)]

def byte_perm(x, y, s):
    b = list(x.to_bytes(4, "little") + y.to_bytes(4, "little"))
    return u32([b[(s >> (4*i)) & 7] for i in range(4)])

lanes = range(32)
qb = {}
for l in lanes:
    g, t = l >> 2, l & 3
    for s in range(8):
        b, k = s >> 2, s & 3
        if b == g >> 2:
            f = np.float32(sl2 * 4**(3-k)); d0 = 64*b + 16*k + 4*t; q = Q[g & 3]
            qb[l, s] = (h2(q[d0]*f, q[d0+2]*f), h2(q[d0+1]*f, q[d0+3]*f))
        else:
            qb[l, s] = (0, 0)
qsum = {(l, j): Q[2*((l & 3) & 1) + j, 64*((l & 3) >> 1):64*((l & 3) >> 1)+64].sum() * sl2 for l in lanes for j in range(2)}
O = [[[0.0]*4 for _ in range(8)] for _ in lanes]
mrun = [[-1e30, -1e30] for _ in lanes]; lsum = [[0.0, 0.0] for _ in lanes]; macc = [[0.0, 0.0] for _ in lanes]
M16 = lambda k: 0x00030003 << (2*k)
for it in range(n // TILE):
    Kt, Vt = Kr[it*TILE:(it+1)*TILE], Vr[it*TILE:(it+1)*TILE]
    c = [[[0.0]*4 for _ in lanes] for _ in range(2)]
    for mt in range(2):
        w = {(l, r, b): u32(Kt[16*mt+8*r+(l >> 2), 4+20*b+4*(l & 3):8+20*b+4*(l & 3)]) for l in lanes for r in range(2) for b in range(2)}
        for b in range(2):
            for k in range(4):
                A = [(w[l, 0, b] & M16(k), w[l, 1, b] & M16(k), (w[l, 0, b] >> 8) & M16(k), (w[l, 1, b] >> 8) & M16(k)) for l in lanes]
                c[mt] = mma(c[mt], A, [qb[l, 4*b+k] for l in lanes])
    s = [[[0.0]*4 for _ in range(2)] for _ in lanes]; dv = {}; mv = {}
    for l in lanes:
        g, t = l >> 2, l & 3; bt = t >> 1
        for mt in range(2):
            for r in range(2):
                cell = 16*mt + 8*r + g
                dk, mk = np.frombuffer(Kt[cell, 20*bt:20*bt+4].tobytes(), np.float16).astype(np.float64)
                dvv, mvv = np.frombuffer(Vt[cell, 20*bt:20*bt+4].tobytes(), np.float16)
                for j in range(2):
                    s[l][mt][2*r+j] = c[mt][l][2*r+j] * dk * 2**18 + mk * qsum[l, j]
                dv[l, mt, r] = dvv; mv[l, mt, r] = float(mvv)
    s = [[[s[l][mt][i] + s[l ^ 2][mt][i] for i in range(4)] for mt in range(2)] for l in lanes]
    tmax = [[max(s[l2][mt][2*r+j] for l2 in lanes if (l2 & 3) == (l & 3) for mt in range(2) for r in range(2)) for j in range(2)] for l in lanes]
    if any(tmax[l][j] > mrun[l][j] + 8 for l in lanes for j in range(2)):
        for l in lanes:
            for j in range(2):
                mn = max(mrun[l][j], tmax[l][j]); al = 2.0**(mrun[l][j] - mn); mrun[l][j] = mn
                lsum[l][j] *= al; macc[l][j] *= al
                for i in range(8): O[l][i][j] *= al; O[l][i][2+j] *= al
    pb = {}
    for mt in range(2):
        for r in range(2):
            X = []
            for l in lanes:
                p = [2.0**(s[l][mt][2*r+j] - mrun[l][j]) for j in range(2)]
                for j in range(2): lsum[l][j] += p[j]; macc[l][j] += p[j] * mv[l, mt, r]
                X.append(h2(np.float16(p[0]) * dv[l, mt, r], np.float16(p[1]) * dv[l, mt, r]))
            T = movtrans(X)
            for l in lanes: pb[l, mt, r] = T[l]
    for ks in range(2):
        for b in range(2):
            e, o = {}, {}
            for l in lanes:
                g, t = l >> 2, l & 3
                for hi in range(2):
                    x = 16*ks + 8*hi + 2*t
                    hA = u32(Vt[x, 4+20*b+2*g:6+20*b+2*g]); hB = u32(Vt[x+1, 4+20*b+2*g:6+20*b+2*g])
                    e[l, hi] = byte_perm(hA, hB, 0x0400); o[l, hi] = byte_perm(hA, hB, 0x0501)
            for k in range(4):
                A = [(e[l, 0] & M16(k), o[l, 0] & M16(k), e[l, 1] & M16(k), o[l, 1] & M16(k)) for l in lanes]
                res = mma([O[l][4*b+k] for l in lanes], A, [(pb[l, ks, 0], pb[l, ks, 1]) for l in lanes])
                for l in lanes: O[l][4*b+k] = res[l]
out = np.zeros((G, D)); ml = {}
for l in lanes:
    g, t = l >> 2, l & 3; bt = t >> 1
    L = [sum(lsum[l2][j] for l2 in lanes if (l2 & 3) == t) for j in range(2)]
    Mc = [sum(macc[l2][j] for l2 in lanes if (l2 & 3) == t) for j in range(2)]
    for j in range(2):
        qh = 2*(t & 1) + j
        for k in range(4):
            dim = 64*bt + 16*k + 2*g
            out[qh, dim] = (O[l][4*bt+k][j] * 2**24 / 4**k + Mc[j]) / L[j]
            out[qh, dim+1] = (O[l][4*bt+k][2+j] * 2**24 / 4**k + Mc[j]) / L[j]
nmse = ((out - ref)**2).sum() / (ref**2).sum()
print(f"emulated chunk of {n} cells: NMSE {nmse:.3e}")
assert nmse < 1e-5
