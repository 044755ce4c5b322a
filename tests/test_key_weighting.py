"""Key weighting (R_K = W R, R_Q = W⁻¹ R): W from Σ_K and the centred key covariance, the
exactness of attention (also in the GGUF head layout), the lower 2-bit error on an
anisotropic case, rotation files with ``weight_k`` and GGUFs with ``attn_q_oscar_rot``."""
from __future__ import annotations

import json

import numpy as np
import pytest

from oscar.calib import calibrate as cal, capture, covariance as cov
from oscar.core import gguf_io, limits, rotfile, rotation as rot

D = 64


def _spd(g: np.random.Generator, d: int, spread: float = 3.0) -> np.ndarray:
    """A random symmetric positive definite ``[d, d]`` with eigenvalues over ``spread`` decades."""
    q, _ = np.linalg.qr(g.standard_normal((d, d)))
    return (q * 10.0 ** g.uniform(-spread, 0, d)) @ q.T


def _stack(g: np.random.Generator, *lead: int) -> np.ndarray:
    return np.stack([_spd(g, D) for _ in range(int(np.prod(lead)))]).reshape(*lead, D, D)


# ----------------------------------------------------------------------------- W itself

@pytest.mark.parametrize("lead", [(3,), (2, 3)], ids=["per-layer", "per-head"])
def test_weighting_is_spd_and_pair_is_exact(lead):
    g = np.random.default_rng(0)
    sk, ck = _stack(g, *lead), _stack(g, *lead)
    w = rot.key_weighting(sk, ck)
    r = rot.rotation_from_covariance(sk)
    assert w.shape == r.shape == (*lead, D, D)
    flat_w, flat_r = w.reshape(-1, D, D), r.reshape(-1, D, D)
    for wi, ri, si in zip(flat_w, flat_r, sk.reshape(-1, D, D)):
        assert np.abs(wi - wi.T).max() <= 1e-12 * np.abs(wi).max()
        ev = np.linalg.eigvalsh(wi)
        assert ev[0] > 0 and ev[-1] / ev[0] <= rot.WEIGHT_COND_MAX * (1 + 1e-9)
        assert np.trace(wi @ wi) / D == pytest.approx(1.0, rel=1e-10)  # mean(d_i²) = 1
        # W shares the eigenbasis U of Σ_K (and of R = U H P)
        _, u = rot.eigenbasis(si)
        m = u.T @ wi @ u
        assert np.abs(m - np.diag(np.diag(m))).max() < 1e-10
    rk, rq = rot.weighted_rotations(w, r)
    assert rot.pair_error(rk, rq).max() < 1e-10
    # R_K is not orthogonal (the weighting does something), R_Q R_Kᵀ = I is what holds
    assert rot.orthogonality_error(rk) > 0.1


@pytest.mark.parametrize("exponent", [None, 0.125, 0.5])
def test_weighting_formula_on_a_diagonal_case(exponent):
    # Σ_K = diag(λ), Cov_K = diag(s): W = diag(d), d = (λ/s)^A scaled to mean(d²) = 1 (A = 1/4 by default)
    lam = np.linspace(4.0, 0.5, D) ** 3
    s = np.linspace(0.2, 3.0, D)
    w = rot.key_weighting(np.diag(lam), np.diag(s)) if exponent is None else \
        rot.key_weighting(np.diag(lam), np.diag(s), exponent)
    d = (lam / s) ** (0.25 if exponent is None else exponent)
    d /= np.sqrt(np.mean(d ** 2))
    np.testing.assert_allclose(w, np.diag(d), atol=1e-12)


def test_weighting_floors_and_condition_cap():
    # a query direction of zero energy and a key direction of zero variance stay finite, and
    # the spread of d is capped
    lam = np.r_[np.ones(D - 1), 0.0]
    s = np.r_[0.0, np.ones(D - 1)]
    w = rot.key_weighting(np.diag(lam), np.diag(s))
    assert np.all(np.isfinite(w))
    ev = np.linalg.eigvalsh(w)
    assert ev[-1] / ev[0] == pytest.approx(rot.WEIGHT_COND_MAX, rel=1e-9)
    limits.check_key_weighting(w.astype(np.float32), "weight_k", 0)


