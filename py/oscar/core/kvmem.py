"""KV cache memory by type and context: bits per value, bytes per token, MiB.

The model mirrors llama.cpp's own accounting (single sequence): each of K and V holds
``cells x n_layer x n_head_kv x head_dim`` values of its type, with ``cells`` the context
padded to 256. An ``oscar2`` side with 16-bit windows adds an F16 pool of
``min(cells, sink + recent + 64) + 1`` slots per layer (llama.cpp's window pool: the windows,
room for the new tokens of a small ubatch, and one spare slot; a larger ubatch reads its own
rows beside the pool). Standard library only.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: bits per stored value of the KV cache types our build accepts
BITS = {"f32": 32.0, "f16": 16.0, "bf16": 16.0, "q8_0": 8.5, "q5_1": 6.0, "q5_0": 5.5, "q4_1": 5.0,
        "q4_0": 4.5, "iq4_nl": 4.5, "oscar3": 3.5, "oscar2": 2.5, "oscar2s": 2.25}

#: n_ctx padding of llama.cpp's KV cache, its default ubatch, and the oscar2 pool's room for new
#: tokens (LLAMA_OSCAR_POOL_NEW)
CELL_PAD = 256
UBATCH = 512
POOL_NEW = 64


#: the cache types llama.cpp keeps its 16-bit windows beside
WINDOWED = ("oscar2", "oscar2s", "oscar3")


def bits(kv_type: str) -> float:
    """Bits per value of a KV type name; ValueError naming the known ones otherwise."""
    if kv_type not in BITS:
        raise ValueError(f"unknown KV cache type '{kv_type}'; known: {', '.join(BITS)}")
    return BITS[kv_type]


@dataclass(frozen=True)
class KVGeometry:
    """What the KV cache size depends on: layers with a KV cache, KV heads, head sizes."""
    n_layer: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int

    def values_per_token(self) -> int:
        """K plus V values stored per token over all layers."""
        return self.n_layer * self.n_head_kv * (self.head_dim_k + self.head_dim_v)


def cells(ctx: int) -> int:
    """KV cells llama.cpp allocates for a context of ``ctx`` tokens (padded to 256)."""
    return int(math.ceil(ctx / CELL_PAD) * CELL_PAD)


def pool_slots(ctx: int, sink: int, recent: int, n_seq: int = 1) -> int:
    """F16 slots per layer of an oscar2 side's 16-bit window pool (0 with windows off)."""
    if sink == 0 and recent == 0:
        return 0
    return min(cells(ctx), n_seq * (sink + recent) + POOL_NEW) + 1


def kv_bytes(g: KVGeometry, ctx: int, type_k: str, type_v: str, sink: int = 64, recent: int = 256) -> dict[str, float]:
    """Bytes of the KV cache at context ``ctx``: ``main`` (the typed tier), ``pool`` (16-bit
    windows of the oscar2 and oscar3 sides) and ``total``; ``sink``/``recent`` apply to those sides."""
    n = cells(ctx)
    main = n * g.n_layer * g.n_head_kv * (g.head_dim_k * bits(type_k) + g.head_dim_v * bits(type_v)) / 8
    slots = pool_slots(ctx, sink, recent)
    pool = 0.0
    for t, hd in ((type_k, g.head_dim_k), (type_v, g.head_dim_v)):
        if t in WINDOWED:
            pool += slots * g.n_layer * g.n_head_kv * hd * 2
    return {"main": main, "pool": pool, "total": main + pool}


def bits_per_value(g: KVGeometry, ctx: int, type_k: str, type_v: str, sink: int = 64, recent: int = 256) -> float:
    """Average bits per stored K/V value at ``ctx``, the 16-bit window pool included."""
    b = kv_bytes(g, ctx, type_k, type_v, sink, recent)
    return 8 * b["total"] / (cells(ctx) * g.n_layer * g.n_head_kv * (g.head_dim_k + g.head_dim_v))


