"""Start our llama-server for a test, on a free loopback port, and stop it afterwards."""
from __future__ import annotations

import contextlib
import subprocess
import time
import urllib.request
from pathlib import Path

from oscar.eval import llama_server as ls
from oscar.eval.llama_server import free_port


@contextlib.contextmanager
def llama_server(bin_dir: Path, model: Path, *args: str, timeout_s: float = 120.0, log: Path | None = None):
    """Yields the server's base URL once /health answers 200 (its output goes to ``log`` if given)."""
    port = free_port()
    out = open(log, "wb") if log is not None else subprocess.DEVNULL
    srv = subprocess.Popen([str(bin_dir / "llama-server"), "-m", str(model), *args,
                            "--host", "127.0.0.1", "--port", str(port)],
                           stdout=out, stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.time() > deadline or srv.poll() is not None:
                    raise AssertionError("llama-server did not become healthy")
                time.sleep(0.5)
        yield url
    finally:
        ls.stop(srv)
        if log is not None:
            out.close()


def complete(url: str, prompt: str, n_predict: int) -> dict:
    """One greedy /completion request without prompt caching; the parsed JSON answer."""
    return ls.complete(url, prompt, n_predict, cache_prompt=False, timeout_s=300)