def test_layer_moments_key_covariance():
    g = np.random.default_rng(1)
    hkv = 2
    ks = [g.standard_normal((t, hkv, D)) * np.linspace(0.1, 2, D) + g.standard_normal(D) for t in (50, 70)]
    m = cov.LayerMoments(hkv, D)
    for k in ks:
        m.add_queries(g.standard_normal((len(k), 4, D)))
    for k in ks:
        m.add_values(k, g.standard_normal(k.shape))
    allk = np.concatenate(ks)
    want = np.stack([np.cov(allk[:, h].T, bias=True) for h in range(hkv)])
    np.testing.assert_allclose(m.cov_k(per_head=True), want, atol=1e-12)
    np.testing.assert_allclose(m.cov_k(), want.mean(axis=0), atol=1e-12)


# ----------------------------------------------------------------------------- invariance and layout

def test_scores_unchanged_in_both_head_layouts(smollm2):
    """With unquantised keys, (q R_Q)·(k R_K) = q·k, in Hugging Face's layout and in the GGUF's
    (keys and queries permuted as llama.cpp's converter does, R's rows permuted, W's rows and
    columns), with W and R stored as a rotation file holds them (float32, GGUF layout)."""
    shape = gguf_io.model_shape(smollm2)
    hq, hkv, d = shape.n_head, shape.n_head_kv, shape.head_dim
    g = np.random.default_rng(2)
    t = 40
    q = g.standard_normal((t, hq, d))
    k = g.standard_normal((t, hkv, d)) * np.linspace(3, 0.1, d) + 0.5
    sk = cov.key_covariance(q * np.linspace(0.2, 4, d), hkv, per_head=True)
    ck = np.stack([_spd(g, d) for _ in range(hkv)])
    r = rot.rotation_from_covariance(sk)          # [Hkv, D, D], HF layout
    w = rot.key_weighting(sk, ck)
    perm = capture.rope_pair_permutation(d)
    rot_g = cal.permute_rotation(r, perm).astype(np.float32)
    w_g = cal.permute_weighting(w, perm).astype(np.float32)
    rots = rotfile.Rotations(rot_g[None], rot_g[None], np.ones(1, np.float32), np.ones(1, np.float32), {},
                         weight_k=w_g[None])
    r_k, r_q = rots.key_matrix[0], rots.query_matrix[0]
    grp = np.arange(hq) // (hq // hkv)

    def scores(qq, kk, mq, mk):  # [Hq, T, T]
        qr = np.einsum("thd,hde->hte", qq, mq[grp])
        kr = np.einsum("thd,hde->hte", kk, mk)
        return np.einsum("hte,hse->hts", qr, kr[grp])

    ref = np.einsum("thd,shd->hts", q, k[:, grp])  # q·k of each query head with its group's keys
    rk_hf, rq_hf = rot.weighted_rotations(w, r)
    np.testing.assert_allclose(scores(q, k, rq_hf, rk_hf), ref, atol=1e-10 * np.abs(ref).max())
    qg, kg = q[..., perm], k[..., perm]
    np.testing.assert_allclose(scores(qg, kg, r_q, r_k), ref, atol=1e-4 * np.abs(ref).max())
    # the rotated coordinates are the same in both layouts (the centring means rely on it)
    np.testing.assert_allclose(np.einsum("thd,hde->the", kg, r_k), np.einsum("thd,hde->the", k, rk_hf),
                               atol=1e-4 * np.abs(k).max())
    assert limits.check_rotation_pair(r_k, r_q, "k", "q", 0) is not None
    # control: permuting only W's rows (like R's) breaks the scores, so the test can fail
    bad = rotfile.Rotations(rot_g[None], rot_g[None], np.ones(1, np.float32), np.ones(1, np.float32), {},
                        weight_k=(w[..., perm, :].astype(np.float32))[None])
    assert np.abs(scores(qg, kg, bad.query_matrix[0], bad.key_matrix[0]) - ref).max() > 0.1 * np.abs(ref).max()


