"""OSCAR rotations and clipping inside llama.cpp (our patches), on SmolLM2-135M.

A converted model is written here with gguf-py (all tensors and metadata of the
original plus random orthogonal rotations and clip ratios), so these tests do not
depend on the calibration code:

- rotation invariance: with a 16-bit KV cache rotated anyway (LLAMA_OSCAR_ROT_16BIT) the
  rotated model's logits equal the original's (KL divergence against the original,
  per-layer and per-KV-head rotations); by default only quantized cache sides are rotated;
- the context log line says which rotation applies (calibrated or Hadamard);
- a rotation tensor of the wrong shape is refused with a message naming the layer;
- clipping: the clipped oscar2 cache write equals numpy's clip_rows + quantize bit for
  bit (tests/c/test-oscar-clip.c), and the per-layer ratios from the GGUF reach the
  oscar2 cache (and only it).
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from oscar.calib.clip import clip_rows
from oscar.core import paths
from oscar.core.quant import quantize
from oscar.eval import perplexity as pp

# SmolLM2-135M: 30 layers, head size 64, 9 query heads, 3 KV heads
N_LAYER, HEAD_DIM, N_HEAD_KV = 30, 64, 3
CTX, CHUNKS = 256, 2


def random_rotation(rng: np.random.Generator, d: int) -> np.ndarray:
    """A random orthogonal (d, d) matrix: Q of the QR decomposition of a Gaussian matrix."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


def random_weight(rng: np.random.Generator, d: int) -> np.ndarray:
    """A random symmetric positive definite (d, d) matrix U diag(w) U^T, w in [0.3, 3] (float64):
    key weighting's W, which makes R_K = W R and R_Q = W^-1 R."""
    u = random_rotation(rng, d).astype(np.float64)
    return (u * rng.uniform(0.3, 3.0, d)) @ u.T


def attention_shape(reader) -> tuple[int, int, int]:
    """``(n_layer, head_dim, n_head_kv)`` read from a GGUF's metadata (independently of
    oscar.core.gguf_io)."""
    arch = reader.fields["general.architecture"].contents()

    def get(key):
        f = reader.fields.get(f"{arch}.{key}")
        return None if f is None else f.contents()

    n_head = get("attention.head_count")
    n_kv = get("attention.head_count_kv") or n_head
    d = get("attention.key_length") or get("embedding_length") // n_head
    return int(get("block_count")), int(d), int(n_kv)


def write_converted(src: Path, dst: Path, per_head: bool = False, clip_k: float = 1.0, clip_v: float = 1.0,
                    seed: int = 0, zeros: dict[str, tuple[int, ...]] | None = None,
                    rotations: bool = True, f32: bool = False, f16: bool = False,
                    edit: dict[str, Callable[[np.ndarray], np.ndarray]] | None = None,
                    sink: int = 64, recent: int = 256, means: dict[str, np.ndarray] | None = None,
                    plan: tuple[list[str], list[str]] | None = None, weighted: bool = False,
                    version: int = 1) -> Path:
    """Copy every tensor and key of ``src`` and add OSCAR rotations and metadata.

    Rotations: numpy R (D, D), or (Hkv, D, D) per KV head, with k' = k @ R.
    zeros: tensor name -> numpy shape: write zeros of that shape instead (malformed input;
    llama.cpp loads a well-shaped zero matrix only with LLAMA_OSCAR_ROT_UNCHECKED=1).
    edit: tensor name -> function of the rotation written there (a damaged file).
    rotations=False: no OSCAR tensors or metadata (a plain copy).
    f32: dequantise the weights to float32. The invariance tests need it: with quantised
    weights llama.cpp quantises the activations to 8 bits before each matrix product,
    so a change in the last float32 bit (a different summation order) flips roundings
    that SmolLM2's massive activations amplify (KL divergence ~3e-3, as much as a q8_0
    KV cache), and no tight bound could be tested.
    f16: dequantise the weights to float16 instead (half the file; matrix products then
    round activations to f16, a much smaller step than 8-bit quantisation).
    means: tensor name (``blk.N.attn_k_oscar_mean``) -> numpy (Hkv, D) centring mean.
    plan: (cache types of K, of V), one name per layer (``oscar.cache_type_k/v``).
    weighted: key weighting: keys take R_K = W R and queries R_Q = W^-1 R (``attn_q_oscar_rot``)
    with a random symmetric positive definite W per layer (per KV head with ``per_head``).
    version: ``oscar.version`` (1 is the layout llama.cpp reads).
    Shapes (layers, head size, KV heads) are read from ``src``.
    """
    import gguf

    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    n_layer, head_dim, n_head_kv = attention_shape(reader)
    writer = gguf.GGUFWriter(dst, arch)

    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), val_type, sub_type=sub_type)

    for t in reader.tensors:
        if (f32 or f16) and t.tensor_type not in (gguf.GGMLQuantizationType.F32,):
            w = gguf.quants.dequantize(t.data, t.tensor_type)
            writer.add_tensor(t.name, w.astype(np.float16 if f16 and w.ndim > 1 else np.float32))
        else:
            writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)

    if not rotations:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return dst

    writer.add_uint32("oscar.version", version)
    writer.add_array("oscar.clip_k", [float(clip_k)] * n_layer)
    writer.add_array("oscar.clip_v", [float(clip_v)] * n_layer)
    writer.add_uint32("oscar.sink_tokens", sink)
    writer.add_uint32("oscar.recent_tokens", recent)
    writer.add_string("oscar.calibration.data", "random orthogonal (test)")
    if plan is not None:
        writer.add_array("oscar.cache_type_k", list(plan[0]))
        writer.add_array("oscar.cache_type_v", list(plan[1]))
    for name, m in (means or {}).items():
        writer.add_tensor(name, np.ascontiguousarray(m, dtype=np.float32))

    rng = np.random.default_rng(seed)
    n_mat = n_head_kv if per_head else 1
    for il in range(n_layer):
        mats = {}
        for kind in ("k", "v"):
            mats[kind] = np.stack([random_rotation(rng, head_dim) for _ in range(n_mat)]).astype(np.float64)
        if weighted:
            w = np.stack([random_weight(rng, head_dim) for _ in range(n_mat)])
            mats["q"] = np.linalg.inv(w) @ mats["k"]
            mats["k"] = w @ mats["k"]
        for kind, m in mats.items():
            name = f"blk.{il}.attn_{kind}_oscar_rot"
            r = (m if per_head else m[0]).astype(np.float32)
            if zeros and name in zeros:
                r = np.zeros(zeros[name], dtype=np.float32)
            if edit and name in edit:
                r = edit[name](r.astype(np.float32))
            writer.add_tensor(name, r)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


