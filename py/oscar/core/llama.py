"""Load a GGUF model with an ``oscar2`` KV cache through llama-cpp-python.

The bindings are llama-cpp-python 0.3.36 installed without its own llama.cpp;
``LLAMA_CPP_LIB_PATH`` points them at our patched ``libllama`` in ``build/bin``
(set here before the first import unless the caller already set it).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import paths
from .quant import GGML_TYPE_OSCAR2, GGML_TYPE_OSCAR2S, GGML_TYPE_OSCAR3

#: KV cache type names accepted by ``load`` and the CLIs, with their ggml type ids
KV_TYPES = {
    "f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8,
    "iq4_nl": 20, "bf16": 30, "oscar2": GGML_TYPE_OSCAR2, "oscar3": GGML_TYPE_OSCAR3, "oscar2s": GGML_TYPE_OSCAR2S,
}


#: type id -> name
TYPE_NAMES = {v: k for k, v in KV_TYPES.items()}
#: cache types llama.cpp reads with flash attention only (for K as well as for V)
FLASH_ONLY = (GGML_TYPE_OSCAR2, GGML_TYPE_OSCAR2S, GGML_TYPE_OSCAR3)
#: V cache types that work without flash attention (a quantised V needs it)
UNQUANTISED = (KV_TYPES["f32"], KV_TYPES["f16"], KV_TYPES["bf16"])


def kv_type(name: str | int) -> int:
    """ggml type id of a KV cache type given by name (``"oscar2"``) or id."""
    if isinstance(name, bool) or not isinstance(name, (str, int)):
        raise ValueError(f"a KV cache type is a name ({', '.join(KV_TYPES)}) or a ggml type id, got {name!r}")
    if isinstance(name, int):
        if name not in KV_TYPES.values():
            raise ValueError(f"unknown KV cache type id {name}; known: {sorted(KV_TYPES.values())}")
        return name
    key = name.strip().lower()
    if key not in KV_TYPES:
        raise ValueError(f"unknown KV cache type '{name}'; known: {', '.join(KV_TYPES)}")
    return KV_TYPES[key]


def bindings():
    """The ``llama_cpp`` module, loaded on our patched libllama."""
    os.environ.setdefault("LLAMA_CPP_LIB_PATH", str(paths.BUILD_BIN))
    lib = Path(os.environ["LLAMA_CPP_LIB_PATH"])
    if not any(lib.glob("libllama.*")):
        raise FileNotFoundError(f"no libllama in {lib}: run `make build` first (or set LLAMA_CPP_LIB_PATH)")
    import llama_cpp  # noqa: PLC0415 (deferred: loading the library is the point)
    return llama_cpp


def head_sizes(model: str | os.PathLike) -> dict[str, tuple[int, str]]:
    """The K and V head sizes of a model GGUF as llama.cpp reads them, from its metadata
    only (gguf-py, no tensor data): ``{"K": (size, key), "V": (size, key)}`` with the key it
    came from: ``<arch>.attention.key_length`` / ``value_length``, else ``embedding_length /
    head_count`` (of layer 0, as llama.cpp). Raises ``ValueError`` if the GGUF has neither."""
    from .gguf_io import _field, open_reader
    r = open_reader(model)
    arch = _field(r, "general.architecture")
    if arch is None:
        raise ValueError(f"{model}: no general.architecture")
    out = {}
    n_embd, n_head = _field(r, f"{arch}.embedding_length"), _field(r, f"{arch}.attention.head_count")
    if isinstance(n_head, list):
        n_head = n_head[0] if n_head else None
    for side, key in (("K", "key_length"), ("V", "value_length")):
        v = _field(r, f"{arch}.attention.{key}")
        if v is not None and not isinstance(v, list):
            out[side] = (int(v), f"{arch}.attention.{key}")
        elif n_embd is not None and n_head:
            out[side] = (int(n_embd) // int(n_head), f"{arch}.embedding_length / {arch}.attention.head_count")
        else:
            raise ValueError(f"{model}: no {arch}.attention.{key} and no embedding_length/head_count")
    return out


def check_head_sizes(model: str | os.PathLike, type_k: int, type_v: int) -> None:
    """Raise ``ValueError`` if a side stored as oscar2 (or oscar2s) has a head size it cannot hold (a
    multiple of :data:`oscar.core.limits.OSCAR2_BLOCK`), naming the layers, the size and the fix,
    before llama.cpp would fail with only "Failed to create llama_context". A GGUF that gguf-py
    cannot read is left to llama.cpp."""
    from . import limits
    sides = [s for s, t in (("K", type_k), ("V", type_v)) if t in (GGML_TYPE_OSCAR2, GGML_TYPE_OSCAR2S)]
    if not sides:
        return
    try:
        sizes = head_sizes(model)
        from .gguf_io import _field, open_reader
        r = open_reader(model)
        n_layer = int(_field(r, f"{_field(r, 'general.architecture')}.block_count", 0) or 0)
    except (ValueError, OSError, TypeError):
        return
    bad = [(s, *sizes[s]) for s in sides if sizes[s][0] <= 0 or sizes[s][0] % limits.OSCAR2_BLOCK]
    if not bad:
        return
    layers = f"layers 0-{n_layer - 1} (all {n_layer})" if n_layer > 1 else "layer 0"
    what = "; ".join(f"{s} head size {n} ({key})" for s, n, key in bad)
    other = " and ".join(f"kv_{s.lower()}='q8_0'" for s, _, _ in bad)
    raise ValueError(f"{model}: {layers}: {what}: not a multiple of {limits.OSCAR2_BLOCK}, and the oscar2 KV cache "
                     f"stores blocks of {limits.OSCAR2_BLOCK} values, so it cannot hold these heads. Use another kv "
                     f"type for {' and '.join(s for s, _, _ in bad)}: e.g. {other}, or kv='f16'")


def load(model: str | os.PathLike, kv: str = "oscar2", *, kv_k: str | None = None, kv_v: str | None = None,
         kv_sink: int | None = None, kv_recent: int | None = None,
         n_ctx: int = 4096, n_threads: int | None = None, verbose: bool = False, **kwargs: Any):
    """Open ``model`` (a GGUF path) with the KV cache stored as ``kv``.

    kv sets both K and V; ``kv_k``/``kv_v`` override one side (mixed pairs such as
    K ``q8_0`` and V ``oscar2``). Flash attention is on: the ``oscar2`` cache is read
    only by the flash-attention kernels.

    kv_sink / kv_recent: positions kept in 16-bit beside an ``oscar2`` cache, the first
    ``kv_sink`` of each sequence and the ``kv_recent`` before each query (0 turns a
    window off; default: the model's ``oscar.sink_tokens``/``oscar.recent_tokens``,
    else 64 and 256). Same as ``--kv-sink``/``--kv-recent`` of the llama.cpp tools.

    A side stored as oscar2 needs a head size that is a multiple of 64: otherwise ``ValueError``
    (naming the layers, the head size and the fix) before any context is made.

    Other keyword arguments go to ``llama_cpp.Llama``. Returns the ``llama_cpp.Llama`` object.
    """
    from . import limits
    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(f"model file {path} does not exist (scripts/fetch-models.sh fetches the demo model)")
    type_k = kv_type(kv if kv_k is None else kv_k)
    type_v = kv_type(kv if kv_v is None else kv_v)
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or not 0 <= n_ctx <= limits.WINDOW_TOKENS_MAX:
        raise ValueError(f"n_ctx must be a number of tokens, an int 0 <= n_ctx <= {limits.WINDOW_TOKENS_MAX} "
                         f"(0: the model's training context), got {n_ctx!r}")
    # before the context: llama.cpp would only say "Failed to create llama_context"
    flash = kwargs.setdefault("flash_attn", True)
    fa_only = [n for n, t in (("K", type_k), ("V", type_v)) if t in FLASH_ONLY]
    if not flash and (fa_only or type_v not in UNQUANTISED):
        side = f"the {' and '.join(fa_only)} cache in {TYPE_NAMES[type_k if fa_only[0] == 'K' else type_v]}" if fa_only \
            else f"a quantised V cache ({TYPE_NAMES[type_v]})"
        raise ValueError(f"{side} is read by flash attention only: leave flash_attn=True, or use kv='f16'")
    check_head_sizes(path, type_k, type_v)
    overrides = dict(kwargs.pop("kv_overrides", None) or {})
    for name, key, value in (("kv_sink", "oscar.sink_tokens", kv_sink), ("kv_recent", "oscar.recent_tokens", kv_recent)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limits.WINDOW_TOKENS_MAX:
            raise ValueError(f"{name} must be a number of tokens (an int, 0 <= n <= {limits.WINDOW_TOKENS_MAX}), "
                             f"got {value!r}")
        overrides[key] = value
    llama_cpp = bindings()
    if overrides:
        kwargs["kv_overrides"] = overrides
    return llama_cpp.Llama(model_path=str(path), type_k=type_k, type_v=type_v, n_ctx=n_ctx,
                           n_threads=n_threads, verbose=verbose, **kwargs)


def describe(llm) -> str:
    """One line on the ``oscar2`` cache of a loaded model: which sides are 2-bit, the
    16-bit windows in force and the memory of each tier ("" without an oscar2 side)."""
    import ctypes
    llama_cpp = bindings()
    fn = llama_cpp.llama_cpp._lib.llama_oscar_kv_describe
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int32
    buf = ctypes.create_string_buffer(1024)
    n = fn(llm.ctx, buf, len(buf))
    return buf.value.decode() if n > 0 else ""
