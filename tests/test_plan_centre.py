"""Precision plans and centring: the Python side against independent references, and llama.cpp.

- ``oscar.core.quant.fake_q8_0``/``fake_q4_0`` (what a plan's other types do to a row) equal
  gguf-py's own q8_0/q4_0 round trips;
- ``oscar.core.plan``: bits per value agree with ``oscar.core.kvmem`` for a uniform cache; the greedy
  plan keeps within its budget, puts sliding layers in q8_0 and raises the layer whose error
  falls most per bit first;
- centring is exact for attention (the clip search's own simulation with and without means);
- llama.cpp: a centred model gives the uncentred model's logits on a 16-bit cache rotated
  anyway (V's mean is added back exactly) and different ones on oscar2 (the means reach the
  quantiser); a plan of q8_0 everywhere under ``-ctk oscar2 -ctv oscar2`` is exactly a q8_0
  cache; a mixed plan is reported layer by layer with the bits per value of the whole cache,
  ``--kv-plan off`` gives exactly the unplanned model; bad plans and means are refused naming
  the layer.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from oscar.calib import clip
from oscar.calib.covariance import LayerMoments
from oscar.core import kvmem, paths, plan
from oscar.core.quant import fake_q4_0, fake_q8_0
from oscar.eval import perplexity as pp

from test_rotation_llama import (CHUNKS, CTX, F16_ROTATED, HEAD_DIM, N_HEAD_KV, N_LAYER, VERBOSE,  # noqa: F401
                                 f32_base, f32_models, write_converted)


# ----------------------------------------------------------------------------- numpy side

@pytest.mark.parametrize("name,fake", [("Q8_0", fake_q8_0), ("Q4_0", fake_q4_0)])
def test_fake_types_equal_gguf_py(name, fake):
    import gguf
    from gguf.quants import dequantize, quantize
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 128)).astype(np.float32) * rng.uniform(0.01, 30, (64, 1)).astype(np.float32)
    x[3, 5] = 400.0  # an outlier block
    x[7, :32] = 0.0  # an all-zero block
    t = gguf.GGMLQuantizationType[name]
    want = dequantize(quantize(x, t), t).reshape(x.shape)
    np.testing.assert_array_equal(fake(x), want)


def shapes(n_layer: int = 4, sliding: tuple[int, ...] = ()) -> list[plan.LayerShape]:
    return [plan.LayerShape(128, 128, 512 if i in sliding else None) for i in range(n_layer)]


@pytest.mark.parametrize("t", ["oscar2", "oscar2s", "q8_0", "f16"])
@pytest.mark.parametrize("ctx", [4096, 32768])
def test_uniform_bits_agree_with_kvmem(t, ctx):
    g = kvmem.KVGeometry(4, 2, 64, 64)
    want = kvmem.bits_per_value(g, ctx, t, t)
    got = plan.bits_per_value(shapes(), *plan.uniform(4, t), ctx=ctx)
    assert got == pytest.approx(want, rel=1e-12)


def error_tables(n_layer: int, bad_layer: int) -> list[dict]:
    """Relative errors: every layer 0.01 with 2-bit K, 0.002 with 2-bit V; 3-bit 0.4 of it, 4-bit
    a tenth, 8-bit a hundredth; ``bad_layer``'s 2-bit K is 0.5 and its 3-bit K 0.2 (a collapsing layer)."""
    scale = {"oscar2": 1.0, "oscar3": 0.4, "q4_0": 0.1, "q8_0": 0.01}
    out = []
    for i in range(n_layer):
        ek = {t: (0.5 if i == bad_layer and t in ("oscar2", "oscar3") else 0.01) * s for t, s in scale.items()}
        ek["q4_0"] = min(ek["q4_0"], 0.001)
        out.append({(a, b): ek[a] + 0.002 * scale[b] for a in scale for b in scale})
    return out