# llama.cpp logs its INFO lines (the oscar line among them) at verbosity 4
VERBOSE = ["-lv", "4"]


@pytest.fixture(scope="module")
def rotated(smollm2, tmp_path_factory) -> Path:
    return write_converted(smollm2, tmp_path_factory.mktemp("oscar") / "smollm2-rot.gguf")


@pytest.fixture(scope="module")
def rotated_clip(smollm2, tmp_path_factory) -> Path:
    return write_converted(smollm2, tmp_path_factory.mktemp("oscar") / "smollm2-rot-clip.gguf",
                           clip_k=0.5, clip_v=0.5)


@pytest.fixture(scope="module")
def f32_models(smollm2, tmp_path_factory) -> dict[str, Path]:
    """SmolLM2 with float32 weights: plain, rotated per layer, rotated per KV head."""
    d = tmp_path_factory.mktemp("oscar-f32")
    return {
        "base": write_converted(smollm2, d / "base.gguf", rotations=False, f32=True),
        "per_layer": write_converted(smollm2, d / "rot.gguf", f32=True),
        "per_head": write_converted(smollm2, d / "rot-head.gguf", f32=True, per_head=True, seed=1),
        "weighted": write_converted(smollm2, d / "rot-weighted.gguf", f32=True, weighted=True, seed=2),
        "weighted_per_head": write_converted(smollm2, d / "rot-weighted-head.gguf", f32=True, per_head=True,
                                             weighted=True, seed=3),
    }


@pytest.fixture(scope="module")
def f32_base(f32_models, wiki_slice, tmp_path_factory, bin_dir):
    """Logits of the unrotated float32 model with an f16 cache (the KL-divergence base)."""
    base = tmp_path_factory.mktemp("kld") / "f16.kld"
    res = pp.run(f32_models["base"], wiki_slice, pp.KVConfig("f16", "f16"), ctx=CTX, chunks=CHUNKS,
                 kld_base=base, save_base=True)
    return base, res


def oscar_line(log: str) -> str:
    m = re.search(r"^.*oscar: (calibrated|no calibrated).*$", log, re.M)
    assert m, "no oscar log line in:\n" + log[-3000:]
    return m.group(0)


#: rotate a 16-bit cache too (llama_oscar_rot_applies): the invariance tests check the wiring
F16_ROTATED = pp.KVConfig("f16", "f16", env={"LLAMA_OSCAR_ROT_16BIT": "1"})
# a zero rotation is refused at load; the probes that use one to show that a layer's rotation is
# read at all load it unchecked
UNCHECKED = {"LLAMA_OSCAR_ROT_UNCHECKED": "1"}
F16_ROTATED_UNCHECKED = pp.KVConfig("f16", "f16", env={"LLAMA_OSCAR_ROT_16BIT": "1", **UNCHECKED})


@pytest.mark.parametrize("variant", ["per_layer", "per_head", "weighted", "weighted_per_head"])
def test_rotation_invariance_f16(variant, f32_models, wiki_slice, f32_base):
    """q'.k' = q.k and o' R_V^T = o: with a 16-bit cache rotated anyway (LLAMA_OSCAR_ROT_16BIT)
    the rotated model gives the original logits up to float rounding (measured: KLD ~1e-6,
    PPL within 1e-4). With key weighting (keys R_K = W R, queries R_Q = W^-1 R) as well: queries
    rotated by R_K instead would score q W^2 k^T."""
    base, ref = f32_base
    res = pp.run(f32_models[variant], wiki_slice, F16_ROTATED, ctx=CTX, chunks=CHUNKS,
                 kld_base=base, extra=VERBOSE)
    kind = "per KV head" if variant.endswith("per_head") else "per layer"
    weighted = ", keys weighted" if variant.startswith("weighted") else ""
    assert f"oscar: calibrated rotations ({kind}{weighted}) from the GGUF" in oscar_line(res.log)
    assert res.kld_mean is not None and res.kld_mean < 1e-4, res.kld_mean
    assert res.same_top >= 99.5, res.same_top
    assert abs(res.ppl / ref.ppl - 1) < 1e-3, (res.ppl, ref.ppl)


