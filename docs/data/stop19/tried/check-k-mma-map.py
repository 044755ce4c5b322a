"""Check the fragment maps of oscar2_fa_k_tile_mma (k-mma.diff, tried in stop 19) without a GPU: emulate
mma.m16n8k16.row.col.s32.s8.s8.s32 lane by lane (A: lane 4g + t holds row g's and row g + 8's
int8 values at k 4t .. 4t + 3; B: k 4t .. 4t + 3 of column g; C: rows g and g + 8, columns 2t,
2t + 1), feed it what each lane loads, and compare the scores with the dp4a path's formula
(oscar2_fa_dot_oscar2) computed directly. D 64/128/256, QV 1/2/4/8.
    python3 check-k-mma-map.py"""
import numpy as np

rng = np.random.default_rng(1)


def check(D: int, QV: int) -> float:
    nb = D // 64
    codes = rng.integers(0, 4, size=(32, D))                  # cell x value
    d = rng.standard_normal((32, nb)).astype(np.float32)      # a cell's block step and minimum
    m = rng.standard_normal((32, nb)).astype(np.float32)
    q = rng.integers(-127, 128, size=(QV, D))                 # Q's q8_0 codes
    qd = rng.random((QV, D // 32)).astype(np.float32)         # q8_0 scales
    qsd = qd * q.reshape(QV, D // 32, 32).sum(-1)             # scale * sum of the codes

    # the reference: oscar2_fa_dot_oscar2, per 32 values of Q
    ref = np.zeros((QV, 32))
    for v in range(QV):
        for i in range(32):
            for b in range(nb):
                s0 = int((codes[i, 64*b:64*b + 32] * q[v, 64*b:64*b + 32]).sum())
                s1 = int((codes[i, 64*b + 32:64*b + 64] * q[v, 64*b + 32:64*b + 64]).sum())
                ref[v, i] += d[i, b]*(qd[v, 2*b]*s0 + qd[v, 2*b + 1]*s1) + m[i, b]*(qsd[v, 2*b] + qsd[v, 2*b + 1])

    # the packed row: code int j of block b holds values 16k + 4j + y at byte y, bits 2k
    def code_int(cell: int, b: int, j: int) -> list[int]:  # the 4 bytes after (w >> 2s) & 0x03030303, per s
        return [[codes[cell, 64*b + 16*s + 4*j + y] for y in range(4)] for s in range(4)]

    def q_int(v: int, idx: int) -> list[int]:  # q_i[v][idx]: values 4 idx .. 4 idx + 3
        return [q[v, 4*idx + y] for y in range(4)]

    NT = (2*QV + 7)//8
    out = np.full((QV, 32), np.nan)
    acc = np.zeros((32, NT, 2, 2))  # lane, nt, mt, row
    for b in range(nb):
        for mt in range(2):
            C = np.zeros((NT, 16, 8), dtype=np.int64)
            for s in range(4):
                A = np.zeros((16, 16), dtype=np.int64)
                B = np.zeros((NT, 16, 8), dtype=np.int64)
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    a0 = code_int(16*mt + g, b, t)[s]
                    a1 = code_int(16*mt + g + 8, b, t)[s]
                    for y in range(4):
                        A[g, 4*t + y] = a0[y]
                        A[g + 8, 4*t + y] = a1[y]
                    for nt in range(NT):
                        vb = 4*nt + g//2
                        bq = q_int(vb, 16*b + 4*s + t) if vb < QV and g % 2 == s//2 else [0]*4
                        for y in range(4):
                            B[nt, 4*t + y, g] = bq[y]
                for nt in range(NT):
                    C[nt] += A @ B[nt]
            for lane in range(32):
                g, t = lane // 4, lane % 4
                for nt in range(NT):
                    vc = 4*nt + t
                    c = [C[nt, g, 2*t], C[nt, g, 2*t + 1], C[nt, g + 8, 2*t], C[nt, g + 8, 2*t + 1]]
                    qd0 = qd[vc, 2*b] if vc < QV else 0.0
                    qd1 = qd[vc, 2*b + 1] if vc < QV else 0.0
                    sd = qsd[vc, 2*b] + qsd[vc, 2*b + 1] if vc < QV else 0.0
                    c0, c1 = 16*mt + g, 16*mt + g + 8
                    acc[lane, nt, mt, 0] += d[c0, b]*(qd0*c[0] + qd1*c[1]) + m[c0, b]*sd
                    acc[lane, nt, mt, 1] += d[c1, b]*(qd0*c[2] + qd1*c[3]) + m[c1, b]*sd
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for nt in range(NT):
            vc = 4*nt + t
            if vc < QV:
                for mt in range(2):
                    assert np.isnan(out[vc, 16*mt + g]) and np.isnan(out[vc, 16*mt + g + 8]), "a score written twice"
                    out[vc, 16*mt + g] = acc[lane, nt, mt, 0]
                    out[vc, 16*mt + g + 8] = acc[lane, nt, mt, 1]
    assert not np.isnan(out).any(), "a score not written"
    return float(np.abs(out - ref).max() / np.abs(ref).max())


for D in (64, 128, 256):
    for QV in (1, 2, 4, 8):
        err = check(D, QV)
        print(f"D={D:3d} QV={QV}: max relative difference {err:.1e}")
        assert err < 1e-5
print("ok: every score written once and equal to the dp4a path's")
