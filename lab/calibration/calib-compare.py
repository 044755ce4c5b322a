#!/usr/bin/env python3
"""Compare rotations and clipping on the attention-output objective (PyTorch simulation).

Captures SmolLM2 (or MODEL) on the WikiText-2 validation text: FIT tokens for the
covariances, then two held-out chunks: the clip search runs on the first, every
configuration is scored on the second (so "searched" is not scored on its own
training data). Prints a markdown table of the relative attention-output error
sum ||o_hat - o||^2 / sum ||o||^2 over all layers (oscar2 2-bit, 64 sink + 256 recent
16-bit tokens).

    .venv/bin/python lab/calibration/calib-compare.py [MODEL.gguf] [--fit 8192] [--ctx 2048]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from oscar.calib import calibrate as cal, capture, clip
from oscar.core import paths
from oscar.core.rotation import hadamard


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default=str(paths.MODELS / paths.SMOLLM2_FILE))
    ap.add_argument("--fit", type=int, default=8192)
    ap.add_argument("--ctx", type=int, default=2048)
    a = ap.parse_args()
    import torch
    torch.set_num_threads(2)
    t0 = time.time()
    m, tok, info = capture.load_model(a.model)
    text = capture.load_calibration_text(paths.WIKITEXT2_VALID)
    fit = capture.tokenize_chunks(tok, text, a.fit, a.ctx)
    held = capture.tokenize_chunks(tok, text, 2 * a.ctx, a.ctx, skip_tokens=a.fit)
    cap = capture.calibrate_statistics(m, info, fit, held)
    t1 = time.time()
    L, d = info.n_layer, info.head_dim
    eye = np.stack([np.eye(d)] * L)
    had = np.stack([hadamard(d)] * L)
    rk, rv = cal.rotations_from_capture(cap, per_head=False)
    rkh, rvh = cal.rotations_from_capture(cap, per_head=True)
    configs = {"none": (eye, eye), "Hadamard": (had, had), "U·H·P per layer": (rk, rv),
               "U·H·P per KV head": (rkh, rvh)}
    rows = []
    from tqdm import tqdm
    for name, (a_k, a_v) in configs.items():
        e = {"no clip": 0.0, "fixed 0.96/0.92": 0.0, "searched": 0.0}
        energy = 0.0
        clips = []
        for i in tqdm(range(L), desc=name, unit="layer"):
            h_search, h_eval = cap.heldout[0][i], cap.heldout[1][i]
            s_search = clip.layer_sim(h_search.q, h_search.k, h_search.v, a_k[i], a_v[i], h_search.scaling,
                                      h_search.sliding_window)
            s_eval = clip.layer_sim(h_eval.q, h_eval.k, h_eval.v, a_k[i], a_v[i], h_eval.scaling, h_eval.sliding_window)
            res = clip.search_layer([s_search], d)
            clips.append((res.clip_k, res.clip_v))
            e["no clip"] += clip.attention_error([s_eval], 1.0, 1.0)
            e["fixed 0.96/0.92"] += clip.attention_error([s_eval], clip.FIXED_CLIP_K, clip.FIXED_CLIP_V)
            e["searched"] += clip.attention_error([s_eval], res.clip_k, res.clip_v)
            energy += clip.reference_energy([s_eval])
        ck = np.array(clips)
        rows.append((name, {k: v / energy for k, v in e.items()}, ck))
    t2 = time.time()
    print(f"capture {t1 - t0:.0f} s ({cap.fit_tokens} fit + {cap.heldout_tokens} held-out tokens), "
          f"searches + scoring {t2 - t1:.0f} s\n")
    print("| rotation | no clip | fixed 0.96/0.92 | searched (scored on the other chunk) | searched clip K (min/median/max) | clip V |")
    print("|---|---|---|---|---|---|")
    for name, e, ck in rows:
        print(f"| {name} | {100 * e['no clip']:.2f} % | {100 * e['fixed 0.96/0.92']:.2f} % | {100 * e['searched']:.2f} % "
              f"| {ck[:, 0].min():.3f} / {np.median(ck[:, 0]):.3f} / {ck[:, 0].max():.3f} "
              f"| {ck[:, 1].min():.3f} / {np.median(ck[:, 1]):.3f} / {ck[:, 1].max():.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
