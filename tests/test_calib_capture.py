"""PyTorch capture on SmolLM2: the attention hook against eager attention, rotation
invariance in the real model, the GGUF head layout, and the clip search against the
fixed ratios on its own objective (re-evaluated by brute force)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from oscar.calib import calibrate as cal, capture, clip  # noqa: E402
from oscar.core import gguf_io, paths, rotation as rot  # noqa: E402
from oscar.core.quant import fake_quantize  # noqa: E402


@pytest.fixture(scope="module")
def smol(smollm2):
    torch.set_num_threads(2)
    m, tok, info = capture.load_model(smollm2)
    return m, tok, info


@pytest.fixture(scope="module")
def text():
    return capture.load_calibration_text(paths.WIKITEXT2_VALID)


def _logits(m, ids, impl):
    m.set_attn_implementation(impl)
    try:
        with torch.inference_mode():
            return m(input_ids=torch.from_numpy(ids)[None], use_cache=False).logits[0].float().numpy()
    finally:
        m.set_attn_implementation(capture.CAPTURE_ATTN)


def test_hook_equals_eager_attention(smol, text):
    m, tok, info = smol
    ids = capture.tokenize_chunks(tok, text, 96, 96)[0]
    seen = {}

    def obs(layer, q, k, v, scaling, sw):
        seen[layer] = (q.shape, k.shape, v.shape, scaling)

    with capture.observing(obs):
        ours = _logits(m, ids, capture.CAPTURE_ATTN)
    assert sorted(seen) == list(range(info.n_layer))
    t = len(ids)
    assert seen[0][:3] == ((t, 9, 64), (t, 3, 64), (t, 3, 64))
    assert seen[0][3] == pytest.approx(64 ** -0.5)
    seen.clear()
    with capture.observing(obs):
        eager = _logits(m, ids, "eager")
    assert not seen  # the eager run really ran transformers' own attention
    np.testing.assert_allclose(ours, eager, atol=2e-3 * np.abs(eager).max())
    assert (ours.argmax(-1) == eager.argmax(-1)).mean() > 0.99


def test_rotated_attention_equals_unrotated_in_model(smol, text):
    """Every layer's attention with q,k rotated by R_K and v by R_V (output rotated back)
    gives the model's logits unchanged."""
    from transformers import AttentionInterface
    m, tok, info = smol
    ids = capture.tokenize_chunks(tok, text, 64, 64)[0]
    g = np.random.default_rng(0)
    rks = [torch.from_numpy(rot.rotation_from_covariance(np.cov(g.standard_normal((64, 200)))).astype(np.float32))
           for _ in range(info.n_layer)]
    rvs = [torch.from_numpy(rot.rotation_from_covariance(np.cov(g.standard_normal((64, 200)))).astype(np.float32))
           for _ in range(info.n_layer)]

    def rotated(module, q, k, v, mask, dropout=0.0, scaling=None, sliding_window=None, **kw):
        i = module.layer_idx
        o = capture.reference_attention(q @ rks[i], k @ rks[i], v @ rvs[i], scaling, sliding_window)
        return (o @ rvs[i].T).transpose(1, 2).contiguous(), None

    AttentionInterface.register("oscar_test_rotated", rotated)
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    AttentionMaskInterface.register("oscar_test_rotated", sdpa_mask)
    base = _logits(m, ids, capture.CAPTURE_ATTN)
    rotl = _logits(m, ids, "oscar_test_rotated")
    np.testing.assert_allclose(rotl, base, atol=1e-3 * np.abs(base).max())


