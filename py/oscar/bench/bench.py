"""``oscar-bench``: prompt-processing and decode speed against context depth, per KV type.

Runs our ``llama-bench`` (or one from ``--bin-dir``) once per KV configuration over the
requested depths (``-d``, JSONL output), and adds the KV cache size each configuration
needs at each depth, computed from the model's geometry (read from the GGUF with
gguf-py) and the bits of each type, the ``oscar2`` 16-bit window pool included
(:mod:`oscar.core.kvmem`). A llama-bench run that fails (out of memory at a depth, a crash,
a timeout) becomes a row saying so, and the sweep goes on with the next depths.
``--from-jsonl`` makes the same report from llama-bench JSONL recorded elsewhere (a GPU
machine that returns files only), without running anything.

Self-contained: needs numpy, gguf-py (on PYTHONPATH: ``llama.cpp/gguf-py``) and
optionally tqdm (:mod:`oscar.core.progress`) and matplotlib, so that it runs on a bare GPU machine with
``PYTHONPATH=py:llama.cpp/gguf-py python3 -m oscar.bench.bench ...``.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from . import equalmem
from ..core import kvmem
from ..core.progress import tqdm
from ..eval import report
from ..eval.perplexity import KVConfig, parse_kv_list

EPILOG = """\
KV configurations: f16, q8_0, q4_0, oscar2, K/V pairs (q8_0/oscar2), oscar2:sink=0,recent=0 (windows).

KV MiB is a model, not a measurement: cells (context padded to 256) x layers x KV heads x
head size x bits of the type, plus for oscar2 sides an F16 pool of min(cells, sink+recent+64)+1
slots per layer. The context of a test is depth + n-prompt + n-gen, as llama-bench allocates it.

examples:
  oscar-bench models/SmolLM2-135M-Instruct.Q4_1.gguf --kv f16,q4_0,oscar2 --depth 0,4096 -p 512 -n 64 --out results/bench
  PYTHONPATH=py:llama.cpp/gguf-py python3 -m oscar.bench.bench qwen3-8b.gguf --kv f16,q8_0,q4_0,oscar2 \\
      --depth 0,16384,65536,131072 --bin-dir build-cuda/bin -ngl 99 --mem-gib 141 --out results/h200
  oscar-bench qwen3-8b.gguf --from-jsonl results/h200/bench-*.jsonl --mem-gib 139.8 --out results/h200
      (the report of llama-bench -o jsonl runs made elsewhere; KV types, depths, -p and -n
       come from the files unless given)
  oscar-bench qwen3-8b.gguf --equal-memory 32768 --kv f16,q8_0,q4_0,oscar2 -n 32 -ngl 99 \\
      --bin-dir build-cuda/bin --mem-gib 139.8 --out results/h200-eqmem
      (equal memory: per KV type the largest batch of 32768-token sequences that fits on the
       device, found by trying batches with llama-batched-bench, then its decode throughput
       and the bandwidth it implies; --mem-gib only seeds the search)
