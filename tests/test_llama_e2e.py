"""End to end: SmolLM2 with an oscar2 KV cache through the Python bindings and
through our llama.cpp tools (perplexity, bench, server, cli), plus bad input."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest

import oscar
from oscar.bench import synthetic
from oscar.eval import perplexity as pp
from server import complete, llama_server

PROMPT = "The capital of France is Paris. The capital of Germany is"


def test_bindings_generate_with_oscar2(smollm2):
    llm = oscar.load(smollm2, kv="oscar2", n_ctx=512)
    assert llm.context_params.type_k == oscar.GGML_TYPE_OSCAR2
    assert llm.context_params.type_v == oscar.GGML_TYPE_OSCAR2
    out = llm.create_completion(PROMPT, max_tokens=12, temperature=0.0)
    assert out["usage"]["completion_tokens"] >= 1
    assert len(out["choices"][0]["text"]) > 0


def kv_state_bytes(model, kv: str, **windows) -> int:
    """Bytes of one sequence's saved state after a fixed prompt: dominated by its KV cache."""
    llm = oscar.load(model, kv=kv, n_ctx=512, **windows)
    llm.eval(llm.tokenize(PROMPT.encode() * 8))
    llama_cpp = oscar.core.llama.bindings()
    return llama_cpp.llama_state_seq_get_size(llm.ctx, 0)


def test_cache_really_is_two_bit(smollm2):
    """The saved KV of a sequence is about 6.4x smaller with oscar2 than with f16 (2.5 vs 16 bits);
    with the 16-bit windows on, the state also carries the 16-bit copies of the window tokens."""
    f16 = kv_state_bytes(smollm2, "f16")
    o2 = kv_state_bytes(smollm2, "oscar2", kv_sink=0, kv_recent=0)
    assert 5.5 < f16 / o2 < 6.5, (f16, o2)
    o2_win = kv_state_bytes(smollm2, "oscar2")
    assert o2 < o2_win < o2 + f16


@pytest.mark.parametrize("k,v", [("oscar2", "f16"), ("q8_0", "oscar2"), ("oscar2", "q4_0")])
def test_bindings_mixed_pairs(smollm2, k, v):
    llm = oscar.load(smollm2, kv_k=k, kv_v=v, n_ctx=512)
    out = llm.create_completion(PROMPT, max_tokens=4, temperature=0.0)
    assert out["usage"]["completion_tokens"] >= 1


def test_bindings_refuse_oscar2_without_flash_attention(smollm2):
    for kv in ("oscar2", "oscar2s"):
        with pytest.raises(ValueError, match="flash attention"):
            oscar.load(smollm2, kv=kv, flash_attn=False)
    # the library itself refuses too (llama-cpp-python turns the NULL context into an error)
    llama_cpp = oscar.core.llama.bindings()
    with pytest.raises(Exception):
        llama_cpp.Llama(model_path=str(smollm2), type_k=oscar.GGML_TYPE_OSCAR2, type_v=oscar.GGML_TYPE_OSCAR2,
                        flash_attn=False, n_ctx=256, verbose=False)


def test_unknown_kv_type_is_named():
    from oscar.core.llama import kv_type
    assert kv_type("oscar3") == 44 and kv_type("oscar2s") == 45
    with pytest.raises(ValueError, match="unknown KV cache type 'oscar4'"):
        kv_type("oscar4")


def test_perplexity_finite_and_really_quantised(smollm2, wiki_slice):
    f16 = pp.run(smollm2, wiki_slice, pp.KVConfig("f16", "f16"), ctx=512, chunks=2)
    o2 = pp.run(smollm2, wiki_slice, pp.KVConfig("oscar2", "oscar2"), ctx=512, chunks=2)
    assert math.isfinite(o2.ppl) and math.isfinite(f16.ppl)
    # a 2-bit cache without calibration loses quality, but stays far from random (vocab 49152)
    assert f16.ppl * 1.05 < o2.ppl < f16.ppl * 20, (f16.ppl, o2.ppl)


def test_perplexity_mixed_pair(smollm2, wiki_slice):
    r = pp.run(smollm2, wiki_slice, pp.KVConfig("q8_0", "oscar2"), ctx=512, chunks=1, extra=["-lv", "4"])
    assert math.isfinite(r.ppl)
    # the start-up device check: every layer's attention runs where the layer runs (no fallback)
    assert "flash attention of all 30 layers runs on the layers' own devices" in r.log
    assert "WARNING: oscar2 KV cache" not in r.log


def test_tools_refuse_oscar2_without_flash_attention(bin_dir, smollm2, wiki_slice):
    p = subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(smollm2), "-f", str(wiki_slice), "-c", "512",
                        "--chunks", "1", "-ctk", "oscar2", "-ctv", "oscar2", "-fa", "off"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "needs flash attention: run with -fa on" in p.stderr + p.stdout


def test_head_dim_the_type_cannot_hold(bin_dir, tmp_path):
    model = synthetic.write(tmp_path / "hd80.gguf", synthetic.GEOMETRIES["tiny-hd80"], "f32")
    p = subprocess.run([str(bin_dir / "llama-completion"), "-m", str(model), "-ctk", "oscar2", "-ctv", "f16",
                        "-fa", "on", "-n", "1", "-p", "hi", "-no-cnv"], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    err = p.stderr + p.stdout
    assert "layer 0: K cache type oscar2 cannot hold head_dim n_embd_head_k=80" in err
    assert "multiple of 64" in err


def test_llama_bench_accepts_oscar2(bin_dir, smollm2):
    p = subprocess.run([str(bin_dir / "llama-bench"), "-m", str(smollm2), "-ctk", "oscar2", "-ctv", "oscar2",
                        "-fa", "1", "-p", "32", "-n", "4", "-r", "1", "-o", "json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.loads(p.stdout)
    assert {r["type_k"] for r in rows} == {"oscar2"} and {r["type_v"] for r in rows} == {"oscar2"}
    assert all(r["avg_ts"] > 0 for r in rows)


def test_llama_cli_single_turn(bin_dir, smollm2):
    p = subprocess.run([str(bin_dir / "llama-cli"), "-m", str(smollm2), "-ctk", "oscar2", "-ctv", "oscar2", "-fa", "on",
                        "-c", "1024", "-n", "8", "--temp", "0", "-st", "-p", "Name three colors."],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Generation:" in p.stdout + p.stderr


def test_llama_server_completion(bin_dir, smollm2):
    with llama_server(bin_dir, smollm2, "-ctk", "oscar2", "-ctv", "oscar2", "-fa", "on", "-c", "2048") as url:
        body = complete(url, PROMPT, 8)
    assert body["tokens_predicted"] >= 1
    assert isinstance(body["content"], str)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_evaluation_server_dies_with_its_parent(bin_dir, smollm2, tmp_path):
    """oscar.eval.llama_server.serve's server does not outlive the process that started it, even
    one killed by SIGKILL (no finally runs): a killed oscar-eval leaves no server behind."""
    script = ("import sys, time\nfrom oscar.eval import llama_server\n"
              f"with llama_server.serve({str(smollm2)!r}, ['-c', '256', '-t', '1']) as s:\n"
              "    print(s.pid, flush=True)\n    time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        os.kill(pid, 0)  # the server runs
        parent.kill()
        parent.wait()
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            with open(f"/proc/{pid}/stat") as f:  # a zombie (exited, not reaped by init yet) counts as gone
                if f.read().split(") ")[-1].startswith("Z"):
                    break
            time.sleep(0.2)
        else:
            os.kill(pid, 9)
            pytest.fail("llama-server still runs 30 s after its parent was killed")
    finally:
        parent.kill()
