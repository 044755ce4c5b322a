"""Covariance, rotation, clipping and attention maths against brute force on small tensors."""
from __future__ import annotations

import numpy as np
import pytest

from oscar.calib import clip, covariance as cov
from oscar.core import rotation as rot
from oscar.core.quant import fake_quantize

torch = pytest.importorskip("torch")


def rand_qkv(seed=0, t=37, hq=6, hkv=2, d=8):
    g = np.random.default_rng(seed)
    scale = np.linspace(0.2, 3.0, d)  # anisotropic, like real activations
    return (g.standard_normal((t, hq, d)) * scale, g.standard_normal((t, hkv, d)) * scale[::-1],
            g.standard_normal((t, hkv, d)))


def test_query_second_moment_brute_force():
    q, _, _ = rand_qkv()
    t, hq, d = q.shape
    hkv, g = 2, hq // 2
    c = cov.query_second_moment(q, hkv)
    for h in range(hkv):
        ref = np.zeros((d, d))
        for tt in range(t):
            for j in range(h * g, (h + 1) * g):
                ref += np.outer(q[tt, j], q[tt, j])
        np.testing.assert_allclose(c[h], ref / (t * g), rtol=1e-12, atol=1e-12)
    all_heads = sum(np.outer(q[tt, j], q[tt, j]) for tt in range(t) for j in range(hq)) / (t * hq)
    np.testing.assert_allclose(cov.key_covariance(q, hkv), all_heads, rtol=1e-12, atol=1e-12)