def test_plan_raises_the_collapsing_layer_first_and_keeps_the_budget():
    lay = shapes(8, sliding=(1, 2))
    base = plan.bits_per_value(lay, ["q8_0" if i in (1, 2) else "oscar2" for i in range(8)],
                               ["q8_0" if i in (1, 2) else "oscar2" for i in range(8)])
    # room for one step of one side of one layer: the collapsing K of layer 5
    one_step = (plan.bits_per_value(lay, ["q8_0" if i in (1, 2) else ("q4_0" if i == 5 else "oscar2") for i in range(8)],
                                    ["q8_0" if i in (1, 2) else "oscar2" for i in range(8)]))
    p = plan.choose(lay, error_tables(8, 5), budget=(base + one_step) / 2 + (one_step - base) / 2 + 1e-9)
    assert p.type_k[5] == "q4_0" and p.type_k.count("oscar2") == 5, p.type_k
    assert p.type_k[1] == p.type_k[2] == p.type_v[1] == p.type_v[2] == "q8_0"
    assert p.bits <= one_step + 1e-9 and p.rel_error < p.rel_error_oscar2
    # no room: nothing raised
    p0 = plan.choose(lay, error_tables(8, 5), budget=base)
    assert [t for i, t in enumerate(p0.type_k) if i not in (1, 2)] == ["oscar2"] * 6
    # a generous budget spends it where it pays, never above it
    p3 = plan.choose(lay, error_tables(8, 5), budget=4.0)
    assert p3.bits <= 4.0 and p3.type_k[5] != "oscar2"
    assert plan.bits_per_value(lay, p3.type_k, p3.type_v) == pytest.approx(p3.bits)
    # values of growing layers stay oscar2 (the GPU kernels' fast path) unless asked for
    assert all(p3.type_v[i] == "oscar2" for i in range(8) if i not in (1, 2))
    pkv = plan.choose(lay, error_tables(8, 5), budget=4.0, sides=("k", "v"))
    assert pkv.bits <= 4.0 and any(pkv.type_v[i] != "oscar2" for i in range(8) if i not in (1, 2))
    assert pkv.rel_error < p3.rel_error


def test_plan_takes_oscar3_keys_and_skips_a_type_that_does_not_pay():
    """Four growing layers, one of which loses by 2-bit keys. With room for one layer's 3-bit keys
    the plan takes them there. That layer's q4_0 keys are worse than its oscar3 keys (no clip, no
    windows): with room for q8_0 it still gets there (oscar3 first, the best gain per bit, then
    past q4_0 straight to q8_0)."""
    lay = shapes(4)
    ek = [{"oscar2": 1e-4, "oscar3": 1e-4, "q4_0": 1e-4, "q8_0": 1e-4} for _ in range(4)]  # nothing to gain
    ek[2] = {"oscar2": 0.05, "oscar3": 0.02, "q4_0": 0.03, "q8_0": 1e-4}
    tab = [{(a, b): e[a] + (0.002 if b == "oscar2" else 0.0005) for a in plan.LADDER for b in plan.LADDER} for e in ek]
    base = plan.bits_per_value(lay, *plan.uniform(4))
    k3 = plan.bits_per_value(lay, ["oscar2", "oscar2", "oscar3", "oscar2"], ["oscar2"] * 4)
    p = plan.choose(lay, tab, budget=k3 + 1e-9)
    assert p.type_k == ["oscar2", "oscar2", "oscar3", "oscar2"] and p.bits == pytest.approx(k3)
    # one layer's K of 4 layers' K and V one bit more (an oscar3 side keeps its 16-bit pool)
    assert k3 - base == pytest.approx((3.5 - 2.5) / 8)
    k8 = plan.bits_per_value(lay, ["oscar2", "oscar2", "q8_0", "oscar2"], ["oscar2"] * 4)
    p8 = plan.choose(lay, tab, budget=k8 + 1e-9)
    assert p8.type_k[2] == "q8_0" and p8.bits <= k8 + 1e-9, p8.type_k


def low_tables(n_layer: int, bad_layer: int) -> list[dict]:
    """:func:`error_tables` with the oscar2s pairs: oscar2s 1.3x oscar2's error on either side."""
    ek = {"oscar2s": 0.013, "oscar2": 0.01, "oscar3": 0.004, "q4_0": 0.001, "q8_0": 1e-4}
    ev = {"oscar2s": 0.0026, "oscar2": 0.002, "oscar3": 8e-4, "q4_0": 2e-4, "q8_0": 2e-6}
    out = []
    for i in range(n_layer):
        k = dict(ek, oscar2s=0.65, oscar2=0.5, oscar3=0.2) if i == bad_layer else ek
        out.append({(a, b): k[a] + ev[b] for a, b in plan.measured_pairs()})
    return out