# ----------------------------------------------------------------------------- the 2-bit error

def _anisotropic(g: np.random.Generator, t: int = 480, hq: int = 4, hkv: int = 2):
    """Queries that read a few directions strongly; keys whose variance lies mostly in the
    directions queries ignore (random orientation, so no axis is special)."""
    basis, _ = np.linalg.qr(g.standard_normal((D, D)))
    q_scale = np.r_[np.full(4, 3.0), np.full(D - 4, 0.03)]
    k_scale = np.r_[np.full(4, 0.3), np.full(D - 4, 3.0)]
    q = (g.standard_normal((t, hq, D)) * q_scale) @ basis.T
    k = (g.standard_normal((t, hkv, D)) * k_scale) @ basis.T
    v = g.standard_normal((t, hkv, D))
    return q, k, v


def test_weighting_lowers_the_attention_error():
    from oscar.calib import clip
    g = np.random.default_rng(3)
    q, k, v = _anisotropic(g)
    m = cov.LayerMoments(k.shape[1], D)
    m.add_queries(q)
    m.add_values(k, v)
    r = rot.rotation_from_covariance(m.sigma_k())
    rv = rot.rotation_from_covariance(m.sigma_v())
    w = rot.key_weighting(m.sigma_k(), m.cov_k())
    rk, rq = rot.weighted_rotations(w, r)
    kw = dict(sink=4, recent=32, query_stride=4)
    plain = clip.layer_sim(q, k, v, r, rv, D ** -0.5, **kw)
    weighted = clip.layer_sim(q, k, v, rk, rv, D ** -0.5, rot_q=rq, **kw)
    # exact attention is the same (the weighting only moves the quantisation)
    np.testing.assert_allclose(weighted.o_ref.numpy(), plain.o_ref.numpy(), atol=1e-4)
    e_plain = clip.attention_error([plain], 1.0, 1.0)
    e_weighted = clip.attention_error([weighted], 1.0, 1.0)
    assert e_weighted < 0.5 * e_plain
    # and after the clip search on both
    s_plain = clip.search_layer([plain], D)
    s_weighted = clip.search_layer([weighted], D)
    assert s_weighted.error < 0.5 * s_plain.error


# ----------------------------------------------------------------------------- rotation files

def _rotations(per_head: bool = False, n_layer: int = 3, hkv: int = 2) -> rotfile.Rotations:
    g = np.random.default_rng(4)
    lead = (n_layer, hkv) if per_head else (n_layer,)
    sk, ck = _stack(g, *lead), _stack(g, *lead)
    r = rot.rotation_from_covariance(sk).astype(np.float32)
    w = rot.key_weighting(sk, ck).astype(np.float32)
    meta = {"n_layer": n_layer, "head_dim": D, "per_head": per_head, "calibration": {"key_weighting": True}}
    return rotfile.Rotations(r, r.copy(), np.full(n_layer, 0.9, np.float32), np.full(n_layer, 0.8, np.float32), meta,
                         weight_k=w)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("per_head", [False, True])
