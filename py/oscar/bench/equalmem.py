"""Equal-memory throughput: the largest batch of sequences of one context that each KV type
fits on a device, its decode throughput, and the bandwidth that throughput implies.

The batch a type fits is found by trying it (``fits(batch) -> bool``, a short
llama-batched-bench run that allocates the whole cache and the compute buffers and
decodes one token): the KV memory model (:mod:`oscar.core.kvmem`) gives the first guess, and
:func:`largest_batch` walks and bisects from there. The measurement itself is
llama-batched-bench ``-pps`` (the prompt decoded once and copied into every sequence's
own stream), ``-ntg`` tokens generated per sequence.

Bytes moved per decode step (:func:`step_bytes`) count what the step must read: the
weights on the device once, and for every sequence its cache at the mean depth of the
generation (the main tier; an ``oscar2`` side also reads the 16-bit rows of its windows).
Writes, activations and the per-layer compute are left out, so the achieved bandwidth
(bytes / step time) is a lower bound on what the device moved. Standard library only.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from ..core import kvmem

#: most sequences llama.cpp takes in one context (LLAMA_MAX_SEQ)
MAX_SEQ = 256


def seq_kv_bytes(g: kvmem.KVGeometry, ctx: int, type_k: str, type_v: str, sink: int, recent: int) -> float:
    """Bytes of one sequence's KV stream of ``ctx`` tokens (main tier and 16-bit pool)."""
    return kvmem.kv_bytes(g, ctx, type_k, type_v, sink, recent)["total"]


def guess_batch(budget_bytes: float, per_seq_bytes: float, per_seq_extra: float = 0.0, max_seq: int = MAX_SEQ) -> int:
    """Sequences whose streams (``per_seq_bytes`` each, plus ``per_seq_extra`` of working
    buffers) fit in ``budget_bytes``, capped at ``max_seq``; at least 1."""
    if per_seq_bytes <= 0:
        raise ValueError("per_seq_bytes must be positive")
    n = int(budget_bytes // (per_seq_bytes + per_seq_extra)) if budget_bytes > 0 else 0
    return max(1, min(n, max_seq))


def largest_batch(fits: Callable[[int], bool], guess: int, max_seq: int = MAX_SEQ) -> tuple[int, dict[int, bool]]:
    """The largest batch ``b`` in 1..max_seq with ``fits(b)``, assuming that a batch that fits
    makes every smaller one fit; returns it (0 if not even 1 fits) and every batch tried.

    From ``guess``: up by doubling steps while batches fit (down by halving while they do not),
    then bisection between the largest batch seen to fit and the smallest seen to fail. A good
    guess costs two tries (the guess and the one above it)."""
    tried: dict[int, bool] = {}

    def t(b: int) -> bool:
        if b not in tried:
            tried[b] = bool(fits(b))
        return tried[b]

    b = max(1, min(guess, max_seq))
    if t(b):
        lo, step = b, 1
        hi = max_seq + 1
        while lo < max_seq:
            nxt = min(lo + step, max_seq)
            if t(nxt):
                lo, step = nxt, 2 * step
            else:
                hi = nxt
                break
    else:
        hi, step = b, 1
        lo = 0
        while hi > 1:
            nxt = max(hi - step, 1)
            if t(nxt):
                lo = nxt
                break
            hi, step = nxt, 2 * step
        if lo == 0:
            return 0, tried
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if t(mid):
            lo = mid
        else:
            hi = mid
    return lo, tried


def step_bytes(g: kvmem.KVGeometry, weight_bytes: float, batch: int, ctx: int, n_gen: int,
               type_k: str, type_v: str, sink: int, recent: int) -> dict[str, float]:
    """Bytes a decode step reads: ``weights`` once, ``kv`` for ``batch`` sequences at the mean
    depth ``ctx + n_gen/2`` (the main tier over the cells llama.cpp attends, the context padded
    to 256; for an oscar2 side also its 16-bit window rows, ``min(depth, sink + recent)`` per
    layer and head), and ``total``."""
    depth = ctx + n_gen // 2
    main = kvmem.kv_bytes(g, depth, type_k, type_v, 0, 0)["main"]
    win = min(depth, sink + recent) if (sink or recent) else 0
    pool = 0.0
    for t, hd in ((type_k, g.head_dim_k), (type_v, g.head_dim_v)):
        if t == "oscar2":
            pool += win * g.n_layer * g.n_head_kv * hd * 2
    kv = batch * (main + pool)
    return {"weights": float(weight_bytes), "kv": kv, "total": weight_bytes + kv}


@dataclass
class BatchedResult:
    """One llama-batched-bench result line (``--output-format jsonl``)."""
    pp: int
    tg: int
    pl: int
    n_kv: int
    t_pp: float      # s
    t_tg: float      # s
    speed_tg: float  # generated tok/s, all sequences together


def parse_batched_jsonl(text: str) -> list[BatchedResult]:
    """The result lines of llama-batched-bench's jsonl output (other lines ignored)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except json.JSONDecodeError:
            continue
        if {"pp", "tg", "pl", "t_tg", "speed_tg"} <= j.keys():
            out.append(BatchedResult(pp=int(j["pp"]), tg=int(j["tg"]), pl=int(j["pl"]), n_kv=int(j.get("n_kv", 0)),
                                     t_pp=float(j.get("t_pp", 0.0)), t_tg=float(j["t_tg"]), speed_tg=float(j["speed_tg"])))
    return out


def table_rows(results: list[dict], base: str = "f16") -> list[list[str]]:
    """Markdown rows of measured equal-memory results (dicts with ``kv``, ``batch``,
    ``kv_gib``, ``step_ms``, ``tok_s``, ``step_bytes``, ``status``), with throughput over
    ``base``'s and the achieved bandwidth in TB/s (10^12 bytes)."""
    ref = next((r["tok_s"] for r in results if r["kv"] == base and r.get("tok_s")), None)
    rows = []
    for r in results:
        if not r.get("tok_s"):
            rows.append([r["kv"], str(r.get("batch") or "-"), "-", "-", "-", "-", "-", "-", r["status"]])
            continue
        tbs = r["step_bytes"] / (r["step_ms"] / 1e3) / 1e12
        rows.append([r["kv"], str(r["batch"]), f"{r['kv_gib']:.1f}", f"{r['step_ms']:.1f}", f"{r['tok_s']:.1f}",
                     f"{r['tok_s'] / ref:.2f}" if ref else "-", f"{r['step_bytes'] / 1e9:.1f}", f"{tbs:.2f}",
                     r["status"]])
    return rows


TABLE_HEAD = ["KV cache", "largest batch", "KV GiB", "step ms", "generated tok/s", "x f16",
              "bytes read per step (GB)", "achieved TB/s", "status"]