@pytest.fixture(scope="module")
def folded_models(f32_models, tmp_path_factory) -> dict[str, Path]:
    """The float32 SmolLM2 converted by oscar.core.gguf_io with random rotations and R_V folded
    into attn_v/attn_output (--fold-v), per layer and per KV head."""
    from oscar.core import rotfile
    d = tmp_path_factory.mktemp("oscar-fold")
    rng = np.random.default_rng(7)
    out = {}
    ones = np.ones(N_LAYER, dtype=np.float32)
    for kind, per_head in (("per_layer", False), ("per_head", True)):
        n = N_LAYER*(N_HEAD_KV if per_head else 1)
        shape = (N_LAYER, N_HEAD_KV, HEAD_DIM, HEAD_DIM) if per_head else (N_LAYER, HEAD_DIM, HEAD_DIM)
        rot_k, rot_v = (np.stack([random_rotation(rng, HEAD_DIM) for _ in range(n)]).reshape(shape) for _ in range(2))
        # a rotation file without a fingerprint (random rotations fit any weights), through the CLI
        rot_file = d / f"{kind}.npz"
        rotfile.Rotations(rot_k, rot_v, ones, ones, {"n_layer": N_LAYER, "head_dim": HEAD_DIM, "n_head_kv": N_HEAD_KV}).save(rot_file)
        out[kind] = d / f"{kind}-folded.gguf"
        p = subprocess.run([str(paths.ROOT / ".venv" / "bin" / "oscar-convert"), str(f32_models["base"]), "--rotations",
                            str(rot_file), "--fold-v", "-q", "-o", str(out[kind])], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert "V's folded into the weights" in p.stderr, p.stderr
        import gguf
        r = gguf.GGUFReader(out[kind])
        assert bool(r.fields["oscar.v_rotation_folded"].contents()) is True
        assert not any(t.name.endswith("attn_v_oscar_rot") for t in r.tensors)
        assert sum(t.name.endswith("attn_k_oscar_rot") for t in r.tensors) == N_LAYER
    return out


@pytest.mark.parametrize("kind", ["per_layer", "per_head"])
def test_folded_v_rotation_runs_exactly(kind, folded_models, wiki_slice, f32_base):
    """R_V folded into attn_v/attn_output (oscar-convert --fold-v): llama.cpp rotates neither
    V nor the attention output, says so at start, and over a 16-bit cache (K rotated anyway,
    LLAMA_OSCAR_ROT_16BIT) gives the original model's logits up to float rounding."""
    base, ref = f32_base
    res = pp.run(folded_models[kind], wiki_slice, F16_ROTATED, ctx=CTX, chunks=CHUNKS, kld_base=base, extra=VERBOSE)
    assert "V's folded into attn_v/attn_output" in oscar_line(res.log), oscar_line(res.log)
    assert res.kld_mean is not None and res.kld_mean < 1e-4, res.kld_mean
    assert abs(res.ppl / ref.ppl - 1) < 1e-3, (res.ppl, ref.ppl)


def test_quantizing_a_folded_model_keeps_oscar(folded_models, tmp_path, wiki_slice):
    """The README's pipeline, fold then quantize: llama-quantize leaves the K rotations in F32
    and keeps the oscar.* metadata (the fold flag among them), and the quantized model runs
    with its V rotation folded."""
    import gguf
    out = tmp_path / "q4_1.gguf"
    p = subprocess.run([str(paths.tool("llama-quantize")), str(folded_models["per_layer"]), str(out), "Q4_1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    r = gguf.GGUFReader(out)
    types = {t.name: gguf.GGMLQuantizationType(t.tensor_type).name for t in r.tensors}
    assert types["blk.0.attn_v.weight"] == "Q4_1"
    assert [types[f"blk.{i}.attn_k_oscar_rot"] for i in range(N_LAYER)] == ["F32"] * N_LAYER
    assert bool(r.fields["oscar.v_rotation_folded"].contents()) is True
    assert len(r.fields["oscar.clip_v"].contents()) == N_LAYER
    res = pp.run(out, wiki_slice, pp.KVConfig("oscar2", "oscar2"), ctx=CTX, chunks=1, extra=VERBOSE)
    assert "V's folded into attn_v/attn_output" in oscar_line(res.log)
    assert np.isfinite(res.ppl)


def test_fold_orientation_matches_the_runtime_rotation():
    """The invariance above holds for any orthogonal matrix, so it cannot tell R_V from its
    transpose; this pins the fold to the convention llama.cpp applies a stored R_V with (and
    the calibration computes R_V for): per KV head v' = v @ R, and o = o' @ Rᵀ per query head
    before the output projection. GQA 3 (9 query heads, 3 KV heads, head 64), per-head R."""
    from oscar.core import gguf_io
    rng = np.random.default_rng(3)
    d, hkv, h, n_embd = 64, 3, 9, 40
    r = np.stack([random_rotation(rng, d) for _ in range(hkv)]).astype(np.float64)
    w_v, b_v = rng.standard_normal((hkv * d, n_embd)), rng.standard_normal(hkv * d)
    w_o = rng.standard_normal((n_embd, h * d))
    w_v2, b_v2, w_o2 = gguf_io.fold_v_rotation(w_v, b_v, w_o, r, h, hkv)
    x = rng.standard_normal(n_embd)
    v = (w_v @ x + b_v).reshape(hkv, d)
    v_rot = np.einsum("hi,hij->hj", v, r)                       # v' = v @ R, head by head
    assert np.allclose((w_v2 @ x + b_v2).reshape(hkv, d), v_rot)
    o_rot = rng.standard_normal((h, d))                           # attention output, rotated space
    o = np.einsum("hj,hij->hi", o_rot, r[np.arange(h) // (h // hkv)])   # o = o' @ R^T
    assert np.allclose(w_o2 @ o_rot.reshape(-1), w_o @ o.reshape(-1))
    # and the transposed fold is not the same thing
    w_v3, _, _ = gguf_io.fold_v_rotation(w_v, b_v, w_o, np.swapaxes(r, 1, 2), h, hkv)
    assert not np.allclose((w_v3 @ x).reshape(hkv, d), np.einsum("hi,hij->hj", (w_v @ x).reshape(hkv, d), r))


def test_fold_v_refuses_quantized_weights(smollm2, tmp_path):
    """--fold-v on a quantized model stops before any work, naming the tensor, its type and
    the way out (convert from float weights, quantize afterwards)."""
    out = tmp_path / "x.gguf"
    p = subprocess.run([str(paths.ROOT / ".venv" / "bin" / "oscar-convert"), str(smollm2), "--rotations", "zoo",
                        "--fold-v", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "--fold-v needs float attention weights (F32, F16 or BF16), but blk.0.attn_v.weight is Q4_1" in p.stderr
    assert "quantize afterwards" in p.stderr
    assert not out.exists()


def test_zero_rotation_changes_logits(smollm2, tmp_path, wiki_slice, f32_base):
    """A well-shaped but zero V rotation in one layer wipes that layer's attention output:
    the logits move, so the invariance above does not come from an unused tensor. Without
    LLAMA_OSCAR_ROT_16BIT a 16-bit cache is not rotated at all: the logits are the original's."""
    bad = write_converted(smollm2, tmp_path / "zero.gguf", f32=True,
                          zeros={"blk.2.attn_v_oscar_rot": (HEAD_DIM, HEAD_DIM)})
    base, _ = f32_base
    res = pp.run(bad, wiki_slice, F16_ROTATED_UNCHECKED, ctx=CTX, chunks=CHUNKS, kld_base=base)
    assert res.kld_mean > 1e-2, res.kld_mean
    res = pp.run(bad, wiki_slice, pp.KVConfig("f16", "f16", env=UNCHECKED), ctx=CTX, chunks=CHUNKS, kld_base=base,
                 extra=VERBOSE)
    assert oscar_line(res.log).endswith(", not applied (16-bit K/V cache: a rotation changes nothing there), "
                                        "no clipping (the K/V cache is not oscar2)"), oscar_line(res.log)
    assert res.kld_mean < 1e-6, res.kld_mean


def test_rotation_only_on_the_quantized_side(smollm2, tmp_path, wiki_slice, f32_base):
    """K in q8_0, V in f16: only K (and q) is rotated. A zero V rotation changes nothing; a
    zero K rotation wipes a layer's scores. The log line names the rotated side."""
    zero_v = write_converted(smollm2, tmp_path / "zv.gguf", f32=True,
                             zeros={"blk.2.attn_v_oscar_rot": (HEAD_DIM, HEAD_DIM)})
    zero_k = write_converted(smollm2, tmp_path / "zk.gguf", f32=True,
                             zeros={"blk.2.attn_k_oscar_rot": (HEAD_DIM, HEAD_DIM)})
    plain = write_converted(smollm2, tmp_path / "plain.gguf", f32=True)
    base, _ = f32_base
    kv = pp.KVConfig("q8_0", "f16", env=UNCHECKED)
    ref = pp.run(plain, wiki_slice, kv, ctx=CTX, chunks=CHUNKS, kld_base=base, extra=VERBOSE)
    assert ", applied to K only (16-bit V)" in oscar_line(ref.log), oscar_line(ref.log)
    zv = pp.run(zero_v, wiki_slice, kv, ctx=CTX, chunks=CHUNKS, kld_base=base)
    zk = pp.run(zero_k, wiki_slice, kv, ctx=CTX, chunks=CHUNKS, kld_base=base)
    assert zv.ppl == ref.ppl, (zv.ppl, ref.ppl)
    assert zk.kld_mean > ref.kld_mean + 1e-3, (zk.kld_mean, ref.kld_mean)


def test_log_line_oscar2_uses_calibrated_rotations(rotated, wiki_slice):
    res = pp.run(rotated, wiki_slice, pp.KVConfig("oscar2", "oscar2"), ctx=CTX, chunks=1, extra=VERBOSE)
    assert oscar_line(res.log).endswith(
        "oscar: calibrated rotations (per layer) from the GGUF, clip K/V from metadata")
    assert np.isfinite(res.ppl)


def test_log_line_without_rotations_says_hadamard(smollm2, wiki_slice):
    res = pp.run(smollm2, wiki_slice, pp.KVConfig("oscar2", "oscar2"), ctx=CTX, chunks=1, extra=VERBOSE)
    assert oscar_line(res.log).endswith(
        "oscar: no calibrated rotations in the model, using llama.cpp's Hadamard rotation")
    res = pp.run(smollm2, wiki_slice, pp.KVConfig("f16", "f16"), ctx=CTX, chunks=1, extra=VERBOSE)
    assert "no calibrated rotations in the model" in oscar_line(res.log)


@pytest.mark.parametrize("name,shape,found", [
    ("blk.3.attn_k_oscar_rot", (64, 32), "[32, 64]"),
    ("blk.7.attn_v_oscar_rot", (2, 64, 64), "[64, 64, 2]"),
    ("blk.5.attn_q_oscar_rot", (64, 32), "[32, 64]"),
])
def test_bad_rotation_shape_is_named(smollm2, tmp_path, wiki_slice, bin_dir, name, shape, found):
    bad = write_converted(smollm2, tmp_path / "bad.gguf", zeros={name: shape}, weighted="attn_q" in name)
    layer = name.split(".")[1]
    p = subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(bad), "-f", str(wiki_slice),
                        "-c", str(CTX), "--chunks", "1", "-fa", "on"], capture_output=True, text=True)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert f"oscar: layer {layer}: tensor '{name}' has shape {found}" in out, out[-3000:]
    assert "expected [64, 64] or [64, 64, 3]" in out, out[-3000:]


def test_query_rotation_of_another_shape_is_refused(smollm2, tmp_path, wiki_slice, bin_dir):
    """Key weighting's R_Q must have R_K's shape: one per KV head beside a per-layer R_K is refused."""
    bad = write_converted(smollm2, tmp_path / "bad.gguf", weighted=True,
                          edit={"blk.6.attn_q_oscar_rot": lambda r: np.stack([r] * 3)})
    p = subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(bad), "-f", str(wiki_slice),
                        "-c", str(CTX), "--chunks", "1", "-fa", "on"], capture_output=True, text=True)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert ("oscar: layer 6 has blk.6.attn_q_oscar_rot of another shape than blk.6.attn_k_oscar_rot: "
            "the GGUF is inconsistent, convert the original model again") in out, out[-3000:]


@pytest.mark.parametrize("name,edit,says", [
    ("blk.3.attn_k_oscar_rot", lambda r: np.where(np.arange(r.size).reshape(r.shape) == 5, np.nan, r), "holds a non-finite value (nan at row 0, column 5)"),
    ("blk.3.attn_k_oscar_rot", lambda r: 10 * r, "is not a rotation"),
    ("blk.2.attn_v_oscar_rot", lambda r: 0 * r, "is not a rotation"),
    ("blk.4.attn_q_oscar_rot", lambda r: 1.01 * r, "does not invert 'blk.4.attn_k_oscar_rot'"),
], ids=["nan", "scaled", "zero", "weighted-pair-scaled"])
def test_damaged_rotation_is_refused(smollm2, tmp_path, wiki_slice, bin_dir, name, edit, says):
    """A rotation with a NaN, scaled by 10, or zeroed ran before and gave nan or a silently
    worse model; llama.cpp now refuses to load it, naming the layer and the tensor. With key
    weighting R_Q and R_K must be inverse to each other (R_Q R_K^T = I): R_Q scaled by 1.01 is
    refused."""
    bad = write_converted(smollm2, tmp_path / "damaged.gguf", edit={name: edit}, weighted="attn_q" in name)
    layer = name.split(".")[1]
    p = subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(bad), "-f", str(wiki_slice),
                        "-c", str(CTX), "--chunks", "1", "-fa", "on", "-ctk", "oscar2", "-ctv", "oscar2"],
                       capture_output=True, text=True)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out[-2000:]
    assert f"oscar: layer {layer}: tensor '{name}' {says}" in out, out[-3000:]
    assert "convert the original model again" in out, out[-3000:]


LIMITS = json.loads((paths.ROOT / "py" / "oscar" / "limits.json").read_text())


def _loads(bin_dir: Path, model: Path, text: Path) -> tuple[bool, str]:
    """Does llama.cpp load ``model`` with an oscar2 cache (and evaluate one chunk)?"""
    p = subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(model), "-f", str(text), "-c", "128",
                        "--chunks", "1", "-fa", "on", "-ctk", "oscar2", "-ctv", "oscar2"],
                       capture_output=True, text=True)
    return p.returncode == 0, p.stdout + p.stderr


