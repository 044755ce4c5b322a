"""Command-line entry points of the oscar package."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm


def eval_main(argv: list[str] | None = None) -> int:
    """``oscar-eval``: quality of KV cache types against f16 with llama.cpp's llama-perplexity."""
    from . import perplexity as pp

    ap = argparse.ArgumentParser(
        prog="oscar-eval",
        description="Measure what a KV cache type costs in quality: runs our llama-perplexity once "
                    "with an f16 cache (reference logits), then once per KV configuration on the same "
                    "chunks, and reports perplexity, KL divergence against f16 (mean and 99th "
                    "percentile) and top-1 agreement.",
        epilog="KV configurations: a type (f16, q8_0, q4_0, oscar2), a K/V pair (q8_0/oscar2), "
               "optionally with +norot to turn llama.cpp's Hadamard rotation off (oscar2+norot).")
    ap.add_argument("model", help="GGUF model file")
    ap.add_argument("--text", required=True, help="evaluation text file (e.g. wiki.test.raw)")
    ap.add_argument("--kv", default="q8_0,q4_0,oscar2", help="comma-separated KV configurations")
    ap.add_argument("--ctx", type=int, default=4096, help="context per chunk (default 4096)")
    ap.add_argument("--chunks", type=int, default=None, help="number of chunks (default: all)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--markdown", help="write the results table to this markdown file")
    a = ap.parse_args(argv)

    for p, what in ((a.model, "model"), (a.text, "text")):
        if not Path(p).is_file():
            ap.error(f"{what} file {p} does not exist")
    configs = [pp.KVConfig.parse(s) for s in a.kv.split(",") if s.strip()]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "f16.logits"
        bar = tqdm(total=len(configs) + 1, desc="oscar-eval", unit="run")
        ref = pp.run(a.model, a.text, pp.KVConfig("f16", "f16"), a.ctx, a.chunks, base, save_base=True, threads=a.threads)
        bar.update()
        rows.append({"kv": "f16", "ppl": ref.ppl, "ppl_err": ref.ppl_err, "kld": 0.0, "kld_p99": 0.0, "same_top": 100.0})
        for cfg in configs:
            r = pp.run(a.model, a.text, cfg, a.ctx, a.chunks, base, threads=a.threads)
            bar.update()
            rows.append({"kv": cfg.name, "ppl": r.ppl, "ppl_err": r.ppl_err, "kld": r.kld_mean, "kld_err": r.kld_err,
                         "kld_p99": r.kld_p99, "same_top": r.same_top, "same_top_err": r.same_top_err})
        bar.close()
    table = ["| KV cache | PPL | KLD vs f16 (mean) | KLD 99% | same top-1 |", "|---|---|---|---|---|"]
    for r in rows:
        kld = f"{r['kld']:.4f}" + (f" ± {r['kld_err']:.4f}" if r.get("kld_err") else "")
        top = f"{r['same_top']:.1f} %" + (f" ± {r['same_top_err']:.1f}" if r.get("same_top_err") else "")
        table.append(f"| {r['kv']} | {r['ppl']:.3f} ± {r['ppl_err']:.3f} | {kld} | {r['kld_p99']:.3f} | {top} |")
    print("\n".join(table))
    meta = {"model": str(a.model), "text": str(a.text), "ctx": a.ctx, "chunks": a.chunks}
    if a.json:
        Path(a.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    if a.markdown:
        Path(a.markdown).write_text("\n".join(table) + "\n")
    print(f"oscar-eval: {len(configs)} KV configurations against f16, ctx {a.ctx}, "
          f"{a.chunks or 'all'} chunks of {a.text}", file=sys.stderr)
    return 0
