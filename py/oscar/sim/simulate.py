"""PyTorch reference simulation of 2-bit KV caches inside a transformers model (``oscar-sim``).

Every method quantises the post-RoPE keys and values of every attention layer
*before* the attention product, through a function registered with transformers'
``AttentionInterface`` (``oscar_sim``). One model, one text, the same chunks and the
same scored tokens for every method, scored against the unquantised model: perplexity,
KL divergence (mean and 99th percentile) and top-1 agreement.

Methods (``--methods``, options after a colon as in ``oscar:sink=0,recent=0``):

- ``f16``: keys and values rounded to float16 (llama.cpp's default cache).
- ``int2``: naive 2-bit, per token, groups of 64 along head_dim, no rotation, no
  16-bit windows. The quantiser is ``oscar2``'s (asymmetric, f16 step and minimum per
  64 values, codes 0..3), so this is llama.cpp's ``oscar2`` with rotation and windows off.
- ``hadamard``: the same after llama.cpp's data-free Hadamard rotation (K: the largest
  Hadamard block, up to head_dim, that divides head_dim; V: blocks of 64).
- ``kivi``: KIVI-style 2-bit (Liu et al. 2024, arXiv:2402.02750): keys per channel
  (each channel of a group of ``group`` consecutive tokens shares a min and a step),
  values per token (groups of ``group`` along head_dim), f16 min/step, and a
  full-precision residual. Simulated as token-by-token decoding: the query at
  position ``p`` reads in full precision the keys from ``residual*floor(p/residual)``
  on (KIVI quantises its key residual ``residual`` tokens at a time) and the values
  of the last ``residual + 1`` positions (values leave the residual one by one).
  Defaults ``group=32``, ``residual=128`` (the paper's setting).
- ``oscar``: calibrated per-layer rotations and clip ratios (zoo entry or an
  ``oscar-convert``-ed GGUF), 16-bit sink and recent windows relative to each query
  (defaults 64/256), our exact ``oscar2`` codes: what llama.cpp's ``-ctk oscar2 -ctv
  oscar2`` computes on the converted model. With a key weighting (``attn_q_oscar_rot``, a
  rotation file's ``weight_k``) keys are rotated by ``R_K`` and queries by ``R_Q``.
- ``oscar-hadamard``: the same without calibration: Hadamard rotation, no clipping,
  windows 64/256 (llama.cpp's ``oscar2`` on an unconverted model).
- ``oscar2s``: ``oscar`` with every layer's K and V in ``oscar2s`` (2.25 bits: oscar2's codes
  around zero with a scale and no minimum, for the centred cache; no precision plan), what
  llama.cpp's ``-ctk oscar2s -ctv oscar2s`` computes on the converted model.
- ``none``: no quantisation (the reference), through the same attention code.

Options: ``sink=N``, ``recent=N`` (windows of int2/hadamard/oscar/oscar2s/oscar-hadamard),
``group=N``, ``residual=N`` (kivi); for ``oscar``: ``centre=0`` ignores the calibration's
centring means, ``plan=0`` its precision plan (every layer oscar2). Where the calibration has
them, ``oscar`` subtracts each KV head's mean key and value after the rotation (both tiers)
and adds V's back to the output, and stores each layer's K and V in its plan's type
(q4_0/q8_0 read at every position, windows only beside oscar2 and oscar3), as llama.cpp does.

Layouts: for llama-style GGUFs, whose conversion permutes the Q/K rows of each head,
queries and keys are taken into llama.cpp's layout (:func:`oscar.calib.capture.qk_permutation`)
before any rotation or grouping, so the 2-bit groups hold the same numbers as in
llama.cpp. Everything else (values, outputs) is unchanged.

Chunking is llama-perplexity's: the whole text tokenised once (llama.cpp's tokenizer
through our bindings, else the Hugging Face one), chunks of ``ctx`` tokens, the first
token of each replaced by BOS when the vocabulary adds one, the second half of each
chunk scored (``ctx/2 - 1`` tokens per chunk).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..calib import capture
from ..calib.simcache import PRESETS, Calibration, Method, SimModel, calibration_of, score_runs
from ..core import paths
from ..eval.perplexity import split_specs

DEFAULT_METHODS = "f16,int2,hadamard,kivi,oscar"


# ============================================================================ methods

def parse_method(spec: str) -> Method:
    """``name`` or ``name:key=N,key=N`` (keys: sink, recent, group, residual)."""
    base, _, opts = spec.strip().partition(":")
    if base not in PRESETS:
        raise ValueError(f"unknown method '{base}'; known: {', '.join(PRESETS)}")
    m = PRESETS[base]
    kw: dict[str, int] = {}
    for opt in filter(None, opts.split(",")):
        key, _, val = opt.partition("=")
        key = key.strip()
        if key not in ("sink", "recent", "group", "residual", "centre", "plan") or not val.strip().isdigit():
            raise ValueError(f"bad option '{opt}' in method '{spec}': use sink=N, recent=N, group=N, residual=N, "
                             "centre=0|1, plan=0|1")
        kw[key] = int(val)
    if base == "kivi" and kw.get("residual", m.residual) % kw.get("group", m.group):
        raise ValueError(f"method '{spec}': the KIVI residual must be a multiple of the group")
    return replace(m, name=spec.strip() if kw else m.name, **kw)


def parse_methods(spec: str) -> list[Method]:
    """Comma-separated methods; ``key=N`` parts belong to the method before
    (``oscar:sink=0,recent=0,kivi`` is two methods)."""
    return [parse_method(s) for s in split_specs(spec)]


# ============================================================================ model, text, calibration

def load(gguf: str | Path, hf_model: str | Path | None = None) -> SimModel:
    """Load the model of ``gguf`` in PyTorch (dequantised by transformers, or from
    ``hf_model``, a Hugging Face folder holding the same weights) and find its Q/K layout."""
    from ..core import gguf_io
    gguf = Path(gguf)
    src = Path(hf_model) if hf_model else gguf
    model, _tok, info = capture.load_model(src)
    base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    w_hf = base.layers[0].self_attn.k_proj.weight.detach().float().numpy()
    w_gg = gguf_io.tensor_f32(gguf, "blk.0.attn_k.weight")
    perm = capture.qk_permutation(w_hf, w_gg, info.n_head_kv, info.head_dim)
    return SimModel(model, info, gguf, perm, str(src))


def load_calibration(spec: str | Path | None, gguf: str | Path) -> Calibration | None:
    """Rotations and clips from ``spec``: a rotation ``.npz``, an ``oscar-convert``-ed GGUF,
    ``zoo`` (look the model up by fingerprint), or None/``auto`` (the GGUF itself if it
    carries them, else the zoo, else None)."""
    from ..core import gguf_io
    from ..calib import zoo
    from ..core import rotfile
    if spec in (None, "auto"):
        r = gguf_io.open_reader(gguf)
        if "oscar.version" in r.fields:
            return load_calibration(gguf, gguf)
        try:
            return load_calibration("zoo", gguf)
        except zoo.NoZooEntry:
            return None
    if str(spec) == "zoo":
        path, _entry = zoo.find(gguf_io.model_shape(gguf))
        return load_calibration(path, gguf)
    p = Path(spec)
    if p.suffix in (".npz", ".safetensors"):
        rot = rotfile.Rotations.load(p)
        rot.validate(gguf_io.model_shape(gguf), str(p))
        return calibration_of(rot, str(p))
    r = gguf_io.open_reader(p)
    if "oscar.version" not in r.fields:
        raise ValueError(f"{p} carries no OSCAR rotations (convert it with oscar-convert)")
    n = gguf_io.model_shape(p).n_layer
    rk, rq = gguf_io.read_key_query_rotations(p, n)
    rv = np.stack([gguf_io.tensor_f32(p, gguf_io.ROT_V.format(i)) for i in range(n)])
    ck = np.asarray(r.fields["oscar.clip_k"].contents(), np.float32)
    cv = np.asarray(r.fields["oscar.clip_v"].contents(), np.float32)
    names = {t.name for t in r.tensors}
    means = []
    for fmt in (gguf_io.MEAN_K, gguf_io.MEAN_V):
        means.append(np.stack([gguf_io.tensor_f32(p, fmt.format(i)) for i in range(n)])
                     if fmt.format(0) in names else None)
    pk = r.fields["oscar.cache_type_k"].contents() if "oscar.cache_type_k" in r.fields else None
    pv = r.fields["oscar.cache_type_v"].contents() if "oscar.cache_type_v" in r.fields else None
    return Calibration(rk, rv, ck, cv, str(p), means[0], means[1], pk, pv, rq)


@dataclass
class Tokens:
    """The tokenised text: ids (int64 ``[N]``), whether each chunk starts with BOS, the BOS id."""
    ids: np.ndarray
    add_bos: bool
    bos: int
    tokenizer: str


def tokenize(gguf: str | Path, text: str, hf_model: str | Path | None = None) -> Tokens:
    """Tokenise ``text`` as llama-perplexity does (``common_tokenize(text, add_special=true,
    parse_special=false)``), with llama.cpp's tokenizer through our bindings when they load,
    else with the Hugging Face tokenizer of the model."""
    try:
        from ..core.llama import bindings
        lc = bindings()
        m = lc.Llama(str(gguf), vocab_only=True, verbose=False)
        ids = m.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        bos = int(m.token_bos())
        probe_on, probe_off = m.tokenize(b"a", add_bos=True), m.tokenize(b"a", add_bos=False)
        return Tokens(np.asarray(ids, np.int64), len(probe_on) > len(probe_off), bos, "llama.cpp")
    except (ImportError, FileNotFoundError, OSError):
        from transformers import AutoTokenizer
        src, kw = (str(hf_model), {}) if hf_model else (str(Path(gguf).parent), {"gguf_file": Path(gguf).name})
        tok = AutoTokenizer.from_pretrained(src, **kw)
        ids = tok(text).input_ids
        bos = tok.bos_token_id
        add_bos = bos is not None and len(ids) > 0 and ids[0] == bos
        return Tokens(np.asarray(ids, np.int64), add_bos, -1 if bos is None else int(bos), "hugging face")


def chunks(tokens: Tokens, ctx: int, n_chunks: int | None) -> list[np.ndarray]:
    """llama-perplexity's chunks: ``tokens[i*ctx:(i+1)*ctx]``, the first replaced by BOS when
    the vocabulary adds one. Raises with the needed token count if the text is too short."""
    n_max = len(tokens.ids) // ctx
    want = n_max if n_chunks is None else n_chunks
    if len(tokens.ids) < 2 * ctx or want > n_max:
        need = max(2, want) * ctx
        raise ValueError(f"the text has {len(tokens.ids)} tokens; {need} are needed for "
                         f"{max(2, want)} chunks of {ctx} (llama-perplexity needs at least 2*ctx)")
    out = []
    for i in range(want):
        c = tokens.ids[i * ctx:(i + 1) * ctx].copy()
        if tokens.add_bos:
            c[0] = tokens.bos
        out.append(c)
    return out


# ============================================================================ scoring

def evaluate(sm: SimModel, chunk_ids: list[np.ndarray], methods: list[Method], calib: Calibration | None,
             block: int = 256, progress: bool = True, llama_query: bool = False) -> dict[str, dict]:
    """Score every method on every chunk against the unquantised model (same chunks, same
    tokens). Returns ``{method name: summary}``."""
    return score_runs(sm, chunk_ids, {m.name: (m, calib) for m in methods}, block, progress, llama_query)


# ============================================================================ llama.cpp cross-check

def llama_config(method: Method, model: str | Path, calib: Calibration | None) -> tuple[Path, dict, list] | None:
    """``(gguf, env, args)`` of the llama-perplexity run that computes what ``method``
    simulates, or None when llama.cpp has no counterpart (KIVI, or a calibrated method
    whose rotations are not in a GGUF). f16 and uncalibrated oscar2 run on ``model``
    (which must carry no OSCAR tensors), calibrated oscar2 and oscar2s on the converted GGUF."""
    from ..core import gguf_io
    converted = "oscar.version" in gguf_io.open_reader(model).fields
    if method.k_quant == "f16" and method.v_quant == "f16":
        return Path(model), {}, ["-ctk", "f16", "-ctv", "f16"]
    if method.k_quant not in ("oscar2", "oscar2s") or method.v_quant != method.k_quant:
        return None
    args = ["-ctk", method.k_quant, "-ctv", method.v_quant, "--kv-sink", str(method.sink), "--kv-recent",
            str(method.recent)]
    if not method.plan and method.k_quant == "oscar2":  # (a plan applies under oscar2 only)
        args += ["--kv-plan", "off"]
    if method.rotation == "calibrated":
        if calib is None or not calib.source.endswith(".gguf"):
            return None
        return Path(calib.source), {}, args
    if converted:
        return None
    return Path(model), ({"LLAMA_ATTN_ROT_DISABLE": "1"} if method.rotation == "none" else {}), args


def llama_perplexity(gguf: str | Path, text: str | Path, ctx: int, n_chunks: int, env: dict, args: list,
                     threads: int | None = None) -> dict:
    """PPL (± error) of one llama-perplexity run of our build (``args`` set the cache types
    and windows, ``env`` e.g. turns the Hadamard off)."""
    cmd = [str(paths.tool("llama-perplexity")), "-m", str(gguf), "-f", str(text), "-c", str(ctx),
           "--chunks", str(n_chunks), "-fa", "on", *args] + (["-t", str(threads)] if threads else [])
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **env))
    if p.returncode != 0:
        raise RuntimeError(f"llama-perplexity failed (exit {p.returncode}): " + (p.stderr or p.stdout)[-2000:])
    from ..eval.perplexity import parse_report
    r = parse_report(p.stdout + p.stderr)
    return {"ppl": r.ppl, "ppl_err": r.ppl_err, "gguf": Path(gguf).name, "args": " ".join(args),
            "env": " ".join(f"{k}={v}" for k, v in env.items())}


def cross_check(methods: list[Method], results: dict[str, dict], model: str | Path, text: str | Path, ctx: int,
                n_chunks: int, calib: Calibration | None, threads: int | None = None,
                progress: bool = True) -> list[dict]:
    """Run llama.cpp for every method it has a counterpart of; rows with both perplexities
    and the relative difference (simulation / llama.cpp - 1)."""
    from ..core.progress import tqdm
    todo = [(m, llama_config(m, model, calib)) for m in methods]
    todo = [(m, c) for m, c in todo if c is not None]
    rows = []
    for m, (gguf, env, args) in tqdm(todo, desc="llama-perplexity", unit="run", disable=not progress):
        r = llama_perplexity(gguf, text, ctx, n_chunks, env, args, threads)
        rows.append({"what": m.name, "llama": r, "sim": results[m.name]["ppl"],
                     "rel_diff": results[m.name]["ppl"] / r["ppl"] - 1})
    return rows


# ============================================================================ report

def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(paths.ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def markdown(report: dict) -> str:
    """The report as markdown: a header of what was run, the method table, the cross-check."""
    h = report["setup"]
    lines = [f"# oscar-sim: {h['model']}", "",
             f"PyTorch {h['torch']} (transformers {h['transformers']}) on {h['machine']}; commit {h['commit']}. "
             f"Text `{h['text']}`, {h['chunks']} chunks of {h['ctx']} tokens (tokenizer: {h['tokenizer']}), "
             f"second half of each chunk scored: {h['scored_tokens']} tokens. KLD and top-1 against the "
             f"unquantised model (float32 K/V). Queries: {h.get('queries', 'exact (float32)')}. Calibration: {h['calibration']}. Wall time {h['wall_s']:.0f} s.", "",
             "| method | what is stored | bits/value (2-bit tier) | PPL | KLD | KLD 99 % | same top-1 |",
             "|---|---|---|---|---|---|---|"]
    for name, r in report["methods"].items():
        bits = "16" if r["bits"] == 16 else f"{r['bits']:g}"
        lines.append(f"| {name} | {r['describe']} | {bits} | {r['ppl']:.3f} ± {r['ppl_err']:.3f} | "
                     f"{r['kld']:.4f} ± {r['kld_err']:.4f} | {r['kld_p99']:.3f} | "
                     f"{r['same_top']:.1f} ± {r['same_top_err']:.1f} % |")
    x = report.get("llama_cpp")
    if x:
        rows = x["rows"]
        f16 = next((r for r in rows if r["what"] == "f16"), None)
        lines += ["", "llama.cpp cross-check (llama-perplexity of our build, same text, ctx and chunks). The last "
                      "column compares each side's PPL relative to its own f16 run (PyTorch runs the dequantised "
                      "weights in float32, llama.cpp the quantised weights with 8-bit activations):", "",
                  "| method | llama.cpp run | llama.cpp PPL | simulation PPL | difference | difference of PPL/PPL(f16) |",
                  "|---|---|---|---|---|---|"]
        for row in rows:
            ll = row["llama"]
            run = f"`{ll['gguf']}` {ll['args']}" + (f" ({ll['env']})" if ll["env"] else "")
            norm = "" if f16 is None else \
                f"{100 * ((row['sim'] / f16['sim']) / (ll['ppl'] / f16['llama']['ppl']) - 1):+.2f} %"
            lines.append(f"| {row['what']} | {run} | {ll['ppl']:.3f} ± {ll['ppl_err']:.3f} | "
                         f"{row['sim']:.3f} | {100 * row['rel_diff']:+.2f} % | {norm} |")
    return "\n".join(lines) + "\n"


def summary_line(report: dict) -> str:
    """One line: the best 2-bit method by KLD and the cross-check result."""
    two = {n: r for n, r in report["methods"].items() if r["bits"] < 4}
    s = f"oscar-sim: {report['setup']['model']}, {report['setup']['scored_tokens']} tokens"
    if two:
        best = min(two, key=lambda n: two[n]["kld"])
        s += f"; best 2-bit method {best}: PPL {two[best]['ppl']:.3f}, KLD {two[best]['kld']:.4f}, " \
             f"top-1 {two[best]['same_top']:.1f} %"
    x = report.get("llama_cpp")
    if x:
        s += "; vs llama.cpp: " + ", ".join(f"{r['what']} {100 * r['rel_diff']:+.2f} %" for r in x["rows"])
    return s


def main(argv: list[str] | None = None) -> int:
    """``oscar-sim``: compare KV quantisation methods in PyTorch on the same text and chunks."""
    ap = argparse.ArgumentParser(
        prog="oscar-sim",
        description="PyTorch reference simulation of 2-bit KV caches: runs the model of a GGUF in "
                    "transformers with its keys and values quantised before attention by each method, "
                    "on llama-perplexity's chunks, and reports perplexity, KL divergence and top-1 "
                    "agreement against the unquantised model. Optionally cross-checks llama.cpp.",
        epilog="Methods: " + ", ".join(PRESETS) + "; options as in oscar:sink=0,recent=0 or kivi:group=32,residual=128.")
    ap.add_argument("model", help="GGUF model file (tokenizer, head layout; weights unless --hf-model)")
    ap.add_argument("--text", default=str(paths.WIKITEXT2_TEST), help="evaluation text (default: WikiText-2 test)")
    ap.add_argument("--methods", default=DEFAULT_METHODS, help=f"comma-separated methods (default {DEFAULT_METHODS})")
    ap.add_argument("--ctx", type=int, default=4096, help="tokens per chunk (default 4096)")
    ap.add_argument("--chunks", type=int, default=2, help="number of chunks (default 2)")
    ap.add_argument("--rotations", default="auto",
                    help="calibration for oscar: a zoo .npz, an oscar-convert-ed GGUF, 'zoo', or 'auto' "
                         "(the model GGUF if converted, else the zoo)")
    ap.add_argument("--hf-model", help="Hugging Face folder with the same weights (skips GGUF dequantisation)")
    ap.add_argument("--llama", action="store_true",
                    help="also run llama-perplexity of our build for every method it implements (f16; oscar2 with "
                         "its rotation and windows; calibrated ones on the --rotations GGUF) and compare")
    ap.add_argument("--llama-query", action="store_true",
                    help="round queries as llama.cpp's CPU flash attention does (q8_0 against oscar2 keys, f16 "
                         "against 16-bit keys); default: exact float32 queries (the method alone)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    ap.add_argument("--block", type=int, default=256, help="queries per attention block (memory)")
    ap.add_argument("--out", help="folder for sim.md and sim.json (default results/sim/<model>-ctx<ctx>)")
    a = ap.parse_args(argv)

    for p, what in ((a.model, "model"), (a.text, "text")):
        if not Path(p).is_file():
            ap.error(f"{what} file {p} does not exist")
    try:
        methods = parse_methods(a.methods)
    except ValueError as e:
        ap.error(str(e))
    if a.ctx < 8 or a.ctx % 2:
        ap.error("--ctx must be an even number >= 8")
    import torch
    import transformers
    torch.set_num_threads(a.threads or max(1, os.cpu_count() or 1))
    t0 = time.time()
    try:
        calib = load_calibration(a.rotations, a.model)
    except (ValueError, FileNotFoundError, LookupError) as e:  # a broken or out-of-limits rotation file, no zoo entry
        ap.error(str(e))
    for m in methods:
        if m.rotation == "calibrated" and calib is None:
            ap.error(f"method {m.name} needs calibrated rotations and none were found for {a.model} "
                     "(give --rotations FILE, or use oscar-hadamard)")
    text = Path(a.text).read_text(encoding="utf-8", errors="replace")
    toks = tokenize(a.model, text, a.hf_model)
    try:
        ids = chunks(toks, a.ctx, a.chunks)
    except ValueError as e:
        ap.error(str(e))
    print(f"oscar-sim: loading {a.hf_model or a.model} in PyTorch ...", file=sys.stderr, flush=True)
    sm = load(a.model, a.hf_model)
    res = evaluate(sm, ids, methods, calib, a.block, llama_query=a.llama_query)
    by = {m.name: m for m in methods}
    report = {
        "setup": {"model": Path(a.model).name, "weights": sm.source, "text": Path(a.text).name, "ctx": a.ctx,
                  "chunks": len(ids), "scored_tokens": len(ids) * (a.ctx - a.ctx // 2 - 1),
                  "tokenizer": toks.tokenizer, "qk_layout": "llama.cpp (permuted)" if sm.perm is not None else "as is",
                  "calibration": calib.source if calib else "none",
                  "queries": "rounded as llama.cpp's CPU kernels (q8_0/f16)" if a.llama_query else "exact (float32)",
                  "torch": torch.__version__,
                  "transformers": transformers.__version__, "commit": git_commit(),
                  "machine": f"{platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads",
                  "command": "oscar-sim " + " ".join(sys.argv[1:] if argv is None else argv), "wall_s": 0.0},
        "methods": {n: {**r, "bits": by[n].bits, "describe": by[n].describe(), "method": asdict(by[n])}
                    for n, r in res.items()},
    }
    if a.llama:
        rows = cross_check(methods, res, a.model, a.text, a.ctx, len(ids), calib, a.threads)
        report["llama_cpp"] = {"model": Path(a.model).name, "rows": rows}
    report["setup"]["wall_s"] = time.time() - t0
    out = Path(a.out) if a.out else paths.ROOT / "results" / "sim" / f"{Path(a.model).stem}-ctx{a.ctx}"
    from ..core import atomic
    atomic.check_dir_output(out)
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(report)
    atomic.write_text(out / "sim.md", md)
    atomic.write_text(out / "sim.json", json.dumps(report, indent=1) + "\n")
    print(md)
    print(summary_line(report))
    print(f"written: {out / 'sim.md'}, {out / 'sim.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