def _mean(layer: int, value: float) -> dict[str, np.ndarray]:
    """Centring means for one layer, zero but for one element of KV head 1."""
    m = np.zeros((N_HEAD_KV, HEAD_DIM), np.float32)
    m[1, 7] = value
    return {f"blk.{layer}.attn_k_oscar_mean": m}


def _pair(layer: int, d: np.ndarray) -> dict:
    """Layer ``layer``'s key weighting replaced by R_K = diag(d) H, R_Q = diag(1/d) H (H the
    64-point Hadamard matrix, d powers of two: exact in float32, so R_Q R_Kᵀ = I exactly and only
    the gains, max d and max 1/d, and the condition number, max d / min d, vary)."""
    from oscar.core.rotation import hadamard
    h = hadamard(HEAD_DIM)
    rk, rq = (d[:, None] * h).astype(np.float32), ((1 / d)[:, None] * h).astype(np.float32)
    return dict(weighted=True, edit={f"blk.{layer}.attn_k_oscar_rot": lambda r: rk,
                                     f"blk.{layer}.attn_q_oscar_rot": lambda r: rq})


def _halves(a: float, b: float) -> np.ndarray:
    return np.r_[np.full(HEAD_DIM // 2, a), np.full(HEAD_DIM // 2, b)]


@pytest.mark.parametrize("what", ["clip_max", "clip_min", "window_max", "rotation_tol", "mean_max", "weight_gain",
                                  "weight_cond"])
def test_runtime_limits_are_the_converters(what, smollm2, tmp_path, wiki_slice, bin_dir):
    """llama.cpp accepts each value just inside py/oscar/limits.json's limits (the list the
    converter checks before writing) and refuses it just outside, naming the key or tensor.
    Centring means: |mean| <= centring_mean_abs_max (inclusive; the next float32 is refused);
    key weightings: the gain of R_K (or R_Q) <= key_weighting_gain_max, R_K's gain at half and at
    twice the limit; the condition number ‖R_K‖₂‖R_Q‖₂ <= key_weighting_cond_max, at 0.41 and
    1.6 times the limit with both gains well inside theirs."""
    tol = LIMITS["rotation_orthogonality_tol"]
    mean_max = np.float32(LIMITS["centring_mean_abs_max"])
    gain = LIMITS["key_weighting_gain_max"]
    cond = LIMITS["key_weighting_cond_max"]
    p2 = lambda x: 2.0 ** np.round(np.log2(x))  # noqa: E731 (a power of two near x)
    assert p2(gain / 2) * 2 > gain and p2(cond ** 0.5 / 1.5) ** 2 <= cond < p2(cond ** 0.5 * 1.2) ** 2
    inside, outside, says = {
        "clip_max": (dict(clip_k=LIMITS["clip_ratio_max"]), dict(clip_k=float(np.nextafter(np.float32(LIMITS["clip_ratio_max"]), np.float32(2)))),
                     "oscar.clip_k"),
        "clip_min": (dict(clip_v=float(np.nextafter(np.float32(LIMITS["clip_ratio_min_exclusive"]), np.float32(1)))),
                     dict(clip_v=LIMITS["clip_ratio_min_exclusive"]), "oscar.clip_v"),
        "window_max": (dict(sink=LIMITS["window_tokens_max"]), dict(sink=LIMITS["window_tokens_max"] + 1), "oscar.sink_tokens"),
        # |R R^T - I| of (1 + e) R is about 2e
        "rotation_tol": (dict(edit={"blk.4.attn_k_oscar_rot": lambda r: r * np.float32(1 + tol / 4)}),
                         dict(edit={"blk.4.attn_k_oscar_rot": lambda r: r * np.float32(1 + tol)}), "blk.4.attn_k_oscar_rot"),
        "mean_max": (dict(means=_mean(3, -mean_max)), dict(means=_mean(3, np.nextafter(mean_max, np.float32(np.inf)))),
                     "tensor 'blk.3.attn_k_oscar_mean' holds 10000"),
        "weight_gain": (_pair(4, np.full(HEAD_DIM, p2(gain / 2))), _pair(4, np.full(HEAD_DIM, 2 * p2(gain / 2) * 2)),
                        "tensor 'blk.4.attn_k_oscar_rot': the key weighting's gain"),
        "weight_cond": (_pair(4, _halves(p2(cond ** 0.5 / 1.5), 1 / p2(cond ** 0.5 / 1.5))),
                        _pair(4, _halves(p2(cond ** 0.5 * 1.2), 1 / p2(cond ** 0.5 * 1.2))),
                        "tensor 'blk.4.attn_k_oscar_rot': the key weighting's condition number"),
    }[what]
    ok, out = _loads(bin_dir, write_converted(smollm2, tmp_path / "inside.gguf", **inside), wiki_slice)
    assert ok, out[-3000:]
    ok, out = _loads(bin_dir, write_converted(smollm2, tmp_path / "outside.gguf", **outside), wiki_slice)
    assert not ok and says in out, out[-3000:]


@pytest.mark.parametrize("case", ["mean+1e6", "scaled-pair"])
def test_out_of_range_calibration_is_refused(case, smollm2, tmp_path, wiki_slice, bin_dir):
    """The issue's two files, written past the converter: a centring mean with 1e6 added, and a
    key weighting with R_K scaled by 1e4 and R_Q by 1e-4 (still each other's inverse). Both
    loaded before and printed nan with exit status 0; now llama.cpp refuses them at load,
    naming the layer, the tensor and the limit."""
    if case == "mean+1e6":
        m = np.full((N_HEAD_KV, HEAD_DIM), 1e6, np.float32)
        kw = dict(means={"blk.2.attn_k_oscar_mean": m})
        says = ("oscar: layer 2: tensor 'blk.2.attn_k_oscar_mean' holds 1e+06 at element 0 of KV head 0, over the "
                f"allowed |mean| <= {LIMITS['centring_mean_abs_max']:g}")
    else:
        kw = dict(weighted=True, edit={"blk.5.attn_k_oscar_rot": lambda r: r * np.float32(1e4),
                                       "blk.5.attn_q_oscar_rot": lambda r: r * np.float32(1e-4)})
        says = "oscar: layer 5: tensor 'blk.5.attn_k_oscar_rot': the key weighting's gain (largest singular value) is "
    ok, out = _loads(bin_dir, write_converted(smollm2, tmp_path / "bad.gguf", **kw), wiki_slice)
    assert not ok and says in out, out[-3000:]
    assert "convert the original model again" in out, out[-3000:]


def test_clip_ratio_is_validated(smollm2, tmp_path, wiki_slice, bin_dir):
    bad = write_converted(smollm2, tmp_path / "badclip.gguf", clip_k=1.5)
    p = subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(bad), "-f", str(wiki_slice),
                        "-c", str(CTX), "--chunks", "1", "-fa", "on"], capture_output=True, text=True)
    assert p.returncode != 0
    assert "oscar.clip_k" in p.stdout + p.stderr and "0 < r <= 1" in p.stdout + p.stderr