def test_plan_starts_from_oscar2s_under_every_layer_in_oscar2():
    """Eight growing layers of 128 + 128 values, windows 64/256: every layer in oscar2 costs 2.69
    bits at 32k, in oscar2s 2.44. A budget of 2.5 cannot hold every layer in oscar2, so the plan
    starts from oscar2s (K and V) and spends the rest where the error falls most per bit: the
    collapsing layer's K first. 3.0 keeps the oscar2 start and names no oscar2s; under 2.44 even
    oscar2s everywhere is over, and the plan says so by its bits. A file without oscar2s
    measurements keeps the oscar2 start and says that it has none."""
    lay = shapes(8)
    all2 = plan.bits_per_value(lay, *plan.uniform(8))
    all2s = plan.bits_per_value(lay, *plan.uniform(8, "oscar2s"))
    assert all2 == pytest.approx(2.5 + 16 * kvmem.pool_slots(32768, 64, 256) / 32768, abs=1e-9)
    assert all2 - all2s == pytest.approx(0.25)
    tab = low_tables(8, 5)
    p = plan.choose(lay, tab, budget=2.5)
    assert p.base == "oscar2s" and p.bits <= 2.5 and p.bits > all2s and p.bits_oscar2 == pytest.approx(all2)
    assert p.type_k[5] != "oscar2s", p.type_k  # the collapsing key raised first
    assert set(p.type_k) <= set(plan.LOW_LADDER_K) and set(p.type_v) <= set(plan.LOW_LADDER_V)
    assert plan.bits_per_value(lay, p.type_k, p.type_v) == pytest.approx(p.bits)
    start = sum(tab[i][("oscar2s", "oscar2s")] for i in range(8))
    assert p.rel_error < start
    # greedy by gain per bit: nothing left that fits the budget and gains
    for i in range(8):
        for side, steps in (("k", plan.LOW_LADDER_K), ("v", plan.LOW_LADDER_V)):
            cur = p.type_k if side == "k" else p.type_v
            for t in steps[steps.index(cur[i]) + 1:]:
                tk, tv = list(p.type_k), list(p.type_v)
                (tk if side == "k" else tv)[i] = t
                assert plan.bits_per_value(lay, tk, tv) > 2.5 + 1e-12 or tab[i][(tk[i], tv[i])] >= tab[i][(p.type_k[i], p.type_v[i])]
    p3 = plan.choose(lay, tab, budget=3.0)
    assert p3.base == "oscar2" and "oscar2s" not in p3.type_k + p3.type_v and p3.bits <= 3.0
    under = plan.choose(lay, tab, budget=2.3)
    assert under.base == "oscar2s" and under.type_k == under.type_v == ["oscar2s"] * 8
    assert under.bits == pytest.approx(all2s)
    old = [{k: v for k, v in t.items() if "oscar2s" not in k} for t in tab]
    po = plan.choose(lay, old, budget=2.5)
    assert po.base == "oscar2" and not po.low_measured and po.type_k == po.type_v == ["oscar2"] * 8
    assert po.as_meta(2.5)["low_measured"] is False and p.as_meta(2.5)["base"] == "oscar2s"


def test_oscar2s_sides_are_measured_clipped():
    """The plan's errors for oscar2s are of the cache llama.cpp writes: each row clipped at the
    layer's ratio (as oscar2) before the scale-only code. Its largest level is 1.5 d = the
    block's largest magnitude, so a row's largest stored magnitude is the clip threshold (the
    row's r-quantile of |x|, as ggml_set_rows_clip takes it), not the row's own maximum."""
    import torch
    rng = np.random.default_rng(3)
    x = torch.from_numpy((rng.standard_normal((5, 2, 128)) * rng.uniform(0.5, 4, (5, 2, 1))).astype(np.float32))
    r = 0.8
    got = clip.stored(x, "oscar2s", r).numpy()
    a = np.sort(np.abs(x.numpy()), axis=-1)
    t = a[..., int(np.floor(r * 127 + 0.5))]
    np.testing.assert_allclose(np.abs(got).max(axis=-1), t, rtol=2e-3)
    np.testing.assert_allclose(np.abs(clip.stored(x, "oscar2s", 1.0).numpy()).max(axis=-1), a[..., -1], rtol=2e-3)
    assert (np.abs(got).max(axis=-1) < 0.99 * a[..., -1]).all()


