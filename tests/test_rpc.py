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
from oscar import perplexity as pp
from oscar.llama_server import free_port, stop

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
