"""``oscar-eval``: what a KV cache type costs in quality, on your model and your text.

Runs our ``llama-perplexity`` once with an f16 cache (the reference logits) and once per
KV configuration on the same chunks; reports perplexity, KL divergence against f16
(mean and 99th percentile) and top-1 agreement with standard errors, the bits per value
each configuration stores at this context, and optionally a passkey retrieval check.
Writes a markdown report, JSON and PNG plots.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

from ..core.progress import tqdm

from ..core import atomic, kvmem
from . import report
from .inputs import EvalError, model_context, model_file_problem, unknown_kv_type
from . import perplexity as pp


EPILOG = """\
KV configurations (comma-separated):
  f16, q8_0, q4_0, oscar2, ...   the same type for K and V
  q8_0/oscar2                    K type / V type
  oscar2+norot                   llama.cpp's data-free Hadamard rotation off
  oscar2:sink=0,recent=0         16-bit windows of an oscar2 cache (default: the model's, else 64 and 256)

error bars: standard errors of the mean over scored tokens (KLD, top-1); PPL +/- is
llama-perplexity's estimate (PPL * standard error of the mean log-likelihood). Tokens of one
text are correlated: the bars understate the spread between texts.

task benchmark: `oscar-eval humaneval MODEL --kv f16,oscar2 --problems 80` (HumanEval pass@1 per
KV configuration through llama-server; `oscar-eval humaneval --help` explains it)

examples:
  oscar-eval models/smollm2-oscar-zoo.gguf --text wiki.test.raw --kv q8_0,q4_0,oscar2 --ctx 4096 --chunks 2 --out results/eval
  oscar-eval model.gguf --kv f16,q4_0,oscar2 --passkey --passkey-ctx 2048,4096 --passkey-trials 5
"""


def _ints(s: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}' is not a comma-separated list of integers") from None


def _fractions(s: str) -> list[float]:
    try:
        v = [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}' is not a comma-separated list of numbers") from None
    if not v or any(not 0 <= x <= 1 for x in v):
        raise argparse.ArgumentTypeError(f"depths '{s}' must be fractions between 0 and 1 (e.g. 0.1,0.5,0.9)")
    return v


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="oscar-eval", formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description=__doc__.split("\n\n")[1].replace("\n", " "), epilog=EPILOG)
    ap.add_argument("model", help="GGUF model file")
    ap.add_argument("--text", help="evaluation text file (e.g. wiki.test.raw); needed unless only --passkey")
    ap.add_argument("--kv", default="q8_0,q4_0,oscar2", help="KV configurations (default q8_0,q4_0,oscar2; "
                    "the f16 reference always runs)")
    ap.add_argument("-c", "--ctx", type=int, default=4096, help="context per chunk (default 4096)")
    ap.add_argument("--chunks", type=int, default=None, help="number of chunks (default: all the text holds)")
    ap.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default: llama.cpp's)")
    ap.add_argument("--out", metavar="DIR", help="write DIR/eval.md, eval.json, quality.png (and passkey.png)")
    ap.add_argument("--json", help="write the results as JSON here (overrides --out)")
    ap.add_argument("--markdown", help="write the markdown report here (overrides --out)")
    ap.add_argument("--plot", help="write the quality plot (PNG) here (overrides --out)")
    ap.add_argument("--reference", metavar="FILE",
                    help="f16 reference logits (llama-perplexity --kl-divergence-base format): reused when FILE exists "
                         "(made by an earlier run on the same model, text and --ctx; its chunks apply), else written "
                         "there and kept (default: a temporary file)")
    ap.add_argument("--title", default=None, help="title of the report and plots (default: model file name)")
    pk = ap.add_argument_group("passkey retrieval")
    pk.add_argument("--passkey", action="store_true", help="also run the passkey retrieval check (greedy, via the bindings)")
    pk.add_argument("--passkey-ctx", type=_ints, default=None, help="context lengths (default: --ctx)")
    pk.add_argument("--passkey-depths", type=_fractions, default=[0.1, 0.5, 0.9],
                    help="depths of the key as fractions of the filler (default 0.1,0.5,0.9)")
    pk.add_argument("--passkey-trials", type=int, default=5, help="random keys per depth (default 5)")
    pk.add_argument("--seed", type=int, default=0, help="seed of the passkey keys (default 0)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    return ap


def count_tokens(model: Path, text: Path) -> int:
    """Tokens of ``text`` as llama-perplexity sees it (BOS added, special tokens not parsed)."""
    import os
    from ..core import llama
    lc = llama.bindings()
    saved = os.dup(2)
    try:  # llama.cpp warns about the context of a vocabulary-only load: not our user's concern
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            vocab = lc.Llama(model_path=str(model), vocab_only=True, verbose=False)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return len(vocab.tokenize(text.read_bytes(), add_bos=True, special=False))


def check_inputs(a: argparse.Namespace) -> tuple[Path, Path | None, list[pp.KVConfig]]:
    """Every check that can fail before a run starts; EvalError says what and how to fix it."""
    model = Path(a.model)
    if (problem := model_file_problem(model)) is not None:
        raise EvalError(problem)
    text = Path(a.text) if a.text else None
    if text is None and not a.passkey:
        raise EvalError("give --text FILE (the evaluation text), or --passkey for the retrieval check only")
    if text is not None and not text.is_file():
        raise EvalError(f"text file {text} does not exist")
    if a.ctx < 16 or a.ctx % 2:
        raise EvalError(f"--ctx {a.ctx}: give an even context of at least 16 tokens")
    if a.chunks is not None and a.chunks < 1:
        raise EvalError(f"--chunks {a.chunks}: give at least 1")
    if a.reference and Path(a.reference).is_dir():
        raise EvalError(f"--reference {a.reference} is a folder: give a file path")
    if a.passkey_trials < 1:
        raise EvalError("--passkey-trials must be at least 1")
    try:
        configs = pp.parse_kv_list(a.kv)
    except ValueError as e:
        raise EvalError(str(e)) from e
    configs = [c for c in configs if c.name != "f16"]  # the reference runs anyway
    problem = unknown_kv_type(configs)
    if problem:
        raise EvalError(problem)
    n_train = model_context(model)
    for ctx, what in [(a.ctx, "--ctx")] + [(c, "--passkey-ctx") for c in (a.passkey_ctx or [])]:
        if n_train is not None and ctx > n_train:
            raise EvalError(f"{what} {ctx} is longer than the context the model was trained for ({n_train} tokens, "
                            f"{model.name}): use {what} {n_train} or less")
    if text is not None:
        n_tok = count_tokens(model, text)
        chunks = a.chunks or 2
        need = a.ctx * max(chunks, 2)
        if n_tok < need:
            fix = (f"use --chunks {n_tok // a.ctx} or fewer, or a longer text" if n_tok // a.ctx >= 2 else
                   f"use a smaller --ctx (at most {n_tok // 2 // 2 * 2}: llama-perplexity needs 2 chunks) "
                   f"or a longer text")
            raise EvalError(f"text {text} has {n_tok} tokens for this model; --ctx {a.ctx} with "
                            f"{'--chunks ' + str(a.chunks) if a.chunks else 'the minimum of 2 chunks'} needs {need}: "
                            + fix)
        scored = (a.chunks or n_tok // a.ctx) * (a.ctx - 1 - a.ctx // 2)
        if scored < 100:
            raise EvalError(f"--ctx {a.ctx} with {a.chunks or n_tok // a.ctx} chunks scores only {scored} tokens; "
                            f"llama-perplexity computes its KL divergence statistics from 100 scored tokens on: "
                            f"use more --chunks or a larger --ctx")
    return model, text, configs


def quality_rows(a: argparse.Namespace, model: Path, text: Path, configs: list[pp.KVConfig],
                 partial=None) -> list[dict]:
    """One llama-perplexity run per configuration (f16 first, its logits the reference);
    ``partial(rows)`` is called after each run (long runs keep what they measured)."""
    extra = ["-b", str(min(a.ctx, 2048))]  # one sequence per pass, as in generation
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(a.reference) if a.reference else Path(tmp) / "f16.logits"
        reuse = base.is_file()
        runs = ([] if reuse else [pp.KVConfig("f16", "f16")]) + configs
        bar = tqdm(total=len(runs), desc="oscar-eval", unit="run", disable=a.quiet)
        for cfg in runs:
            bar.set_postfix_str(cfg.name)
            ref = cfg.name == "f16"
            r = pp.run(model, text, cfg, a.ctx, a.chunks, base, save_base=ref, threads=a.threads, extra=extra)
            bar.update()
            if reuse and not rows:  # the f16 row from the reference's own perplexity
                m = re.search(r"Mean PPL\(base\)\s*:\s*([0-9.eE+-]+)\s*±\s*([0-9.eE+-]+)", r.log)
                if m is None:
                    raise RuntimeError("llama-perplexity printed no PPL(base) for the reference " + str(base))
                rows.append({"kv": "f16", "type_k": "f16", "type_v": "f16", "bits": 16.0, "bits_main": 16.0,
                             "ppl": float(m.group(1)), "ppl_err": float(m.group(2)), "kld": 0.0, "kld_err": 0.0,
                             "kld_p99": 0.0, "same_top": 100.0, "same_top_err": 0.0})
            rows.append({"kv": cfg.name, "type_k": cfg.k, "type_v": cfg.v,
                         "bits": kvmem.measured_bits(cfg.k, cfg.v, r.log),
                         "bits_main": (kvmem.bits(cfg.k) + kvmem.bits(cfg.v)) / 2,
                         "ppl": r.ppl, "ppl_err": r.ppl_err,
                         "kld": 0.0 if ref else r.kld_mean, "kld_err": 0.0 if ref else r.kld_err,
                         "kld_p99": 0.0 if ref else r.kld_p99,
                         "same_top": 100.0 if ref else r.same_top, "same_top_err": 0.0 if ref else r.same_top_err})
            if partial:
                partial(rows)
        bar.close()
    return rows


def quality_table(rows: list[dict]) -> str:
    return report.markdown_table(
        ["KV cache", "bits/value (main tier)", "bits/value (with 16-bit pool)", "PPL", "KLD vs f16", "KLD 99 %",
         "same top-1"],
        [[r["kv"], f"{r['bits_main']:g}", f"{r['bits']:.2f}", f"{r['ppl']:.3f} ± {r['ppl_err']:.3f}",
          f"{r['kld']:.4f} ± {r['kld_err']:.4f}", f"{r['kld_p99']:.3f}",
          f"{r['same_top']:.1f} ± {r['same_top_err']:.1f} %"] for r in rows])


def passkey_table(rows: list[dict]) -> str:
    return report.markdown_table(
        ["KV cache", "ctx", "prompt tokens", "depth", "correct", "accuracy (95 % interval)"],
        [[r["kv"], str(r["ctx"]), str(r["prompt_tokens"]), f"{100 * r['depth']:.0f} %", f"{r['correct']}/{r['trials']}",
          f"{r['accuracy']:.0f} % ({r['ci_low']:.0f}-{r['ci_high']:.0f})"] for r in rows])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["humaneval"]:  # the task benchmark has options of its own
        from . import humaneval
        return humaneval.main(argv[1:])
    a = parser().parse_args(argv)
    t0 = time.time()
    try:
        model, text, configs = check_inputs(a)
        out = Path(a.out) if a.out else None
        if out:
            out.mkdir(parents=True, exist_ok=True)
        md_path = a.markdown or (out / "eval.md" if out else None)
        js_path = a.json or (out / "eval.json" if out else None)
        png_path = a.plot or (out / "quality.png" if out else None)
        title = a.title or model.name
        meta = report.metadata(model=str(model), text=str(text) if text else None, ctx=a.ctx,
                               chunks=a.chunks or "all", kv=[c.name for c in configs],
                               scored_tokens_per_chunk=a.ctx - 1 - a.ctx // 2)
        rows: list[dict] = []
        pk_rows: list[dict] = []
        def partial(done: list[dict]) -> None:
            if js_path:
                report.write_json(js_path, {"meta": meta, "rows": done, "passkey": [], "partial": True})

        if text is not None:
            rows = quality_rows(a, model, text, configs, partial)
        if a.passkey:
            from . import passkey
            pk_ctx = a.passkey_ctx or [a.ctx]
            meta["passkey"] = {"ctx": pk_ctx, "depths": a.passkey_depths, "trials": a.passkey_trials, "seed": a.seed}
            pk_rows = passkey.run(str(model), [pp.KVConfig("f16", "f16")] + configs, pk_ctx, a.passkey_depths,
                                  a.passkey_trials, a.seed, threads=a.threads, progress=not a.quiet)
    except (EvalError, RuntimeError, FileNotFoundError) as e:
        print(f"oscar-eval: error: {e}", file=sys.stderr)
        return 1

    parts = [f"# oscar-eval: {title}", "", report.markdown_meta(meta), ""]
    if rows:
        parts += ["## Quality against f16", "", quality_table(rows), "",
                  "Error bars: standard error of the mean over scored tokens (KLD, top-1); PPL ± is "
                  "llama-perplexity's estimate. Bits per value include the oscar2 16-bit window pool "
                  "at this context, as llama.cpp reports it.", ""]
    if pk_rows:
        parts += ["## Passkey retrieval (greedy)", "", passkey_table(pk_rows), ""]
        f16_acc = [r["accuracy"] for r in pk_rows if r["kv"] == "f16"]
        if f16_acc and max(f16_acc) == 0:
            parts += ["The model does not retrieve the key even with an f16 cache: this check says nothing "
                      "about the KV types on this model.", ""]
    md = "\n".join(parts)
    print(md)
    if md_path:
        atomic.write_text(md_path, md)
    if js_path:
        report.write_json(js_path, {"meta": meta, "rows": rows, "passkey": pk_rows})
    from . import plot
    if png_path and rows:
        plot.quality_vs_bits(rows, png_path, f"{title}: quality vs KV bits, ctx {a.ctx}")
    if pk_rows and (out or png_path):
        pk_png = (out / "passkey.png") if out else Path(png_path).with_name(Path(png_path).stem + "-passkey.png")
        plot.passkey_accuracy(pk_rows, pk_png, f"{title}: passkey retrieval")
    written = [str(p) for p in (md_path, js_path, png_path) if p]
    print(f"oscar-eval: {len(configs)} KV configurations against f16 on {model.name}"
          + (f", ctx {a.ctx}, {a.chunks or 'all'} chunks of {text.name}" if text else "")
          + (f", passkey {len(pk_rows)} cells" if pk_rows else "")
          + f" in {time.time() - t0:.0f} s" + (f"; wrote {', '.join(written)}" if written else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
