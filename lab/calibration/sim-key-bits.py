#!/usr/bin/env python3
"""Key precision on code text, simulated (oscar-sim's attention inside the PyTorch model).

Scores KV settings that differ only in the keys' cache type per layer against the unquantised
model on HumanEval's prompts and canonical solutions (concatenated, llama-perplexity's chunks:
the second half of each chunk scored), with the zoo entry's rotations, clips, centring and
windows (default 4 sink + 32 recent tokens: the prompt lies in the quantised tier). Values stay
oscar2. A setting is NAME=KIND, KIND one of:

  plan           the zoo entry's precision plan
  TYPE           every layer's keys in TYPE (oscar2, oscar3, q4_0, q8_0)
  oscar3c        every layer's keys in oscar3 clipped at the layer's 2-bit clip ratio
  sel:N:TYPE     keys in TYPE in the N layers of largest 2-bit key error in the zoo entry's
                 calibration tables (its meta.plan.errors), oscar2 elsewhere

  lab/calibration/sim-key-bits.py MODEL.gguf ZOO.npz 'plan=plan;q4=q4_0;k3=oscar3' [--ctx 2048 --chunks 4]
"""
from __future__ import annotations

import argparse
import copy
import gzip
import json
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("zoo", help="the zoo entry (.npz) of the model")
    ap.add_argument("settings", help="NAME=KIND;NAME=KIND;...")
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--sink", type=int, default=4)
    ap.add_argument("--recent", type=int, default=32)
    a = ap.parse_args()

    import torch
    from oscar.calib import simcache
    from oscar.calib.simcache import clip_rows
    from oscar.core import rotfile
    from oscar.eval import humaneval
    from oscar.sim import simulate as sim

    base_quantize = simcache.quantize_side

    def quantize_side(x, kind, clip, method, keys):  # oscar3c: the 2-bit clip before 3 bits
        if kind == "oscar3c":
            return base_quantize(clip_rows(x, clip) if clip < 1.0 else x, "oscar3", 1.0, method, keys)
        return base_quantize(x, kind, clip, method, keys)
    simcache.quantize_side = quantize_side
    base_low_mask = simcache.low_mask
    simcache.low_mask = lambda method, kind, i, j, keys: base_low_mask(method, "oscar3" if kind == "oscar3c" else kind, i, j, keys)

    raw = [json.loads(line) for line in gzip.open(humaneval.data_file(), "rt")]
    text = "".join(r["prompt"] + r["canonical_solution"] + "\n\n" for r in raw)
    sm = sim.load(a.model)
    rot = rotfile.Rotations.load(a.zoo)
    calib = simcache.calibration_of(rot, a.zoo)
    errors = rot.meta["plan"]["errors"]
    ids = sim.chunks(sim.tokenize(a.model, text), a.ctx, a.chunks)
    n = sm.info.n_layer
    method = sim.parse_method(f"oscar:sink={a.sink},recent={a.recent}")
    base = simcache.make_plan(method, n, sm.info.head_dim, sm.perm, calib, 256, True)
    plans = {}
    for spec in a.settings.split(";"):
        name, _, kind = spec.partition("=")
        p = copy.copy(base)
        if kind.startswith("sel:"):
            _, k, t = kind.split(":")
            e = [errors[i]["oscar2,oscar2"] for i in range(n)]
            top = set(sorted(range(n), key=lambda i: -e[i])[:int(k)])
            p.kq = [t if i in top else "oscar2" for i in range(n)]
        elif kind != "plan":
            p.kq = [kind] * n
        plans[name] = p
        print(f"{name}: keys {p.kq}", flush=True)
    ref_plan = simcache.make_plan(simcache.PRESETS["none"], n, sm.info.head_dim, sm.perm, None, 256)
    stats = {k: simcache.Stats() for k in plans}
    t0 = time.time()
    for ci, c in enumerate(ids):
        targets = torch.from_numpy(c[len(c) // 2 + 1:])
        ref = simcache.chunk_logprobs(sm.model, c, ref_plan)
        for k, p in plans.items():
            stats[k].add(simcache.chunk_logprobs(sm.model, c, p), ref, targets)
        print(f"chunk {ci + 1}/{len(ids)} ({time.time() - t0:.0f} s)", flush=True)
    print(f"| keys | KLD vs unquantised | KLD 99 % | same top-1 |  ({len(ids)} chunks of {a.ctx}, windows {a.sink}/{a.recent})")
    print("|---|---|---:|---|")
    for k, s in stats.items():
        r = s.summary()
        print(f"| {k} | {r['kld']:.4f} ± {r['kld_err']:.4f} | {r['kld_p99']:.3f} | {r['same_top']:.2f} ± {r['same_top_err']:.2f} % |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