def test_value_covariance_brute_force():
    q, k, v = rand_qkv(1)
    t, hkv, d = k.shape
    c = cov.query_second_moment(q, hkv)
    per_head = cov.value_covariance(k, v, c, per_head=True)
    for h in range(hkv):
        w = np.array([k[tt, h] @ c[h] @ k[tt, h] for tt in range(t)])
        w = w / w.mean()
        assert abs(w.mean() - 1) < 1e-12
        ref = sum(w[tt] * np.outer(v[tt, h], v[tt, h]) for tt in range(t)) / t
        np.testing.assert_allclose(per_head[h], ref, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(cov.value_covariance(k, v, c), per_head.mean(0), rtol=1e-12)


def test_streaming_moments_equal_batch():
    q, k, v = rand_qkv(2, t=50)
    m = cov.LayerMoments(2, 8)
    for s in (slice(0, 13), slice(13, 40), slice(40, 50)):
        m.add_queries(q[s])
    for s in (slice(0, 7), slice(7, 50)):
        m.add_values(k[s], v[s])
    c = cov.query_second_moment(q, 2)
    np.testing.assert_allclose(m.sigma_k(True), c, rtol=1e-12)
    np.testing.assert_allclose(m.sigma_k(), c.mean(0), rtol=1e-12)
    np.testing.assert_allclose(m.sigma_v(True), cov.value_covariance(k, v, c, True), rtol=1e-11)
    np.testing.assert_allclose(m.sigma_v(), cov.value_covariance(k, v, c), rtol=1e-11)
    with pytest.raises(RuntimeError):
        m.add_queries(q)


def test_hadamard_and_bit_reverse_brute_force():
    for d in (1, 2, 8, 64):
        h = rot.hadamard(d)
        ref = np.array([[(-1) ** bin(i & j).count("1") for j in range(d)] for i in range(d)]) / np.sqrt(d)
        np.testing.assert_array_equal(h, ref)
    assert rot.bit_reverse(8).tolist() == [0, 4, 2, 6, 1, 5, 3, 7]
    br = rot.bit_reverse(64)
    assert all(int(format(i, "06b")[::-1], 2) == br[i] for i in range(64))
    with pytest.raises(ValueError, match="power of two"):
        rot.hadamard(48)


@pytest.mark.parametrize("d", [8, 64, 128])
def test_rotation_is_u_h_p(d):
    g = np.random.default_rng(d)
    a = g.standard_normal((4 * d, d)) * np.linspace(0.1, 5, d)
    sigma = a.T @ a / len(a)
    sigma[0, 1] += 1e-3  # not exactly symmetric: the rotation symmetrises first
    r = rot.rotation_from_covariance(sigma)
    assert rot.orthogonality_error(r) < 1e-12
    # brute force: eigenvectors by decreasing eigenvalue, then Hadamard, then bit-reversed placement
    s = (sigma + sigma.T) / 2
    w, u = np.linalg.eigh(s)
    u = u[:, ::-1]
    w = w[::-1]
    uh = np.zeros((d, d))
    for i in range(d):  # column i of U·H
        uh[:, i] = sum(u[:, m] * rot.hadamard(d)[m, i] for m in range(d))
    # eigenvectors are defined up to sign: compare U·diag(±1) with the module's U
    _, u_mod = rot.eigenbasis(sigma)
    signs = np.sign(np.sum(u_mod * u, axis=0))
    np.testing.assert_allclose(u_mod, u * signs, atol=1e-8)
    uh = (u * signs) @ rot.hadamard(d)
    ref = np.zeros((d, d))
    for i in range(d):
        ref[:, rot.bit_reverse(d)[i]] = uh[:, i]
    np.testing.assert_allclose(r, ref, atol=1e-10)
    # U diagonalises Σ with decreasing eigenvalues
    np.testing.assert_allclose(u_mod.T @ s @ u_mod, np.diag(w), atol=1e-9 * w[0])
    assert np.all(np.diff(w) <= 0)


def test_per_head_rotations_stack():
    g = np.random.default_rng(3)
    s = np.stack([(lambda a: a.T @ a)(g.standard_normal((40, 16))) for _ in range(3)])
    r = rot.rotation_from_covariance(s)
    assert r.shape == (3, 16, 16)
    for h in range(3):
        np.testing.assert_array_equal(r[h], rot.rotation_from_covariance(s[h]))
    assert rot.orthogonality_error(r) < 1e-12


def test_check_orthogonal_rejects():
    with pytest.raises(ValueError, match="not orthogonal"):
        rot.check_orthogonal(np.eye(8) * 1.01)
    with pytest.raises(ValueError, match="NaN"):
        rot.check_orthogonal(np.full((4, 4), np.nan))


def clip_rows_brute(x, r):
    out = np.array(x, dtype=np.float32, copy=True)
    d = x.shape[-1]
    for row in out.reshape(-1, d):
        a = sorted(abs(float(v)) for v in row)
        k = int(np.floor(float(np.float32(r)) * (d - 1) + 0.5))
        t = a[k]
        for i in range(d):
            row[i] = min(max(row[i], -t), t)
    return out


@pytest.mark.parametrize("r", [0.0, 0.5, 0.92, 0.96, 60 / 63, 1.0])
def test_clip_rows_brute_force(r):
    x = np.random.default_rng(4).standard_normal((5, 3, 64)).astype(np.float32) * 3
    np.testing.assert_array_equal(clip.clip_rows(x, r), clip_rows_brute(x, r))


def test_clip_rows_definition_details():
    x = np.arange(-31, 33, dtype=np.float32)[None]  # |x| sorted: 0,1,1,2,2,...,31,31,32
    assert clip.clip_index(0.96, 64) == 60 and clip.clip_index(0.92, 64) == 58
    assert clip.clip_index(1.0, 64) == 63
    np.testing.assert_array_equal(clip.clip_rows(x, 1.0), x)
    t = np.sort(np.abs(x[0]))[60]
    assert clip.clip_rows(x, 0.96).max() == t and clip.clip_rows(x, 0.96).min() == -t
    for k in range(64):
        assert clip.clip_index(clip.ratio_of_index(k, 64), 64) == k
    with pytest.raises(ValueError):
        clip.clip_rows(x, 1.5)


def _attn_np(q, k, v, scaling):
    """Brute-force causal GQA attention, float64: q [T,Hq,D], k/v [T,Hkv,D] -> [T,Hq,D]."""
    t, hq, d = q.shape
    g = hq // k.shape[1]
    out = np.zeros((t, hq, d))
    for i in range(t):
        for h in range(hq):
            s = np.array([q[i, h] @ k[j, h // g] * scaling for j in range(i + 1)])
            p = np.exp(s - s.max())
            p /= p.sum()
            out[i, h] = p @ v[: i + 1, h // g]
    return out


def test_reference_attention_brute_force_and_rotation_invariance():
    from oscar.calib.capture import reference_attention
    q, k, v = rand_qkv(5, t=21, d=16)
    ref = _attn_np(q, k, v, 0.25)
    tq = lambda x: torch.from_numpy(x.astype(np.float32)).transpose(0, 1)[None]  # [1, H, T, D]
    out = reference_attention(tq(q), tq(k), tq(v), 0.25)[0].transpose(0, 1).numpy()
    np.testing.assert_allclose(out, ref, atol=2e-5)
    # rotation invariance: q' = q R_K, k' = k R_K, v' = v R_V, o = o' R_Vᵀ
    g = np.random.default_rng(6)
    rk = rot.rotation_from_covariance((lambda a: a.T @ a)(g.standard_normal((50, 16))))
    rv = rot.rotation_from_covariance((lambda a: a.T @ a)(g.standard_normal((50, 16))))
    out_r = reference_attention(tq(q @ rk), tq(k @ rk), tq(v @ rv), 0.25)[0].transpose(0, 1).numpy() @ rv.T
    np.testing.assert_allclose(out_r, ref, atol=5e-5)
    # per-KV-head rotations: query heads use their group's rotation
    rkh = np.stack([rk, rk.T @ rk @ rot.hadamard(16)])
    qr = np.stack([q[:, h] @ rkh[h // 3] for h in range(6)], axis=1)
    kr = np.stack([k[:, h] @ rkh[h] for h in range(2)], axis=1)
    out_h = reference_attention(tq(qr), tq(kr), tq(v), 0.25)[0].transpose(0, 1).numpy()
    np.testing.assert_allclose(out_h, ref, atol=5e-5)


def test_layer_sim_matches_brute_force_with_windows():
    """The search's simulator against a per-query brute force with the 16-bit windows."""
    g = np.random.default_rng(7)
    t, hq, hkv, d = 420, 4, 2, 64
    q = g.standard_normal((t, hq, d)).astype(np.float32)
    k = g.standard_normal((t, hkv, d)).astype(np.float32)
    v = g.standard_normal((t, hkv, d)).astype(np.float32)
    rk = rot.rotation_from_covariance(np.cov(k.reshape(-1, d).T))
    rv = rot.hadamard(d)
    sim = clip.layer_sim(q, k, v, rk, rv, 0.125, sliding_window=300, query_stride=25)
    rkq, rvq = 0.9, 0.8
    got = sim.error(clip.quantized(sim.k, rkq), clip.quantized(sim.v, rvq))
    # brute force in float64
    kr, vr, qr = k @ rk, v @ rv, q @ rk
    kq = fake_quantize(clip_rows_brute(kr.astype(np.float32), rkq)).astype(np.float64)
    vq = fake_quantize(clip_rows_brute(vr.astype(np.float32), rvq)).astype(np.float64)
    err = 0.0
    for i in range(64 + 256, t, 25):
        js = [j for j in range(i + 1) if i - j < 300]
        for h in range(hq):
            def out(kk, vv):
                s = np.array([qr[i, h] @ kk[j, h // 2] * 0.125 for j in js])
                p = np.exp(s - s.max())
                p /= p.sum()
                return sum(p[n] * vv[j, h // 2] for n, j in enumerate(js))
            two = lambda j: 64 <= j <= i - 256
            kmix = np.where(np.array([two(j) for j in range(t)])[:, None, None], kq, kr)
            vmix = np.where(np.array([two(j) for j in range(t)])[:, None, None], vq, vr)
            err += np.sum((out(kmix, vmix) - out(kr, vr)) ** 2)
    assert got == pytest.approx(err, rel=2e-3)