def test_clip_only_in_oscar2_cache(rotated, rotated_clip, wiki_slice):
    """Clip ratios from the GGUF change the oscar2 cache and nothing else."""
    f16_a = pp.run(rotated, wiki_slice, pp.KVConfig("f16", "f16"), ctx=CTX, chunks=CHUNKS)
    f16_b = pp.run(rotated_clip, wiki_slice, pp.KVConfig("f16", "f16"), ctx=CTX, chunks=CHUNKS, extra=VERBOSE)
    assert f16_a.ppl == f16_b.ppl
    assert "no clipping (the K/V cache is not oscar2)" in oscar_line(f16_b.log)
    # windows off: at this context the 16-bit windows would cover every token
    no_win = pp.KVConfig.parse("oscar2:sink=0,recent=0")
    o2_a = pp.run(rotated, wiki_slice, no_win, ctx=CTX, chunks=CHUNKS)
    o2_b = pp.run(rotated_clip, wiki_slice, no_win, ctx=CTX, chunks=CHUNKS)
    assert np.isfinite(o2_a.ppl) and np.isfinite(o2_b.ppl)
    assert abs(o2_b.ppl / o2_a.ppl - 1) > 0.01, (o2_a.ppl, o2_b.ppl)


@pytest.mark.parametrize("r", [1.0, 0.96, 0.92, 0.5, 1e-4])
@pytest.mark.parametrize("src", ["f32", "f16"])
def test_clipped_cache_write_matches_numpy(bin_dir, tmp_path, r, src):
    """ggml_set_rows_clip into oscar2 == numpy clip_rows then quantize, bit for bit."""
    prog = bin_dir / "test-oscar-clip"
    if not prog.exists():
        pytest.fail(f"{prog} is missing (tests/c/test-oscar-clip.c is not built)")
    rng = np.random.default_rng(42)
    n_rows, n_heads = 41, 3
    x = (rng.standard_normal((n_rows, n_heads * HEAD_DIM))
         * np.exp(rng.standard_normal((n_rows, n_heads * HEAD_DIM)))).astype(np.float32)
    x[0, :HEAD_DIM] = 1.0          # all equal
    # many ties; no zeros: clipping a row with zeros at r ~ 0 gives +0 and -0, and the
    # C and numpy quantisers pick different signs of zero for the block minimum
    x[1, :HEAD_DIM] = (np.arange(HEAD_DIM) % 5 + 1.0) * np.where(np.arange(HEAD_DIM) % 2, -1, 1)
    inp, out = tmp_path / "in.f32", tmp_path / "out.bin"
    x.tofile(inp)
    cmd = [str(prog), str(inp), str(out), str(n_heads * HEAD_DIM), str(HEAD_DIM), repr(r)]
    if src == "f16":
        cmd.append("f16")
    subprocess.run(cmd, check=True, capture_output=True)
    got = np.fromfile(out, dtype=np.uint8).reshape(-1, 20)
    xs = x.astype(np.float16).astype(np.float32) if src == "f16" else x
    ref = quantize(clip_rows(xs.reshape(n_rows, n_heads, HEAD_DIM), r))
    assert np.array_equal(got, ref), f"{(got != ref).any(axis=1).sum()} blocks differ"