def test_rotation_file_round_trip_with_weight_k(tmp_path, suffix, half, per_head):
    r = _rotations(per_head)
    f = r.save(tmp_path / f"rot{suffix}", half=half)
    back = rotfile.Rotations.load(f)
    assert back.weight_k is not None and back.weight_k.dtype == np.float32
    # stored as its scales in rot_k's eigenbasis (D values a matrix, not D x D)
    if suffix == ".npz":
        with np.load(f) as z:
            assert z["weight_k"].shape == r.rot_k.shape[:-1] and z["weight_k"].dtype == np.float32
    d, _ = rot.weighting_scales(r.weight_k, r.rot_k)
    np.testing.assert_allclose(rot.weighting_scales(back.weight_k, back.rot_k)[0], d, rtol=1e-5)
    np.testing.assert_allclose(back.weight_k, r.weight_k, atol=2e-3 if half else 1e-5)
    assert rot.orthogonality_error(back.rot_k) < 1e-5
    assert rot.pair_error(back.key_matrix, back.query_matrix).max() < 1e-5
    tol = 2e-3 if half else 1e-5
    np.testing.assert_allclose(back.key_matrix, r.key_matrix, atol=tol)
    np.testing.assert_allclose(back.query_matrix, r.query_matrix, atol=tol * 10)
    np.testing.assert_allclose(back.key_matrix, back.weight_k.astype(np.float64) @ back.rot_k, atol=1e-6)


def test_weighting_scales_rebuild_the_weighting():
    """W = U diag(d) U^T with U = R (H P)^T: the scales of key_weighting's W in the basis of
    rotation_from_covariance's R rebuild W, in the GGUF's permuted layout as well."""
    g = np.random.default_rng(11)
    sk, ck = _stack(g, 3), _stack(g, 3)
    r, w = rot.rotation_from_covariance(sk), rot.key_weighting(sk, ck)
    d, residual = rot.weighting_scales(w, r)
    assert residual < 1e-12 and d.shape == (3, D) and (d > 0).all()
    np.testing.assert_allclose(rot.weighting_from_scales(d, r), w, atol=1e-12)
    perm = g.permutation(D)
    w_g = w[:, perm][:, :, perm]
    np.testing.assert_allclose(rot.weighting_from_scales(d, r[:, perm]), w_g, atol=1e-12)
    # a W that is not diagonal in R's basis is told apart (and kept whole by save)
    assert rot.weighting_scales(w, rot.rotation_from_covariance(ck))[1] > 1e-2


def test_rotation_file_keeps_a_weighting_of_another_basis_whole(tmp_path):
    r = _rotations()
    g = np.random.default_rng(12)
    r.weight_k = rot.key_weighting(_stack(g, 3), _stack(g, 3)).astype(np.float32)  # not rot_k's basis
    back = rotfile.Rotations.load(r.save(tmp_path / "whole.npz"))
    with np.load(tmp_path / "whole.npz") as z:
        assert z["weight_k"].shape == r.rot_k.shape
    np.testing.assert_array_equal(back.weight_k, r.weight_k)


@pytest.mark.parametrize("edit,msg", [
    (lambda d: d * np.r_[1.0, -1.0, 1.0][:, None], "weight_k[1] (layer 1) is not symmetric positive definite"),
    (lambda d: np.where(np.arange(D) == 5, np.nan, d), "weight_k[0] (layer 0) holds a non-finite value"),
    (lambda d: d * np.geomspace(1.0, 1e6, D), "weight_k[0] (layer 0) is too ill-conditioned"),
    (lambda d: d[:, :-1], "weight_k has float32 shape (3, 63)"),
], ids=["negative", "nan", "ill-conditioned", "shape"])
def test_rotation_file_refuses_bad_weight_scales(tmp_path, edit, msg):
    r = _rotations()
    d, _ = rot.weighting_scales(r.weight_k, r.rot_k)
    bad = tmp_path / "bad.npz"
    np.savez(bad, rot_k=r.rot_k, rot_v=r.rot_v, clip_k=r.clip_k, clip_v=r.clip_v,
             weight_k=np.ascontiguousarray(edit(d), np.float32), meta=np.array(json.dumps(r.meta)))
    with pytest.raises(rotfile.BadRotationFile) as e:
        rotfile.Rotations.load(bad)
    assert msg in str(e.value) and str(bad) in str(e.value) and "--rotations calibrate" in str(e.value)


def test_rotation_file_without_weight_k_loads_as_before(tmp_path):
    r = _rotations()
    r.weight_k = None
    back = rotfile.Rotations.load(r.save(tmp_path / "plain.npz"))
    assert back.weight_k is None
    np.testing.assert_array_equal(back.key_matrix, back.rot_k)
    np.testing.assert_array_equal(back.query_matrix, back.rot_k)
    with np.load(tmp_path / "plain.npz") as z:
        assert "weight_k" not in z.files


