#!/usr/bin/env python3
"""Calibration variants from one capture, as rotation files and converted GGUFs.

Captures MODEL once (FIT validation tokens for the covariances, then HELDOUT tokens in
chunks of 2048 kept for the clip search), then for each variant builds rotations and
searches the clip ratios (:func:`oscar.calib.calibrate.finish`), writes
``OUT/NAME.npz`` (a rotation file with full zoo metadata) and ``OUT/NAME.gguf`` (the
converted model). Score the GGUFs end to end with lab/results/results-quality.py --extra.

    .venv/bin/python lab/calibration/calib-variants.py smollm2-135m --fit 32768 --heldout 4096 \\
        --only layer-lo0.75,layer,head,hadamard,head-2chunks

Variants (NAME: rotation, clip grid, held-out chunks used by the search):
  layer-lo0.75   U·H·P per layer, r >= 0.746, first chunk (the bundled zoo's settings)
  layer          U·H·P per layer, r >= 0.5, first chunk
  head           U·H·P per KV head, r >= 0.5, first chunk
  hadamard       Hadamard (data-free) + searched clip, r >= 0.5, first chunk
  k-head-v-had   U·H·P per KV head for K, Hadamard for V, r >= 0.5, first chunk
  k-had-v-head   Hadamard for K, U·H·P per KV head for V, r >= 0.5, first chunk
  layer-2chunks  as layer, all held-out chunks
  head-2chunks   as head, all held-out chunks
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from oscar.calib import calibrate as cal
from oscar.core import gguf_io, paths

#: name -> (per_head, lo, kind_k, kind_v, all held-out chunks)
VARIANTS = {
    "layer-lo0.75": (False, 47 / 63, "uhp", "uhp", False),
    "layer": (False, 0.5, "uhp", "uhp", False),
    "head": (True, 0.5, "uhp", "uhp", False),
    "hadamard": (False, 0.5, "hadamard", "hadamard", False),
    "k-head-v-had": (True, 0.5, "uhp", "hadamard", False),
    "k-had-v-head": (True, 0.5, "hadamard", "uhp", False),
    "layer-2chunks": (False, 0.5, "uhp", "uhp", True),
    "head-2chunks": (True, 0.5, "uhp", "uhp", True),
}
ALIASES = {"smollm2-135m": (paths.SMOLLM2_FILE, None),
           "gemma3-270m": ("gemma-3-270m-it-Q4_K_M.gguf", "gemma-3-270m-hf"),
           "qwen2.5-coder-0.5b": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b-instruct-hf"),
           "qwen2.5-coder-1.5b": ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-1.5b-instruct-hf")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=sorted(ALIASES))
    ap.add_argument("--fit", type=int, default=32768)
    ap.add_argument("--heldout", type=int, default=4096)
    ap.add_argument("--only", default=",".join(VARIANTS), help="comma-separated variant names")
    ap.add_argument("--out", default=str(paths.ROOT / "results" / "variants"))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    names = [n.strip() for n in a.only.split(",") if n.strip()]
    bad = [n for n in names if n not in VARIANTS]
    if bad:
        ap.error(f"unknown variants {bad}; known: {', '.join(VARIANTS)}")
    gguf_file, folder = ALIASES[a.model]
    gguf = paths.MODELS / gguf_file
    src = paths.MODELS / folder if folder and (paths.MODELS / folder / "config.json").is_file() else gguf
    out = Path(a.out) / a.model
    out.mkdir(parents=True, exist_ok=True)
    shape = gguf_io.model_shape(gguf)
    c = cal.run_capture(src, gguf, shape, str(paths.WIKITEXT2_VALID), a.fit, a.heldout, progress=True,
                        threads=a.threads)
    print(f"capture: {c.cap.fit_tokens} fit + {c.cap.heldout_tokens} held-out tokens in {c.capture_s:.0f} s",
          file=sys.stderr)
    all_chunks = c.cap.heldout
    summary = {}
    for n in names:
        per_head, lo, kk, kv, both = VARIANTS[n]
        c.cap.heldout = all_chunks if both else all_chunks[:1]
        c.cap.heldout_tokens = sum(len(ch[0].k) for ch in c.cap.heldout)
        t0 = time.time()
        rot, rep = cal.finish(c, per_head, lo, kk, kv, progress=True)
        rot.save(out / f"{n}.npz")
        conv = paths.ROOT / ".venv" / "bin" / "oscar-convert"
        subprocess.run([str(conv), str(gguf), "--rotations", str(out / f"{n}.npz"), "-o", str(out / f"{n}.gguf"),
                        "--force", "-q"], check=True)
        summary[n] = {"search_s": round(time.time() - t0, 1), "rel_error_searched": rep.rel_error,
                      "rel_error_fixed": rep.rel_error_fixed,
                      "clip_k": [round(float(x), 3) for x in rot.clip_k],
                      "clip_v": [round(float(x), 3) for x in rot.clip_v]}
        print(f"{n}: attention-output error {100 * rep.rel_error:.2f} % (fixed 0.96/0.92: "
              f"{100 * rep.rel_error_fixed:.2f} %) on its search chunks, {time.time() - t0:.0f} s", file=sys.stderr)
        (out / "summary.json").write_text(json.dumps({"fit": c.cap.fit_tokens, "capture_s": c.capture_s,
                                                      "variants": summary}, indent=1))
    print(f"calib-variants: {len(names)} variants of {a.model} in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
