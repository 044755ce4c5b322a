"""Quality figures of docs/RESULTS.md section 2 in one run: one f16 reference of the original
model on the WikiText-2 test split, then every KV configuration (and the OSCAR-converted
models) against it on the same chunks.

    .venv/bin/python lab/results/results-quality.py [--model smollm2|gemma3] [--chunks 2] [--ctx 4096]
    .venv/bin/python lab/results/results-quality.py --only-extra --extra "per-head=models/x.gguf" ...

Writes results/quality[-MODEL].md and .json. The converted models come from the zoo
(searched clipping) and the same rotations with the published fixed ratios 0.96/0.92
(lab/results/results-calib.sh for SmolLM2; made here for the other models). They are compared
with the f16 logits of the original model (their own f16 logits match it to KLD ~1e-3:
quantised weights quantise activations to 8 bits, so an orthogonal rotation is not
bit-exact). ``--extra LABEL=MODEL.gguf[@KV]`` adds rows (KV default ``oscar2``, windows on)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from oscar.core import paths
from oscar.eval import perplexity as pp

ROOT = paths.ROOT


@dataclass(frozen=True)
class ModelSet:
    """The original GGUF of one bundled model and its converted copies."""
    alias: str      # oscar-convert zoo alias
    orig: Path      # original GGUF
    zoo: Path       # converted with the zoo rotations (searched clipping)
    fixed: Path     # the same rotations with clip 0.96/0.92


MODELS = {
    "smollm2": ModelSet("smollm2-135m", paths.MODELS / paths.SMOLLM2_FILE,
                        paths.MODELS / "smollm2-oscar-zoo.gguf", paths.MODELS / "smollm2-oscar-fixedclip.gguf"),
    "gemma3": ModelSet("gemma3-270m", paths.MODELS / "gemma-3-270m-it-Q4_K_M.gguf",
                       paths.MODELS / "gemma3-oscar-zoo.gguf", paths.MODELS / "gemma3-oscar-fixedclip.gguf"),
}


def standard_runs(m: ModelSet) -> list[tuple[str, Path, str]]:
    """``(label, model, kv configuration)`` of the standard table."""
    return [
        ("q8_0", m.orig, "q8_0"),
        ("q4_0", m.orig, "q4_0"),
        ("oscar2, Hadamard, no windows", m.orig, "oscar2:sink=0,recent=0"),
        ("oscar2, no rotation, no windows", m.orig, "oscar2+norot:sink=0,recent=0"),
        ("oscar2, Hadamard, windows 64/256", m.orig, "oscar2"),
        ("oscar2, calibrated U·H·P + searched clip, no windows", m.zoo, "oscar2:sink=0,recent=0"),
        ("oscar2, calibrated U·H·P + fixed clip 0.96/0.92, windows 64/256", m.fixed, "oscar2"),
        ("oscar2, calibrated U·H·P + searched clip, windows 64/256", m.zoo, "oscar2"),
        ("f16, zoo-converted model (rotation invariance with the real weights)", m.zoo, "f16"),
    ]


def parse_extra(spec: str) -> tuple[str, Path, str]:
    """``LABEL=MODEL.gguf[@KV]`` -> ``(label, model, kv)``; a clear error otherwise."""
    label, eq, rest = spec.partition("=")
    if not eq or not label or not rest:
        raise SystemExit(f"--extra {spec!r}: use LABEL=MODEL.gguf or LABEL=MODEL.gguf@KV")
    model, _, kv = rest.partition("@")
    if not Path(model).is_file():
        raise SystemExit(f"--extra {spec!r}: {model} does not exist")
    return label, Path(model), kv or "oscar2"


def ensure_converted(m: ModelSet) -> None:
    """Write the zoo and fixed-clip conversions of ``m`` if they are missing."""
    if m.zoo.exists() and m.fixed.exists():
        return
    if m.alias == "smollm2-135m":
        subprocess.run([str(ROOT / "lab" / "results" / "results-calib.sh")], check=True,
                       env={**__import__("os").environ, "ONLY_CONVERT": "1"})
        return
    import numpy as np
    from oscar.calib import zoo
    from oscar.core import rotfile
    from oscar.core.gguf_io import model_shape
    conv = str(ROOT / ".venv" / "bin" / "oscar-convert")
    subprocess.run([conv, m.alias, "--rotations", "zoo", "-o", str(m.zoo), "--force", "-q"], check=True)
    f, _ = zoo.find(model_shape(m.orig))
    rot = rotfile.Rotations.load(f)
    rot.clip_k = np.full_like(rot.clip_k, 0.96)
    rot.clip_v = np.full_like(rot.clip_v, 0.92)
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "fixedclip.npz"
        rot.save(npz)
        subprocess.run([conv, str(m.orig), "--rotations", str(npz), "-o", str(m.fixed), "--force", "-q"], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="smollm2")
    ap.add_argument("--chunks", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--runs", default=None,
                    help="comma-separated labels of the standard table to run (default: all)")
    ap.add_argument("--extra", action="append", default=[], metavar="LABEL=MODEL.gguf[@KV]")
    ap.add_argument("--only-extra", action="store_true", help="skip the standard rows (f16 reference still runs)")
    ap.add_argument("--out", default=None, help="output name under results/ (default quality or quality-MODEL)")
    a = ap.parse_args()
    m = MODELS[a.model]
    text = paths.WIKITEXT2_TEST
    extras = [parse_extra(s) for s in a.extra]
    runs = [] if a.only_extra else standard_runs(m)
    if a.runs:
        want = [s.strip() for s in a.runs.split(";")] if ";" in a.runs else [s.strip() for s in a.runs.split(",")]
        unknown = [w for w in want if w not in {r[0] for r in runs}]
        if unknown:
            raise SystemExit(f"--runs: unknown labels {unknown}; the labels are: {[r[0] for r in runs]}")
        runs = [r for r in runs if r[0] in want]
    if any(r[1] in (m.zoo, m.fixed) for r in runs):
        ensure_converted(m)
    runs += extras
    rows = []
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "f16.logits"
        bar = tqdm(total=len(runs) + 1, desc=f"quality {a.model}", unit="run")
        ref = pp.run(m.orig, text, pp.KVConfig("f16", "f16"), a.ctx, a.chunks, base, save_base=True)
        bar.update()
        rows.append(dict(label="f16", model=m.orig.name, kv="f16", ppl=ref.ppl, ppl_err=ref.ppl_err,
                         kld=0.0, kld_err=0.0, kld_p99=0.0, same_top=100.0, same_top_err=0.0))
        for label, model, kv in runs:
            r = pp.run(model, text, pp.KVConfig.parse(kv), a.ctx, a.chunks, base)
            bar.update()
            rows.append(dict(label=label, model=model.name, kv=kv, ppl=r.ppl, ppl_err=r.ppl_err, kld=r.kld_mean,
                             kld_err=r.kld_err, kld_p99=r.kld_p99, same_top=r.same_top, same_top_err=r.same_top_err))
            print(f"{label}: PPL {r.ppl:.3f} KLD {r.kld_mean:.4f} top-1 {r.same_top:.1f} %", file=sys.stderr)
        bar.close()
    bits = {"f16": 16, "q8_0": 8.5, "q4_0": 4.5}
    lines = ["| KV cache | bits/value (2-bit tier) | PPL | KLD vs f16 | KLD 99 % | same top-1 |", "|---|---|---|---|---|---|"]
    for r in rows:
        b = bits.get(r["kv"], 2.5)
        lines.append(f"| {r['label']} | {b} | {r['ppl']:.3f} ± {r['ppl_err']:.3f} | {r['kld']:.4f} ± {r['kld_err']:.4f} "
                     f"| {r['kld_p99']:.3f} | {r['same_top']:.1f} ± {r['same_top_err']:.1f} % |")
    out = ROOT / "results"
    out.mkdir(exist_ok=True)
    name = a.out or ("quality" if a.model == "smollm2" else f"quality-{a.model}")
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    (out / f"{name}.json").write_text(json.dumps({"model": m.orig.name, "ctx": a.ctx, "chunks": a.chunks,
                                                  "rows": rows}, indent=2))
    print("\n".join(lines))
    print(f"results-quality: {len(runs)} configurations of {m.orig.name} against f16, ctx {a.ctx}, {a.chunks} chunks "
          f"of {text.name}, {time.time() - t0:.0f} s; wrote results/{name}.md")


if __name__ == "__main__":
    main()