def _asym(w):
    w = w.copy()
    w[1, 0, 1] += 0.05
    return w


def _indefinite(w):
    w = w.copy()
    w[1] -= 2.0 * np.abs(np.linalg.eigvalsh(w[1].astype(np.float64))).max() * np.eye(D, dtype=np.float32)
    return w


def _ill(w):
    w = w.copy()
    u = np.linalg.qr(np.random.default_rng(5).standard_normal((D, D)))[0]
    w[1] = ((u * np.r_[1.0, np.full(D - 1, 1e-6)]) @ u.T).astype(np.float32)
    w[1] = 0.5 * (w[1] + w[1].T)
    return w


def _nan(w):
    w = w.copy()
    w[1, 3, 3] = np.nan
    return w


@pytest.mark.parametrize("edit,msg", [
    (_asym, "weight_k[1] (layer 1) is not symmetric"),
    (_indefinite, "weight_k[1] (layer 1) is not symmetric positive definite (smallest eigenvalue -"),
    (_ill, "weight_k[1] (layer 1) is too ill-conditioned"),
    (_nan, "weight_k[1] (layer 1) holds a non-finite value"),
    (lambda w: w[:, :32, :32], "weight_k has float32 shape (3, 32, 32)"),
], ids=["asymmetric", "indefinite", "ill-conditioned", "nan", "shape"])
@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_rotation_file_refuses_bad_weight_k(tmp_path, edit, msg, suffix):
    r = _rotations()
    good = r.save(tmp_path / f"good{suffix}")
    arrays = {"rot_k": r.rot_k, "rot_v": r.rot_v, "clip_k": r.clip_k, "clip_v": r.clip_v,
              "weight_k": np.ascontiguousarray(edit(r.weight_k))}
    meta = json.dumps(r.meta)
    bad = tmp_path / f"bad{suffix}"
    if suffix == ".npz":
        np.savez(bad, **arrays, meta=np.array(meta))
    else:
        from safetensors.numpy import save_file
        save_file(arrays, str(bad), metadata={rotfile.ST_META_KEY: meta})
    rotfile.Rotations.load(good)
    with pytest.raises(rotfile.BadRotationFile) as e:
        rotfile.Rotations.load(bad)
    assert msg in str(e.value) and str(bad) in str(e.value) and "--rotations calibrate" in str(e.value)
    # the same checks on rotations in memory (what calibration hands to oscar-convert)
    r.weight_k = edit(r.weight_k)
    with pytest.raises(rotfile.BadRotationFile, match="weight_k"):
        r.check_limits("the calibrated rotations")


# ----------------------------------------------------------------------------- GGUF

@pytest.mark.parametrize("weighted", [True, False])
def test_gguf_round_trip_query_rotation(smollm2, tmp_path, weighted):
    shape = gguf_io.model_shape(smollm2)
    L, hkv, d = shape.n_layer, shape.n_head_kv, shape.head_dim
    g = np.random.default_rng(6)
    sk = np.stack([_spd(g, d) for _ in range(L)])
    r = rot.rotation_from_covariance(sk).astype(np.float32)
    w = rot.key_weighting(sk, np.stack([_spd(g, d) for _ in range(L)])).astype(np.float32)
    rots = rotfile.Rotations(r, r, np.full(L, 0.9, np.float32), np.full(L, 0.8, np.float32), {},
                         weight_k=w if weighted else None)
    out = tmp_path / "w.gguf"
    gguf_io.write_oscar_gguf(smollm2, out, rots, progress=False)
    names = {t.name for t in gguf_io.open_reader(out).tensors}
    assert all((gguf_io.ROT_Q.format(i) in names) == weighted for i in range(L))
    rk, rq = gguf_io.read_key_query_rotations(out, L)
    np.testing.assert_array_equal(rk, rots.key_matrix)
    if weighted:
        np.testing.assert_array_equal(rq, rots.query_matrix)
        assert rot.pair_error(rk, rq).max() < 1e-5
        assert rot.orthogonality_error(rk) > 0.01
    else:
        assert rq is None
    from oscar.sim import simulate as sim
    c = sim.load_calibration(out, smollm2)
    np.testing.assert_array_equal(c.rot_k, rk)
    assert (c.rot_q is not None) == weighted