# ----------------------------------------------------------------------------- Gemma 3
#
# Opt-in: writing four f16 copies of Gemma-3-270M and running llama-perplexity with its
# 262k-token vocabulary took 6.6 min on the 2-core machine (3 passed), too long for the
# suite. Run them with:
#   OSCAR_SLOW_TESTS=1 .venv/bin/python -m pytest -q tests/test_rotation_llama.py -k gemma3

import os

slow = pytest.mark.skipif(os.environ.get("OSCAR_SLOW_TESTS") != "1",
                          reason="slow (~7 min): set OSCAR_SLOW_TESTS=1 to run the Gemma-3 llama.cpp checks")
GEMMA_FILE = "gemma-3-270m-it-Q4_K_M.gguf"
# longer than Gemma-3-270M's 512-token sliding window, so its sliding-window layers
# (iSWA cache) really mask old tokens
GEMMA_CTX = 768


@pytest.fixture(scope="module")
def gemma3() -> Path:
    model = paths.MODELS / GEMMA_FILE
    if not model.exists():
        subprocess.run([str(paths.ROOT / "scripts" / "fetch-models.sh"), "gemma3"], check=True)
    return model


@pytest.fixture(scope="module")
def gemma3_f16(gemma3, tmp_path_factory, wiki_slice) -> dict:
    """Gemma-3-270M with f16 weights: plain, randomly rotated, and with a zero V rotation
    in one sliding-window layer (0) and in one global layer (5); plus the f16-cache logits
    of the plain one (the KL-divergence base)."""
    d = tmp_path_factory.mktemp("oscar-gemma")
    models = {
        "base": write_converted(gemma3, d / "base.gguf", rotations=False, f16=True),
        "rot": write_converted(gemma3, d / "rot.gguf", f16=True, seed=3),
        "zero_swa": write_converted(gemma3, d / "zero0.gguf", f16=True, zeros={"blk.0.attn_v_oscar_rot": (256, 256)}),
        "zero_global": write_converted(gemma3, d / "zero5.gguf", f16=True,
                                       zeros={"blk.5.attn_v_oscar_rot": (256, 256)}),
    }
    base = d / "f16.kld"
    ref = pp.run(models["base"], wiki_slice, pp.KVConfig("f16", "f16"), ctx=GEMMA_CTX, chunks=1,
                 kld_base=base, save_base=True)
    return {"models": models, "base": base, "ref": ref}