def test_plan_lowers_sliding_layers_when_the_start_is_over_budget():
    """Gemma-3's geometry (18 layers, 15 sliding over 512): with sliding layers in q8_0 the cache
    is 3.47 bits/value at 32k. A budget of 3.2 lowers sliding sides to q4_0, V first (its
    q4_0 costs least here), and stops once within budget; 2.9 cannot be met: every sliding side
    goes to q4_0 (2.93 bits), every growing layer stays oscar2, and the plan's bits say what it
    costs."""
    sliding = tuple(i for i in range(18) if i % 6 != 5)
    lay = [plan.LayerShape(256, 256, 512 if i in sliding else None) for i in range(18)]
    tab = []
    for i in range(18):  # sliding: K's q4_0 hurts 10x V's; growing layers as error_tables
        ek = {"oscar2": 0.01, "oscar3": 0.004, "q4_0": 0.001, "q8_0": 1e-5}
        ev = {"oscar2": 0.002, "oscar3": 8e-4, "q4_0": 1e-4 if i in sliding else 2e-4, "q8_0": 2e-6}
        tab.append({(a, b): ek[a] + ev[b] for a in plan.LADDER for b in plan.LADDER})
    start = ["q8_0" if i in sliding else "oscar2" for i in range(18)]
    assert plan.bits_per_value(lay, start, start) == pytest.approx(3.47, abs=0.01)
    floor = ["q4_0" if i in sliding else "oscar2" for i in range(18)]
    low = plan.bits_per_value(lay, floor, floor)
    assert 2.9 < low < 3.0
    p = plan.choose(lay, tab, budget=2.9)
    assert p.type_k == floor and p.type_v == floor and p.bits == pytest.approx(low)
    mid = plan.choose(lay, tab, budget=3.2)
    assert mid.bits <= 3.2 + 1e-9
    lowered_v = [i for i in sliding if mid.type_v[i] == "q4_0"]
    lowered_k = [i for i in sliding if mid.type_k[i] == "q4_0"]
    assert lowered_v and len(lowered_k) < len(sliding) and (not lowered_k or len(lowered_v) == len(sliding))
    # one side fewer lowered would be over the budget: it lowers no more than it must
    undo_k, undo_v = list(mid.type_k), list(mid.type_v)
    (undo_k if lowered_k else undo_v)[(lowered_k or lowered_v)[-1]] = "q8_0"
    assert plan.bits_per_value(lay, undo_k, undo_v) > 3.2

