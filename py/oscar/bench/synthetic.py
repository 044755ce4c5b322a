"""Synthetic llama-architecture GGUF models: real shapes, random weights.

Used to measure speed at scale without downloads (e.g. Qwen3-8B geometry) and to
make models with shapes the bundled ones lack (e.g. a head_dim of 80) for tests.
The tokenizer is a byte-level SentencePiece vocabulary (<unk>, <s>, </s> and the
256 byte tokens), so any text tokenises.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Geometry:
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_ctx: int = 131072


#: named shapes of real models
GEOMETRIES = {
    "qwen3-8b": Geometry(n_layer=36, n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=12288),
    "llama-3.2-1b": Geometry(n_layer=16, n_embd=2048, n_head=32, n_head_kv=8, head_dim=64, n_ff=8192),
    "smollm2-135m": Geometry(n_layer=30, n_embd=576, n_head=9, n_head_kv=3, head_dim=64, n_ff=1536, n_ctx=8192),
    "tiny-hd80": Geometry(n_layer=2, n_embd=160, n_head=2, n_head_kv=1, head_dim=80, n_ff=320, n_ctx=2048),
    "tiny-hd64": Geometry(n_layer=2, n_embd=128, n_head=2, n_head_kv=1, head_dim=64, n_ff=256, n_ctx=2048),
}


def _vocab() -> tuple[list[bytes], list[float], list[int]]:
    from gguf import TokenType
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{i:02X}>".encode() for i in range(256)]
    scores = [0.0] * len(tokens)
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    return tokens, scores, [int(t) for t in types]


#: clip ratio written by ``write(..., oscar=True)``, about the middle of the calibrated ones
SYNTH_CLIP = 0.85


def random_rotations(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` random orthogonal matrices, shape ``[n, d, d]`` float32 (QR of Gaussian
    matrices, signs fixed so that the distribution is uniform)."""
    out = np.empty((n, d, d), dtype=np.float32)
    for i in range(n):
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        out[i] = (q * np.sign(np.diag(r))).astype(np.float32)
    return out


