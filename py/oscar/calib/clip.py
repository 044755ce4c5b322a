"""Per-row clipping and the per-layer clip-ratio search against the attention output.

``clip_rows`` is THE definition the C side implements; keep it the only one.

The search (:func:`search_layer`) simulates one attention layer on held-out
calibration activations: keys and values rotated (``k' = k @ R_K``, ``v' = v @ R_V``,
queries ``q' = q @ R_Q``, where ``R_Q = R_K`` for an orthogonal R_K and ``W⁻¹ R`` for a
weighted ``R_K = W R``, :func:`oscar.core.rotation.key_weighting`), clipped with :func:`clip_rows`, quantised with the real
``oscar2`` reference (:func:`oscar.core.quant.fake_quantize`), mixed with the 16-bit tier
per query (a query at position t reads positions ``< S`` and ``> t - W`` exactly,
everything else quantised), and scored by the squared error of the attention
output against unquantised attention. It picks the clip index per layer for K and
for V by coordinate descent over a grid that contains the fixed ratios
(``FIXED_CLIP_K``, ``FIXED_CLIP_V``), so on its own objective it never does worse
than them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import kvmem
from ..core.quant import fake_as, fake_quantize

FIXED_CLIP_K = 0.96
FIXED_CLIP_V = 0.92
SINK_TOKENS = 64
RECENT_TOKENS = 256
#: lowest clip ratio the search tries by default
DEFAULT_CLIP_LO = 0.5


def clip_index(r: float, d: int) -> int:
    """``k = floor(r*(d-1) + 0.5)``, the rank used by :func:`clip_rows` (0 <= k <= d-1)."""
    if not (0.0 <= r <= 1.0):
        raise ValueError(f"clip ratio must be in [0, 1], got {r}")
    return int(np.floor(np.float64(np.float32(r)) * (d - 1) + 0.5))


def clip_rows(x: np.ndarray, r: float) -> np.ndarray:
    """Clip each row of ``x`` to the magnitude of its r-quantile.

    For each row (one token, one head, D values), with a = sorted(|x|) ascending and
    k = floor(r*(D-1) + 0.5), t = a[k]; x is clamped to [-t, t]; r = 1 means no clipping.

    x: ``[..., D]`` (float32 in, float32 out); r: float in [0, 1] (taken as float32, as
    stored in the GGUF). The last axis is the row.
    """
    x = np.asarray(x, dtype=np.float32)
    k = clip_index(r, x.shape[-1])
    if k == x.shape[-1] - 1:
        return x.copy()
    t = np.partition(np.abs(x), k, axis=-1)[..., k:k + 1]
    return np.clip(x, -t, t)


def ratio_of_index(k: int, d: int) -> float:
    """The float32 ratio ``k/(d-1)``, for which ``clip_index`` gives back exactly ``k``."""
    return float(np.float32(k / (d - 1)))


# ----------------------------------------------------------------------------- simulation

def _rotate(x, r):
    """x: torch ``[T, H, D]``; r: ``[D, D]`` or ``[Hkv, D, D]`` (head h of x uses
    ``r[h * Hkv // H]``, i.e. query heads use their KV group's rotation)."""
    import torch
    r = torch.as_tensor(np.asarray(r, dtype=np.float32))
    if r.ndim == 2:
        return x @ r
    g = x.shape[1] // r.shape[0]
    return torch.einsum("thd,hde->the", x, r.repeat_interleave(g, dim=0))


@dataclass
class LayerSim:
    """Precomputed pieces of one layer on held-out activations (rotated, float32 torch),
    queries grouped by KV head so no K/V repetition is needed.

    q: ``[Hkv, G*Nq, D]`` the scored queries (group h: its G heads, each over the Nq
    positions); k, v: ``[T, Hkv, D]`` rotated (vh: v as ``[Hkv, T, D]``); quant: bool
    ``[1, G*Nq, T]`` True where the (allowed) key is read in 2-bit; s_exact:
    ``[Hkv, G*Nq, T]`` scaled scores with 16-bit keys, -inf where masked out (causal,
    sliding window); o_ref: ``[Hkv, G*Nq, D]`` unquantised output (rotated V space).
    """
    q: object
    k: object
    v: object
    quant: object
    s_exact: object
    scaling: float
    vh: object = None
    o_ref: object = None
    allowed: object = None  # bool [1, G*Nq, T]: every key the query reads (a side without windows)

    def probs(self, kq, windows: bool = True):
        """Attention weights ``[Hkv, G*Nq, T]`` with 2-bit keys ``kq`` (``[T, Hkv, D]``; None: all
        16-bit) where ``quant`` (``windows=False``: at every allowed position, a side without
        16-bit windows)."""
        import torch
        s = self.s_exact
        if kq is not None:
            s = torch.where(self.quant if windows else self.allowed,
                            torch.matmul(self.q, kq.permute(1, 2, 0)) * self.scaling, s)
        return torch.softmax(s, dim=-1)

    def split(self, p, windows: bool = True):
        """``(p @ v, p_2bit)``: the output with 16-bit values, and the weights on 2-bit positions
        (``windows=False``: on every position)."""
        import torch
        return torch.matmul(p, self.vh), p * (self.quant if windows else self.allowed)

    def output_split(self, a, pq, vq):
        """Attention output ``[Hkv, G*Nq, D]`` from :meth:`split`'s parts and 2-bit values ``vq``
        (``[T, Hkv, D]``; None: 16-bit)."""
        import torch
        if vq is None:
            return a
        return a + torch.matmul(pq, vq.transpose(0, 1) - self.vh)

    def output(self, kq, vq):
        """Attention output ``[Hkv, G*Nq, D]`` with 2-bit keys ``kq`` and values ``vq``
        (``[T, Hkv, D]``, None: 16-bit) at the 2-bit positions."""
        return self.output_split(*self.split(self.probs(kq)), vq)

    def error(self, kq, vq) -> float:
        """Sum of squared differences of the attention output from ``o_ref``."""
        return float(((self.output(kq, vq) - self.o_ref) ** 2).sum())


def layer_sim(q: np.ndarray, k: np.ndarray, v: np.ndarray, rot_k: np.ndarray, rot_v: np.ndarray,
              scaling: float, sliding_window: int | None = None, sink: int = SINK_TOKENS,
              recent: int = RECENT_TOKENS, query_stride: int = 8, mean_k: np.ndarray | None = None,
              mean_v: np.ndarray | None = None, rot_q: np.ndarray | None = None) -> LayerSim | None:
    """Build a :class:`LayerSim` from one chunk's activations of one layer.

    q: ``[T, Hq, D]``; k, v: ``[T, Hkv, D]``; rot_k, rot_v: ``[D, D]`` or ``[Hkv, D, D]``;
    rot_q: the queries' matrix, of rot_k's shape (None: rot_k, for an orthogonal rot_k);
    mean_k, mean_v: ``[Hkv, D]`` in rotated coordinates, subtracted from every rotated key and
    value (centring: exact for attention, so only the quantisation sees it), or None.
    Scores the queries at positions ``t >= sink + recent`` (the first to read a 2-bit
    key), every ``query_stride``-th. Returns None if the chunk is too short for any.
    """
    import torch
    t_len, hq, d = q.shape
    hkv = k.shape[1]
    g = hq // hkv
    pos = np.arange(sink + recent, t_len, query_stride)
    if len(pos) == 0:
        return None
    nq = len(pos)
    rot_q = rot_k if rot_q is None else rot_q
    qt = _rotate(torch.from_numpy(np.ascontiguousarray(q[pos], dtype=np.float32)), rot_q)  # [Nq, Hq, D]
    qt = qt.reshape(nq, hkv, g, d).permute(1, 2, 0, 3).reshape(hkv, g * nq, d).contiguous()
    kt = _rotate(torch.from_numpy(np.asarray(k, dtype=np.float32)), rot_k)
    vt = _rotate(torch.from_numpy(np.asarray(v, dtype=np.float32)), rot_v)
    if mean_k is not None:
        kt = kt - torch.from_numpy(np.asarray(mean_k, dtype=np.float32))[None]
    if mean_v is not None:
        vt = vt - torch.from_numpy(np.asarray(mean_v, dtype=np.float32))[None]
    kt, vt = kt.contiguous(), vt.contiguous()
    i = torch.from_numpy(pos)[:, None]
    j = torch.arange(t_len)[None, :]
    allowed = j <= i
    if sliding_window is not None:
        allowed &= (i - j) < sliding_window
    quant = allowed & (j >= sink) & (j <= i - recent)
    allowed, quant = allowed.repeat(g, 1)[None], quant.repeat(g, 1)[None]
    s = (torch.matmul(qt, kt.permute(1, 2, 0)) * scaling).masked_fill(~allowed, float("-inf"))
    sim = LayerSim(qt, kt, vt, quant, s, scaling, vt.transpose(0, 1).contiguous(), allowed=allowed)
    sim.o_ref = sim.output(None, None)
    return sim


def quantized(x, r: float):
    """``fake_quantize(clip_rows(x, r))`` for a torch ``[T, H, D]`` tensor (rows of D)."""
    import torch
    a = clip_rows(x.numpy(), r)
    return torch.from_numpy(fake_quantize(a))


def stored(x, kv_type: str, r: float):
    """A torch ``[T, H, D]`` tensor as the cache of type ``kv_type`` holds it: oscar2 and oscar2s
    clipped at ``r`` (oscar2: :func:`quantized`), any other type unclipped (llama.cpp clips only
    those two)."""
    import torch
    if kv_type == "oscar2":
        return quantized(x, r)
    if kv_type == "oscar2s":
        return torch.from_numpy(fake_as(clip_rows(x.numpy(), r), kv_type))
    return torch.from_numpy(fake_as(x.numpy(), kv_type))


def type_error(sims: list[LayerSim], type_k: str, type_v: str, r_k: float, r_v: float) -> float:
    """Summed squared attention-output error of one layer with K stored as ``type_k`` and V as
    ``type_v`` (oscar2 and oscar2s sides clipped at ``r_k``/``r_v``; oscar2, oscar2s and oscar3
    sides read beside the 16-bit windows, other types at every position, as llama.cpp keeps
    windows only beside those)."""
    total = 0.0
    for s in sims:
        kq = None if type_k == "f16" else stored(s.k, type_k, r_k)
        vq = None if type_v == "f16" else stored(s.v, type_v, r_v)
        a, pq = s.split(s.probs(kq, windows=type_k in kvmem.WINDOWED), windows=type_v in kvmem.WINDOWED)
        total += float(((s.output_split(a, pq, vq) - s.o_ref) ** 2).sum())
    return total


def attention_error(sims: list[LayerSim], r_k: float, r_v: float) -> float:
    """The search objective for one layer: summed squared attention-output error over
    the held-out chunks ``sims`` with K clipped at ``r_k`` and V at ``r_v``."""
    return sum(s.error(quantized(s.k, r_k), quantized(s.v, r_v)) for s in sims)


def reference_energy(sims: list[LayerSim]) -> float:
    """Sum of squares of the unquantised outputs (to express errors relatively)."""
    return sum(float((s.o_ref ** 2).sum()) for s in sims)


@dataclass
class ClipResult:
    """Chosen ratios of one layer and the objective at them and at the fixed ratios."""
    clip_k: float
    clip_v: float
    error: float
    error_fixed: float
    energy: float


def search_layer(sims: list[LayerSim], head_dim: int, lo: float = DEFAULT_CLIP_LO, rounds: int = 2) -> ClipResult:
    """Coordinate descent over clip indices ``k in [floor(lo*(D-1)), D-1]`` (ratios
    ``k/(D-1)``, which include the indices of the fixed ratios): V at the fixed ratio
    while K is searched, then V with the best K, ``rounds`` times. Ties keep the
    current value, so the result's objective is <= the fixed ratios'."""
    d = head_dim
    fk, fv = clip_index(FIXED_CLIP_K, d), clip_index(FIXED_CLIP_V, d)
    first = int(np.floor(lo * (d - 1)))
    step = max(1, (d - first) // 24)  # at most ~24 candidates (head_dim 256: every 3rd index)
    ks = sorted(set(range(d - 1, first - 1, -step)) | {fk, fv})
    kq = {i: [quantized(s.k, ratio_of_index(i, d)) for s in sims] for i in ks}
    vq = {i: [quantized(s.v, ratio_of_index(i, d)) for s in sims] for i in ks}

    cache: dict[tuple[int, int], float] = {}

    def err(o, s) -> float:
        return float(((o - s.o_ref) ** 2).sum())

    def search_k(iv: int) -> None:  # fill cache[(ik, iv)] for all ik
        for ik in ks:
            if (ik, iv) not in cache:
                cache[(ik, iv)] = sum(err(s.output_split(*s.split(s.probs(a)), b), s)
                                      for s, a, b in zip(sims, kq[ik], vq[iv]))

    def search_v(ik: int) -> None:  # fill cache[(ik, iv)] for all iv, keys (hence weights) fixed
        parts = [s.split(s.probs(a)) for s, a in zip(sims, kq[ik])]
        for iv in ks:
            if (ik, iv) not in cache:
                cache[(ik, iv)] = sum(err(s.output_split(a, pq, b), s) for s, (a, pq), b in zip(sims, parts, vq[iv]))

    best_k, best_v = fk, fv
    for _ in range(rounds):
        search_k(best_v)
        best_k = min(ks, key=lambda i: (cache[(i, best_v)], i != best_k))
        search_v(best_k)
        best_v = min(ks, key=lambda i: (cache[(best_k, i)], i != best_v))
    if (fk, fv) not in cache:
        search_k(fv)
    return ClipResult(ratio_of_index(best_k, d), ratio_of_index(best_v, d), cache[(best_k, best_v)],
                      cache[(fk, fv)], reference_energy(sims))