def test_gguf_head_layout_is_converter_permutation(smol, smollm2):
    """llama.cpp's converter permutes Q/K rows per head (reshape(H, 2, D/2).swapaxes);
    re-implemented here independently of capture.rope_pair_permutation."""
    m, _, info = smol
    w_hf = m.model.layers[3].self_attn.k_proj.weight.detach().float().numpy()
    w_gg = gguf_io.tensor_f32(smollm2, "blk.3.attn_k.weight")
    conv = w_hf.reshape(info.n_head_kv, 2, info.head_dim // 2, -1).swapaxes(1, 2).reshape(w_hf.shape)
    np.testing.assert_allclose(conv, w_gg, atol=1e-6)
    perm = capture.qk_permutation(w_hf, w_gg, info.n_head_kv, info.head_dim)
    assert perm is not None
    np.testing.assert_array_equal(w_hf.reshape(3, 64, -1)[:, perm].reshape(w_hf.shape), conv)
    # a key row in GGUF layout, rotated with the GGUF-layout R, equals the HF row rotated with R
    r = rot.rotation_from_covariance(np.cov(np.random.default_rng(1).standard_normal((64, 100))))
    k_hf = np.random.default_rng(2).standard_normal(64)
    np.testing.assert_allclose(k_hf[perm] @ r[perm, :], k_hf @ r, atol=1e-12)


def _objective_brute(h, rk, rv, r_k, r_v, stride=8, sink=64, recent=256, rq=None):
    """The clip objective recomputed in float64 with explicit loops over scored queries (those
    from position sink + recent on; 2-bit K and V outside the sink and recent windows);
    queries rotated by ``rq`` (None: ``rk``)."""
    t, hq, d = h.q.shape
    g = hq // h.k.shape[1]
    qr, kr, vr = h.q @ (rk if rq is None else rq), h.k @ rk, h.v @ rv
    kq = fake_quantize(clip.clip_rows(kr.astype(np.float32), r_k)).astype(np.float64)
    vq = fake_quantize(clip.clip_rows(vr.astype(np.float32), r_v)).astype(np.float64)
    err = 0.0
    for i in range(sink + recent, t, stride):
        two = (np.arange(i + 1) >= sink) & (np.arange(i + 1) <= i - recent)
        for hh in range(hq):
            kv = hh // g
            km = np.where(two[:, None], kq[: i + 1, kv], kr[: i + 1, kv])
            vm = np.where(two[:, None], vq[: i + 1, kv], vr[: i + 1, kv])

            def out(kk, vv):
                s = kk @ qr[i, hh] * h.scaling
                p = np.exp(s - s.max())
                return (p / p.sum()) @ vv
            err += np.sum((out(km, vm) - out(kr[: i + 1, kv], vr[: i + 1, kv])) ** 2)
    return err


@pytest.fixture(scope="module")
def small_cap(smol, text):
    """A capture of 512 fit and 640 held-out tokens."""
    m, tok, info = smol
    fit = capture.tokenize_chunks(tok, text, 512, 512)
    held = capture.tokenize_chunks(tok, text, 640, 640, skip_tokens=512)
    return capture.calibrate_statistics(m, info, fit, held, progress=False)


def test_clip_search_beats_fixed_ratios(smol, small_cap):
    m, tok, info = smol
    cap = small_cap
    rk_all, rv_all = cal.rotations_from_capture(cap, per_head=False)
    total_s = total_f = 0.0
    for layer in (2, 15, 29):
        rk, rv = rk_all[layer], rv_all[layer]
        res = clip.search_layer(cal.layer_sims(cap, layer, rk, rv), info.head_dim)
        h = cap.heldout[0][layer]
        h64 = capture.HeldOutLayer(h.q.astype(np.float64), h.k.astype(np.float64), h.v.astype(np.float64),
                                   h.scaling, None)
        e_s = _objective_brute(h64, rk, rv, res.clip_k, res.clip_v)
        e_f = _objective_brute(h64, rk, rv, clip.FIXED_CLIP_K, clip.FIXED_CLIP_V)
        assert e_s == pytest.approx(res.error, rel=1e-2)
        assert e_f == pytest.approx(res.error_fixed, rel=1e-2)
        assert e_s <= e_f * (1 + 1e-6)
        total_s += e_s
        total_f += e_f
    assert total_s < 0.95 * total_f  # searching clearly beats 0.96/0.92 on this objective


def test_window_split_errors_match_brute_force(smol, small_cap):
    # the calibration weighs splits of the default windows' pool (sink + recent = 320) by the
    # held-out attention-output error over all layers: each split's sum equals the brute-force
    # objective, and the splits differ
    m, tok, info = smol
    cap = small_cap
    rk, rv = cal.rotations_from_capture(cap, per_head=False)
    res = [clip.ClipResult(0.9, 0.85, 0.0, 0.0, 0.0)] * info.n_layer
    errs = cal.window_errors(cap, rk, rv, res, sinks=(4, 64))
    brute = {}
    for s in (4, 64):
        brute[s] = 0.0
        for layer in range(info.n_layer):
            h = cap.heldout[0][layer]
            h64 = capture.HeldOutLayer(h.q.astype(np.float64), h.k.astype(np.float64), h.v.astype(np.float64),
                                       h.scaling, None)
            brute[s] += _objective_brute(h64, rk[layer], rv[layer], 0.9, 0.85, sink=s, recent=320 - s)
    # the same scored queries and reference outputs for every split: the ratio is the energy-free check
    assert errs[4] / errs[64] == pytest.approx(brute[4] / brute[64], rel=2e-2)
    assert abs(errs[4] / errs[64] - 1) > 0.005


def test_default_split_error_from_the_search(smol, small_cap):
    # the calibration takes the default split's error from the clip search instead of measuring
    # it again: the search's objective (every layer oscar2) and its type tables (a plan's mix)
    # give what window_errors measures at that split
    m, tok, info = smol
    cap = small_cap
    rk, rv = cal.rotations_from_capture(cap, per_head=False)
    res, tables = cal.search_clips(cap, rk, rv, progress=False, plan_pairs=[(a, b) for a in ("oscar2", "q4_0") for b in ("oscar2", "q4_0")])
    types = (["q4_0" if i % 3 == 0 else "oscar2" for i in range(info.n_layer)], ["oscar2"] * info.n_layer)
    for ty in (None, types):
        measured = cal.window_errors(cap, rk, rv, res, types=ty, sinks=(clip.SINK_TOKENS,))
        assert cal.searched_error(res, tables, ty) == pytest.approx(measured[clip.SINK_TOKENS], rel=1e-9)
    # and the mix is not the all-oscar2 figure (the tables are read, not the objective)
    assert abs(cal.searched_error(res, tables, types) / cal.searched_error(res, tables) - 1) > 0.01



def test_key_weighting_in_calibration(smol, small_cap, smollm2):
    """finish() with the key weighting (default) and without: R itself is the same, W is in
    the GGUF layout (real keys and queries permuted as the GGUF's, scored with R_Q and R_K
    from the rotation file, give q·k), the centring means are the keys' under R_K, and the
    searched objective (queries by R_Q) is what a brute-force recomputation gives."""
    m, tok, info = smol
    cap = small_cap
    c = cal.Captured(m, info, cap, smollm2, gguf_io.model_shape(smollm2), "test", 0.0)
    rw, repw = cal.finish(c, budget=None, progress=False)
    rp, _ = cal.finish(c, budget=None, progress=False, key_weighting=False)
    assert rw.meta["calibration"]["key_weighting"] is True and rp.meta["calibration"]["key_weighting"] is False
    assert "queries by W⁻¹" in rw.meta["calibration"]["objective"]
    assert rp.weight_k is None and rw.weight_k.shape == rw.rot_k.shape == (info.n_layer, 64, 64)
    np.testing.assert_array_equal(rw.rot_k, rp.rot_k)
    rw.check_limits("calibrated")
    layer = 7
    perm = cal.key_permutation(m, smollm2, info)
    assert perm is not None
    h = cap.heldout[0][layer]
    q, k = h.q[:200].astype(np.float64), h.k[:200].astype(np.float64)
    grp = np.arange(info.n_head) // (info.n_head // info.n_head_kv)
    ref = np.einsum("thd,shd->hts", q, k[:, grp])
    r_k, r_q = rw.key_matrix[layer].astype(np.float64), rw.query_matrix[layer].astype(np.float64)
    got = np.einsum("thd,shd->hts", q[..., perm] @ r_q, (k[..., perm] @ r_k)[:, grp])
    np.testing.assert_allclose(got, ref, atol=1e-4 * np.abs(ref).max())
    assert rot.orthogonality_error(r_k) > 0.05  # the weighting is not the identity
    np.testing.assert_allclose(rw.mean_k[layer], cap.moments[layer].mean_k()[:, perm] @ r_k,
                               atol=1e-4 * np.abs(rw.mean_k[layer]).max())
    # the weighted search's objective (queries by R_Q, Hugging Face layout, no centring),
    # recomputed by brute force
    r_hf, rv_hf = cal.rotations_from_capture(cap, per_head=False)
    w_hf = cal.key_weights_from_capture(cap, per_head=False)
    rk_hf, rq_hf = rot.weighted_rotations(w_hf[layer], r_hf[layer])
    res = clip.search_layer(cal.layer_sims(cap, layer, rk_hf, rv_hf[layer], rot_q=rq_hf), info.head_dim)
    h64 = capture.HeldOutLayer(h.q.astype(np.float64), h.k.astype(np.float64), h.v.astype(np.float64), h.scaling,
                               None)
    brute = _objective_brute(h64, rk_hf, rv_hf[layer], res.clip_k, res.clip_v, rq=rq_hf)
    assert brute == pytest.approx(res.error, rel=1e-2)
    # queries rotated by R_K instead of R_Q would be a different (wrong) attention
    wrong = _objective_brute(h64, rk_hf, rv_hf[layer], res.clip_k, res.clip_v)
    assert abs(wrong / brute - 1) > 0.05
    # a milder exponent: the same eigenbasis, log-scales halved (A = 1/8 against 1/4) up to the
    # normalisation, and recorded in the meta
    w_mild = cal.key_weights_from_capture(cap, per_head=False, exponent=0.125)
    d4, res4 = rot.weighting_scales(w_hf[layer], r_hf[layer])
    d8, res8 = rot.weighting_scales(w_mild[layer], r_hf[layer])
    assert max(res4, res8) < 1e-9
    ratio = np.log(d8) - 0.5 * np.log(d4)
    np.testing.assert_allclose(ratio, ratio.mean(), atol=1e-9)
    rm, _ = cal.finish(c, budget=None, progress=False, weight_exponent=0.125)
    assert rm.meta["calibration"]["key_weighting_exponent"] == 0.125 and "(λ/s)^0.125" in rm.meta["calibration"]["objective"]
    assert rw.meta["calibration"]["key_weighting_exponent"] == rot.KEY_WEIGHT_EXPONENT


def test_key_weighting_exponent_chosen_at_the_logits(smol, small_cap, smollm2, text, tmp_path):
    """choose_key_weighting: each candidate exponent's calibration is scored by the simulated
    cache's KL divergence on tokens after the fit and held-out ones; each score equals what
    oscar-sim computes for that calibration read back from its rotation file, and the one
    returned is the lowest, the same tensors finish() gives for its exponent, with the scores
    in its meta."""
    from dataclasses import replace
    from oscar.calib import simcache
    from oscar.sim import simulate as sim
    m, tok, info = smol
    score = capture.tokenize_chunks(tok, text, 768, 768, skip_tokens=512 + 640)
    c = cal.Captured(m, info, small_cap, smollm2, gguf_io.model_shape(smollm2), "test", 0.0, score_ids=score)
    chosen, _rep, scores = cal.choose_key_weighting(c, exponents=(0.0, 0.25), progress=False, budget=None)
    assert set(scores) == {0.0, 0.25} and scores[0.0] != scores[0.25]
    assert all(0 < s < 1 for s in scores.values())
    best = min(scores, key=scores.get)
    meta = chosen.meta["calibration"]
    assert meta["key_weighting_scores"] == {cal.exponent_name(a): s for a, s in scores.items()}
    assert meta["key_weighting"] is (best > 0) and "768 tokens" in meta["key_weighting_scored_on"]
    sm = simcache.SimModel(m, info, smollm2, cal.key_permutation(m, smollm2, info), "test")
    for a in scores:
        r, _ = cal.finish(c, budget=None, progress=False, key_weighting=a > 0, weight_exponent=a or 0.25)
        if a == best:
            np.testing.assert_array_equal(chosen.key_matrix, r.key_matrix)
            np.testing.assert_array_equal(chosen.clip_k, r.clip_k)
            np.testing.assert_array_equal(chosen.clip_v, r.clip_v)
        f = tmp_path / f"r{a}.npz"
        r.save(f)
        method = replace(simcache.PRESETS["oscar"], sink=r.meta["sink_tokens"], recent=r.meta["recent_tokens"])
        got = sim.evaluate(sm, score, [method], sim.load_calibration(f, smollm2), progress=False)["oscar"]["kld"]
        assert got == pytest.approx(scores[a], rel=2e-3), a
