"""Checks of a model file and a llama.cpp build that ``oscar-eval`` and its HumanEval
benchmark both run before any work starts."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ..core import gguf_io, kvmem, paths


class EvalError(Exception):
    """A user-facing error of oscar-eval (printed without a traceback, exit status 1)."""


def known_kv_types() -> list[str]:
    """KV cache types our llama-perplexity accepts (from its --help), else kvmem's list."""
    try:
        h = subprocess.run([str(paths.tool("llama-perplexity")), "--help"], capture_output=True, text=True,
                           timeout=60).stdout
    except (OSError, FileNotFoundError, subprocess.TimeoutExpired):
        return list(kvmem.BITS)
    m = re.search(r"--cache-type-k TYPE.*?allowed values:(.*?)\(default", h, re.S)
    if not m:
        return list(kvmem.BITS)
    return [t.strip() for t in m.group(1).replace("\n", " ").split(",") if t.strip()]


def unknown_kv_type(configs) -> str | None:
    """Why one of ``configs`` (KV configurations with ``name``, ``k`` and ``v``) cannot run on
    this build (a cache type its llama-perplexity does not list), or None."""
    known = known_kv_types()
    for c in configs:
        for t in (c.k, c.v):
            if t not in known:
                return f"KV type '{t}' (in '{c.name}') is not known to this build; known: {', '.join(known)}"
    return None


def model_context(model: Path) -> int | None:
    """The context length the model was trained for (``<arch>.context_length``), if stated."""
    try:
        r = gguf_io.open_reader(model)
    except ValueError as e:
        raise EvalError(f"{model} is not a readable GGUF model: {e}") from e
    arch = gguf_io._field(r, "general.architecture")
    n = gguf_io._field(r, f"{arch}.context_length") if arch else None
    return int(n) if n is not None else None


def model_file_problem(model: Path) -> str | None:
    """Why ``model`` cannot be evaluated (missing, not a GGUF), or None."""
    if not model.is_file():
        return f"model file {model} does not exist (scripts/fetch-models.sh fetches the bundled models)"
    with open(model, "rb") as f:
        if f.read(4) != b"GGUF":
            return f"{model} is not a GGUF file"
    return None
