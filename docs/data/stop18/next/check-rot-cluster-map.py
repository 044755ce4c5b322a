# (stop 18, run here: "ok 117 configurations") python3 docs/data/stop18/next/check-rot-cluster-map.py
# index-map check of k_rot_cluster (rot-cluster.diff): phase 1 covers every (row, dim) once, phase 2
# every (row, output column) once, for D 64/128/256 and groups of 1-4 jobs of 1-64 rows
import itertools, random
ROT_CL, THREADS, TC = 8, 256, 4
def check(D, rows, rope):
    off = [0]
    for r in rows: off.append(off[-1] + r)
    n_all = off[-1]
    seen = {}
    for b in range(ROT_CL):  # every block reads everything
        cov = set()
        for t0 in range(THREADS):
            for t in range(t0, n_all*(D//2), THREADS):
                rr, m = divmod(t, D//2)
                i0, i1 = (m, m + D//2) if rope == 2 else (2*m, 2*m + 1)
                for i in (i0, i1):
                    assert (rr, i) not in cov; cov.add((rr, i))
        assert len(cov) == n_all*D
    CPB = D//ROT_CL; NCG = CPB//TC; NRT = THREADS//NCG
    out = set()
    for b in range(ROT_CL):
        for t in range(THREADS):
            cg = t % NCG; j0 = b*CPB + cg*TC
            for rr in range(t//NCG, n_all, NRT):
                # job lookup as rot_cluster_job
                k, first = 0, 0
                for q in range(1, 4):
                    if q < len(rows) and rr >= off[q]: k, first = q, off[q]
                assert off[k] <= rr < off[k+1]
                for c in range(TC):
                    key = (rr, j0 + c)
                    assert key not in out and 0 <= j0 + c < D; out.add(key)
    assert len(out) == n_all*D
random.seed(1)
n = 0
for D in (64, 128, 256):
    for nj in (1, 2, 3, 4):
        for _ in range(5):
            rows = [random.choice([1, 4, 8, 9, 32, 48, 64]) for _ in range(nj)]
            if sum(rows)*(D+4)*4 > 48*1024: continue
            for rope in (0, 1, 2):
                check(D, rows, rope); n += 1
print("ok", n, "configurations")