@slow
def test_gemma3_rotation_invariance_iswa(gemma3_f16, wiki_slice):
    """Gemma 3 (head size 256, one KV head, sliding-window layers in llama.cpp's iSWA cache,
    Q scaled before attention): random rotations in every layer leave the f16-cache logits
    as they are, so Q, K, V and the output are rotated consistently in both caches."""
    g = gemma3_f16
    res = pp.run(g["models"]["rot"], wiki_slice, F16_ROTATED, ctx=GEMMA_CTX, chunks=1,
                 kld_base=g["base"], extra=VERBOSE)
    assert "oscar: calibrated rotations (per layer) from the GGUF" in oscar_line(res.log)
    assert res.kld_mean is not None and res.kld_mean < 1e-3, res.kld_mean
    assert res.same_top >= 99.0, res.same_top
    assert abs(res.ppl / g["ref"].ppl - 1) < 1e-2, (res.ppl, g["ref"].ppl)


@slow
@pytest.mark.parametrize("variant", ["zero_swa", "zero_global"])
def test_gemma3_rotations_used_in_both_caches(variant, gemma3_f16, wiki_slice):
    """A zero V rotation in a sliding-window layer, or in a global layer, moves the logits:
    the rotation tensors are read by both caches of the iSWA model."""
    g = gemma3_f16
    res = pp.run(g["models"][variant], wiki_slice, F16_ROTATED_UNCHECKED, ctx=GEMMA_CTX, chunks=1,
                 kld_base=g["base"])
    assert res.kld_mean > 1e-2, res.kld_mean