"""


#: what a sweep runs when neither the command line nor recorded results (--from-jsonl) say
RUN_DEFAULTS = {"kv": "f16,q4_0,oscar2", "depth": [0, 4096], "n_prompt": 512, "n_gen": 64, "repetitions": 3}


class BenchError(Exception):
    """A user-facing error of oscar-bench (printed without a traceback, exit status 1)."""


def _ints(s: str) -> list[int]:
    try:
        v = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}' is not a comma-separated list of integers") from None
    if not v or any(x < 0 for x in v):
        raise argparse.ArgumentTypeError(f"'{s}': give one or more depths of 0 or more tokens")
    return v


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="oscar-bench", formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description="llama-bench sweep of prompt processing and decode tok/s against "
                                             "context depth per KV cache type, with the KV cache MiB of each; "
                                             "markdown table, JSON and PNG plot.", epilog=EPILOG)
    ap.add_argument("model", help="GGUF model file")
    d = RUN_DEFAULTS
    ap.add_argument("--kv", help=f"KV configurations (default {d['kv']})")
    ap.add_argument("-d", "--depth", type=_ints,
                    help=f"context depths, comma-separated (default {','.join(map(str, d['depth']))})")
    ap.add_argument("-p", "--n-prompt", type=int, help=f"prompt tokens per pp test, 0 = no pp (default {d['n_prompt']})")
    ap.add_argument("-n", "--n-gen", type=int, help=f"generated tokens per tg test, 0 = no tg (default {d['n_gen']})")
    ap.add_argument("-r", "--repetitions", type=int, help=f"repetitions per test (default {d['repetitions']})")
    ap.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default: llama-bench's)")
    ap.add_argument("-ngl", "--n-gpu-layers", type=int, default=None, help="layers on the GPU (e.g. 99)")
    ap.add_argument("--bin-dir", default=None, help="folder holding llama-bench (default: this repository's build/bin)")
    ap.add_argument("--extra", default="", help="further llama-bench arguments, one string (e.g. \"-ub 256 -b 2048\")")
    ap.add_argument("--mem-gib", type=float, default=24.0,
                    help="memory for the weights and KV cache when stating the largest context per KV type (default 24)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one llama-bench run may take (default 1800)")
    ap.add_argument("--from-jsonl", nargs="+", metavar="FILE",
                    help="report llama-bench -o jsonl results recorded elsewhere instead of running llama-bench")
    ap.add_argument("--out", metavar="DIR", help="write DIR/bench.md, bench.json, bench.png")
    ap.add_argument("--title", default=None, help="title of the report and plot (default: model file name)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--equal-memory", type=int, metavar="CTX", default=None,
                    help="instead of the depth sweep: per KV type the largest batch of CTX-token sequences that "
                         "fits on the device (tried with llama-batched-bench from --bin-dir), its decode tok/s "
                         "over -n tokens (default 32) and the bytes read per step over the step time")
    ap.add_argument("--max-batch", type=int, default=equalmem.MAX_SEQ,
                    help=f"with --equal-memory: the largest batch tried (default {equalmem.MAX_SEQ}, llama.cpp's most "
                         "sequences per context)")
    return ap


# ----------------------------------------------------------------------------- model geometry

def read_geometry(model: Path) -> tuple[kvmem.KVGeometry, dict]:
    """KV geometry of a model GGUF and facts for the report (arch, windows, training context).

    A per-layer ``head_count_kv`` array is folded into ``n_layer = 1`` and ``n_head_kv`` =
    the sum over layers, which gives the same byte counts."""
    try:
        from gguf import GGUFReader
    except ImportError as e:
        raise BenchError("gguf-py is not importable: run inside the .venv, or set PYTHONPATH=py:llama.cpp/gguf-py") from e
    try:
        r = GGUFReader(str(model), "r")
    except Exception as e:  # gguf-py raises assorted errors on non-GGUF input
        raise BenchError(f"{model} is not a readable GGUF model ({e})") from e

    def field(key: str, default=None):
        f = r.fields.get(key)
        return default if f is None else f.contents()

    arch = field("general.architecture")
    if arch is None:
        raise BenchError(f"{model}: not a model GGUF (no general.architecture)")
    n_layer = int(field(f"{arch}.block_count"))
    n_head = field(f"{arch}.attention.head_count")
    n_head = max(n_head) if isinstance(n_head, list) else int(n_head)
    kv = field(f"{arch}.attention.head_count_kv", n_head)
    n_embd = int(field(f"{arch}.embedding_length"))
    hk = int(field(f"{arch}.attention.key_length", n_embd // n_head))
    hv = int(field(f"{arch}.attention.value_length", hk))
    if isinstance(kv, list):
        g = kvmem.KVGeometry(1, int(sum(kv)), hk, hv)
    else:
        g = kvmem.KVGeometry(n_layer, int(kv), hk, hv)
    facts = {"arch": arch, "n_layer": n_layer, "n_head": n_head, "n_head_kv": kv, "head_dim_k": hk, "head_dim_v": hv,
             "context_length": field(f"{arch}.context_length"),
             "sliding_window": field(f"{arch}.attention.sliding_window"),
             "sink_tokens": field("oscar.sink_tokens"), "recent_tokens": field("oscar.recent_tokens"),
             "file_bytes": model.stat().st_size}
    return g, facts


def windows(cfg: KVConfig, facts: dict) -> tuple[int, int]:
    """(sink, recent) in force for ``cfg``: its own flags, else the model's, else 64/256."""
    opts = dict(zip(cfg.args[::2], cfg.args[1::2]))
    sink = int(opts.get("--kv-sink", facts.get("sink_tokens") if facts.get("sink_tokens") is not None else 64))
    recent = int(opts.get("--kv-recent", facts.get("recent_tokens") if facts.get("recent_tokens") is not None else 256))
    return sink, recent


