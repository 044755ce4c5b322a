"""oscar2 over llama.cpp's RPC backend: a model split over two rpc-servers on 127.0.0.1.

Two `ggml-rpc-server` processes (upstream's rpc-server) (CPU backend, one thread each) serve a device each; llama-perplexity
with `--rpc A,B -ngl 99 -ts 1,1` puts half of the layers, with their oscar2 cache and their
rotations, on each, and runs each layer's attention there (the RPC backend forwards the graph
with every tensor's type, op parameters and sources; the remote CPU backend runs the oscar2
kernels). Its perplexity must be the local run's: the same kernels compute the same numbers,
only elsewhere.
"""
from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import time

import pytest

from oscar import cli
from oscar.eval import perplexity as pp
from oscar.eval.llama_server import free_port, stop

CTX, CHUNKS = 512, 2
# windows smaller than the chunk, so that most cells of each chunk are read from the 2-bit tier
WINDOWS = ["--kv-sink", "16", "--kv-recent", "64"]
LOG = ["-lv", "4"]  # the buffer lines: where the weights and the cache are


@pytest.fixture(scope="module")
def smollm2_oscar(smollm2, tmp_path_factory):
    """SmolLM2 with its zoo rotations: rotation tensors travel to the servers with their layers."""
    out = tmp_path_factory.mktemp("rpc") / "smollm2-oscar.gguf"
    assert cli.convert_main([str(smollm2), "--rotations", "zoo", "-o", str(out), "-q"]) == 0
    return out