def test_gguf_write_refuses_a_broken_pair(smollm2, tmp_path):
    shape = gguf_io.model_shape(smollm2)
    L, d = shape.n_layer, shape.head_dim
    r = np.stack([rot.hadamard(d)] * L).astype(np.float32)
    w = np.stack([np.diag(np.linspace(0.5, 1.5, d))] * L)
    rk, rq = rot.weighted_rotations(w, r)
    rq[4] *= 1.01
    with pytest.raises(ValueError, match=r"blk\.4\.attn_q_oscar_rot.*R_Q R_Kᵀ - I"):
        gguf_io.write_fields(smollm2, tmp_path / "x.gguf", rk, r, np.full(L, 0.9), np.full(L, 0.9), 64, 256,
                                 "t", 1, "test", progress=False, rot_q=rq)
    # without R_Q, a non-orthogonal R_K is refused as before
    with pytest.raises(ValueError, match="not orthogonal"):
        gguf_io.write_fields(smollm2, tmp_path / "x.gguf", rk, r, np.full(L, 0.9), np.full(L, 0.9), 64, 256,
                                 "t", 1, "test", progress=False)
    assert not (tmp_path / "x.gguf").exists()


def test_sim_rotates_queries_by_r_q():
    """oscar-sim's prepare(): keys by R_K, queries by R_Q (the calibration's rot_q), so the
    rotated scores equal q·k; without rot_q the queries take R_K."""
    torch = pytest.importorskip("torch")
    from oscar.calib import simcache
    g = np.random.default_rng(7)
    n_layer, hq, hkv, t = 2, 4, 2, 12
    sk = _stack(g, n_layer, hkv)
    r = rot.rotation_from_covariance(sk)
    rk, rq = rot.weighted_rotations(rot.key_weighting(sk, _stack(g, n_layer, hkv)), r)
    ones = np.ones(n_layer, np.float32)
    calib = simcache.Calibration(rk.astype(np.float32), r.astype(np.float32), ones, ones, "test",
                            rot_q=rq.astype(np.float32))
    method = simcache.Method("rotate-only", rotation="calibrated")
    perm = capture.rope_pair_permutation(D)
    plan = simcache.make_plan(method, n_layer, D, perm, calib)
    q, k, v = (torch.from_numpy(g.standard_normal((h, t, D)).astype(np.float32)) for h in (hq, hkv, hkv))
    p = simcache.prepare(q, k, v, 1, plan)
    grp = np.arange(hq) // (hq // hkv)
    qn, kn = q.numpy()[..., perm], k.numpy()[..., perm]
    np.testing.assert_allclose(p.q.numpy(), np.einsum("htd,hde->hte", qn, rq[1][grp]), atol=1e-4)
    np.testing.assert_allclose(p.hi_k.numpy(), np.einsum("htd,hde->hte", kn, rk[1]), atol=1e-4)
    ref = np.einsum("htd,hsd->hts", q.numpy(), k.numpy()[grp])
    got = np.einsum("htd,hsd->hts", p.q.numpy(), p.hi_k.numpy()[grp])
    np.testing.assert_allclose(got, ref, atol=1e-4 * np.abs(ref).max())
    calib.rot_q = None
    p2 = simcache.prepare(q, k, v, 1, simcache.make_plan(method, n_layer, D, perm, calib))
    np.testing.assert_allclose(p2.q.numpy(), np.einsum("htd,hde->hte", qn, rk[1][grp]), atol=1e-4)
