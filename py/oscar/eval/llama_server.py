"""Our ``llama-server`` as a context manager: started on a free loopback port with the
given arguments, its log kept, stopped afterwards (and on Linux when the process that started it
dies, however it dies); and greedy ``/completion`` requests."""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..core import paths


class ServerError(RuntimeError):
    """llama-server did not start or answer; the message carries the tail of its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """A running server: its base URL and the file its output goes to."""
    url: str
    log_path: Path
    pid: int

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _die_with_parent(parent: int):
    """A ``preexec_fn`` for Linux: the child gets SIGTERM when the process that started it dies
    (killed, even by SIGKILL), so a server never outlives the evaluation that needed it.
    None elsewhere (the context manager still stops it on any exception)."""
    if not sys.platform.startswith("linux"):
        return None

    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)
    return preexec


def _tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


@contextlib.contextmanager
def serve(model: str | Path, args: list[str], env: dict[str, str] | None = None, timeout_s: float = 300.0):
    """Yields a :class:`Server` once ``/health`` answers 200. ``args`` are llama-server options
    (``-c``, ``-ctk``, ...); ``env`` extra environment variables. Raises :class:`ServerError`
    with the end of the server's log when it exits or does not become healthy in ``timeout_s``."""
    exe = paths.tool("llama-server")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="oscar-server-") as tmp:
        log_path = Path(tmp) / "llama-server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([str(exe), "-m", str(model), *args, "--host", "127.0.0.1", "--port", str(port)],
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **(env or {})}, preexec_fn=_die_with_parent(os.getpid()))
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + timeout_s
            while True:
                if proc.poll() is not None:
                    raise ServerError(f"llama-server exited with status {proc.returncode} "
                                      f"({' '.join(args)}):\n{_tail(log_path)}")
                try:
                    with urllib.request.urlopen(url + "/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.time() > deadline:
                    raise ServerError(f"llama-server did not become healthy in {timeout_s:.0f} s:\n{_tail(log_path)}")
                time.sleep(0.3)
            yield Server(url, log_path, proc.pid)
        finally:
            stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """Terminate a server process, killing it if it has not exited within 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def complete(url: str, prompt: str, n_predict: int, stop: list[str] | None = None, cache_prompt: bool = True,
             timeout_s: float = 1800.0) -> dict:
    """One temperature-0 ``/completion`` request; the server's parsed JSON answer (``content``,
    ``timings`` with ``prompt_n``, the prompt tokens computed, ``tokens_cached``, ...)."""
    body = {"prompt": prompt, "n_predict": n_predict, "temperature": 0, "cache_prompt": cache_prompt,
            "stop": stop or []}
    req = urllib.request.Request(url + "/completion", method="POST", headers={"Content-Type": "application/json"},
                                 data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise ServerError(f"llama-server answered {e.code} to a completion request: {e.read()[:500]!r}") from e


def tokenize(url: str, text: str) -> list[int]:
    """The server's tokens for ``text`` (no BOS, special tokens not parsed), from ``/tokenize``."""
    req = urllib.request.Request(url + "/tokenize", method="POST", headers={"Content-Type": "application/json"},
                                 data=json.dumps({"content": text, "add_special": False}).encode())
    with urllib.request.urlopen(req, timeout=120) as r:
        return list(json.loads(r.read())["tokens"])
