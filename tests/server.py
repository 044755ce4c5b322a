"""Start our llama-server for a test, on a free loopback port, and stop it afterwards."""
from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        srv.terminate()
        try:
            srv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
        if log is not None:
            out.close()


def complete(url: str, prompt: str, n_predict: int) -> dict:
    """One greedy /completion request; the parsed JSON answer."""
    req = urllib.request.Request(url + "/completion", method="POST", headers={"Content-Type": "application/json"},
                                 data=json.dumps({"prompt": prompt, "n_predict": n_predict, "temperature": 0,
                                                  "cache_prompt": False}).encode())
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())
