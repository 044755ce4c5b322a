"""Quality figures of docs/RESULTS.md sections 2 and 4 in one run: one f16 reference of
SmolLM2-135M on the WikiText-2 test split, then every KV configuration (and the OSCAR-
converted models) against it on the same chunks.

    .venv/bin/python scripts/results-quality.py [--chunks 2] [--ctx 4096]

Writes results/quality.md and results/quality.json. The converted models are compared with
the f16 logits of the original model (their own f16 logits match it to KLD ~1e-3: Q4_1
weights quantise activations to 8 bits, so an orthogonal rotation is not bit-exact)."""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from tqdm import tqdm

from oscar import paths
from oscar import perplexity as pp

ROOT = paths.ROOT
ORIG = paths.MODELS / paths.SMOLLM2_FILE
ZOO = paths.MODELS / "smollm2-oscar-zoo.gguf"
FIXED = paths.MODELS / "smollm2-oscar-fixedclip.gguf"

RUNS = [  # (label, model, kv configuration)
    ("q8_0", ORIG, "q8_0"),
    ("q4_0", ORIG, "q4_0"),
    ("oscar2, Hadamard, no windows", ORIG, "oscar2:sink=0,recent=0"),
    ("oscar2, no rotation, no windows", ORIG, "oscar2+norot:sink=0,recent=0"),
    ("oscar2, Hadamard, windows 64/256", ORIG, "oscar2"),
    ("oscar2, calibrated U·H·P + searched clip, no windows", ZOO, "oscar2:sink=0,recent=0"),
    ("oscar2, calibrated U·H·P + fixed clip 0.96/0.92, windows 64/256", FIXED, "oscar2"),
    ("oscar2, calibrated U·H·P + searched clip, windows 64/256", ZOO, "oscar2"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    a = ap.parse_args()
    text = paths.WIKITEXT2_TEST
    if not ZOO.exists() or not FIXED.exists():
        subprocess.run([str(ROOT / "scripts" / "results-calib.sh")], check=True, env={**__import__("os").environ, "ONLY_CONVERT": "1"})
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "f16.logits"
        bar = tqdm(total=len(RUNS) + 1, desc="quality", unit="run")
        ref = pp.run(ORIG, text, pp.KVConfig("f16", "f16"), a.ctx, a.chunks, base, save_base=True)
        bar.update()
        rows.append(dict(label="f16", model=ORIG.name, kv="f16", ppl=ref.ppl, ppl_err=ref.ppl_err,
                         kld=0.0, kld_err=0.0, kld_p99=0.0, same_top=100.0, same_top_err=0.0))
        for label, model, kv in RUNS:
            r = pp.run(model, text, pp.KVConfig.parse(kv), a.ctx, a.chunks, base)
            bar.update()
            rows.append(dict(label=label, model=model.name, kv=kv, ppl=r.ppl, ppl_err=r.ppl_err, kld=r.kld_mean,
                             kld_err=r.kld_err, kld_p99=r.kld_p99, same_top=r.same_top, same_top_err=r.same_top_err))
        bar.close()
    bits = {"f16": 16, "q8_0": 8.5, "q4_0": 4.5}
    lines = ["| KV cache | bits/value (2-bit tier) | PPL | KLD vs f16 | KLD 99 % | same top-1 |", "|---|---|---|---|---|---|"]
    for r in rows:
        b = bits.get(r["kv"], 2.5)
        lines.append(f"| {r['label']} | {b} | {r['ppl']:.3f} ± {r['ppl_err']:.3f} | {r['kld']:.4f} ± {r['kld_err']:.4f} "
                     f"| {r['kld_p99']:.3f} | {r['same_top']:.1f} ± {r['same_top_err']:.1f} % |")
    out = ROOT / "results"
    out.mkdir(exist_ok=True)
    (out / "quality.md").write_text("\n".join(lines) + "\n")
    (out / "quality.json").write_text(json.dumps({"ctx": a.ctx, "chunks": a.chunks, "rows": rows}, indent=2))
    print("\n".join(lines))
    print(f"results-quality: {len(RUNS)} configurations against f16, ctx {a.ctx}, {a.chunks} chunks of {text.name}")


if __name__ == "__main__":
    main()