def test_moments_means_are_the_token_means():
    rng = np.random.default_rng(1)
    m = LayerMoments(2, 64)
    ks, vs = [], []
    for t in (50, 70):
        q = rng.standard_normal((t, 4, 64))
        k = rng.standard_normal((t, 2, 64)) + 3.0
        v = rng.standard_normal((t, 2, 64)) - 1.5
        m.add_queries(q)
        ks.append(k)
        vs.append(v)
    for k, v in zip(ks, vs):
        m.add_values(k, v)
    np.testing.assert_allclose(m.mean_k(), np.concatenate(ks).mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(m.mean_v(), np.concatenate(vs).mean(axis=0), rtol=1e-12)


def test_centring_is_exact_and_narrows_the_2bit_error():
    """The clip search's simulation: with centring means the unquantised attention output is the
    uncentred one minus V's mean (exact); with offsets in the data the 2-bit error falls."""
    rng = np.random.default_rng(2)
    t, hq, hkv, d = 600, 4, 2, 64
    offs_k = rng.standard_normal((hkv, d)).astype(np.float32) * 6
    offs_v = rng.standard_normal((hkv, d)).astype(np.float32) * 4
    q = rng.standard_normal((t, hq, d)).astype(np.float32)
    k = (rng.standard_normal((t, hkv, d)) + offs_k).astype(np.float32)
    v = (rng.standard_normal((t, hkv, d)) + offs_v).astype(np.float32)
    eye = np.eye(d, dtype=np.float32)
    plain = clip.layer_sim(q, k, v, eye, eye, 0.125)
    centred = clip.layer_sim(q, k, v, eye, eye, 0.125, mean_k=offs_k, mean_v=offs_v)
    o_plain = plain.o_ref.numpy()
    o_centred = centred.o_ref.numpy() + offs_v[:, None, :]
    np.testing.assert_allclose(o_centred, o_plain, rtol=1e-4, atol=1e-4)
    e_plain = clip.type_error([plain], "oscar2", "oscar2", 1.0, 1.0)
    e_centred = clip.type_error([centred], "oscar2", "oscar2", 1.0, 1.0)
    assert e_centred < 0.5 * e_plain, (e_centred, e_plain)
    # and the 16-bit reference of type_error is the output itself
    assert clip.type_error([centred], "f16", "f16", 1.0, 1.0) == 0.0


# ----------------------------------------------------------------------------- the converter's writer

def test_writer_checks_plans_and_means(smollm2, tmp_path):
    from oscar.core import gguf_io
    rot = np.stack([np.eye(HEAD_DIM, dtype=np.float32)] * N_LAYER)
    clips = np.ones(N_LAYER, np.float32)
    good_mean = np.zeros((N_LAYER, N_HEAD_KV, HEAD_DIM), np.float32)
    out = tmp_path / "o.gguf"

    def write(**kw):
        gguf_io.write_fields(smollm2, out, rot, rot, clips, clips, 64, 256, "t", 0, "t", progress=False,
                                 force=True, **kw)

    with pytest.raises(ValueError, match=r"layer 3 names the cache type 'q5_1'"):
        write(plan_k=["oscar2"] * 3 + ["q5_1"] + ["oscar2"] * (N_LAYER - 4), plan_v=["oscar2"] * N_LAYER)
    with pytest.raises(ValueError, match=r"names 2 cache types, the model has 30 layers"):
        write(plan_k=["q8_0"] * 2, plan_v=["oscar2"] * N_LAYER)
    assert not out.exists()
    bad = good_mean.copy()
    bad[7, 1, 3] = np.nan
    with pytest.raises(ValueError, match=r"blk\.7\.attn_k_oscar_mean holds a non-finite value"):
        write(mean_k=bad)
    assert not out.exists()
    write(mean_k=good_mean + 1, mean_v=good_mean - 2, plan_k=["q8_0"] * N_LAYER, plan_v=["oscar2"] * N_LAYER)
    import gguf
    r = gguf.GGUFReader(out)
    names = {t.name: t for t in r.tensors}
    assert names["blk.4.attn_k_oscar_mean"].data.shape == (N_HEAD_KV, HEAD_DIM)
    np.testing.assert_array_equal(names["blk.4.attn_v_oscar_mean"].data, -2.0)
    assert r.fields["oscar.cache_type_k"].contents() == ["q8_0"] * N_LAYER


def test_writer_refuses_a_mean_of_another_head_size(smollm2, tmp_path):
    from oscar.core import gguf_io
    rot = np.stack([np.eye(HEAD_DIM, dtype=np.float32)] * N_LAYER)
    clips = np.ones(N_LAYER, np.float32)
    out = tmp_path / "o.gguf"
    with pytest.raises(ValueError, match=r"mean_v has shape \(30, 3, 63\); expected \(30, n_head_kv, 64\)"):
        gguf_io.write_fields(smollm2, out, rot, rot, clips, clips, 64, 256, "t", 0, "t", progress=False,
                                 mean_v=np.zeros((N_LAYER, N_HEAD_KV, HEAD_DIM - 1), np.float32))
    assert not out.exists()


# ----------------------------------------------------------------------------- llama.cpp

def random_means(seed: int, scale: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for il in range(N_LAYER):
        for kind in ("k", "v"):
            out[f"blk.{il}.attn_{kind}_oscar_mean"] = (rng.standard_normal((N_HEAD_KV, HEAD_DIM)) * scale).astype(np.float32)
    return out


@pytest.fixture(scope="module")
def centred_models(smollm2, tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("centre")
    return {
        "plain": write_converted(smollm2, d / "plain.gguf", f32=True),
        "centred": write_converted(smollm2, d / "centred.gguf", f32=True, means=random_means(0, 2.0)),
    }


def test_centring_is_exact_on_a_16bit_cache(centred_models, wiki_slice, f32_base):
    """The same rotations with and without centring means, a 16-bit cache rotated anyway:
    both give the original logits (V's mean is added back to the output exactly; K's shifts
    each query's scores by one constant)."""
    base, ref = f32_base
    res = pp.run(centred_models["centred"], wiki_slice, F16_ROTATED, ctx=CTX, chunks=CHUNKS, kld_base=base)
    assert res.kld_mean < 1e-4, res.kld_mean
    assert abs(res.ppl / ref.ppl - 1) < 1e-3, (res.ppl, ref.ppl)


def test_centring_reaches_the_quantiser(centred_models, wiki_slice, f32_base):
    """On oscar2 (no windows: every key and value in 2-bit) the centred model's logits differ
    from the uncentred one's: the means are subtracted before the 2-bit quantiser."""
    base, _ = f32_base
    kv = pp.KVConfig("oscar2", "oscar2", args=["--kv-sink", "0", "--kv-recent", "0"])
    a = pp.run(centred_models["plain"], wiki_slice, kv, ctx=CTX, chunks=CHUNKS, kld_base=base)
    b = pp.run(centred_models["centred"], wiki_slice, kv, ctx=CTX, chunks=CHUNKS, kld_base=base)
    assert a.ppl != b.ppl and abs(a.kld_mean - b.kld_mean) > 1e-4, (a.kld_mean, b.kld_mean)


def oscar2_line(log: str) -> str:
    m = re.search(r"^.*oscar: (K and V|K|V) in oscar2 .*$", log, re.M)
    assert m, "no oscar2 memory line in:\n" + log[-3000:]
    return m.group(0)


def test_plan_of_q8_0_everywhere_is_a_q8_0_cache(smollm2, tmp_path, wiki_slice):
    plain = write_converted(smollm2, tmp_path / "plain.gguf")
    planned = write_converted(smollm2, tmp_path / "planned.gguf", plan=(["q8_0"] * N_LAYER, ["q8_0"] * N_LAYER))
    a = pp.run(plain, wiki_slice, pp.KVConfig("q8_0", "q8_0"), ctx=CTX, chunks=CHUNKS)
    b = pp.run(planned, wiki_slice, pp.KVConfig("oscar2", "oscar2"), ctx=CTX, chunks=CHUNKS, extra=VERBOSE)
    assert a.ppl == b.ppl, (a.ppl, b.ppl)
    assert "oscar: K and V in oscar2" not in b.log  # nothing is oscar2


def test_mixed_plan_is_reported_and_off_restores_oscar2(smollm2, tmp_path, wiki_slice):
    tk = ["q8_0"] * 10 + ["q4_0"] * 2 + ["oscar2"] * (N_LAYER - 12)
    tv = ["oscar2"] * 5 + ["f16"] + ["oscar2"] * (N_LAYER - 6)
    plain = write_converted(smollm2, tmp_path / "plain.gguf")
    planned = write_converted(smollm2, tmp_path / "planned.gguf", plan=(tk, tv))
    kv = pp.KVConfig("oscar2", "oscar2")
    res = pp.run(planned, wiki_slice, kv, ctx=CTX, chunks=CHUNKS, extra=VERBOSE)
    line = oscar2_line(res.log)
    assert "precision plan: oscar2 for K in 18 and V in 29 of 30 layers" in line, line
    assert "K q4_0 in 2 of 30 layers" in line and "K q8_0 in 10 of 30 layers" in line and "V f16 in 1 of 30 layers" in line
    # bits per value of the whole cache, from the tensors' sizes: cells = CTX (padded to 256)
    cells, per = kvmem.cells(CTX), N_HEAD_KV * HEAD_DIM
    slots = kvmem.pool_slots(CTX, 64, 256)
    stored = sum(cells * per * kvmem.bits(t) for t in tk + tv)
    stored += slots * per * 16 * (tk.count("oscar2") + tv.count("oscar2"))
    want = stored / (cells * per * 2 * N_LAYER)
    got = float(re.search(r"; ([0-9.]+) bits/value over the whole cache at (\d+) cells", line).group(1))
    assert got == pytest.approx(want, abs=0.006), (got, want, line)
    off = pp.run(planned, wiki_slice, pp.KVConfig("oscar2", "oscar2", args=["--kv-plan", "off"]), ctx=CTX, chunks=CHUNKS)
    ref = pp.run(plain, wiki_slice, kv, ctx=CTX, chunks=CHUNKS)
    assert off.ppl == ref.ppl and res.ppl != ref.ppl, (off.ppl, ref.ppl, res.ppl)


def test_plan_of_oscar2s_is_the_oscar2s_cache_and_mixes(smollm2, tmp_path, wiki_slice):
    """A plan under 2.7 bits names oscar2s: every layer's K and V in oscar2s under -ctk oscar2
    -ctv oscar2 is exactly llama.cpp's oscar2s cache asked for by name; a mixed plan (oscar2s
    with oscar3, q8_0 and oscar2 sides) is reported against oscar2s with the bits of the whole
    cache, and --kv-plan off gives the unplanned oscar2 cache."""
    plain = write_converted(smollm2, tmp_path / "plain.gguf", means=random_means(2, 0.5))
    low = write_converted(smollm2, tmp_path / "low.gguf", means=random_means(2, 0.5),
                          plan=(["oscar2s"] * N_LAYER, ["oscar2s"] * N_LAYER))
    small = ["--kv-sink", "4", "--kv-recent", "16"]  # (most of the 256 cells in the 2-bit tier)
    a = pp.run(plain, wiki_slice, pp.KVConfig("oscar2s", "oscar2s", args=small), ctx=CTX, chunks=CHUNKS)
    b = pp.run(low, wiki_slice, pp.KVConfig("oscar2", "oscar2", args=small), ctx=CTX, chunks=CHUNKS, extra=VERBOSE)
    assert a.ppl == b.ppl, (a.ppl, b.ppl)
    assert re.search(r"oscar: K and V in oscar2s \(2\.25 bits/value\)", b.log), b.log[-3000:]
    tk = ["oscar2s"] * 20 + ["oscar3"] * 6 + ["q8_0"] * 2 + ["oscar2"] * 2
    tv = ["oscar2s"] * 27 + ["oscar2"] * 3
    mixed = write_converted(smollm2, tmp_path / "mixed.gguf", means=random_means(2, 0.5), plan=(tk, tv))
    res = pp.run(mixed, wiki_slice, pp.KVConfig("oscar2", "oscar2"), ctx=CTX, chunks=CHUNKS, extra=VERBOSE)
    line = re.search(r"^.*oscar: (K and V|K|V) in oscar2s .*$", res.log, re.M).group(0)
    assert "precision plan: oscar2s for K in 20 and V in 27 of 30 layers" in line, line
    assert "K oscar3 in 6 of 30 layers" in line and "K q8_0 in 2 of 30 layers" in line, line
    assert "K oscar2 in 2 of 30 layers" in line and "V oscar2 in 3 of 30 layers" in line, line
    cells, per = kvmem.cells(CTX), N_HEAD_KV * HEAD_DIM
    slots = kvmem.pool_slots(CTX, 64, 256)
    stored = sum(cells * per * kvmem.bits(t) for t in tk + tv)
    stored += slots * per * 16 * sum(t in kvmem.WINDOWED for t in tk + tv)
    want = stored / (cells * per * 2 * N_LAYER)
    got = float(re.search(r"; ([0-9.]+) bits/value over the whole cache at (\d+) cells", line).group(1))
    assert got == pytest.approx(want, abs=0.006), (got, want, line)
    mix = pp.run(mixed, wiki_slice, pp.KVConfig("oscar2", "oscar2", args=small), ctx=CTX, chunks=CHUNKS)
    off = pp.run(mixed, wiki_slice, pp.KVConfig("oscar2", "oscar2", args=small + ["--kv-plan", "off"]), ctx=CTX,
                 chunks=CHUNKS)
    ref = pp.run(plain, wiki_slice, pp.KVConfig("oscar2", "oscar2", args=small), ctx=CTX, chunks=CHUNKS)
    assert off.ppl == ref.ppl and len({ref.ppl, a.ppl, mix.ppl}) == 3, (off.ppl, ref.ppl, a.ppl, mix.ppl)


def test_llama_bench_takes_kv_plan(smollm2, tmp_path, bin_dir):
    """llama-bench's --kv-plan off stores every layer in oscar2 (the A/B of a plan's speed on one
    file); a value other than on/off is refused naming the flag."""
    tk = ["q8_0"] * 3 + ["oscar2"] * (N_LAYER - 3)
    planned = write_converted(smollm2, tmp_path / "planned.gguf", plan=(tk, ["oscar2"] * N_LAYER))

    def bench(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(bin_dir / "llama-bench"), "-m", str(planned), "-ctk", "oscar2", "-ctv", "oscar2",
                               "-fa", "1", "-p", "0", "-n", "1", "-r", "1", "-t", "2", "-v", *extra],
                              capture_output=True, text=True, timeout=120)

    on, off = bench(), bench("--kv-plan", "off")
    assert on.returncode == 0 and off.returncode == 0, (on.stderr[-2000:], off.stderr[-2000:])
    assert "K q8_0 in 3 of 30 layers" in oscar2_line(on.stderr), oscar2_line(on.stderr)
    assert "precision plan is off" in off.stderr and "q8_0" not in oscar2_line(off.stderr), oscar2_line(off.stderr)
    bad = bench("--kv-plan", "maybe")
    assert bad.returncode != 0 and "--kv-plan takes 'on' or 'off', got 'maybe'" in bad.stderr, bad.stderr[-2000:]


def _load_error(bin_dir: Path, model: Path, text: Path) -> str:
    p = subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(model), "-f", str(text), "-c", "256",
                        "--chunks", "1", "-ctk", "oscar2", "-ctv", "oscar2"], capture_output=True, text=True)
    assert p.returncode != 0, "loaded a model it should refuse"
    return p.stderr + p.stdout