@slow
def test_gemma3_plan_out_of_oscar2_in_sliding_layers_is_reported(gemma3, tmp_path, wiki_slice):
    """A plan that keeps Gemma-3's 15 sliding-window layers in q4_0 and its 3 global layers in
    oscar2 (what the zoo's plan stores): the start-up line describes both caches of the iSWA
    model, the sliding one by its types and memory (15 layers, 256 values per cell and side,
    q4_0's 18 bytes per 32 values, a whole number of streams)."""
    glob = [i for i in range(18) if i % 6 == 5]
    types = ["oscar2" if i in glob else "q4_0" for i in range(18)]
    model = write_converted(gemma3, tmp_path / "planned.gguf", plan=(types, types))
    res = pp.run(model, wiki_slice, pp.KVConfig("oscar2", "oscar2"), ctx=GEMMA_CTX, chunks=1, extra=VERBOSE)
    line = next(ln for ln in res.log.splitlines() if "[full-attention layers]" in ln)
    assert "[full-attention layers] oscar: K and V in oscar2" in line, line
    m = re.search(r"\[sliding-window layers\] K in q4_0, V in q4_0 \(15 layers, no oscar2\): ([0-9.]+) MiB at (\d+) cells",
                  line)
    assert m, line
    per_stream = 15 * 2 * int(m.group(2)) * 256 * 18 / 32
    streams = float(m.group(1)) * 2**20 / per_stream
    assert streams >= 1 and abs(streams - round(streams)) < 0.01, (streams, line)