def prompt_scratch_per_cell(g: KVGeometry, type_k: str, type_v: str, ubatch: int = UBATCH) -> float:
    """Bytes per KV cell of the CUDA working buffers of a prompt batch of ``ubatch`` tokens,
    which llama.cpp reserves with the context (its worst-case graph attends over every cell):
    the KQ mask (F16, ubatch per cell); where a side is not F16, upstream's F16 copy of one
    layer's K or V for its tensor-core kernels; with an oscar2 side, instead, the F16 expansion
    of one layer's K and V and the mask rewritten for it (these lie in the attention node's
    own allocation, ggml_cuda_fattn_oscar2_alloc_size, so the reservation counts them too).
    Measured on the H200 for Qwen3-8B geometry: f16 and oscar2 exactly, q8_0 and
    q4_0 0.8 KiB per cell below this (so the model errs on the small side for them)."""
    for t in (type_k, type_v):
        bits(t)  # (an unknown type name raises here)
    mask = 2.0 * ubatch
    one_layer_f16 = {"k": g.n_head_kv * g.head_dim_k * 2.0, "v": g.n_head_kv * g.head_dim_v * 2.0}
    if "oscar2" in (type_k, type_v):
        return mask + one_layer_f16["k"] + one_layer_f16["v"] + mask
    return mask + (one_layer_f16["k"] if type_k != "f16" else 0.0) + (one_layer_f16["v"] if type_v != "f16" else 0.0)


def max_context(g: KVGeometry, budget_bytes: float, type_k: str, type_v: str, sink: int = 64, recent: int = 256,
                extra_per_cell: float = 0.0) -> int:
    """Largest context (a multiple of 256) whose KV cache, and ``extra_per_cell`` bytes per cell
    beside it (say ``prompt_scratch_per_cell``), fit in ``budget_bytes`` (0 if none)."""
    if budget_bytes <= 0:
        return 0
    per_cell = kv_bytes(g, CELL_PAD, type_k, type_v, 0, 0)["main"] / CELL_PAD + extra_per_cell
    full_pool = kv_bytes(g, 10**9, type_k, type_v, sink, recent)["pool"]  # pool at its cap
    n = int((budget_bytes - full_pool) // per_cell) // CELL_PAD * CELL_PAD
    while n > 0 and kv_bytes(g, n, type_k, type_v, sink, recent)["total"] + n * extra_per_cell > budget_bytes:
        n -= CELL_PAD
    return max(n, 0)


_MIB = r"([0-9.]+) MiB"


def parse_oscar_line(log: str) -> dict[str, float] | None:
    """MiB of the tiers from llama.cpp's start-up line ``oscar: K and V in oscar2 (2.5
    bits/value): A MiB; 16-bit windows ...: B MiB[; K in q4_0: C MiB | ; precision plan: ...:
    C MiB]; N bits/value over the whole cache at M cells`` (or ``in oscar2s (2.25 bits/value)``):
    keys ``oscar2`` (the 2-bit tier), ``pool``, ``other`` and ``bits`` (NaN when the line has no
    such figure); None when the log has no such line (no oscar2 or oscar2s side)."""
    m = re.search(r"oscar: (K and V|K|V) in oscar2s? \([0-9.]+ bits/value\): " + _MIB + r"(.*)", log)
    if not m:
        return None
    rest = m.group(3)
    pool = re.search(r"16-bit windows for [^:]*: .*?: " + _MIB, rest)
    other = re.search(r"; (?:[KV] in \w+|precision plan: [^:]*): " + _MIB, rest)
    bpv = re.search(r"; ([0-9.]+) bits/value over the whole cache", rest)
    return {"sides": m.group(1), "oscar2": float(m.group(2)), "pool": float(pool.group(1)) if pool else 0.0,
            "other": float(other.group(1)) if other else 0.0, "bits": float(bpv.group(1)) if bpv else math.nan}


def measured_bits(type_k: str, type_v: str, log: str) -> float:
    """Average bits per K/V value of a run, the 16-bit pool included, from its ``oscar:`` log
    line: each oscar2 side costs ``2.5 * (oscar2 MiB + pool MiB) / oscar2 MiB``. Without
    an oscar2 side it is the types' nominal bits."""
    line = parse_oscar_line(log)
    if line is not None and not math.isnan(line["bits"]):
        return line["bits"]  # llama.cpp's own figure (every layer's type, the pool included)
    if line is None or line["oscar2"] <= 0:
        return (bits(type_k) + bits(type_v)) / 2
    o2 = 2.5 * (line["oscar2"] + line["pool"]) / line["oscar2"]
    return ((o2 if type_k == "oscar2" else bits(type_k)) + (o2 if type_v == "oscar2" else bits(type_v))) / 2
