"""A small driver over the llama.cpp C API (through llama-cpp-python's ctypes
bindings) for tests that need several sequences, state save/restore and direct
control over batches: things the high-level Llama class does not expose."""
from __future__ import annotations

import ctypes

import numpy as np

import oscar
from oscar.core.llama import bindings, kv_type


class Context:
    """A llama_context on an already loaded model (``llm.model`` of oscar.load)."""

    def __init__(self, llm, kv: str = "oscar2", n_ctx: int = 2048, n_seq_max: int = 1,
                 n_batch: int = 512, n_ubatch: int = 512, n_threads: int = 2, unified: bool = True,
                 kv_k: str | None = None, kv_v: str | None = None):
        self.ll = bindings()
        self.llm = llm
        p = self.ll.llama_context_default_params()
        p.n_ctx = n_ctx
        p.n_batch = n_batch
        p.n_ubatch = n_ubatch
        p.n_seq_max = n_seq_max
        p.n_threads = n_threads
        p.n_threads_batch = n_threads
        p.type_k = kv_type(kv_k or kv)
        p.type_v = kv_type(kv_v or kv)
        p.flash_attn_type = self.ll.LLAMA_FLASH_ATTN_TYPE_ENABLED
        p.kv_unified = unified
        self.ctx = self.ll.llama_init_from_model(llm.model, p)
        if not self.ctx:
            raise RuntimeError("llama_init_from_model failed")
        self.n_vocab = llm.n_vocab()
        self.n_batch = n_batch

    def close(self) -> None:
        if self.ctx:
            self.ll.llama_free(self.ctx)
            self.ctx = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def mem(self):
        return self.ll.llama_get_memory(self.ctx)

    def decode(self, tokens: list[int], pos0: int, seq: int = 0, all_logits: bool = True) -> np.ndarray:
        """Decode ``tokens`` at positions pos0.. in sequence ``seq``, in batches of n_batch.
        Returns logits [len(tokens), n_vocab] (all_logits) or [1, n_vocab] of the last token."""
        out = []
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start:start + self.n_batch]
            batch = self.ll.llama_batch_init(len(chunk), 0, 1)
            try:
                batch.n_tokens = len(chunk)
                for i, t in enumerate(chunk):
                    batch.token[i] = t
                    batch.pos[i] = pos0 + start + i
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = seq
                    last = start + i == len(tokens) - 1
                    batch.logits[i] = bool(all_logits or last)
                rc = self.ll.llama_decode(self.ctx, batch)
                if rc != 0:
                    raise RuntimeError(f"llama_decode failed with {rc}")
                for i in range(len(chunk)):
                    if all_logits or start + i == len(tokens) - 1:
                        ptr = self.ll.llama_get_logits_ith(self.ctx, i)
                        out.append(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy())
            finally:
                self.ll.llama_batch_free(batch)
        return np.stack(out)

    def seq_state(self, seq: int) -> bytes:
        n = self.ll.llama_state_seq_get_size(self.ctx, seq)
        buf = (ctypes.c_uint8 * n)()
        got = self.ll.llama_state_seq_get_data(self.ctx, buf, n, seq)
        assert got == n
        return bytes(buf)

    def set_seq_state(self, data: bytes, seq: int) -> None:
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        got = self.ll.llama_state_seq_set_data(self.ctx, buf, len(data), seq)
        if got == 0:
            raise RuntimeError("llama_state_seq_set_data failed")

    def describe(self) -> str:
        fn = self.ll.llama_cpp._lib.llama_oscar_kv_describe
        fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        fn.restype = ctypes.c_int32
        buf = ctypes.create_string_buffer(1024)
        fn(self.ctx, buf, len(buf))
        return buf.value.decode()