# ----------------------------------------------------------------------------- llama-bench runs

def bench_command(exe: Path, model: Path, cfg: KVConfig, depths: list[int], a: argparse.Namespace) -> list[str]:
    """The llama-bench command line for one KV configuration over ``depths``."""
    cmd = [str(exe), "-m", str(model), "-ctk", cfg.k, "-ctv", cfg.v, "-fa", "1",
           "-p", str(a.n_prompt), "-n", str(a.n_gen), "-r", str(a.repetitions),
           "-d", ",".join(str(d) for d in depths), "-o", "jsonl"]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    if a.n_gpu_layers is not None:
        cmd += ["-ngl", str(a.n_gpu_layers)]
    return cmd + cfg.args + shlex.split(a.extra)


def run_llama_bench(cmd: list[str], env: dict, timeout: float, on_row) -> tuple[int | None, str]:
    """Run llama-bench, calling ``on_row(dict)`` for each JSONL result as it arrives.

    Returns (exit status, None on timeout; the tail of its stderr)."""
    err_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"oscar-bench-{os.getpid()}-{time.time_ns()}.err"
    with open(err_path, "w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        t0 = time.time()
        rc: int | None
        try:
            assert p.stdout is not None
            for line in p.stdout:  # the deadline is checked between results
                line = line.strip()
                if line.startswith("{"):
                    try:
                        on_row(json.loads(line))
                    except json.JSONDecodeError:
                        pass
                if time.time() - t0 > timeout:
                    raise subprocess.TimeoutExpired(cmd, timeout)
            rc = p.wait(timeout=max(1.0, timeout - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = None
        err.seek(0)
        tail = err.read()[-3000:]
    err_path.unlink(missing_ok=True)
    return rc, tail


def _reason(tail: str) -> str:
    """The most telling line of a failed llama-bench's stderr."""
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    for key in ("out of memory", "failed to allocate", "error", "failed", "abort"):
        for ln in reversed(lines):
            if key in ln.lower():
                return ln[:200]
    return lines[-1][:200] if lines else "no output"


def read_jsonl(files: list[str]) -> list[dict]:
    """llama-bench ``-o jsonl`` results from ``files``, in order."""
    out = []
    for f in files:
        try:
            lines = Path(f).read_text().splitlines()
        except OSError as e:
            raise BenchError(f"cannot read {f} ({e.strerror})") from e
        for i, line in enumerate(lines, 1):
            if line.strip().startswith("{"):
                try:
                    j = json.loads(line)
                except json.JSONDecodeError as e:
                    raise BenchError(f"{f}:{i}: not a JSON line ({e.msg})") from e
                if not {"type_k", "type_v", "n_depth", "n_prompt", "n_gen", "avg_ts"} <= j.keys():
                    raise BenchError(f"{f}:{i}: not a llama-bench result (run llama-bench with -o jsonl)")
                out.append(j)
    if not out:
        raise BenchError(f"no llama-bench results in {', '.join(files)} (run llama-bench with -o jsonl)")
    return out


def recorded_defaults(recorded: list[dict], a: argparse.Namespace) -> None:
    """KV configurations, depths, -p, -n and -r of recorded results, where not given."""
    if a.kv is None:
        pairs = list(dict.fromkeys((j["type_k"], j["type_v"]) for j in recorded))
        a.kv = ",".join(k if k == v else f"{k}/{v}" for k, v in pairs)
    if a.depth is None:
        a.depth = sorted({int(j["n_depth"]) for j in recorded})
    if a.n_prompt is None:
        a.n_prompt = max(int(j["n_prompt"]) for j in recorded)
    if a.n_gen is None:
        a.n_gen = max(int(j["n_gen"]) for j in recorded)
    if a.repetitions is None:
        a.repetitions = max(len(j.get("samples_ts", [])) for j in recorded) or None


def tests_run(a: argparse.Namespace) -> list[str]:
    """The llama-bench tests of each point: "pp" when -p > 0, "tg" when -n > 0."""
    return [k for k, n in (("pp", a.n_prompt), ("tg", a.n_gen)) if n > 0]


def sweep(exe: Path, model: Path, configs: list[KVConfig], g: kvmem.KVGeometry, facts: dict,
          a: argparse.Namespace, recorded: list[dict] | None = None) -> tuple[list[dict], dict]:
    """All (configuration, depth) rows, and llama-bench's own build/device facts; from
    ``recorded`` llama-bench results instead of runs when given."""
    rows: list[dict] = []
    lb_info: dict = {}
    want = tests_run(a)
    bar = tqdm(total=len(configs) * len(a.depth) * len(want), desc="oscar-bench", unit="test", disable=a.quiet)
    for cfg in configs:
        sink, recent = windows(cfg, facts)
        by_depth = {d: {"kv": cfg.name, "type_k": cfg.k, "type_v": cfg.v, "depth": d, "status": "not run",
                        "ctx": d + a.n_prompt + a.n_gen} for d in a.depth}
        for d, row in by_depth.items():
            b = kvmem.kv_bytes(g, row["ctx"], cfg.k, cfg.v, sink, recent)
            row.update(kv_mib=b["total"] / 2**20, kv_mib_main=b["main"] / 2**20, kv_mib_pool=b["pool"] / 2**20,
                       sink=sink if "oscar2" in (cfg.k, cfg.v) else None,
                       recent=recent if "oscar2" in (cfg.k, cfg.v) else None)

        def on_row(j: dict) -> None:
            for k in ("build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_type", "n_threads"):
                lb_info.setdefault(k, j.get(k))
            row = by_depth.get(int(j.get("n_depth", -1)))
            if row is None:
                return
            kind = "pp" if j.get("n_prompt", 0) > 0 and j.get("n_gen", 0) == 0 else "tg"
            row[kind + "_ts"] = float(j["avg_ts"])
            row[kind + "_sd"] = float(j.get("stddev_ts", 0.0))
            row["status"] = "ok" if all(row.get(w + "_ts") for w in want) else "partial"
            bar.update()

        if recorded is not None:
            for j in recorded:
                if (j["type_k"], j["type_v"]) == (cfg.k, cfg.v):
                    on_row(j)
            rows += [by_depth[d] for d in a.depth]
            continue
        remaining = list(a.depth)
        env = dict(os.environ, **cfg.env)
        while remaining:
            bar.set_postfix_str(f"{cfg.name} from depth {remaining[0]}")
            rc, tail = run_llama_bench(bench_command(exe, model, cfg, remaining, a), env, a.timeout, on_row)
            done = [d for d in remaining if by_depth[d]["status"] == "ok"]
            if len(done) == len(remaining):  # (a crash after the last result loses nothing)
                break
            failed = next(d for d in remaining if by_depth[d]["status"] != "ok")
            why = (f"timed out after {a.timeout:.0f} s" if rc is None else
                   f"llama-bench exit {rc}: {_reason(tail)}" if rc != 0 else "llama-bench printed no result")
            by_depth[failed]["status"] = "failed: " + why
            later = remaining[remaining.index(failed) + 1:]
            if rc is None:  # deeper runs only take longer
                for d in later:
                    by_depth[d]["status"] = "skipped: a shallower depth timed out"
                later = []
            bar.update(len(want) - sum(1 for w in want if by_depth[failed].get(w + "_ts")))
            remaining = later
        rows += [by_depth[d] for d in a.depth]
    bar.close()
    return rows, lb_info


# ----------------------------------------------------------------------------- equal memory

#: device memory left out of the first guess of the largest batch: compute buffers, the CUDA context
EQMEM_RESERVE_GIB = 3.0


def device_weight_bytes(model: Path) -> int:
    """Bytes of the weights a decode step on a GPU reads: every tensor but the token embeddings
    (looked up on the CPU), which count where they are also the output (no output.weight)."""
    from gguf import GGUFReader
    sizes = {t.name: int(t.n_bytes) for t in GGUFReader(str(model), "r").tensors}
    total = sum(sizes.values())
    if "output.weight" in sizes:
        total -= sizes.get("token_embd.weight", 0)
    return total


def batched_command(exe: Path, model: Path, cfg: KVConfig, ctx: int, n_gen: int, batch: int,
                    a: argparse.Namespace, probe: bool = False) -> list[str]:
    """llama-batched-bench for ``batch`` sequences of ``ctx`` tokens, each in its own stream, the
    prompt decoded once and copied (-pps), ``n_gen`` tokens generated per sequence. ``probe``: the
    same context (the whole cache and compute buffers allocated) with a 32-token prompt and one
    generated token, which says whether the batch fits."""
    npp, ntg = (32, 1) if probe else (ctx, n_gen)
    cmd = [str(exe), "-m", str(model), "-ctk", cfg.k, "-ctv", cfg.v, "-fa", "on", "-c", str(batch * (ctx + n_gen)),
           "-b", "2048", "-ub", "512", "-npp", str(npp), "-ntg", str(ntg), "-npl", str(batch), "-pps",
           "--output-format", "jsonl"]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    if a.n_gpu_layers is not None:
        cmd += ["-ngl", str(a.n_gpu_layers)]
    return cmd + cfg.args + shlex.split(a.extra)


def run_batched(cmd: list[str], env: dict, timeout: float) -> tuple[list[equalmem.BatchedResult], str]:
    """Run llama-batched-bench; its results and, when it gave none, why."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout:.0f} s"
    res = equalmem.parse_batched_jsonl(p.stdout + "\n" + p.stderr)
    if res and p.returncode == 0:
        return res, ""
    return [], f"llama-batched-bench exit {p.returncode}: {_reason(p.stderr[-3000:] or p.stdout[-3000:])}"


def equal_memory(exe: Path, model: Path, configs: list[KVConfig], g: kvmem.KVGeometry, facts: dict,
                 a: argparse.Namespace) -> list[dict]:
    """Per configuration: the largest batch of ``a.equal_memory``-token sequences that fits (tried),
    and its decode throughput; rows for equalmem.table_rows."""
    ctx, n_gen = a.equal_memory, a.n_gen
    weights = device_weight_bytes(model)
    budget = a.mem_gib * 2**30 - weights - EQMEM_RESERVE_GIB * 2**30
    rows = []
    for cfg in configs:
        sink, recent = windows(cfg, facts)
        env = dict(os.environ, **cfg.env)
        per_seq = equalmem.seq_kv_bytes(g, ctx + n_gen, cfg.k, cfg.v, sink, recent)
        scratch = kvmem.prompt_scratch_per_cell(g, cfg.k, cfg.v) * kvmem.cells(ctx + n_gen)
        guess = equalmem.guess_batch(budget, per_seq, scratch, max_seq=a.max_batch)
        refused: dict[int, str] = {}

        def fits(b: int) -> bool:
            res, why = run_batched(batched_command(exe, model, cfg, ctx, n_gen, b, a, probe=True), env, a.timeout)
            if not res:
                refused[b] = why
            if not a.quiet:
                print(f"oscar-bench: {cfg.name}: {b} x {ctx} tokens " + ("fits" if res else f"does not fit ({why})"),
                      file=sys.stderr, flush=True)
            return bool(res)

        batch, tried = equalmem.largest_batch(fits, guess, max_seq=a.max_batch)
        row = {"kv": cfg.name, "type_k": cfg.k, "type_v": cfg.v, "ctx": ctx, "n_gen": n_gen, "guess": guess,
               "tried": {str(k): v for k, v in sorted(tried.items())}, "refused": {str(k): v for k, v in sorted(refused.items())},
               "batch": batch, "status": "ok"}
        if batch == 0:
            row["status"] = f"not even one sequence of {ctx} tokens fits ({refused.get(1, '')})"
            rows.append(row)
            continue
        if not a.quiet:
            print(f"oscar-bench: {cfg.name}: measuring {batch} x {ctx} tokens, {n_gen} generated each",
                  file=sys.stderr, flush=True)
        res, why = run_batched(batched_command(exe, model, cfg, ctx, n_gen, batch, a), env, a.timeout)
        if not res:
            row["status"] = "failed: " + why
            rows.append(row)
            continue
        r = res[-1]
        sb = equalmem.step_bytes(g, weights, batch, ctx, n_gen, cfg.k, cfg.v, sink, recent)
        row.update(kv_gib=batch * per_seq / 2**30, step_ms=1e3 * r.t_tg / r.tg, tok_s=r.speed_tg,
                   t_pp=r.t_pp, step_bytes=sb["total"], step_bytes_kv=sb["kv"], step_bytes_weights=sb["weights"])
        rows.append(row)
    return rows


def equal_memory_markdown(meta: dict, rows: list[dict], a: argparse.Namespace) -> str:
    t = report.markdown_table(equalmem.TABLE_HEAD, equalmem.table_rows(rows))
    return "\n".join([f"# oscar-bench --equal-memory {a.equal_memory}: {meta['title']}", "", report.markdown_meta(meta), "", t, "",
                      f"Per KV type the largest batch of {a.equal_memory}-token sequences (a KV stream each) that "
                      "llama-batched-bench could allocate and run, found by trying batches; then "
                      f"`-npp {a.equal_memory} -ntg {a.n_gen} -pps` at that batch. Bytes read per step: the weights "
                      f"on the device ({meta['weights_bytes'] / 1e9:.2f} GB) and every sequence's cache at the mean depth "
                      "of the generation (oscar2: its 2-bit cells and the 16-bit rows of its windows); achieved TB/s "
                      "is that over the step time, a lower bound on what the device moved.", ""])


# ----------------------------------------------------------------------------- report

def fits_table(g: kvmem.KVGeometry, facts: dict, configs: list[KVConfig], mem_gib: float) -> list[dict]:
    """Largest context whose KV cache fits beside the weights in ``mem_gib`` GiB, per configuration:
    the cache alone, and with the working buffers that a 512-token prompt batch needs per cell on
    CUDA (kvmem.prompt_scratch_per_cell; fixed compute buffers not counted)."""
    budget = mem_gib * 2**30 - facts["file_bytes"]
    out = []
    for cfg in configs:
        sink, recent = windows(cfg, facts)
        scratch = kvmem.prompt_scratch_per_cell(g, cfg.k, cfg.v)
        out.append({"kv": cfg.name, "mem_gib": mem_gib,
                    "max_context": kvmem.max_context(g, budget, cfg.k, cfg.v, sink, recent),
                    "max_context_cuda": kvmem.max_context(g, budget, cfg.k, cfg.v, sink, recent, scratch),
                    "bytes_per_token": kvmem.kv_bytes(g, kvmem.CELL_PAD, cfg.k, cfg.v, 0, 0)["main"] / kvmem.CELL_PAD,
                    "cuda_scratch_per_token": scratch})
    return out


def _speed(r: dict, k: str) -> str:
    return f"{r[k + '_ts']:.2f} ± {r.get(k + '_sd', 0):.2f}" if r.get(k + "_ts") else "-"


def markdown(meta: dict, rows: list[dict], fits: list[dict], a: argparse.Namespace) -> str:
    kinds = tests_run(a)
    t = report.markdown_table(
        ["KV cache", "depth"] + [f"{k}{a.n_prompt if k == 'pp' else a.n_gen} tok/s" for k in kinds]
        + ["KV MiB (main + 16-bit pool)", "status"],
        [[r["kv"], str(r["depth"])] + [_speed(r, k) for k in kinds]
         + [f"{r['kv_mib']:.1f} ({r['kv_mib_main']:.1f} + {r['kv_mib_pool']:.1f})", r["status"]] for r in rows])
    f = report.markdown_table(
        ["KV cache", "KV bytes/token (main tier)", f"largest context in {a.mem_gib:g} GiB",
         "CUDA prompt-batch buffers, bytes/token", "largest context with them"],
        [[x["kv"], f"{x['bytes_per_token']:.0f}", f"{x['max_context']:,}", f"{x['cuda_scratch_per_token']:.0f}",
          f"{x['max_context_cuda']:,}"] for x in fits])
    return "\n".join([f"# oscar-bench: {meta['title']}", "", report.markdown_meta(meta), "", t, "",
                      f"Largest context whose KV cache fits beside the weights ({meta['model_bytes'] / 2**30:.2f} GiB) "
                      f"in {a.mem_gib:g} GiB, from the KV model: the cache alone, and with the working buffers "
                      "that llama.cpp's CUDA backend reserves per cell for a 512-token prompt batch (the mask, "
                      "F16 copies of one layer's quantized K/V; fixed compute buffers not counted):", "", f, ""])


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    t0 = time.time()
    try:
        model = Path(a.model)
        if not model.is_file():
            raise BenchError(f"model file {model} does not exist")
        bin_dir = Path(a.bin_dir) if a.bin_dir else report.ROOT / "build" / "bin"
        exe = bin_dir / "llama-bench"
        if a.equal_memory is not None:
            if a.from_jsonl:
                raise BenchError("--equal-memory runs llama-batched-bench itself: leave out --from-jsonl")
            if a.equal_memory < 1:
                raise BenchError(f"--equal-memory {a.equal_memory}: give a context of 1 or more tokens")
            if a.n_gen is None:
                a.n_gen = 32
            if a.n_gen < 1:
                raise BenchError("--equal-memory needs -n 1 or more generated tokens")
            if not 1 <= a.max_batch <= equalmem.MAX_SEQ:
                raise BenchError(f"--max-batch {a.max_batch}: give 1 to {equalmem.MAX_SEQ} (llama.cpp's most sequences)")
            exe = bin_dir / "llama-batched-bench"
        recorded = read_jsonl(a.from_jsonl) if a.from_jsonl else None
        if recorded is not None:
            recorded_defaults(recorded, a)
        for k, v in RUN_DEFAULTS.items():
            if getattr(a, k) is None:
                setattr(a, k, list(v) if isinstance(v, list) else v)
        if recorded is None and not exe.is_file():
            raise BenchError(f"{exe} does not exist: build {exe.name} there or point --bin-dir at the folder "
                             f"that holds it (e.g. build/bin or build-cuda/bin)")
        if a.repetitions < 1 or a.n_prompt < 0 or a.n_gen < 0 or a.n_prompt + a.n_gen == 0:
            raise BenchError("-r must be >= 1, and -p/-n >= 0 with at least one of them > 0")
        try:
            configs = parse_kv_list(a.kv)
            for c in configs:
                kvmem.bits(c.k), kvmem.bits(c.v)
        except ValueError as e:
            raise BenchError(str(e)) from e
        g, facts = read_geometry(model)
        if facts["sliding_window"]:
            print(f"oscar-bench: note: {facts['arch']} has sliding-window layers; the KV MiB model counts every "
                  f"layer at full context and overstates their cache", file=sys.stderr)
        if a.equal_memory is None and facts["context_length"] and max(a.depth) + a.n_prompt + a.n_gen > int(facts["context_length"]):
            print(f"oscar-bench: note: depths beyond the model's training context ({facts['context_length']}) are "
                  f"measured anyway (speed does not depend on it)", file=sys.stderr)
        if a.equal_memory is not None:
            return equal_memory_main(a, model, bin_dir, configs, g, facts, t0)
        rows, lb = sweep(exe, model, configs, g, facts, a, recorded)
    except BenchError as e:
        print(f"oscar-bench: error: {e}", file=sys.stderr)
        return 1
    title = a.title or model.name
    meta = report.metadata(title=title, model=str(model), model_bytes=facts["file_bytes"],
                           geometry={k: facts[k] for k in ("arch", "n_layer", "n_head", "n_head_kv",
                                                           "head_dim_k", "head_dim_v")},
                           llama_bench={**lb, "binary": str(exe) if recorded is None else None,
                                        "recorded": a.from_jsonl, "n_prompt": a.n_prompt, "n_gen": a.n_gen,
                                        "repetitions": a.repetitions, "n_gpu_layers": a.n_gpu_layers,
                                        "extra": a.extra or None})
    fits = fits_table(g, facts, configs, a.mem_gib)
    md = markdown(meta, rows, fits, a)
    print(md)
    written = []
    if a.out:
        out = Path(a.out)
        from ..core import atomic
        atomic.check_dir_output(out)
        out.mkdir(parents=True, exist_ok=True)
        atomic.write_text(out / "bench.md", md)
        report.write_json(out / "bench.json", {"meta": meta, "rows": rows, "fits": fits})
        written += [str(out / "bench.md"), str(out / "bench.json")]
        try:
            from ..eval import plot
            plot.speed_vs_depth(rows, out / "bench.png", f"{title}: llama-bench, {lb.get('backends', '')} "
                                f"{lb.get('gpu_info') or lb.get('cpu_info') or ''}")
            written.append(str(out / "bench.png"))
        except ImportError:
            print("oscar-bench: matplotlib is not installed: no PNG (pip install matplotlib)", file=sys.stderr)
    n_bad = sum(1 for r in rows if r["status"] != "ok")
    print(f"oscar-bench: {len(configs)} KV configurations x {len(a.depth)} depths on {model.name}: "
          f"{len(rows) - n_bad} ok, {n_bad} failed or skipped, in {time.time() - t0:.0f} s"
          + (f"; wrote {', '.join(written)}" if written else ""), file=sys.stderr)
    return 0


def equal_memory_main(a: argparse.Namespace, model: Path, bin_dir: Path, configs: list[KVConfig],
                      g: kvmem.KVGeometry, facts: dict, t0: float) -> int:
    """--equal-memory: run, print the table, write DIR/eqmem.md and eqmem.json."""
    exe = bin_dir / "llama-batched-bench"
    rows = equal_memory(exe, model, configs, g, facts, a)
    title = a.title or model.name
    meta = report.metadata(title=title, model=str(model), model_bytes=facts["file_bytes"],
                           weights_bytes=device_weight_bytes(model),
                           geometry={k: facts[k] for k in ("arch", "n_layer", "n_head", "n_head_kv",
                                                           "head_dim_k", "head_dim_v")},
                           llama_batched_bench={"binary": str(exe), "ctx": a.equal_memory, "n_gen": a.n_gen,
                                                "n_gpu_layers": a.n_gpu_layers, "extra": a.extra or None,
                                                "mem_gib_guess": a.mem_gib})
    md = equal_memory_markdown(meta, rows, a)
    print(md)
    written = []
    if a.out:
        out = Path(a.out)
        from ..core import atomic
        atomic.check_dir_output(out)
        out.mkdir(parents=True, exist_ok=True)
        atomic.write_text(out / "eqmem.md", md)
        report.write_json(out / "eqmem.json", {"meta": meta, "rows": rows})
        written = [str(out / "eqmem.md"), str(out / "eqmem.json")]
    n_bad = sum(1 for r in rows if r["status"] != "ok")
    print(f"oscar-bench: equal memory at {a.equal_memory} tokens, {len(configs)} KV configurations on {model.name}: "
          f"{len(rows) - n_bad} measured, {n_bad} failed, in {time.time() - t0:.0f} s"
          + (f"; wrote {', '.join(written)}" if written else ""), file=sys.stderr)
    return 0 if n_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
