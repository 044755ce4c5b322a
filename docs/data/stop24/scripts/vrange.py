"""Stop 24: the widest span (max - min) of V over a 64-value block, per layer, on the first 512
tokens of the WikiText-2 validation text, before OSCAR's rotation (the rotation narrows it):
how large the step d = span/3 of an oscar2 V block gets in a real model. Run on this machine:

    .venv/bin/python docs/data/stop24/scripts/vrange.py models/SmolLM2-135M-Instruct.Q4_1.gguf

SmolLM2-135M: widest span 22.53, median of the layers' widest 8.51, mean span 4.43, so d <= 7.5.
"""
import sys

import numpy as np
import torch

from oscar import capture

m, tok, info = capture.load_model(sys.argv[1])
text = open('/work/shared/data/wikitext-2/valid.txt').read()[:20000]
ids = tok(text, return_tensors='pt').input_ids[:, :512]
res = []
for li, layer in enumerate(m.model.layers):
    def hook(mod, inp, out, li=li):
        v = out.detach().float()[0]
        v = v.reshape(v.shape[0], -1, info.head_dim)  # [token][KV head][dim]
        for b in range(info.head_dim // 64):
            blk = v[:, :, 64 * b:64 * (b + 1)]
            span = blk.amax(-1) - blk.amin(-1)
            res.append((li, float(span.max()), float(span.mean())))
    layer.self_attn.v_proj.register_forward_hook(hook)
with torch.no_grad():
    m(ids)
r = np.array(res)
print("widest V block span (before rotation): %.2f, median of the layers' widest %.2f, mean span %.2f"
      % (r[:, 1].max(), np.median(r[:, 1]), r[:, 2].mean()))
print("d_max = span/3 = %.2f; p*d overflows f16 when p > %.1f (e^%.2f)"
      % (r[:, 1].max() / 3, 65504 / (r[:, 1].max() / 3), np.log(65504 / (r[:, 1].max() / 3))))