def random_key_weightings(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` random key weightings ``W = U diag(w) Uᵀ`` (symmetric positive definite, w in
    [0.3, 3], U random orthogonal), float64 ``[n, d, d]``."""
    u = random_rotations(n, d, rng).astype(np.float64)
    return np.einsum("nij,nj,nkj->nik", u, rng.uniform(0.3, 3.0, (n, d)), u)


def write(path: str | Path, g: Geometry, weight_type: str = "f16", seed: int = 0, oscar: bool = False,
          fold_v: bool = False, centre: bool = False, k_q4_0_layers: tuple[int, ...] = (),
          k_q8_0_layers: tuple[int, ...] = (), key_weighting: bool = False,
          k_oscar3_layers: tuple[int, ...] = (), oscar2s_layers: tuple[int, ...] = ()) -> Path:
    """Write a llama-architecture GGUF with geometry ``g`` and random weights.

    weight_type: ``f32``, ``f16``, ``q8_0`` or ``q4_0`` for the matrices (quantised with
    gguf-py's quantisers). To keep large models quick to write, one random matrix per shape
    is reused across layers; embeddings and the output matrix stay F32.

    oscar: also embed what a calibrated conversion embeds (see :mod:`oscar.core.gguf_io`): a
    random orthogonal K and V rotation per layer, ``[D, D]``, clip ratios ``SYNTH_CLIP``
    and 64 sink / 256 recent tokens, so that speed is measured on the path a converted
    model takes (dense rotations and clipped cache writes) rather than upstream's Hadamard.
    fold_v (with oscar): the model of ``oscar-convert --fold-v``: no V rotation tensors and
    ``oscar.v_rotation_folded`` set. The random attn_v/attn_output matrices stand for the
    folded ones (a random Gaussian matrix times a rotation is a random Gaussian matrix).
    centre (with oscar): random centring means per layer, ``blk.N.attn_k_oscar_mean`` and
    (unless fold_v) ``blk.N.attn_v_oscar_mean``, numpy ``(Hkv, D)``, as a calibrated conversion
    carries them.
    k_q4_0_layers, k_q8_0_layers, k_oscar3_layers (with oscar): a precision plan,
    ``oscar.cache_type_k`` naming q4_0 (q8_0, oscar3) for these layers and oscar2 for the others
    (V oscar2 everywhere), the shape of the zoo's plans at 3.0 bits per value.
    oscar2s_layers (with oscar): these layers' V, and K where no other list names the layer, in
    oscar2s, the shape of a plan under 2.7 bits per value.
    key_weighting (with oscar): keys take ``W R`` and queries ``W⁻¹ R``
    (``blk.N.attn_q_oscar_rot``) with a random symmetric positive definite W per layer, as a
    calibration with its key weighting writes them.
    """
    if fold_v and not oscar:
        raise ValueError("fold_v needs oscar (a folded V rotation is part of a converted model)")
    named = {"q4_0": k_q4_0_layers, "q8_0": k_q8_0_layers, "oscar3": k_oscar3_layers}
    k_types: dict[int, str] = {}
    for t, ls in named.items():
        for il in ls:
            if il in k_types:
                raise ValueError(f"layer {il} is named by both --k-{k_types[il]}-layers and --k-{t}-layers; "
                                 "a layer's K has one type")
            k_types[il] = t
    if (centre or k_types or key_weighting or oscar2s_layers) and not oscar:
        raise ValueError("--centre, --key-weighting and --k-q4_0-layers/--k-q8_0-layers/--k-oscar3-layers/--oscar2s-layers "
                         "need --oscar (they belong to a converted model)")
    bad = [il for il in k_types if not 0 <= il < g.n_layer]
    if bad:
        raise ValueError(f"--k-{k_types[bad[0]]}-layers names layer {bad[0]}; the model has layers 0..{g.n_layer - 1}")
    bad = [il for il in oscar2s_layers if not 0 <= il < g.n_layer]
    if bad:
        raise ValueError(f"--oscar2s-layers names layer {bad[0]}; the model has layers 0..{g.n_layer - 1}")
    import gguf

    path = Path(path)
    rng = np.random.default_rng(seed)
    tokens, scores, types = _vocab()
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"synthetic-{g.n_layer}L-{g.n_embd}d")
    w.add_context_length(g.n_ctx)
    w.add_embedding_length(g.n_embd)
    w.add_block_count(g.n_layer)
    w.add_feed_forward_length(g.n_ff)
    w.add_head_count(g.n_head)
    w.add_head_count_kv(g.n_head_kv)
    w.add_key_length(g.head_dim)
    w.add_value_length(g.head_dim)
    w.add_rope_dimension_count(g.head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    if oscar:
        from ..core.gguf_io import MEAN_K, MEAN_V, OSCAR_VERSION, ROT_K, ROT_Q, ROT_V
        w.add_uint32("oscar.version", OSCAR_VERSION)
        w.add_array("oscar.clip_k", [SYNTH_CLIP] * g.n_layer)
        w.add_array("oscar.clip_v", [SYNTH_CLIP] * g.n_layer)
        w.add_uint32("oscar.sink_tokens", 64)
        w.add_uint32("oscar.recent_tokens", 256)
        w.add_string("oscar.calibration.data", "none (synthetic model: random rotations)")
        w.add_uint32("oscar.calibration.tokens", 0)
        w.add_string("oscar.calibration.objective", "none")
        if fold_v:
            w.add_bool("oscar.v_rotation_folded", True)
        rots = random_rotations(2 * g.n_layer, g.head_dim, np.random.default_rng(seed + 1))
        rot_q = None
        if key_weighting:
            from ..core.rotation import weighted_rotations
            wk = random_key_weightings(g.n_layer, g.head_dim, np.random.default_rng(seed + 3))
            r_k, r_q = weighted_rotations(wk, rots[0::2].astype(np.float64))
            rots[0::2] = r_k.astype(np.float32)
            rot_q = r_q.astype(np.float32)
        if k_types or oscar2s_layers:
            low = set(oscar2s_layers)
            w.add_array("oscar.cache_type_k", [k_types.get(il, "oscar2s" if il in low else "oscar2") for il in range(g.n_layer)])
            w.add_array("oscar.cache_type_v", ["oscar2s" if il in low else "oscar2" for il in range(g.n_layer)])
        means = (np.random.default_rng(seed + 2).standard_normal((2 * g.n_layer, g.n_head_kv, g.head_dim))
                 .astype(np.float32) * 0.5 if centre else None)

    qtype = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
             "q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}[weight_type]
    cache: dict[tuple[int, int], np.ndarray] = {}

    def matrix(rows: int, cols: int) -> np.ndarray:
        if (rows, cols) not in cache:
            m = (rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)).astype(np.float32)
            if qtype == gguf.GGMLQuantizationType.F16:
                m = m.astype(np.float16)
            elif qtype != gguf.GGMLQuantizationType.F32:
                m = gguf.quants.quantize(m, qtype)
            cache[(rows, cols)] = m
        return cache[(rows, cols)]

    def add(name: str, arr: np.ndarray) -> None:
        w.add_tensor(name, arr, raw_dtype=qtype if arr.dtype == np.uint8 else None)

    ones = np.ones(g.n_embd, dtype=np.float32)
    w.add_tensor("token_embd.weight", (rng.standard_normal((n_vocab, g.n_embd), dtype=np.float32)).astype(np.float32))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", (rng.standard_normal((n_vocab, g.n_embd), dtype=np.float32) / np.sqrt(g.n_embd)).astype(np.float32))
    for il in range(g.n_layer):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", ones)
        w.add_tensor(p + "ffn_norm.weight", ones)
        add(p + "attn_q.weight", matrix(g.n_head * g.head_dim, g.n_embd))
        add(p + "attn_k.weight", matrix(g.n_head_kv * g.head_dim, g.n_embd))
        add(p + "attn_v.weight", matrix(g.n_head_kv * g.head_dim, g.n_embd + 0))
        add(p + "attn_output.weight", matrix(g.n_embd, g.n_head * g.head_dim))
        add(p + "ffn_gate.weight", matrix(g.n_ff, g.n_embd))
        add(p + "ffn_up.weight", matrix(g.n_ff, g.n_embd))
        add(p + "ffn_down.weight", matrix(g.n_embd, g.n_ff))
        if oscar:
            w.add_tensor(ROT_K.format(il), rots[2 * il])
            if rot_q is not None:
                w.add_tensor(ROT_Q.format(il), rot_q[il])
            if not fold_v:
                w.add_tensor(ROT_V.format(il), rots[2 * il + 1])
            if means is not None:
                w.add_tensor(MEAN_K.format(il), means[2 * il])
                if not fold_v:
                    w.add_tensor(MEAN_V.format(il), means[2 * il + 1])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    import importlib.util
    w.write_tensors_to_file(progress=g.n_layer > 8 and importlib.util.find_spec("tqdm") is not None)
    w.close()
    return path


def main(argv: list[str] | None = None) -> int:
    """``oscar-synth``: write one synthetic model; 0 on success, 1 with a message otherwise."""
    ap = argparse.ArgumentParser(
        prog="oscar-synth",
        description="Write a llama-architecture GGUF with real shapes and random weights, "
                    "for speed measurements at scale without downloads (its output is noise).",
        epilog="geometries: " + "; ".join(f"{k}: {g.n_layer} layers, {g.n_head}/{g.n_head_kv} heads, head_dim "
                                          f"{g.head_dim}, n_embd {g.n_embd}, n_ff {g.n_ff}"
                                          for k, g in sorted(GEOMETRIES.items()))
               + ".  example: oscar-synth qwen3-8b --weights q4_0 -o qwen3-8b-synth.gguf")
    ap.add_argument("geometry", choices=sorted(GEOMETRIES), help="named model shape")
    ap.add_argument("-o", "--output", required=True, help="output .gguf path (must not exist)")
    ap.add_argument("--weights", choices=("f32", "f16", "q8_0", "q4_0"), default="q8_0",
                    help="weight type of the layer matrices (default q8_0)")
    ap.add_argument("--ctx", type=int, default=None,
                    help="context length written to the GGUF (default: the geometry's, 131072 for the large ones)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--oscar", action="store_true",
                    help="also embed random OSCAR rotations and clip ratios (as a converted model carries), "
                         "so that oscar2 runs the calibrated path instead of upstream's Hadamard rotation")
    ap.add_argument("--fold-v", action="store_true",
                    help="with --oscar: the V rotation folded into the weights, as oscar-convert --fold-v writes it "
                         "(no V rotation at run time)")
    ap.add_argument("--centre", action="store_true",
                    help="with --oscar: also random centring means per layer and KV head, as a calibrated conversion carries")
    ap.add_argument("--key-weighting", action="store_true",
                    help="with --oscar: keys rotated by W R and queries by W^-1 R (attn_q_oscar_rot) with a random "
                         "symmetric positive definite W per layer, as a calibration's key weighting writes them")
    ap.add_argument("--k-q4_0-layers", metavar="L,L,...", default="",
                    help="with --oscar: a precision plan storing these layers' K in q4_0 (every other K and V in oscar2), "
                         "as the zoo's plans do at 3.0 bits per value; e.g. 0,1,35")
    ap.add_argument("--k-q8_0-layers", metavar="L,L,...", default="",
                    help="with --oscar: the same for K in q8_0 (a layer named by none of these keeps K in oscar2)")
    ap.add_argument("--k-oscar3-layers", metavar="L,L,...", default="",
                    help="with --oscar: the same for K in oscar3 (3-bit keys)")
    ap.add_argument("--oscar2s-layers", metavar="L,L,...", default="",
                    help="with --oscar: these layers' V, and K where no --k-*-layers names the layer, in oscar2s (2.25 "
                         "bits), as a plan under 2.7 bits per value stores them")
    a = ap.parse_args(argv)
    if a.fold_v and not a.oscar:
        print("oscar-synth: error: --fold-v needs --oscar (a folded V rotation belongs to a converted model)", file=sys.stderr)
        return 1
    layer_lists = {}
    for opt, val in (("--k-q4_0-layers", a.k_q4_0_layers), ("--k-q8_0-layers", a.k_q8_0_layers),
                     ("--k-oscar3-layers", a.k_oscar3_layers), ("--oscar2s-layers", a.oscar2s_layers)):
        try:
            layer_lists[opt] = tuple(sorted({int(x) for x in val.split(",") if x.strip()}))
        except ValueError:
            print(f"oscar-synth: error: {opt} takes layer numbers separated by commas, got '{val}'", file=sys.stderr)
            return 1
    out = Path(a.output)
    if os.path.lexists(out):  # a dangling link too: write() would create its target
        print(f"oscar-synth: error: {out} exists; remove it first or choose another -o", file=sys.stderr)
        return 1
    if not out.resolve().parent.is_dir():
        print(f"oscar-synth: error: folder {out.resolve().parent} does not exist", file=sys.stderr)
        return 1
    g = GEOMETRIES[a.geometry]
    if a.ctx is not None:
        if a.ctx < 1:
            print("oscar-synth: error: --ctx must be a positive number of tokens", file=sys.stderr)
            return 1
        g = replace(g, n_ctx=a.ctx)
    t0 = time.time()
    try:
        write(out, g, a.weights, a.seed, oscar=a.oscar, fold_v=a.fold_v, centre=a.centre,
              k_q4_0_layers=layer_lists["--k-q4_0-layers"], k_q8_0_layers=layer_lists["--k-q8_0-layers"],
              key_weighting=a.key_weighting, k_oscar3_layers=layer_lists["--k-oscar3-layers"],
              oscar2s_layers=layer_lists["--oscar2s-layers"])
    except ValueError as e:  # options that do not fit the geometry, refused before anything is written
        out.unlink(missing_ok=True)
        print(f"oscar-synth: error: {e}", file=sys.stderr)
        return 1
    except BaseException:
        out.unlink(missing_ok=True)  # never leave a truncated model behind
        raise
    print(f"oscar-synth: wrote {out} ({a.geometry}: {g.n_layer} layers, {g.n_head}/{g.n_head_kv} heads, "
          f"head_dim {g.head_dim}, {a.weights} weights{', OSCAR rotations' if a.oscar else ''}{' (V folded)' if a.fold_v else ''}{', centred' if a.centre else ''}{', keys weighted' if a.key_weighting else ''}{f', K q4_0 in layers {a.k_q4_0_layers}' if layer_lists['--k-q4_0-layers'] else ''}{f', K q8_0 in layers {a.k_q8_0_layers}' if layer_lists['--k-q8_0-layers'] else ''}{f', K oscar3 in layers {a.k_oscar3_layers}' if layer_lists['--k-oscar3-layers'] else ''}{f', oscar2s in layers {a.oscar2s_layers}' if layer_lists['--oscar2s-layers'] else ''}, ctx {g.n_ctx}, {out.stat().st_size / 2**20:.0f} MiB) "
          f"in {time.time() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
