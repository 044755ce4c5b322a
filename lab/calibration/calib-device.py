#!/usr/bin/env python3
"""Calibration on a PyTorch device, with models built from a config (random weights, no download).

1. Equality: a small llama model captured on the CPU and on DEVICE (the same weights, the same
   tokens) gives the same attention-aware covariances (Σ_K, Σ_V per layer) up to float32
   rounding (1e-4 relative), and the same clip ratios from the clip search in at least 90% of
   the layers (a near-tie of the search's grid may tip the other way); it exits 1 otherwise.
2. Timing: for each --geometry (oscar.bench.synthetic's named shapes), the capture (three passes of
   the model over --tokens + --heldout tokens) and the clip search, on each --device.

    lab/calibration/calib-device.py --device cuda,cpu --geometry smollm2-135m,qwen3-8b --tokens 16384 --json out.json

Prints one line per (geometry, device) and a summary line; --json writes the figures.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

import numpy as np  # noqa: E402


def build(geometry: str, device: str, seed: int = 0):
    """A llama-architecture causal LM with ``geometry``'s shapes and random weights, on ``device``."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig
    from oscar.bench import synthetic
    from oscar.calib import capture
    g = synthetic.GEOMETRIES[geometry]
    cfg = LlamaConfig(vocab_size=32000, hidden_size=g.n_embd, intermediate_size=g.n_ff, num_hidden_layers=g.n_layer,
                      num_attention_heads=g.n_head, num_key_value_heads=g.n_head_kv, head_dim=g.head_dim,
                      max_position_embeddings=4096, rms_norm_eps=1e-5)
    torch.manual_seed(seed)
    with torch.device(device):
        m = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    return capture.prepare_model(m, f"{geometry} (random weights)", device)


def chunks(n_tokens: int, ctx: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(3, 32000, size=min(ctx, n_tokens - s), dtype=np.int64) for s in range(0, n_tokens, ctx)]


def sync(device: str) -> None:
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run(model, info, fit, held, device: str, search: bool = True) -> dict:
    """Capture, rotations and (with ``search``) the clip search; times in seconds."""
    from oscar.calib import calibrate as cal, capture
    sync(device)
    t0 = time.time()
    cap = capture.calibrate_statistics(model, info, fit, held, progress=False)
    sync(device)
    t1 = time.time()
    rk, rv = cal.rotations_from_capture(cap, per_head=False)
    clips = None
    if search:
        res = cal.search_clips(cap, rk, rv, progress=False)
        res = res[0] if isinstance(res, tuple) else res  # (results, tables) where the plan tables are returned
        clips = [(r.clip_k, r.clip_v) for r in res]
    t2 = time.time()
    return {"cap": cap, "clips": clips, "capture_s": t1 - t0, "search_s": t2 - t1}


def equality(device: str, ctx: int) -> dict:
    """The small model on the CPU and on ``device``: covariances and clip ratios."""
    model, info = build("smollm2-135m", "cpu")
    fit, held = chunks(2 * ctx, ctx, 1), chunks(ctx, ctx, 2)
    ref = run(model, info, fit, held, "cpu")
    dev_model, _ = copy.deepcopy(model), None
    dev_model = dev_model.to(device)
    got = run(dev_model, info, fit, held, device)
    worst = 0.0
    for a, b in zip(ref["cap"].moments, got["cap"].moments):
        for x, y in ((a.sigma_k(), b.sigma_k()), (a.sigma_v(), b.sigma_v())):
            worst = max(worst, float(np.abs(x - y).max() / np.abs(x).max()))
    same = sum(r == g for r, g in zip(ref["clips"], got["clips"]))
    return {"max_rel_cov_diff": worst, "clip_layers_equal": same, "layers": info.n_layer}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda,cpu", help="comma-separated devices to time (default cuda,cpu)")
    ap.add_argument("--geometry", default="smollm2-135m,llama-3.2-1b,qwen3-8b",
                    help="comma-separated oscar.bench.synthetic geometries")
    ap.add_argument("--cpu-geometry", default="smollm2-135m",
                    help="the geometries also timed on the cpu device (default smollm2-135m: a CPU run of an 8B model "
                         "takes hours)")
    ap.add_argument("--tokens", type=int, default=16384, help="calibration tokens (default 16384)")
    ap.add_argument("--heldout", type=int, default=2048, help="held-out tokens for the clip search (default 2048)")
    ap.add_argument("--ctx", type=int, default=2048, help="tokens per chunk (default 2048)")
    ap.add_argument("--no-equality", action="store_true", help="skip the CPU-against-device check")
    ap.add_argument("--json", default=None, help="write the figures here")
    a = ap.parse_args(argv)
    import torch
    from oscar.calib import capture
    torch.set_num_threads(os.cpu_count() or 1)
    devices = [capture.check_device(d) for d in a.device.split(",")]
    out = {"torch": torch.__version__, "host": platform.node(), "cpus": os.cpu_count(),
           "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
           "tokens": a.tokens, "heldout": a.heldout, "ctx": a.ctx, "runs": []}
    ok = True
    gpu = next((d for d in devices if d != "cpu"), None)
    if gpu and not a.no_equality:
        eq = equality(gpu, 512)
        out["equality"] = {"device": gpu, **eq}
        # the clip search picks the best of a grid: float32 rounding may tip a near-tie in a layer
        ok = eq["max_rel_cov_diff"] < 1e-4 and eq["clip_layers_equal"] >= 0.9 * eq["layers"]
        print(f"equality cpu vs {gpu}: covariances differ by {eq['max_rel_cov_diff']:.2e} (relative), clip ratios "
              f"equal in {eq['clip_layers_equal']}/{eq['layers']} layers: {'ok' if ok else 'FAILED'}", flush=True)
    fit, held = chunks(a.tokens, a.ctx, 1), chunks(a.heldout, a.ctx, 2)
    cpu_geoms = set(a.cpu_geometry.split(","))
    for geom in a.geometry.split(","):
        for dev in devices:
            if dev == "cpu" and geom not in cpu_geoms:
                continue
            t = time.time()
            model, info = build(geom, dev)
            build_s = time.time() - t
            r = run(model, info, fit, held, dev)
            row = {"geometry": geom, "device": dev, "params_M": sum(p.numel() for p in model.parameters()) / 1e6,
                   "build_s": build_s, "capture_s": r["capture_s"], "search_s": r["search_s"]}
            out["runs"].append(row)
            print(f"{geom} on {dev}: {row['params_M']:.0f}M parameters, capture {r['capture_s']:.1f} s "
                  f"({a.tokens}+{a.heldout} tokens, 3 passes), clip search {r['search_s']:.1f} s", flush=True)
            del model
            if dev.startswith("cuda"):
                torch.cuda.empty_cache()
            if a.json:  # after every run, so that a run cut short keeps what it measured
                Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    print(f"calib-device: {len(out['runs'])} runs on {', '.join(devices)}"
          + (f"; equality {'ok' if ok else 'FAILED'}" if "equality" in out else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