def test_bad_plan_and_mean_are_refused(smollm2, tmp_path, wiki_slice, bin_dir):
    bad_type = write_converted(smollm2, tmp_path / "t.gguf",
                               plan=(["oscar2"] * 4 + ["q5_1"] + ["oscar2"] * 25, ["oscar2"] * N_LAYER))
    log = _load_error(bin_dir, bad_type, wiki_slice)
    assert "oscar.cache_type_k': layer 4 names the cache type 'q5_1'" in log and "--kv-plan off" in log, log[-2000:]
    short = write_converted(smollm2, tmp_path / "s.gguf", plan=(["oscar2"] * 3, ["oscar2"] * 3))
    assert "names 3 cache types, the model has 30 layers" in _load_error(bin_dir, short, wiki_slice)
    means = random_means(1, 1.0)
    means["blk.6.attn_v_oscar_mean"] = np.zeros((N_HEAD_KV + 1, HEAD_DIM), np.float32)
    shape = write_converted(smollm2, tmp_path / "m.gguf", means=means)
    log = _load_error(bin_dir, shape, wiki_slice)
    assert "layer 6: tensor 'blk.6.attn_v_oscar_mean' has shape [64, 4]; expected [64, 3]" in log, log[-2000:]
    means = random_means(1, 1.0)
    means["blk.2.attn_k_oscar_mean"][1, 7] = np.inf
    log = _load_error(bin_dir, write_converted(smollm2, tmp_path / "n.gguf", means=means), wiki_slice)
    assert "layer 2: tensor 'blk.2.attn_k_oscar_mean' holds a non-finite value" in log, log[-2000:]