@contextlib.contextmanager
def rpc_server(bin_dir, log_path):
    port = free_port()
    log = open(log_path, "wb")
    proc = subprocess.Popen([str(bin_dir / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port), "-t", "1"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while True:  # listening once a connection is accepted (a probe that sends nothing is dropped)
            assert proc.poll() is None, f"rpc-server exited: {log_path.read_text(errors='replace')[-1500:]}"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert time.time() < deadline, "rpc-server did not listen within 60 s"
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)
        log.close()


@pytest.mark.parametrize("cache", ["oscar2", "oscar2s"])
def test_perplexity_over_two_rpc_servers_equals_local(bin_dir, smollm2_oscar, wiki_slice, tmp_path, cache):
    """oscar2s has CPU kernels only, and its cache is refused on a device that cannot write it; an
    RPC device asks its server's backend, here a CPU one, so the cache is placed there and runs."""
    kv = pp.KVConfig(cache, cache)
    local = pp.run(smollm2_oscar, wiki_slice, kv, ctx=CTX, chunks=CHUNKS, threads=1, extra=[*WINDOWS, *LOG])
    with rpc_server(bin_dir, tmp_path / "rpc0.log") as a, rpc_server(bin_dir, tmp_path / "rpc1.log") as b:
        remote = pp.run(smollm2_oscar, wiki_slice, kv, ctx=CTX, chunks=CHUNKS, threads=1,
                        extra=[*WINDOWS, *LOG, "--rpc", f"{a},{b}", "-ngl", "99", "-ts", "1,1"])
    log = remote.log
    print(f"oscar2 perplexity local {local.ppl:.4f} +/- {local.ppl_err:.4f}, "
          f"over two rpc-servers {remote.ppl:.4f} +/- {remote.ppl_err:.4f}")
    # the split: each server holds layers (weights) and their oscar2 cache
    for ep in (a, b):
        assert re.search(r"RPC\d+\[" + re.escape(ep) + r"\] model buffer size = +[1-9]", log), \
            f"no model weights on {ep}:\n{log[-3000:]}"
        assert re.search(r"RPC\d+\[" + re.escape(ep) + r"\].*KV buffer size = +[1-9]", log), \
            f"no KV cache on {ep}:\n{log[-3000:]}"
    assert not re.search(r"RPC\d+\[", local.log), "the local run used an RPC device"
    assert f"oscar: K and V in {cache} (" in log and "no calibrated rotations" not in log
    assert "flash attention of all 30 layers runs on the layers' own devices" in log
    assert "WARNING: oscar2 KV cache" not in log
    # llama-perplexity prints four decimals
    assert round(remote.ppl, 4) == round(local.ppl, 4), (local.ppl, remote.ppl)


@pytest.mark.parametrize("nkvo", [True, False], ids=["cache-on-host", "cache-on-device"])
def test_attention_on_another_backend_than_its_layer(bin_dir, smollm2_oscar, wiki_slice, tmp_path, nkvo):
    """A layer on one device whose attention runs on another: the cache kept in host memory
    (-nkvo), or a device that lacks the attention kernel (GGML_RPC_REFUSE_OPS=FLASH_ATTN_EXT makes
    the RPC device refuse it, as a device without kernels for a head size does). The zoo model is
    centred, so mu_V is added to the attention output on the layer's device: that sum must not be
    an in-place view of the other backend's memory (the server then wrote through a null pointer).
    Perplexity must be the local run's."""
    kv = pp.KVConfig("oscar2s", "oscar2s")
    local = pp.run(smollm2_oscar, wiki_slice, kv, ctx=CTX, chunks=CHUNKS, threads=1, extra=[*WINDOWS, *LOG])
    refused = pp.KVConfig("oscar2s", "oscar2s", env={"GGML_RPC_REFUSE_OPS": "FLASH_ATTN_EXT"})
    with rpc_server(bin_dir, tmp_path / "rpc0.log") as a:
        remote = pp.run(smollm2_oscar, wiki_slice, refused, ctx=CTX, chunks=CHUNKS, threads=1,
                        extra=[*WINDOWS, *LOG, "--rpc", a, "-ngl", "99", *(["-nkvo"] if nkvo else [])])
    log = remote.log
    print(f"oscar2s perplexity local {local.ppl:.4f}, layers on an rpc-server, attention here "
          f"({'-nkvo' if nkvo else 'kernel refused'}) {remote.ppl:.4f}")
    assert re.search(r"RPC\d+\[" + re.escape(a) + r"\] model buffer size = +[1-9]", log), log[-3000:]
    if nkvo:
        assert "oscar2 KV cache kept on the CPU (-nkvo" in log and "WARNING: oscar2 KV cache" not in log
    else:
        assert re.search(r"RPC\d+\[" + re.escape(a) + r"\].*KV buffer size = +[1-9]", log), log[-3000:]
        assert "WARNING: oscar2 KV cache: flash attention of 30 of 30 layers does not run where the layer runs" in log
    assert round(remote.ppl, 4) == round(local.ppl, 4), (local.ppl, remote.ppl)


def test_refuse_ops_warns_of_names_that_are_no_op(bin_dir, smollm2_oscar, wiki_slice, tmp_path):
    """GGML_RPC_REFUSE_OPS with a misspelt name refused nothing, silently: each name that is no
    ggml op is now reported once, by name; the known one still takes effect (the attention runs
    off the RPC device, as in the test above)."""
    kv = pp.KVConfig("oscar2", "oscar2", env={"GGML_RPC_REFUSE_OPS": "FLASH_ATTN_EXT,,FLASH_ATTN_EXTT"})
    with rpc_server(bin_dir, tmp_path / "rpc0.log") as a:
        res = pp.run(smollm2_oscar, wiki_slice, kv, ctx=128, chunks=1, threads=1,
                     extra=[*WINDOWS, *LOG, "--rpc", a, "-ngl", "99"])
    log = res.log
    assert log.count("GGML_RPC_REFUSE_OPS names 'FLASH_ATTN_EXTT', which is no ggml op") == 1, log[-3000:]
    assert "names 'FLASH_ATTN_EXT'," not in log and "names ''" not in log
    assert "WARNING: oscar2 KV cache: flash attention of 30 of 30 layers does not run where the layer runs" in log
