"""Calibration pipeline: capture -> covariances -> rotations -> clip search -> :class:`Rotations`.

Capture and search run in Hugging Face's head layout; the rotations are then
re-expressed in llama.cpp's layout (:func:`oscar.capture.qk_permutation`), which is
what the GGUF and rotation files store.
"""
from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import capture, clip, gguf_io
from .rotation import hadamard, rotation_from_covariance
from .zoo import Rotations

OBJECTIVE = ("per-layer clip ratios for K and V minimising the squared attention-output error on held-out "
             "calibration tokens (oscar2 2-bit, 16-bit sinks/recent windows); rotations U*H*P from "
             "attention-aware covariances")
DEFAULT_TOKENS = 32768
DEFAULT_HELDOUT = 2048
DEFAULT_CTX = 2048


@dataclass
class Report:
    """What a calibration did, for the summary line and the notes."""
    fit_tokens: int
    heldout_tokens: int
    capture_s: float
    search_s: float
    layers: list[clip.ClipResult] = field(default_factory=list)
    qk_permuted: bool = False

    @property
    def rel_error(self) -> float:
        return sum(r.error for r in self.layers) / max(1e-30, sum(r.energy for r in self.layers))

    @property
    def rel_error_fixed(self) -> float:
        return sum(r.error_fixed for r in self.layers) / max(1e-30, sum(r.energy for r in self.layers))


def rotations_from_capture(cap: capture.Capture, per_head: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(rot_k, rot_v)`` float64 ``[L, D, D]`` or ``[L, Hkv, D, D]`` (Hugging Face layout)."""
    rk = np.stack([rotation_from_covariance(m.sigma_k(per_head)) for m in cap.moments])
    rv = np.stack([rotation_from_covariance(m.sigma_v(per_head)) for m in cap.moments])
    return rk, rv


def layer_sims(cap: capture.Capture, layer: int, rot_k: np.ndarray, rot_v: np.ndarray) -> list[clip.LayerSim]:
    """The clip-search simulations of one layer over all held-out chunks."""
    out = []
    for chunk in cap.heldout:
        h = chunk[layer]
        s = clip.layer_sim(h.q, h.k, h.v, rot_k, rot_v, h.scaling, h.sliding_window)
        if s is not None:
            out.append(s)
    if not out:
        raise ValueError(f"held-out chunks are too short for the clip search (need > "
                         f"{clip.SINK_TOKENS + clip.RECENT_TOKENS} tokens)")
    return out


def search_clips(cap: capture.Capture, rot_k: np.ndarray, rot_v: np.ndarray, progress: bool = True,
                 desc: str = "clip search") -> list[clip.ClipResult]:
    """Per-layer clip search (:func:`oscar.clip.search_layer`) with a progress bar."""
    from tqdm import tqdm
    return [clip.search_layer(layer_sims(cap, i, rot_k[i], rot_v[i]), cap.info.head_dim)
            for i in tqdm(range(cap.info.n_layer), desc=desc, unit="layer", disable=not progress)]


def hadamard_rotations(info: capture.ModelInfo) -> np.ndarray:
    """``[L, D, D]`` copies of the data-free Hadamard (the baseline)."""
    return np.stack([hadamard(info.head_dim)] * info.n_layer)


def to_gguf_layout(model, gguf_path: str | Path, info: capture.ModelInfo, rot_k: np.ndarray) -> tuple[np.ndarray, bool]:
    """Re-express key rotations in the GGUF's head layout (rows permuted for llama-style
    conversions); values are never permuted by the converters."""
    base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    w_hf = base.layers[0].self_attn.k_proj.weight.detach().float().numpy()
    w_gg = gguf_io.tensor_f32(gguf_path, "blk.0.attn_k.weight")
    perm = capture.qk_permutation(w_hf, w_gg, info.n_head_kv, info.head_dim)
    if perm is None:
        return rot_k, False
    return rot_k[..., perm, :], True


def calibrate(model_src: str | Path, gguf_path: str | Path, shape: gguf_io.ModelShape, data: str,
              n_tokens: int = DEFAULT_TOKENS, heldout_tokens: int = DEFAULT_HELDOUT, ctx: int = DEFAULT_CTX,
              per_head: bool = False, progress: bool = True) -> tuple[Rotations, Report]:
    """Calibrate rotations and clip ratios.

    model_src: what PyTorch loads (the GGUF, or the Hugging Face folder it was converted
    from); gguf_path: the GGUF the result is for (layout, fingerprint). ``n_tokens`` fit
    the covariances; the next ``heldout_tokens`` of the text score the clip search.
    """
    import torch
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    t0 = time.time()
    text = capture.load_calibration_text(data)  # first: a bad --calib-data fails before the slow load
    model, tok, info = capture.load_model(model_src)
    for key, want in (("n_layer", shape.n_layer), ("n_head", shape.n_head), ("n_head_kv", shape.n_head_kv),
                      ("head_dim", shape.head_dim)):
        if getattr(info, key) != want:
            raise ValueError(f"PyTorch model and GGUF disagree on {key}: {getattr(info, key)} vs {want}")
    ctx = min(ctx, max(n_tokens, 64))
    fit = capture.tokenize_chunks(tok, text, n_tokens, ctx)
    held = capture.tokenize_chunks(tok, text, heldout_tokens, max(ctx, min(heldout_tokens, DEFAULT_CTX)),
                                   skip_tokens=n_tokens)
    cap = capture.calibrate_statistics(model, info, fit, held, progress)
    rk, rv = rotations_from_capture(cap, per_head)
    t1 = time.time()
    results = search_clips(cap, rk, rv, progress)
    t2 = time.time()
    rk_gguf, permuted = to_gguf_layout(model, gguf_path, info, rk)
    meta = {
        "arch": shape.arch, "n_layer": shape.n_layer, "n_head": shape.n_head, "n_head_kv": shape.n_head_kv,
        "head_dim": shape.head_dim, "fingerprint": shape.fingerprint, "per_head": per_head,
        "sink_tokens": clip.SINK_TOKENS, "recent_tokens": clip.RECENT_TOKENS, "model": Path(gguf_path).name,
        "calibration": {"data": Path(data).name if Path(data).exists() else str(data), "tokens": cap.fit_tokens,
                        "heldout_tokens": cap.heldout_tokens, "objective": OBJECTIVE},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "attn_output_rel_error": {"searched": None, "fixed": None},
    }
    rep = Report(cap.fit_tokens, cap.heldout_tokens, t1 - t0, t2 - t1, results, permuted)
    meta["attn_output_rel_error"] = {"searched": rep.rel_error, "fixed": rep.rel_error_fixed}
    rot = Rotations(rk_gguf.astype(np.float32), rv.astype(np.float32),
                    np.array([r.clip_k for r in results], np.float32), np.array([r.clip_v for r in results], np.float32),
                    meta)
    return rot, rep
